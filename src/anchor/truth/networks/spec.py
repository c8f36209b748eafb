"""A published Bayesian network written into a world file: every node with its states, parents and
conditional probability table, so the file alone says what the truth of a network world is.

Plain data, light to import (:mod:`anchor.truth.world` holds it); reading the networks pgmpy ships is
:mod:`.source`, inference on them :mod:`.inference`.

The table of a node (``NetworkNode.cpt``) has one row per state of its parents, ``cpt[i][k] =
P(node = states[k] | parents in configuration i)``. Configuration ``i`` reads the parents' state
indices as a mixed-radix number, the first parent the most significant digit and each parent's states
in the order that parent lists them: with parents A (2 states) and B (3 states), row 0 is (A0, B0),
row 1 (A0, B1), row 2 (A0, B2), row 3 (A1, B0), ... A root has one row. This is the order of pgmpy's
``TabularCPD`` columns and of a generated world's ``Variable.cpt``.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: How far a row of a table may sum from 1 (the published tables are written with a few decimals).
ROW_SUM_TOLERANCE = 1e-6


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NetworkNode(_Model):
    """One node of a published network: its states, its parents and its table."""

    name: str = Field(min_length=1)
    states: list[str] = Field(min_length=1)
    parents: list[str] = Field(default_factory=list)
    cpt: list[list[float]] = Field(description="cpt[i][k] = P(node = states[k] | parents in configuration i); "
                                               "configuration i reads the parents' state indices as a mixed-radix "
                                               "number, the first parent most significant.")

    @model_validator(mode="after")
    def _table(self) -> NetworkNode:
        if len(set(self.states)) != len(self.states):
            raise ValueError(f"{self.name}: states repeat")
        if len(set(self.parents)) != len(self.parents) or self.name in self.parents:
            raise ValueError(f"{self.name}: parents must be distinct and not the node itself")
        for i, row in enumerate(self.cpt):
            if len(row) != len(self.states):
                raise ValueError(f"{self.name}: cpt row {i} has {len(row)} entries for {len(self.states)} states")
            if any(not 0.0 <= p <= 1.0 for p in row):
                raise ValueError(f"{self.name}: cpt row {i} holds a value outside [0, 1]")
            if abs(math.fsum(row) - 1.0) > ROW_SUM_TOLERANCE:
                raise ValueError(f"{self.name}: cpt row {i} sums to {math.fsum(row)!r}, not 1")
        return self


class NetworkSpec(_Model):
    """A published network as a world's hidden model, with the outcome the world asks about.

    ``nodes`` are the published network's nodes that any question of the world can depend on: the
    outcome node, the factors' nodes and all their ancestors, parents before children. Every other
    node of the published network only descends from these; summed out, it changes no probability
    among them, so it is left out of the file (``published_nodes`` says how many the network has)."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", description="The network's name, e.g. 'asia'.")
    source: str = Field(min_length=1, description="Where the network comes from and its licence.")
    published_nodes: int = Field(ge=1)
    outcome_node: str = Field(min_length=1)
    outcome_state: str = Field(min_length=1, description="Outcome 1: the outcome node is in this state; "
                                                         "outcome 2: it is in any other state.")
    nodes: list[NetworkNode] = Field(min_length=1, description="Parents before children.")

    @model_validator(mode="after")
    def _consistent(self) -> NetworkSpec:
        seen: dict[str, NetworkNode] = {}
        for node in self.nodes:
            if node.name in seen:
                raise ValueError(f"node {node.name} is written twice")
            missing = [p for p in node.parents if p not in seen]
            if missing:
                raise ValueError(f"node {node.name} comes before its parent(s) {', '.join(missing)}")
            rows = math.prod(len(seen[p].states) for p in node.parents)
            if len(node.cpt) != rows:
                raise ValueError(f"{node.name}: cpt has {len(node.cpt)} rows, {rows} expected for its parents' states")
            seen[node.name] = node
        if self.outcome_node not in seen:
            raise ValueError(f"the outcome node {self.outcome_node} is not a node of the network")
        if self.outcome_state not in seen[self.outcome_node].states:
            raise ValueError(f"the outcome state {self.outcome_state} is not a state of {self.outcome_node}")
        if len(seen) > self.published_nodes:
            raise ValueError(f"{len(seen)} nodes written, more than the {self.published_nodes} published")
        return self

    def node(self, name: str) -> NetworkNode:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)
