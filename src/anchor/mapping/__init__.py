"""Stage 2: candidate retrieval over a factor space, then LLM selection and reflection.

* :mod:`.config`: ``MappingConfig``, the stage's settings, and the retriever names;
* :mod:`.mapper`: ``ConditionMapper``, the stage end to end;
* :mod:`.retrieval`: the hierarchical (clusters, then factors) and flat candidate indexes;
* :mod:`.retrievers`: the candidate-search backends (exact KNN, FAISS, BM25) and ``make_retriever``.

The public names below are importable from ``anchor.mapping``. Only the settings load with the
package; the rest loads on first use, so that reading a setting never imports the retrieval stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from anchor.lazy import lazy_exports
from anchor.settings.mapping import RETRIEVER_NAMES, MappingConfig

_LAZY = {
    "ConditionMapper": "anchor.mapping.mapper",
    "BM25Retriever": "anchor.mapping.retrievers",
    "FaissRetriever": "anchor.mapping.retrievers",
    "KNNRetriever": "anchor.mapping.retrievers",
    "Retriever": "anchor.mapping.retrievers",
    "make_retriever": "anchor.mapping.retrievers",
}

if TYPE_CHECKING:
    from anchor.mapping.mapper import ConditionMapper
    from anchor.mapping.retrievers import (
        BM25Retriever,
        FaissRetriever,
        KNNRetriever,
        Retriever,
        make_retriever,
    )


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "RETRIEVER_NAMES", "BM25Retriever", "ConditionMapper", "FaissRetriever", "KNNRetriever", "MappingConfig",
    "Retriever", "make_retriever",
]
