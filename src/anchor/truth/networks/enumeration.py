"""anchor's own exact inference in a network world by enumeration, to cross-check the truth
(:mod:`.inference`, itself held to pgmpy's): the joint distribution of the nodes a question can depend
on, enumerated state by state.

A question about some nodes given others depends only on those nodes and their ancestors: every other
node descends from them alone and sums out to 1 (it is *barren*). So the joint is built over that
ancestral set, one array axis per node, as the product of the nodes' tables, and a conditional is a
ratio of two masked sums. Where that joint has more than :data:`MAX_JOINT_STATES` states the question
is not cross-checked (:class:`TooLarge`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from anchor.truth.networks.spec import NetworkNode, NetworkSpec

#: The most joint states enumerated (2**22 states of float64: 32 MiB).
MAX_JOINT_STATES = 2 ** 22


class TooLarge(ValueError):
    """The joint of the ancestral set has more states than :data:`MAX_JOINT_STATES`."""


def ancestral_set(nodes: Sequence[NetworkNode], names: Iterable[str]) -> list[str]:
    """``names`` and all their ancestors, in the order of ``nodes`` (parents before children)."""
    parents = {n.name: n.parents for n in nodes}
    keep: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop()
        if name not in keep:
            keep.add(name)
            stack.extend(parents[name])
    return [n.name for n in nodes if n.name in keep]


def enumerate_conditional(spec: NetworkSpec, query: Mapping[str, Iterable[str]],
                          evidence: Mapping[str, Iterable[str]]) -> float:
    """P(each query node in one of its listed states | each evidence node in one of its listed states), by
    enumerating the joint of their ancestral set. TooLarge where that joint exceeds the limit; ValueError
    where the evidence has probability zero."""
    nodes = ancestral_set(spec.nodes, [*query, *evidence])
    by_name = {n.name: n for n in spec.nodes}
    size = math.prod(len(by_name[n].states) for n in nodes)
    if size > MAX_JOINT_STATES:
        raise TooLarge(f"the joint of {len(nodes)} nodes has {size:,} states (limit {MAX_JOINT_STATES:,})")
    axis = {name: i for i, name in enumerate(nodes)}
    joint = np.ones([len(by_name[n].states) for n in nodes], dtype=np.float64)
    for name in nodes:
        node = by_name[name]
        # The table as an array with one axis per parent, then one for the node: rows run over the parents'
        # states with the first parent most significant, which is C order.
        table = np.asarray(node.cpt, dtype=np.float64).reshape(
            [len(by_name[p].states) for p in node.parents] + [len(node.states)])
        own = [axis[p] for p in node.parents] + [axis[name]]
        order = np.argsort(own)
        shape = [1] * len(nodes)
        for a in own:
            shape[a] = joint.shape[a]
        joint = joint * table.transpose(order).reshape(shape)
    given = _mask(joint.shape, axis, by_name, evidence)
    total = float(joint[given].sum())
    if total <= 0.0:
        raise ValueError(f"the evidence {dict(evidence)} has probability zero")
    return float(joint[given & _mask(joint.shape, axis, by_name, query)].sum()) / total


def _mask(shape: tuple[int, ...], axis: Mapping[str, int], by_name: Mapping[str, NetworkNode],
          allowed: Mapping[str, Iterable[str]]) -> np.ndarray:
    mask = np.ones(shape, dtype=bool)
    for name, states in allowed.items():
        keep = set(states)
        flags = np.array([s in keep for s in by_name[name].states])
        view = [1] * len(shape)
        view[axis[name]] = len(flags)
        mask &= flags.reshape(view)
    return mask
