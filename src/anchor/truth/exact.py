"""Exact probabilities in a world's hidden network, by enumerating every joint state.

Worlds are small (an outcome, a few latents, a dozen or so factors), so the whole joint
distribution fits in one array: 2**n states for n binary variables. The table is computed once per
world and kept; every query afterwards is a masked sum. No approximation, no sampling: the numbers
here are the truth that methods are scored against.

A network world (a published network, :mod:`anchor.truth.networks`) is answered instead by pgmpy's
variable elimination behind the same interface (:class:`~anchor.truth.networks.inference.NetworkTable`):
the same names, ``"O"`` and the factor ids, each 1 (present) or 0 (absent).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np

from anchor.truth.world import OUTCOME, World

#: More binary variables than this and the joint table stops being small (2**22 states = 32 MB).
MAX_VARIABLES = 22


class JointTable:
    """The joint distribution of a world's variables: ``probs[s]`` for every state ``s``, and each
    variable's value in each state."""

    def __init__(self, world: World) -> None:
        names = [v.name for v in world.variables]
        if len(names) > MAX_VARIABLES:
            raise ValueError(f"world {world.id}: {len(names)} variables; at most {MAX_VARIABLES} are enumerated")
        self.names = names
        self.index = {name: i for i, name in enumerate(names)}
        states = np.arange(2 ** len(names), dtype=np.int64)
        # bits[i, s] = value of variable i in state s
        self.bits = ((states[None, :] >> np.arange(len(names))[:, None]) & 1).astype(bool)
        probs = np.ones(states.shape[0], dtype=np.float64)
        for var in world.variables:
            row = np.zeros(states.shape[0], dtype=np.int64)
            for parent in var.parents:
                row = (row << 1) | self.bits[self.index[parent]]
            p_one = np.asarray(var.cpt, dtype=np.float64)[row]
            probs *= np.where(self.bits[self.index[var.name]], p_one, 1.0 - p_one)
        self.probs = probs

    def mask(self, evidence: Mapping[str, int]) -> np.ndarray:
        """The states that agree with ``evidence`` (variable name -> 0 or 1)."""
        keep = np.ones(self.probs.shape[0], dtype=bool)
        for name, value in evidence.items():
            if value not in (0, 1):
                raise ValueError(f"evidence {name}={value!r}: values are 0 or 1")
            column = self.bits[self.index[name]]
            keep &= column if value else ~column
        return keep

    def probability(self, evidence: Mapping[str, int]) -> float:
        """P(evidence)."""
        return float(self.probs[self.mask(evidence)].sum())

    def conditional(self, query: Mapping[str, int], evidence: Mapping[str, int]) -> float:
        """P(query | evidence); ValueError when the evidence has probability zero."""
        given = self.mask(evidence)
        total = float(self.probs[given].sum())
        if total <= 0.0:
            raise ValueError(f"the evidence {dict(evidence)} has probability zero")
        return float(self.probs[given & self.mask(query)].sum()) / total


class ExactTable(Protocol):
    """What every world's exact inference answers, over the names ``"O"`` and the factor ids (0 or 1)."""

    def probability(self, evidence: Mapping[str, int]) -> float: ...

    def conditional(self, query: Mapping[str, int], evidence: Mapping[str, int]) -> float: ...


# Worlds are immutable but not hashable (they hold lists): tables are kept by the world object's
# identity, with the world itself, so that an id is never reused while its entry lives.
_TABLES: dict[int, tuple[World, ExactTable]] = {}
_MAX_TABLES = 64


def joint(world: World) -> ExactTable:
    """The world's exact table, made once per world object: the enumerated joint of a generated world,
    pgmpy's variable elimination for a network world."""
    entry = _TABLES.get(id(world))
    if entry is not None and entry[0] is world:
        return entry[1]
    if len(_TABLES) >= _MAX_TABLES:
        _TABLES.pop(next(iter(_TABLES)))
    table: ExactTable
    if world.network is not None:
        from anchor.truth.networks.inference import NetworkTable  # pgmpy is loaded only for network worlds

        table = NetworkTable(world.network, {f.id: (str(f.node), str(f.state)) for f in world.factors})
    else:
        table = JointTable(world)
    _TABLES[id(world)] = (world, table)
    return table


def p_outcome1(world: World, present: list[str] | tuple[str, ...]) -> float:
    """P(O1 | the factors in ``present`` are present), every other factor unobserved."""
    return joint(world).conditional({OUTCOME: 1}, {f: 1 for f in present})


def factor_phi(world: World, factor_id: str) -> float:
    """P(O1 | this factor is present): the quantity ANCHOR's elicitation asks for."""
    return p_outcome1(world, [factor_id])


def prior_outcome1(world: World) -> float:
    """P(O1) with nothing observed."""
    return joint(world).probability({OUTCOME: 1})


def likelihoods(world: World, evidence: Mapping[str, int]) -> tuple[float, float]:
    """(P(evidence | O1), P(evidence | O2))."""
    table = joint(world)
    return (table.conditional(evidence, {OUTCOME: 1}), table.conditional(evidence, {OUTCOME: 0}))
