"""The files a run writes (``anchor eval``, ``anchor predict``), as typed models (written and read by :mod:`anchor.rundir`,
which owns the directory: its file names, schema version, locking and strict or lenient reading).

``DIR/config.json``       ``RunConfig``: everything needed to rerun (no secrets).
``DIR/predictions.jsonl`` one ``Prediction`` per line, appended as instances finish; a retried
                          instance appends a new line, and the last line for a (run, id) counts.
``DIR/traces.jsonl``      one ``TraceRecord`` per answered condition (methods with an audit trail).
``DIR/calls.jsonl``       one ``CallRecord`` per LLM request or cache hit, as it happens: the
                          exact cost of everything the run directory asked for, kills included
                          (a request cut off by one is counted apart, as interrupted).
``DIR/sample.json``       ``SampleRecord`` (below; drawn by evaluation/datasets/sampling.py): the seeded sample of
                          instance ids the run scores (with ``--limit N``, the first N of them), when the run samples.
``DIR/metrics.json``      ``MetricsReport``: per-run metrics, mean and std over runs, calibration, cost
                          (``StageCost`` records per stage).
``DIR/spaces/*.json``     factor spaces (ANCHOR), built once per scenario (and run, or shared).
``DIR/calibration.json``  ``RunCalibration``: this run's held-out calibration figures, written by
                          ``anchor calibrate report`` and shown in the run's HTML index.

A run of ``anchor predict`` (kind ``cases``) has the same files. Its ``predictions.jsonl`` is written in
the order rows finish and rewritten in input order when the run ends; it also holds
``DIR/rejected.jsonl`` (the rows that could not be read, with line and reason) and the same predictions
as a table, ``DIR/predictions.csv`` or ``.parquet``, when asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from anchor.types import CalibratedProbability, CriticalPath, InferenceResult, StageCost, TextTruncation

Kind = Literal["pairwise", "decision", "factcheck", "cases"]
Status = Literal["ok", "abstained", "failed"]

METRIC_KEYS: dict[Kind, tuple[str, ...]] = {
    "pairwise": ("f1_context1", "f1_context2", "f1_same", "f1_micro", "coverage"),
    "decision": ("accuracy", "accuracy_covered", "coverage"),
    "factcheck": ("balanced_accuracy", "accuracy", "coverage"),
    # A user's own cases (anchor predict): scored on the rows that carry a label.
    "cases": ("accuracy", "balanced_accuracy", "accuracy_covered", "coverage"),
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class RunConfig(_Model):
    schema_version: int = Field(default=1, ge=1, description=(
        "The run-directory layout (anchor.rundir.SCHEMA_VERSION) of the directory this configuration "
        "was written in; 1 when absent (written before it was recorded). Not part of the run's identity."))
    anchor_version: str
    dataset: str
    data_path: str | None = None
    data_sha256: str
    kind: Kind
    method: str
    ablations: list[str] = Field(default_factory=list)
    limit: int | None = Field(default=None, ge=1, description="Only the first N instances (of the sample, "
                                                                "when the run samples).")
    sample: Annotated[int, Field(ge=1)] | Literal["all"] | None = Field(
        default=None, description="Seeded sample of this many instances ('all': every one, in the seeded order); "
                                  "None: the whole file in file order.")
    sample_seed: int | None = Field(default=None, description="Seed of the sample (None when not sampling).")
    runs: int = Field(ge=1, description="Repetitions with seeds seed, seed + 1, ...")
    seed: int
    negation: Literal["template", "llm"] = "template"
    decision_threshold: float = Field(default=0.9, ge=0, lt=1)
    balance_outcomes: bool = False
    spaces: Literal["per-run", "shared"] = "per-run"
    """Factor spaces (and other per-scenario artefacts) built for every run, or once for all runs."""
    spaces_from: str | None = None
    """Another run directory whose stored artefacts are reused instead of being built."""
    spaces_from_base: Literal["cwd", "run"] = "cwd"
    """What a relative ``spaces_from`` starts from: the working directory (``anchor eval --spaces-from`` as
    given) or this run's own directory (``anchor reproduce`` and the analyses: their folders can move)."""
    llm: dict[str, Any] = Field(default_factory=dict, description="LLMSettings.describe(): no secrets")
    anchor_config: dict[str, Any] | None = None
    stage: str | None = Field(default=None, description="The variant of a method that has several (--stage).")
    method_config: dict[str, Any] | None = Field(
        default=None, description="The method's own settings (BIRD: its BirdConfig), from its MethodSpec.")
    max_factors: int | None = Field(default=None, ge=1, description=(
        "ANCHOR: every factor space truncated to its first N factors by abduction order after it is built "
        "or loaded (anchor analyze factors); None = the spaces as built."))
    estimator: dict[str, Any] | None = Field(default=None, description=(
        "ANCHOR: the second LLM that elicits phi and the latent parameters (LLMSettings.describe(), no "
        "secrets); None = the main LLM does (anchor analyze estimator)."))
    command: str = Field(default="", description="The command line, with secret values replaced by ***.")
    calibrator: dict[str, Any] | None = Field(default=None, description=(
        "The calibrator applied to every P(O1) (anchor eval --calibrator): path, sha256, kind and what it was "
        "fitted on; None = the method's own probabilities."))
    embedder: dict[str, Any] | None = Field(default=None, description=(
        "Methods that embed (ANCHOR's): the embedder's identity (anchor.embedding.embed.EmbedderIdentity: model, vector "
        "width, where it runs), part of the run's identity; None = the method embeds nothing."))
    cases: dict[str, Any] | None = Field(default=None, description=(
        "anchor predict: how the cases file is read (format, column mapping, limits), so that readers of the "
        "run read it the same way; None for the benchmark datasets."))
    artefact_keys: Literal["scenario", "content"] = Field(default="scenario", description=(
        "How per-scenario artefacts are named: 'scenario' = the scenario's key (with the seed when built per "
        "run), 'content' = the scenario's key and a hash of the settings that built it (anchor predict: a space "
        "store shared by runs with different settings)."))


    def spaces_source(self, run_dir: Path) -> Path | None:
        """The run directory whose artefacts this run (in ``run_dir``) reuses; None when it builds its own."""
        if self.spaces_from is None:
            return None
        path = Path(self.spaces_from)
        return run_dir / path if self.spaces_from_base == "run" and not path.is_absolute() else path


