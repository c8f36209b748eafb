"""What a network world asks about, read off the graph: the default outcome of a network without written
texts, which nodes' states become factors, and the groups (themes) the simulated LLM puts factors in.

* **Default outcome** (networks without written texts): the node with the most ancestors (the first in
  the network's order among equals) that has a state of prior probability in [0.1, 0.9]; of its states,
  the one whose prior is nearest 0.5 (the first among equals). Many ancestors: its probability depends
  on much of the network; the prior band keeps the question from being settled in advance.
* **Factor nodes**: every node but the outcome's, nearest to the outcome first (distance in the
  undirected graph; nodes the outcome cannot reach come last), nodes at the same distance in an order
  drawn from the world's seed. Each node brings all its states of positive prior probability, one factor
  each; a node whose states would take the world past ``max_factors`` is skipped and the next one tried.
* **Themes** ("latent groups from the graph"): a factor belongs to the group of the outcome's neighbour
  through which a shortest path from the outcome reaches its node (the first such neighbour in the
  network's order when there are several); the neighbour's own states are in its group. So a group is
  one branch of the graph around the outcome, through which all its evidence flows, as ANCHOR's latent
  network assumes for a latent and its factors.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Sequence

from anchor.truth.networks.spec import NetworkNode

#: Prior band of the default outcome's state.
OUTCOME_PRIOR_BAND = (0.1, 0.9)
#: The most factors a network world has by default (the generated worlds have 8 to 14).
MAX_FACTORS = 40
#: The group of factors whose node the outcome cannot reach.
UNREACHED = None


def neighbours(nodes: Sequence[NetworkNode]) -> dict[str, list[str]]:
    """Each node's parents and children, in the network's order."""
    order = {n.name: i for i, n in enumerate(nodes)}
    out: dict[str, set[str]] = {n.name: set() for n in nodes}
    for n in nodes:
        for p in n.parents:
            out[n.name].add(p)
            out[p].add(n.name)
    return {name: sorted(found, key=order.__getitem__) for name, found in out.items()}


def distances(nodes: Sequence[NetworkNode], start: str) -> dict[str, int]:
    """Edges on a shortest undirected path from ``start`` to each node it reaches."""
    near = neighbours(nodes)
    dist = {start: 0}
    queue = deque([start])
    while queue:
        name = queue.popleft()
        for other in near[name]:
            if other not in dist:
                dist[other] = dist[name] + 1
                queue.append(other)
    return dist


def branches(nodes: Sequence[NetworkNode], outcome: str) -> dict[str, str | None]:
    """Each node's group: the outcome's neighbour a shortest path reaches it through (None: unreached)."""
    near = neighbours(nodes)
    order = {n.name: i for i, n in enumerate(nodes)}
    dist = distances(nodes, outcome)
    head: dict[str, str | None] = {n.name: UNREACHED for n in nodes}
    for name in sorted((n for n in dist if dist[n] > 0), key=lambda n: (dist[n], order[n])):
        if dist[name] == 1:
            head[name] = name
        else:
            via = [head[m] for m in near[name] if dist.get(m) == dist[name] - 1]
            head[name] = min((h for h in via if h is not None), key=order.__getitem__)
    head[outcome] = UNREACHED
    return head


def ancestor_counts(nodes: Sequence[NetworkNode]) -> dict[str, int]:
    """How many ancestors each node has (nodes are parents first)."""
    ancestors: dict[str, frozenset[str]] = {}
    for n in nodes:
        ancestors[n.name] = frozenset(n.parents).union(*(ancestors[p] for p in n.parents))
    return {name: len(found) for name, found in ancestors.items()}


def default_outcome(nodes: Sequence[NetworkNode], prior: Callable[[str], list[float]]) -> tuple[str, str]:
    """The default outcome of a network without written texts (module docstring); ``prior(node)`` is the
    node's marginal distribution."""
    counts = ancestor_counts(nodes)
    low, high = OUTCOME_PRIOR_BAND
    by_name = {n.name: n for n in nodes}
    for name in sorted(counts, key=lambda n: -counts[n]):  # a stable sort keeps the network's order among equals
        p = prior(name)
        inside = [k for k, q in enumerate(p) if low <= q <= high]
        if inside:
            best = min(inside, key=lambda k: abs(p[k] - 0.5))
            return name, by_name[name].states[best]
    raise ValueError("no node has a state with a prior probability in [0.1, 0.9]")


def factor_nodes(nodes: Sequence[NetworkNode], outcome: str, rng: random.Random, prior: Callable[[str], list[float]],
                 max_factors: int = MAX_FACTORS) -> list[tuple[str, list[str]]]:
    """(node, its states that become factors) in the order of the module docstring."""
    dist = distances(nodes, outcome)
    unreached = len(nodes)
    names = [n.name for n in nodes if n.name != outcome]
    rng.shuffle(names)
    names.sort(key=lambda n: dist.get(n, unreached))  # stable: the seeded order stays among equals
    by_name = {n.name: n for n in nodes}
    picked: list[tuple[str, list[str]]] = []
    total = 0
    for name in names:
        if max_factors - total < 2:  # every node has two states or more
            break
        k = len(by_name[name].states)
        if total + k > max_factors:
            continue
        p = prior(name)
        states = [s for s, q in zip(by_name[name].states, p, strict=True) if q > 0.0]
        if states:
            picked.append((name, states))
            total += len(states)
    return picked
