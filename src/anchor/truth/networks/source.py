"""The published Bayesian networks pgmpy ships inside its wheel: the bnlearn repository's networks as
``.bif.gz`` files in pgmpy's package folder ``utils/example_models``. They are read from there with
pgmpy's BIF reader; nothing is downloaded.

The folder is found with ``importlib`` without importing pgmpy (listing the networks stays fast);
reading one imports pgmpy and parses its file (about a second for a small network, a few for a large
one), once per process.
"""

from __future__ import annotations

import functools
import gzip
import heapq
import importlib.metadata
import importlib.util
import warnings
from dataclasses import dataclass
from pathlib import Path

from anchor.errors import AnchorError
from anchor.truth.networks.spec import NetworkNode

SUFFIX = ".bif.gz"
PGMPY_NEEDED = "published networks need pgmpy (pip install 'anchor-infer[networks]')"
LICENCE = ("bnlearn Bayesian network repository (M. Scutari, 'Learning Bayesian Networks with the bnlearn R "
           "Package', Journal of Statistical Software 35(3), 2010; https://www.bnlearn.com/bnrepository/), "
           "CC BY-SA 3.0")


class NetworkError(AnchorError):
    """A published network that cannot be used: unknown, pgmpy missing, or too large for exact inference."""


class OutcomeError(NetworkError):
    """An outcome the network does not have: no such node or state, not NODE=STATE, or a certain state."""


@dataclass(frozen=True)
class PublishedNetwork:
    """A network as pgmpy ships it: every node, parents before children (the file's order otherwise)."""

    name: str
    source: str
    nodes: tuple[NetworkNode, ...]

    @functools.cached_property
    def by_name(self) -> dict[str, NetworkNode]:
        return {n.name: n for n in self.nodes}


def pgmpy_version() -> str | None:
    try:
        return importlib.metadata.version("pgmpy")
    except importlib.metadata.PackageNotFoundError:
        return None


def models_folder() -> Path:
    """pgmpy's folder of example networks; NetworkError without pgmpy."""
    spec = importlib.util.find_spec("pgmpy")
    if spec is None or not spec.submodule_search_locations:
        raise NetworkError(PGMPY_NEEDED)
    return Path(next(iter(spec.submodule_search_locations))) / "utils" / "example_models"


def available_networks() -> list[str]:
    """The names of the networks pgmpy ships, sorted."""
    folder = models_folder()
    if not folder.is_dir():
        raise NetworkError(f"pgmpy {pgmpy_version()} ships no example networks ({folder} is missing)")
    return sorted(p.name[: -len(SUFFIX)] for p in folder.iterdir() if p.name.endswith(SUFFIX))


def check_name(name: str) -> str:
    """``name`` if pgmpy ships it, else NetworkError naming the ones it does."""
    names = available_networks()
    if name not in names:
        raise NetworkError(f"{name!r} is not a network pgmpy ships; available: {', '.join(names)}")
    return name


@functools.lru_cache(maxsize=8)
def read_network(name: str) -> PublishedNetwork:
    """The network ``name`` from pgmpy's package data, as anchor writes networks (:class:`NetworkNode`)."""
    path = models_folder() / f"{check_name(name)}{SUFFIX}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pgmpy announces deprecations of modules this does not use
        from pgmpy.readwrite import BIFReader

        model = BIFReader(string=gzip.decompress(path.read_bytes()).decode("utf-8")).get_model()
    nodes = {}
    for cpd in model.get_cpds():
        node = cpd.variable
        parents = list(cpd.variables[1:])
        # get_values(): one row per state, one column per parent configuration (first parent most significant).
        table = cpd.get_values().T.tolist()
        nodes[node] = NetworkNode(name=node, states=[str(s) for s in cpd.state_names[node]], parents=parents,
                                  cpt=table)
    order = _parents_first(list(model.nodes()), nodes)
    source = f"{LICENCE}; read from pgmpy {pgmpy_version()}'s package data (utils/example_models/{path.name})"
    return PublishedNetwork(name=name, source=source, nodes=tuple(nodes[n] for n in order))


def _parents_first(names: list[str], nodes: dict[str, NetworkNode]) -> list[str]:
    """The names with every node after its parents, otherwise as early as the given order allows."""
    index = {n: i for i, n in enumerate(names)}
    children: dict[str, list[str]] = {n: [] for n in names}
    waiting = {n: len(nodes[n].parents) for n in names}
    for n in names:
        for p in nodes[n].parents:
            children[p].append(n)
    ready = [index[n] for n in names if waiting[n] == 0]
    heapq.heapify(ready)
    placed: list[str] = []
    while ready:
        name = names[heapq.heappop(ready)]
        placed.append(name)
        for child in children[name]:
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, index[child])
    if len(placed) != len(names):
        raise NetworkError("the network has a cycle")
    return placed