class SideRecord(_Model):
    """One condition of an instance: what the method answered, or why not."""

    condition: int = Field(description="1 (the decision condition, or a pair's first), or 2 (a pair's second).")
    p_outcome1: float | None = None
    p_outcome1_raw: float | None = Field(default=None, description=(
        "The method's own P(O1) when the run applied a calibrator (p_outcome1 is then the calibrated one)."))
    status: Status = "ok"
    reason: str | None = None
    n_factors: int | None = None
    artefact: str | None = None
    fallback: str | None = None
    truncated: TextTruncation | None = Field(
        default=None, description="Set when the condition was cut to fit a prompt into the model's context.")
    factors: list[str] | None = Field(default=None, description=(
        "The factors the condition was mapped to (methods that map: ANCHOR, BIRD); None for the others."))


class Prediction(_Model):
    run: int
    id: str
    seed: int
    kind: Kind
    line: int | None = Field(default=None, description=(
        "anchor predict: the line of the cases file where the row starts (Parquet: its row number)."))
    # decision / factcheck
    label: int | None = None
    p_true: float | None = Field(default=None, ge=0.0, le=1.0, description=(
        "anchor predict: the row's true P(outcome1) when the cases file gives one (its p_true column: the cases "
        "of a synthetic world), kept so that the run can be scored against the truth on its own."))
    p_outcome1: float | None = None
    p_outcome1_raw: float | None = Field(default=None, description=(
        "The method's own P(O1) when the run applied a calibrator (p_outcome1 is then the calibrated one)."))
    p_outcome2: float | None = Field(default=None, description="1 - p_outcome1 (None with it).")
    # pairwise
    human: int | None = None
    gold: int | None = None
    p_gold_1: float | None = None
    p_gold_2: float | None = None
    choice: int | None = Field(default=None, description="Compare baseline: 1, 2 or 3 (same).")
    prediction: int | None = None
    unknown: bool = False
    status: Status = Field(default="ok", description="failed when any side failed; abstained when a side was "
                                                     "unknown; ok otherwise.")
    error: str | None = None
    sides: list[SideRecord] = Field(default_factory=list)
    n_factors: list[int] | None = None
    truncated: bool = Field(default=False, description="A condition of this instance was cut to fit the "
                                                       "model's context (details on its side record).")
    cost: list[dict[str, Any]] = Field(default_factory=list)
    seconds: float = 0.0


