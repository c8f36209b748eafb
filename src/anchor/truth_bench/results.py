"""``results.json`` of ``anchor truth bench``: the plan, its groups of worlds, every case, every cell with its
settings, scores and cost, the map, and the verdicts. JSON with a schema version; the same command gives
the same file (timings are kept apart, in ``timings.json``).

Schema 2 (this anchor): cells, cases and comparisons are keyed by *group* (a structure at a prior, or the
published networks) instead of schema 1's ``structure``; ``groups`` describes them; intervals resample
worlds and the cases within them (``Comparison.worlds``); ``map`` and ``power`` are new.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from anchor.truth.scores import Figure, TruthScores
from anchor.truth_bench.plan import BenchPlan, SweepName

BENCH_SCHEMA_VERSION = 2

VerdictWord = Literal["held", "did not hold", "not checked"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GroupInfo(_Model):
    """A group of worlds: its structure, its prior (None: the published networks, each at its own), its
    cases file (relative to DIR) and its worlds."""

    structure: str
    prior: float | None
    cases_file: str
    worlds: list[str]


class CaseInfo(_Model):
    """One row of a group's cases file."""

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
    """One (group, error setting, method): its run and its scores against the truth."""

    group: str
    setting: str
    method: str
    run: str | None = Field(description="The run directory, relative to the bench's DIR (None when not run).")
    answered_by: str | None = Field(default=None, description=(
        "The setting whose run gave this cell its answers: the two settings differ only in error parameters "
        "that no prompt this method sent reads, so its answers are the same, request by request "
        "(anchor.truth.simulate.reads). None: the cell's own run."))
    not_run: str | None = Field(default=None, description="Why the method was not run (then no scores).")
    p: list[float | None] = Field(default_factory=list, description=(
        "P(outcome1) of each case of the group, in the order of ``cases``; None: unknown or failed."))
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
    """Cell ``a`` against cell ``b`` on the cases both answered: the mean of |a - p_true| - |b - p_true| (or
    of the Bayes-decision agreement, in points) with a 95% interval from resampling the worlds and, within
    each world drawn, its cases (seeded). Below 0: ``a`` is closer to the truth."""

    a: str
    b: str
    group: str
    setting: str
    n: int = Field(description="Cases both answered.")
    worlds: int = Field(description="Worlds those cases come from (what the interval resamples first).")
    diff: float | None
    low: float | None
    high: float | None

    @property
    def better(self) -> bool:
        return closer(self.diff, self.high)

    @property
    def worse(self) -> bool:
        return farther(self.diff, self.low)


#: A mean difference of errors smaller than this is no difference, however narrow its interval: two answers
#: that differ in the fifth decimal (the network and Naive Bayes where the latent is the outcome itself) are
#: the same answer.
NEGLIGIBLE = 0.001


def closer(diff: float | None, high: float | None) -> bool:
    """``a`` closer to the truth than ``b``: the whole interval below 0, and by more than a negligible amount."""
    return high is not None and high < 0 and diff is not None and diff <= -NEGLIGIBLE


def farther(diff: float | None, low: float | None) -> bool:
    return low is not None and low > 0 and diff is not None and diff >= NEGLIGIBLE


class MapCell(_Model):
    """One cell of the map: ANCHOR at factor-error level ``factor`` against a direct method at direct-error
    level ``direct``, in one group (paired, with the interval of :class:`Comparison`)."""

    group: str
    direct: float
    factor: float
    a: str
    b: str
    n: int
    worlds: int
    diff: float | None
    low: float | None
    high: float | None

    @property
    def better(self) -> bool:
        return closer(self.diff, self.high)

    @property
    def worse(self) -> bool:
        return farther(self.diff, self.low)


class Power(_Model):
    """What a paired comparison of ANCHOR with vanilla at the default errors can tell, in one group or pooled
    over several (``group``: a group's name, ``<structure> (every prior)`` or ``every group``): the interval's
    half-width and the smallest difference in MAE it finds with 80% power (2.8 standard errors)."""

    group: str
    worlds: int
    n: int
    half_width: float | None
    detectable: float | None


class Crossover(_Model):
    """Where, along a sweep, the sign of ``a``'s minus ``b``'s error to the truth changes (ANCHOR minus a
    direct method): ``at`` is the level interpolated linearly between the two levels around it."""

    sweep: SweepName
    group: str
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
    """One claim, checked: held, did not hold, or not checked, with its figures and where it held."""

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
    groups: dict[str, GroupInfo] = Field(description="Each group of worlds: its structure, prior and worlds.")
    cases: dict[str, list[CaseInfo]] = Field(description="Each group's cases, in the order of the cells' p.")
    cells: list[CellResult]
    map: list[MapCell] = Field(default_factory=list)
    power: list[Power] = Field(default_factory=list)
    crossovers: list[Crossover] = Field(default_factory=list)
    verdicts: list[Verdict] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def cell(self, group: str, setting: str, method: str) -> CellResult | None:
        for c in self.cells:
            if (c.group, c.setting, c.method) == (group, setting, method):
                return c
        return None

    def group_names(self, *, structure: str | None = None, even: bool | None = None) -> list[str]:
        """The groups, in plan order, of one structure and/or at even odds (or not)."""
        return [name for name, g in self.groups.items()
                if (structure is None or g.structure == structure) and (even is None or (g.prior == 0.5) == even)]
