"""The paper's sampling protocol for the fact-checking sets: a seeded sample of N instances.

The paper scores every method on 100 instances per fact-checking set, drawn with seed 42. Here a
sample is defined over the instances' stable ids, in file order, so that it depends only on the
file and the seed:

* The ids are put in a seeded random order: a Fisher-Yates shuffle driven by
  ``random.Random(seed).random()``. Python guarantees that ``random()`` yields the same sequence
  for a given seed on every version and platform (unlike ``shuffle``/``sample``, whose use of the
  generator may change), and the shuffle does not depend on hashing, so the order is the same
  across processes, machines and Python versions.
* A sample of size N is the first N ids of that order, returned in that order. Samples are
  therefore nested (the sample of 4 is the first 4 of the sample of 100), and any prefix of a
  sample is itself a fair sample, never a slice of a label-sorted file.
* ``"all"`` is every instance, in the same seeded order.
* Asking for more instances than the file has takes all of them, and the returned
  :class:`SampleRecord` says so in its ``note`` (the bundled COVID-Fact sample has 12 rows, so the
  default of 100 must still run on it).

:class:`SampleRecord` is what a run directory should keep: the seed, the size asked for, the
population and the sampled ids, so that another method can be checked against exactly the same
instances (:meth:`SampleRecord.select`).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from typing import TypeVar

from anchor.rundir.records import HasId, SampleError, SampleRecord, SampleSize

__all__ = [
    "DEFAULT_SAMPLE_SEED",
    "DEFAULT_SAMPLE_SIZE",
    "SampleError",
    "check_sample_seed",
    "SampleRecord",
    "SampleSize",
    "draw_sample",
    "parse_sample_size",
    "sample_instances",
    "seeded_order",
]

DEFAULT_SAMPLE_SIZE = 100
DEFAULT_SAMPLE_SEED = 42

Item = TypeVar("Item", bound=HasId)


def parse_sample_size(value: str | int) -> SampleSize:
    """``"all"`` or a positive whole number (as text or int), for a ``--sample`` option."""
    if isinstance(value, bool):
        raise SampleError(f"sample size must be a positive whole number or 'all', got {value!r}")
    if isinstance(value, int):
        number = value
    else:
        text = value.strip().lower()
        if text == "all":
            return "all"
        try:
            number = int(text)
        except ValueError:
            raise SampleError(f"sample size must be a positive whole number or 'all', got {value!r}") from None
    if number < 1:
        raise SampleError(f"sample size must be at least 1 (or 'all'), got {number}")
    return number


def check_sample_seed(seed: int, name: str = "sample seed") -> int:
    """``seed`` if it can seed a sample: a whole number >= 0 (``name`` says what gave it, in the error).
    ``random.Random`` seeds with the absolute value of an int, so -1 would draw seed 1's sample."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SampleError(f"{name} must be a whole number >= 0, got {seed!r}")
    return seed


def seeded_order(ids: Sequence[str], seed: int = DEFAULT_SAMPLE_SEED) -> list[int]:
    """Positions ``0..len(ids)-1`` in the seeded order that defines every sample of ``ids``."""
    check_sample_seed(seed)
    if len(set(ids)) != len(ids):
        dupes = sorted(i for i, n in Counter(ids).items() if n > 1)
        raise SampleError(f"instance ids must be unique to sample them; repeated: {', '.join(dupes[:5])}")
    rng = random.Random(seed)
    order = list(range(len(ids)))
    # Fisher-Yates from the end, drawing with random() (stable across Python versions).
    for i in range(len(order) - 1, 0, -1):
        j = min(int(rng.random() * (i + 1)), i)
        order[i], order[j] = order[j], order[i]
    return order


def draw_sample(
    instances: Sequence[Item], size: SampleSize = DEFAULT_SAMPLE_SIZE, seed: int = DEFAULT_SAMPLE_SEED
) -> tuple[list[Item], SampleRecord]:
    """The seeded sample of ``size`` instances (see the module docstring) and its record."""
    size = parse_sample_size(size)
    if not instances:
        raise SampleError("there are no instances to sample from")
    order = seeded_order([inst.id for inst in instances], seed)
    n = len(order) if size == "all" else min(size, len(order))
    note = None
    if size != "all" and size > len(order):
        note = (f"asked for a sample of {size} but only {len(order)} usable instances exist; "
                f"all {len(order)} are used")
    chosen = [instances[k] for k in order[:n]]
    record = SampleRecord(seed=seed, requested=size, population=len(order), ids=[inst.id for inst in chosen],
                          note=note)
    return chosen, record


def sample_instances(
    instances: Sequence[Item], size: SampleSize = DEFAULT_SAMPLE_SIZE, seed: int = DEFAULT_SAMPLE_SEED
) -> list[Item]:
    """Just the sampled instances of :func:`draw_sample`."""
    return draw_sample(instances, size, seed)[0]
