"""BIRD's inference: average the trained model over every completion of the mapped values.

P(O1 | C) is the arithmetic mean of P(O1 | f) over all complete assignments f that contain every
mapped value, i.e. a uniform marginalisation over the factors the condition says nothing about.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from anchor.bird.cpt import cpt_output, decode_assignment, one_hot_rows
from anchor.bird.types import BirdModel, MappedValue

#: Completions enumerated exactly up to this many; beyond it a seeded uniform sample of this size.
MAX_EXACT_COMPLETIONS = 1 << 20


@dataclass
class Marginal:
    p_outcome1: float
    n_assignments: int
    sampled: bool = False
    notes: list[str] = field(default_factory=list)


def allowed_values(model: BirdModel, mapped: Sequence[MappedValue]) -> list[list[int]]:
    """Per factor, the value indices consistent with the mapping. Raises ``ValueError`` for a mapped
    value the model does not have, or two values of one factor."""
    index = {f.name: (i, {v.text: j for j, v in enumerate(f.values)}) for i, f in enumerate(model.factors)}
    allowed: list[list[int] | None] = [None] * len(model.factors)
    for m in mapped:
        if m.factor not in index or m.value not in index[m.factor][1]:
            raise ValueError(f"mapped value {m.value!r} of factor {m.factor!r} is not in the model")
        i, values = index[m.factor]
        if allowed[i] is not None:
            raise ValueError(f"factor {m.factor!r} is mapped to more than one value")
        allowed[i] = [values[m.value]]
    return [a if a is not None else list(range(len(f.values))) for a, f in zip(allowed, model.factors, strict=True)]


def marginal_probability(model: BirdModel, mapped: Sequence[MappedValue], *, seed: int = 0) -> Marginal:
    """Mean model output over the completions of ``mapped`` (see the module docstring)."""
    if not model.factors or not model.parameters:
        raise ValueError("the model has no trained factors")
    allowed = allowed_values(model, mapped)
    sizes = [len(f.values) for f in model.factors]
    params = np.array([p.p for p in model.parameters], dtype=np.float64)
    total = math.prod(len(a) for a in allowed)
    notes: list[str] = []
    if total <= MAX_EXACT_COMPLETIONS:
        combos = list(itertools.product(*allowed))
        sampled = False
    else:
        rng = random.Random(seed)
        lens = [len(a) for a in allowed]
        combos = [tuple(a[d] for a, d in zip(allowed, decode_assignment(i, lens), strict=True))
                  for i in rng.sample(range(total), MAX_EXACT_COMPLETIONS)]
        sampled = True
        notes.append(f"{total} completions: averaged over a seeded sample of {MAX_EXACT_COMPLETIONS}")
    outputs = cpt_output(one_hot_rows(combos, sizes), params)
    return Marginal(p_outcome1=float(np.mean(outputs)), n_assignments=len(combos), sampled=sampled, notes=notes)
