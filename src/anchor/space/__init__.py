"""Stage 1: the hierarchical factor space (abduction, voting, clustering, themes).

* :mod:`.config`: ``BuildParams``, the stage's settings;
* :mod:`.builder`: ``FactorSpaceBuilder``, the stage end to end, with :mod:`.abduction`,
  :mod:`.validation`, :mod:`.voting` and :mod:`.vote_stream`, :mod:`.structure` (UMAP + HDBSCAN,
  swappable) and :mod:`.themes`;
* :mod:`.io`: ``save_space``, ``load_space``; :mod:`.truncate`: a space cut to its first factors;
  :mod:`.umap_cache`: UMAP's compiled kernels kept on disk.

The public names below are importable from ``anchor.space``. Only the settings load with the
package (the domain model, :mod:`anchor.types`, records them in every space); the rest loads on
first use, so that reading a setting never imports the build, UMAP or the LLM client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from anchor.lazy import lazy_exports
from anchor.settings.space import BuildParams

_LAZY = {
    "FactorSpaceBuilder": "anchor.space.builder",
    "SpaceFileError": "anchor.space.io",
    "load_space": "anchor.space.io",
    "save_space": "anchor.space.io",
    "Clusterer": "anchor.space.structure",
    "ClusteringResult": "anchor.space.structure",
    "HDBSCANClusterer": "anchor.space.structure",
    "Reducer": "anchor.space.structure",
    "UMAPReducer": "anchor.space.structure",
    "cluster_embeddings": "anchor.space.structure",
    "truncate_space": "anchor.space.truncate",
}

if TYPE_CHECKING:
    from anchor.space.builder import FactorSpaceBuilder
    from anchor.space.io import SpaceFileError, load_space, save_space
    from anchor.space.structure import (
        Clusterer,
        ClusteringResult,
        HDBSCANClusterer,
        Reducer,
        UMAPReducer,
        cluster_embeddings,
    )
    from anchor.space.truncate import truncate_space


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "BuildParams", "Clusterer", "ClusteringResult", "FactorSpaceBuilder", "HDBSCANClusterer", "Reducer",
    "SpaceFileError", "UMAPReducer", "cluster_embeddings", "load_space", "save_space", "truncate_space",
]
