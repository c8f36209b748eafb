"""What works on any list of instances (the types are :mod:`anchor.rundir.instances`'s): the stable key of a
scenario, grouping by scenario and the outcome-order balancing."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from anchor.rundir.instances import DecisionInstance, PairwiseInstance
from anchor.types import Scenario, scenario_key

Instance = TypeVar("Instance", DecisionInstance, PairwiseInstance)

__all__ = ["DecisionInstance", "PairwiseInstance", "balance_outcome_order", "group_by_scenario", "scenario_key"]


def group_by_scenario(instances: Iterable[Instance]) -> dict[str, list[Instance]]:
    """Instances grouped by :func:`scenario_key`, groups and members in first-seen order."""
    groups: dict[str, list[Instance]] = {}
    for inst in instances:
        groups.setdefault(scenario_key(inst.scenario), []).append(inst)
    return groups


def balance_outcome_order(instances: Sequence[Instance]) -> list[Instance]:
    """Swap outcome1/outcome2 for about half of the scenarios, deterministically.

    In the bundled Plasma and Today files the gold outcome is always outcome1, so a method with a
    positional bias would look perfect. This returns copies in which every scenario whose
    :func:`scenario_key` is odd has its outcomes swapped (and the label, or the pairwise ``gold``,
    flipped accordingly). All instances of a scenario are treated alike, so grouping by scenario
    still works; ids are kept, so results can be joined back to the source rows.
    """
    out: list[Instance] = []
    swapped: dict[str, Scenario] = {}
    for inst in instances:
        key = scenario_key(inst.scenario)
        if int(key, 16) % 2 == 0:
            out.append(inst)
            continue
        scen = swapped.setdefault(key, inst.scenario.swapped())
        if isinstance(inst, DecisionInstance):
            label = None if inst.label is None else 3 - inst.label
            out.append(inst.model_copy(update={"scenario": scen, "label": label}))
        else:
            out.append(inst.model_copy(update={"scenario": scen, "gold": 3 - inst.gold}))
    return out
