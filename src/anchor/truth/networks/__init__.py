"""Published Bayesian networks as worlds: the bnlearn networks pgmpy ships inside its wheel, read from its
package data, each a world whose truth is exact inference in an expert-built network.

* :mod:`.spec`: the network as a world file writes it (light to import; :mod:`anchor.truth.world` holds it);
* :mod:`.source`: the networks pgmpy ships, read with its BIF reader;
* :mod:`.select`: the default outcome, the factor nodes and the themes, read off the graph;
* :mod:`.words`: texts written for this project for some networks;
* :mod:`.inference`: the truth, pgmpy's variable elimination; :mod:`.enumeration`: anchor's own, to
  cross-check it;
* :mod:`.build`: a network world; :mod:`.worlds`: a world file of them.

Importing this package loads neither pgmpy nor the texts: the names below are looked up on first use.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "available_networks": "anchor.truth.networks.source",
    "NetworkError": "anchor.truth.networks.source",
    "network_world": "anchor.truth.networks.build",
    "network_worlds": "anchor.truth.networks.worlds",
    "written_networks": "anchor.truth.networks.worlds",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)
