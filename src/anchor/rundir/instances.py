"""What a run answers: the instance types (one condition with its label, or a pair of conditions with
the human judgement between them).

Every benchmark loader returns them (:mod:`anchor.evaluation.datasets`), ``anchor predict`` makes one per
row of a user's table, and a run directory keeps those it scores (``instances.jsonl``). They live with
the run engine, under the datasets, so that the run directory can read them back without knowing any
dataset.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from anchor.text import normalise_space
from anchor.types import Scenario


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


Instance = DecisionInstance | PairwiseInstance
