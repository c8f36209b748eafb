"""Cross-validation folds grouped by scenario, the same for every method of a dataset.

The conditions of one scenario share its text and outcomes, so a calibrator that saw some of them
would be scored on near-copies of its training data. Every instance of a scenario therefore lands
in the same fold, whichever run, method or repetition it comes from.

The folds are made once per dataset over the union of the instances (distinct ids) of every run
directory in the report, by scikit-learn's ``GroupKFold``: it spreads the scenarios over the folds
so that the folds hold about as many instances each. Its input is sorted (ids in natural order, and
``GroupKFold`` orders groups by their key, a hash of the scenario text), so the folds depend only on
which instances the report covers, never on the order the directories were given in. The number of
folds is the one asked for, or the number of scenarios when there are fewer; with fewer than two
scenarios there is nothing to hold out, and :func:`scenario_folds` returns an empty assignment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

DEFAULT_FOLDS = 5


def _natural(instance_id: str) -> list[tuple[int, int | str]]:
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", instance_id) if part]


def scenario_folds(instances: Iterable[tuple[str, str]], n_folds: int = DEFAULT_FOLDS) -> dict[str, int]:
    """Scenario key -> fold index (0-based) for ``(instance id, scenario key)`` pairs.

    Pairs may repeat (the same instance in several runs); an instance id given with two different
    scenarios is an error. Returns ``{}`` when there are fewer than two scenarios.
    """
    if n_folds < 2:
        raise ValueError(f"need at least 2 folds, got {n_folds}")
    scenario_of: dict[str, str] = {}
    for iid, key in instances:
        if scenario_of.setdefault(iid, key) != key:
            raise ValueError(f"instance {iid!r} is given with two scenarios ({scenario_of[iid]} and {key})")
    scenarios = set(scenario_of.values())
    if len(scenarios) < 2:
        return {}
    from sklearn.model_selection import GroupKFold  # costs seconds to import; only the report needs it

    ids = sorted(scenario_of, key=_natural)
    groups = np.array([scenario_of[i] for i in ids])
    k = min(n_folds, len(scenarios))
    folds: dict[str, int] = {}
    for fold, (_, test) in enumerate(GroupKFold(n_splits=k).split(np.zeros(len(ids)), groups=groups)):
        for key in set(groups[test].tolist()):
            folds[key] = fold
    return folds


def fold_count(folds: dict[str, int]) -> int:
    return len(set(folds.values()))
