"""``results.json`` of ``anchor truth bench``: the plan, every case, every cell with its settings, scores
and cost, and the verdicts. JSON with a schema version; the same command gives the same file (timings
are kept apart, in ``timings.json``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from anchor.truth.bench.plan import BenchPlan, SweepName
from anchor.truth.scores import Figure, TruthScores

BENCH_SCHEMA_VERSION = 1

VerdictWord = Literal["held", "did not hold", "not checked"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CaseInfo(_Model):
    """One row of a structure's cases file."""

    id: str
    world: str
    kind: str = Field(description="factors, paraphrase, distractor or nothing (no factor: the truth is the prior).")
    p_true: float
    label: int


class Cost(_Model):
    """What a cell cost. ``answers`` is what the method needs, however it was got; ``requests`` and ``tokens``
    are what its run sent itself, given the response cache and space store the bench's runs share."""

    answers: int = Field(description="LLM answers the method used: asked for, from the cache, or inside a "
                                     "factor space or BIRD model it took from the shared store.")
    requests: int = Field(description="Requests this run sent (each once; answers from the cache are none).")
    tokens: int = Field(description="Prompt and completion tokens of those requests.")


class CellResult(_Model):
    """One (structure, error setting, method): its run and its scores against the truth."""

    structure: str
    setting: str
    method: str
    run: str | None = Field(description="The run directory, relative to the bench's DIR (None when not run).")
    answered_by: str | None = Field(default=None, description=(
        "The setting whose run gave this cell its answers: the two settings differ only in error parameters "
        "that no prompt this method sent reads, so its answers are the same, request by request "
        "(anchor.truth.simulate.reads). None: the cell's own run."))
    not_run: str | None = Field(default=None, description="Why the method was not run (then no scores).")
    p: list[float | None] = Field(default_factory=list, description=(
        "P(outcome1) of each case of the structure, in the order of ``cases``; None: unknown or failed."))
    status: list[Literal["ok", "unknown", "failed"]] = Field(default_factory=list)
    scores: TruthScores | None = None
    ece_truth: Figure | None = Field(default=None, description=(
        "Calibration error against the truth: the answered cases in ten equal-width bins of the estimate, "
        "the mean |mean estimate - mean p_true| of the bins weighted by their size."))
    unknown_with_factors: Figure | None = Field(default=None, description=(
        "Share of the cases that state factors (every kind but 'nothing') the method left unknown or failed."))
    answered_nothing: Figure | None = Field(default=None, description=(
        "Share of the 'nothing' cases (no factor stated) the method answered anyway."))
    cost: Cost | None = None


class Comparison(_Model):
    """Method ``a`` against method ``b`` on the cases both answered: the mean of |a - p_true| - |b - p_true|
    with a 95% bootstrap interval (seeded; resampling the cases). Below 0: ``a`` is closer to the truth."""

    a: str
    b: str
    structure: str
    setting: str
    n: int
    diff: float | None
    low: float | None
    high: float | None

    @property
    def better(self) -> bool:
        return self.high is not None and self.high < 0

    @property
    def worse(self) -> bool:
        return self.low is not None and self.low > 0


class Crossover(_Model):
    """Where, along a sweep, the sign of ``a``'s minus ``b``'s error to the truth changes (ANCHOR minus a
    direct method): ``at`` is the level interpolated linearly between the two levels around it."""

    sweep: SweepName
    structure: str
    a: str
    b: str
    levels: list[float]
    diffs: list[float | None] = Field(description="Mean paired difference of errors at each level.")
    between: tuple[float, float] | None = None
    at: float | None = None
    a_better_above: bool | None = Field(default=None, description="True: a is closer to the truth above the "
                                                                   "crossover (and farther below it).")
    note: str = ""


class Verdict(_Model):
    """One claim of the paper, checked: held, did not hold, or not checked, with its figures and where it held."""

    claim: int
    title: str
    verdict: VerdictWord
    summary: str
    where_held: list[str] = Field(default_factory=list)
    figures: dict[str, Any] = Field(default_factory=dict)


class BenchResults(_Model):
    schema_version: int = BENCH_SCHEMA_VERSION
    anchor_version: str
    plan: BenchPlan
    settings: dict[str, dict[str, Any]] = Field(description="Each error setting by name: its sweep, level and "
                                                            "every SimErrors parameter.")
    worlds: dict[str, list[str]] = Field(description="The worlds of each structure.")
    cases: dict[str, list[CaseInfo]] = Field(description="Each structure's cases, in the order of the cells' p.")
    cells: list[CellResult]
    crossovers: list[Crossover] = Field(default_factory=list)
    verdicts: list[Verdict] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def cell(self, structure: str, setting: str, method: str) -> CellResult | None:
        for c in self.cells:
            if (c.structure, c.setting, c.method) == (structure, setting, method):
                return c
        return None
