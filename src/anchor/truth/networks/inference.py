"""Exact probabilities in a network world, behind the interface of :class:`anchor.truth.exact.JointTable`:
variable elimination on the network the world file writes out, as one tensor contraction.

A world's questions are about binary names: ``"O"`` (1: the outcome node is in the outcome state) and
its factor ids (1: the factor's node is in the factor's state, 0: in any other state). Each name is a
constraint on one node: "present" keeps one state, "absent" drops one. The answer is the contraction of
the tables of the nodes the question reaches (the ancestors of its nodes: any other node sums to 1) with
a 0/1 vector of allowed states on each constrained node, normalised: exactly what pgmpy's
``VariableElimination`` computes (the tests hold the two to 1e-9 on several networks), but in an order
fixed by the network file alone. pgmpy's own elimination order follows the iteration order of sets of
node names, which Python's string hashing changes from process to process, and the last bits of a truth
with it; a bench or a world file must be the same file on every run.

Answers are kept per question: the simulated LLM asks the same ones many times. One question at a time
per table (a lock): the simulated LLM's HTTP server answers from several threads.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from anchor.truth.networks.enumeration import ancestral_set
from anchor.truth.networks.source import PGMPY_NEEDED, NetworkError
from anchor.truth.networks.spec import NetworkNode, NetworkSpec

OUTCOME = "O"
# Prefix of the indicator nodes added for absent factors; no published node name starts with it.
_INDICATOR = "__anchor_allowed__"
_MAX_KEPT = 4096


def _pgmpy() -> tuple[Any, Any, Any]:
    # pgmpy is imported here, not at module level: anchor imports without it, and it is slow to load.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            from pgmpy.factors.discrete import TabularCPD
            from pgmpy.inference import VariableElimination
            from pgmpy.models import DiscreteBayesianNetwork
    except ImportError:
        raise NetworkError(PGMPY_NEEDED) from None
    return DiscreteBayesianNetwork, TabularCPD, VariableElimination


def pgmpy_model(nodes: Sequence[NetworkNode], allowed: Mapping[str, frozenset[str]] | None = None) -> Any:
    """The nodes as a pgmpy ``DiscreteBayesianNetwork``, with an indicator child for each node of
    ``allowed`` (node -> the states the indicator is 1 for)."""
    network_cls, cpd_cls, _ = _pgmpy()
    model = network_cls()
    model.add_nodes_from(n.name for n in nodes)
    model.add_edges_from((p, n.name) for n in nodes for p in n.parents)
    states = {n.name: n.states for n in nodes}
    for node in nodes:
        # pgmpy's columns are the parent configurations in the same order as the rows of a node's cpt.
        values = np.asarray(node.cpt, dtype=np.float64).T
        model.add_cpds(cpd_cls(node.name, len(node.states), values, evidence=node.parents or None,
                               evidence_card=[len(states[p]) for p in node.parents] or None,
                               state_names={node.name: node.states, **{p: states[p] for p in node.parents}}))
    for name, keep in (allowed or {}).items():
        flag = [1.0 if s in keep else 0.0 for s in states[name]]
        model.add_edge(name, _INDICATOR + name)
        model.add_cpds(cpd_cls(_INDICATOR + name, 2, [[1.0 - f for f in flag], flag], evidence=[name],
                               evidence_card=[len(states[name])],
                               state_names={_INDICATOR + name: ["0", "1"], name: states[name]}))
    return model


def _contract() -> Any:
    # opt_einsum comes with pgmpy (the networks extra); its greedy path depends only on the operands' order.
    try:
        from opt_einsum import contract
    except ImportError:
        raise NetworkError(PGMPY_NEEDED) from None
    return contract


def query_engine(model: Any) -> Any:
    """pgmpy's ``VariableElimination`` on ``model``."""
    return _pgmpy()[2](model)


class Constraints:
    """What a set of binary names says about the network's nodes: node -> the states it allows."""

    def __init__(self, spec: NetworkSpec, meaning: Mapping[str, tuple[str, str]], values: Mapping[str, int]) -> None:
        self.allowed: dict[str, frozenset[str]] = {}
        states = {n.name: n.states for n in spec.nodes}
        for name, value in values.items():
            if value not in (0, 1):
                raise ValueError(f"evidence {name}={value!r}: values are 0 or 1")
            try:
                node, state = meaning[name]
            except KeyError:
                raise KeyError(name) from None
            current = self.allowed.get(node, frozenset(states[node]))
            self.allowed[node] = current & {state} if value else current - {state}

    @property
    def impossible(self) -> bool:
        return any(not keep for keep in self.allowed.values())