R = TypeVar("R")


class TraceRecord(_Model, Generic[R]):
    """The audit trail of one answered condition (``DIR/traces.jsonl``).

    ``result`` is the method's own trail (a JSON object): an ANCHOR ``InferenceResult`` for ANCHOR's
    methods, another shape for the others; as written by the runner and read without a type, a dict.
    ``AnchorTrace`` (``TraceRecord[InferenceResult]``) is the typed view of an ANCHOR line: a line of
    another method's trail fails it on ``result`` alone."""

    run: int = Field(ge=0)
    id: str = Field(min_length=1)
    side: Literal[0, 1] = Field(default=0, description="0 for a decision instance; 0 and 1 for the two "
                                                       "conditions of a pair.")
    condition: str
    space: str | None = Field(default=None, description="Key of the factor space used (DIR/spaces/<key>.json).")
    result: R
    calibration: CalibratedProbability | None = Field(default=None, description=(
        "The raw and the calibrated P(O1), when the run applied a calibrator (result holds the raw one)."))


AnchorTrace = TraceRecord[InferenceResult]
"""A trace line whose result is ANCHOR's (an ``InferenceResult``), typed."""


class CriticalPathReport(_Model):
    """Per scenario, the longest chain of requests that had to wait for one another (its artefact's
    build, then the longest of its instances): a lower bound on its time however many requests the
    server takes at once. Means and maxima are None when some scenario's chain was not recorded."""

    scenarios: int = 0
    mean_requests: float | None = None
    mean_seconds: float | None = None
    max_requests: int | None = None
    max_seconds: float | None = None
    per_scenario: dict[str, CriticalPath | None] = Field(default_factory=dict, description=(
        "Scenario key -> its critical path (None: recorded before chains were)."))


#: metrics.json's and calibration.json's ``schema_version``, stamped by the run directory when it writes them.
LAYOUT_VERSION = ("The run-directory layout (anchor.rundir.SCHEMA_VERSION) this file was written in; None "
                  "in files written before it was recorded (the directory's config.json says it).")


