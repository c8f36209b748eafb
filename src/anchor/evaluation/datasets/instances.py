"""The instance types every loader returns, and what works on any list of them: the stable key of
a scenario, grouping by scenario and the outcome-order balancing."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from anchor.evaluation.datasets.text import normalise_space
from anchor.types import Scenario, scenario_key


class _Instance(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    id: str = Field(min_length=1)
    dataset: str = Field(min_length=1)
    scenario: Scenario


def _nonempty(text: str) -> str:
    text = normalise_space(text)
    if not text:
        raise ValueError("condition text is empty")
    return text


class DecisionInstance(_Instance):
    """One condition with the outcome it supports (Plasma, Today, Common2Sense, fact checking)."""

    condition: str = Field(min_length=1)
    label: Literal[1, 2] | None = Field(description=(
        "Outcome the condition supports: 1 = scenario.outcome1; None = not known (a user's unlabelled case)."))

    @field_validator("condition")
    @classmethod
    def _clean(cls, value: str) -> str:
        return _nonempty(value)

    @property
    def gold_outcome(self) -> str | None:
        if self.label is None:
            return None
        return self.scenario.outcome1 if self.label == 1 else self.scenario.outcome2


class PairwiseInstance(_Instance):
    """Two conditions for the same gold outcome, with the human judgement of which supports it more."""

    gold: Literal[1, 2] = Field(description="Which outcome is the gold statement: 1 = scenario.outcome1.")
    condition1: str = Field(min_length=1)
    condition2: str = Field(min_length=1)
    human: Literal[1, 2, 3] = Field(
        description="1: condition1 supports the gold outcome more; 2: condition2 does; 3: equally."
    )

    @field_validator("condition1", "condition2")
    @classmethod
    def _clean(cls, value: str) -> str:
        return _nonempty(value)

    @property
    def gold_outcome(self) -> str:
        return self.scenario.outcome1 if self.gold == 1 else self.scenario.outcome2


Instance = TypeVar("Instance", DecisionInstance, PairwiseInstance)


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