class NetworkTable:
    """``probability(evidence)`` and ``conditional(query, evidence)`` over a network world's binary names,
    answered by variable elimination (the interface of :class:`anchor.truth.exact.JointTable`)."""

    def __init__(self, spec: NetworkSpec, factors: Mapping[str, tuple[str, str]]) -> None:
        self.spec = spec
        #: Each binary name's (node, state): the outcome and every factor.
        self.meaning: dict[str, tuple[str, str]] = {OUTCOME: (spec.outcome_node, spec.outcome_state), **factors}
        self.states = {n.name: n.states for n in spec.nodes}
        self._nodes = {n.name: n for n in spec.nodes}
        self._tables: dict[str, np.ndarray] = {}
        self._kept: dict[tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]], float] = {}
        self._lock = threading.Lock()

    def probability(self, evidence: Mapping[str, int]) -> float:
        """P(evidence)."""
        return self.conditional(evidence, {})

    def conditional(self, query: Mapping[str, int], evidence: Mapping[str, int]) -> float:
        """P(query | evidence); ValueError when the evidence has probability zero."""
        asked = (tuple(sorted(query.items())), tuple(sorted(evidence.items())))
        with self._lock:
            found = self._kept.get(asked)
            if found is None:
                found = self._conditional(query, evidence)
                if len(self._kept) >= _MAX_KEPT:
                    self._kept.pop(next(iter(self._kept)))
                self._kept[asked] = found
            return found

    def _conditional(self, query: Mapping[str, int], evidence: Mapping[str, int]) -> float:
        given = Constraints(self.spec, self.meaning, evidence)
        wanted = Constraints(self.spec, self.meaning, query)
        if given.impossible:
            raise ValueError(f"the evidence {dict(evidence)} has probability zero")
        hard = {node: next(iter(keep)) for node, keep in given.allowed.items() if len(keep) == 1}
        soft = {node: keep for node, keep in given.allowed.items() if len(keep) > 1}
        # Where the evidence fixes a node, the query holds there or fails there without inference.
        fails = wanted.impossible or any(node in hard and hard[node] not in keep
                                         for node, keep in wanted.allowed.items())
        free = sorted(node for node in wanted.allowed if node not in hard)
        values, order = self._posterior(free if free and not fails else [], hard, soft, evidence)
        if fails:
            return 0.0
        mask = np.ones(values.shape, dtype=bool)
        for axis, node in enumerate(order):
            keep = np.array([s in wanted.allowed[node] for s in self.states[node]])
            shape = [1] * values.ndim
            shape[axis] = len(keep)
            mask &= keep.reshape(shape)
        return float(values[mask].sum())

    def _posterior(self, variables: list[str], hard: dict[str, str], soft: dict[str, frozenset[str]],
                   asked: Mapping[str, int]) -> tuple[np.ndarray, list[str]]:
        """The joint posterior of ``variables`` given the evidence, as an array and its axes' nodes. With no
        variables, only checks that the evidence is possible (an array holding 1.0 and no axes)."""
        allowed = {**{node: frozenset({state}) for node, state in hard.items()}, **soft}
        if not allowed and not variables:
            return np.ones(()), []
        values = self._contract(variables, allowed)
        total = float(values.sum())
        if not np.all(np.isfinite(values)) or total <= 0.0:
            raise ValueError(f"the evidence {dict(asked)} has probability zero")
        if not variables:
            return np.ones(()), []
        return values / total, list(variables)

    def _contract(self, variables: list[str], allowed: Mapping[str, frozenset[str]]) -> np.ndarray:
        """P(variables, every node of ``allowed`` in an allowed state), unnormalised, with ``variables``' axes
        in their order: the tables of the nodes reached, contracted in the order of the network file."""
        reached = [self._nodes[name] for name in ancestral_set(self.spec.nodes, [*variables, *allowed])]
        label = {node.name: i for i, node in enumerate(reached)}
        operands: list[Any] = []
        for node in reached:
            shape = [len(self.states[p]) for p in node.parents] + [len(node.states)]
            operands += [self._table(node).reshape(shape), [*(label[p] for p in node.parents), label[node.name]]]
        for name in sorted(allowed):
            operands += [np.array([1.0 if s in allowed[name] else 0.0 for s in self.states[name]]), [label[name]]]
        with np.errstate(invalid="ignore", over="ignore"):
            return np.asarray(_contract()(*operands, [label[v] for v in variables], optimize="greedy"),
                              dtype=np.float64)

    def _table(self, node: NetworkNode) -> np.ndarray:
        table = self._tables.get(node.name)
        if table is None:
            table = self._tables[node.name] = np.asarray(node.cpt, dtype=np.float64)
        return table