class MetricsReport(_Model):
    schema_version: int | None = Field(default=None, ge=1, description=LAYOUT_VERSION)
    dataset: str
    kind: Kind
    method: str
    ablations: list[str] = Field(default_factory=list)
    llm: dict[str, Any] = Field(default_factory=dict)
    small_model: bool = Field(description="True when the numbers come from the embedded 135M model.")
    oracle: bool = False
    n_instances: int
    n_runs: int
    scope: str = Field(description="What the headline metrics are computed over.")
    runs: list[dict[str, Any]]
    mean: dict[str, float | None]
    std: dict[str, float | None]
    n_failed: int = Field(default=0, description="Predictions the run could not make (over all runs); they count "
                                                 "as unknown in the metrics and are retried when the command is "
                                                 "run again.")
    n_abstained: int = Field(default=0, description="Predictions where the method answered 'unknown' (failed "
                                                    "ones not included: they are n_failed).")
    n_unknown: int | None = Field(default=None, description=(
        "Predictions (over all runs) without a decision, as the headline metrics count them: the abstained, the "
        "failed and, on decision data, a tie at exactly 0.5; the sum of runs[].unknown, each run also saying how "
        "many of them abstained and failed. None in reports written before it was recorded."))
    stage: str | None = None
    n_fallback: int = Field(default=0, description="Predictions where the method said 'unknown' and its fallback "
                                                   "method (MethodSpec.fallback) answered instead.")
    fallback: str | None = Field(default=None, description="The fallback method, when the run had one.")
    failures: list[dict[str, Any]] = Field(default_factory=list, description="Failed predictions: run, id, reason.")
    calibration: dict[str, Any] | None = None
    cost: dict[str, StageCost] = Field(default_factory=dict, description="Per stage, plus 'total'.")
    cost_scope: str = ""
    cost_reused: dict[str, StageCost] = Field(default_factory=dict, description="Build cost of artefacts reused "
                                                                                "from another run directory "
                                                                                "(not in 'cost').")
    cost_per_instance: StageCost | None = Field(default=None, description="The total divided by the predictions "
                                                                          "(stage 'total').")
    critical_path: CriticalPathReport | None = Field(default=None, description=(
        "The longest chain of dependent requests per scenario, from calls.jsonl (None in older reports)."))
    data: dict[str, Any] | None = Field(default=None, description=(
        "The data file as read: source, rows, usable, skipped (count) and skipped_rows (line and reason of "
        "the first ones), for formats that skip bad rows instead of failing."))
    sample: dict[str, Any] | None = Field(default=None, description=(
        "How the instances were sampled (seed, requested, population, size, used, file); None when the run "
        "scores the whole file."))
    n_truncated: int = Field(default=0, description="Predictions (over all runs) whose condition was cut to fit "
                                                    "the model's context window.")
    notes: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _named_costs(cls, data: Any) -> Any:
        """Costs written before they were ``StageCost`` records (run-directory schema 1) carry no stage:
        it is the key they are filed under (``request_seconds`` is read as ``llm_seconds``, see StageCost)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for key in ("cost", "cost_reused"):
            if isinstance(data.get(key), dict):
                data[key] = {stage: {"stage": stage, **c} if isinstance(c, dict) and "stage" not in c else c
                             for stage, c in data[key].items()}
        per = data.get("cost_per_instance")
        if isinstance(per, dict) and "stage" not in per:
            data["cost_per_instance"] = {"stage": "total", **per}
        return data


class CalibrationRow(_Model):
    """Cross-validated scores of one calibrator (or of the raw probabilities, ``calibrator="none"``)."""

    calibrator: str
    brier: float | None = None
    log_loss: float | None = None
    ece: float | None = Field(default=None, description="Equal-width bins.")
    ece_equal_mass: float | None = Field(default=None, description="Bins of (nearly) equal counts.")
    decision: float | None = Field(default=None, description="The dataset's decision metric (see decision_metric).")


class RunCalibration(_Model):
    """``DIR/calibration.json``: this run's part of an ``anchor calibrate report``, for its HTML index."""

    schema_version: int | None = Field(default=None, ge=1, description=LAYOUT_VERSION)
    report: str = Field(description="Where the full report (calibration.md, calibration.json, PNGs) was written.")
    generated: str
    dataset: str
    method: str
    model: str
    small_model: bool = False
    n_folds: int | None = Field(default=None, description="None when there were too few scenarios to cross-validate.")
    n: int = Field(description="Instances (over the runs pooled with this one for its dataset and method).")
    n_answered: int
    decision_metric: str
    rows: list[CalibrationRow] = Field(default_factory=list)
    aurc: float | None = Field(default=None, description="Area under this run's risk-coverage curve.")
    max_coverage: float | None = None
    plots: list[str] = Field(default_factory=list, description="PNG files of the report that show this run.")
    notes: list[str] = Field(default_factory=list)


# --------------------------------------------------------------------------- sample.json

SampleSize = int | Literal["all"]


class SampleError(ValueError):
    """A sample size or a recorded sample that cannot be used."""


class HasId(Protocol):
    @property
    def id(self) -> str: ...


Item = TypeVar("Item", bound=HasId)


class SampleRecord(BaseModel):
    """Which instances a sample holds, and how it was drawn (kept in the run directory)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int
    requested: SampleSize = Field(description="The size asked for: a number or 'all'.")
    population: int = Field(ge=0, description="Usable instances the sample was drawn from.")
    ids: list[str] = Field(description="Sampled ids, in the seeded order the instances are returned in.")
    note: str | None = Field(default=None, description="Set when fewer instances than asked were available.")

    def select(self, instances: Sequence[Item]) -> list[Item]:
        """The recorded instances, in the recorded order; an error names any id that is missing."""
        by_id = {inst.id: inst for inst in instances}
        missing = [i for i in self.ids if i not in by_id]
        if missing:
            raise SampleError(f"{len(missing)} sampled id(s) are not in the data, e.g. {missing[0]!r}; "
                              "the file differs from the one the sample was drawn from")
        return [by_id[i] for i in self.ids]
