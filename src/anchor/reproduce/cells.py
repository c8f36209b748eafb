"""Our number for each of the paper's cells, read from the reproduction's finished runs and analyses.

A published cell names a table, a row (``method`` or ``method:variant``), a dataset, a metric and
the paper's model. The user's reproduction has one model, so our cell for a row, dataset and metric
is the same whatever model the paper's cell is of (except in the estimator tables, where the model is
a role: the main model, the estimator, or their difference). Every value is put in the unit of the
paper's cell (percent, points, fraction, ratio), with its std over runs and the per-run values that
the claims need for their spread.

Where each number comes from:

* Tables 1-3: ``metrics.json`` of the run of that dataset, method and ablation (Table 3's
  ``f1_micro_delta`` is the variant's micro-F1 minus the full model's, run by run); the F1 of a
  class the runs have no pair of has no value, and says so (``Value.absent``);
* Table 4: the rows of :func:`anchor.evaluation.report.transplant.transplant_groups`, the same
  computation as ``anchor report``'s table (mapping cost per prediction over BIRD‡'s);
* the cost figure: :func:`anchor.evaluation.cost.compare.compare` of the BIRD† and ANCHOR runs,
  the same as ``anchor cost``; ANCHOR over BIRD per scenario;
* Tables 8 and 9: the estimator analysis of the dataset.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from anchor.analysis.estimator import EstimatorAnalysis
from anchor.analysis.factors import FactorCountAnalysis
from anchor.evaluation.cost.compare import CostCompareError, compare
from anchor.evaluation.report.loading import LoadedRun, ReportError, load_run
from anchor.evaluation.report.transplant import TransplantRow, transplant_groups
from anchor.reproduce.analyses import estimator_itself, no_result
from anchor.reproduce.plan import ANALYSES_FOLDER as ANALYSES
from anchor.reproduce.plan import RUNS_FOLDER as RUNS
from anchor.reproduce.plan import Plan, run_name
from anchor.reproduce.published import PublishedCell
from anchor.reproduce.selection import PAIRWISE
from anchor.scoring.scores import missing_class

#: What makes two runs of one dataset comparable across models: the same instances, runs, seeds and data.
SLICE_FIELDS = ("limit", "runs", "seed", "sample", "sample_seed", "data_sha256", "balance_outcomes", "spaces")
#: ANCHOR's build sizes, which --quick changes.
BUILD_FIELDS = ("n_target", "batch_size", "max_rounds")
#: Metrics whose value is a measured time: they differ between any two executions of the same runs.
TIMED_METRICS = ("mapping_seconds_ratio", "seconds_ratio")
COST_TABLE = "fig:time_token_api_cost_left"
TRANSPLANT_TABLE = "tab:bird_on_harbor"
ESTIMATOR_TABLES = ("tab:llm-calib-performance", "tab:llm-calib-distribution")


@dataclass(frozen=True)
class Value:
    """Our number for one cell, in the unit of the paper's cell."""

    value: float | None
    std: float | None = None
    runs: int = 1
    per_run: tuple[float, ...] = ()
    source: str = ""
    """The run directories or analysis it comes from, in the reproduction's folder."""
    note: str = ""
    unfit: str = ""
    """Why the value, though right, cannot stand for the paper's cell in a claim (empty when it can)."""
    absent: str = ""
    """Why there is no value (``value`` None) when the runs hold no data for it: "no Same pair in this run"."""


def scale(cell: PublishedCell) -> float:
    """Factor from the 0-1 scale of metrics.json to the cell's unit."""
    return 100.0 if cell.unit in ("percent", "points") else 1.0


def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


@dataclass
class Ours:
    """The reproduction's finished runs and analyses, read once, and our value for any published cell."""

    plan: Plan
    out_dir: Path
    runs: dict[str, LoadedRun] = field(default_factory=dict)
    analyses: dict[str, BaseModel] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    """Run or analysis name -> why it has no numbers (not finished, failed, not planned)."""
    model_name: str = ""
    """The model the reproduction ran, as the report names it."""
    _transplant: dict[str, TransplantRow] | None = None
    _cost: dict[str, Any] | None = None

    @classmethod
    def read(cls, plan: Plan, out_dir: Path, reasons: dict[str, str] | None = None,
             loaders: dict[str, Callable[[Path], BaseModel]] | None = None) -> Ours:
        """Load every finished run (``metrics.json``) and analysis result; ``reasons`` says why the others
        have none (default: not finished)."""
        ours = cls(plan=plan, out_dir=Path(out_dir))
        reasons = reasons or {}
        for run in plan.runs:
            try:
                if run.name in reasons:
                    raise ReportError(reasons[run.name])
                ours.runs[run.name] = load_run(ours.out_dir / "runs" / run.name)
            except ReportError as exc:
                ours.missing[run.name] = reasons.get(run.name, str(exc).split(";")[0])
        for analysis in plan.analyses:
            path = ours.out_dir / "analyses" / analysis.name / f"{analysis.analysis}.json"
            load = (loaders or {}).get(analysis.analysis)
            empty = no_result(path.parent)
            if analysis.name in reasons or load is None or not path.exists():
                ours.missing[analysis.name] = reasons.get(analysis.name, f"nothing to compare: {empty}" if empty
                                                          else "not finished")
                continue
            ours.analyses[analysis.name] = load(path)
        return ours

    # ------------------------------------------------------------------ one cell

    def value(self, cell: PublishedCell) -> Value | None:
        """Our number for ``cell``; None when the reproduction has none (see :meth:`why_missing`)."""
        if cell.table == TRANSPLANT_TABLE:
            return self._transplant_value(cell)
        if cell.table == COST_TABLE:
            return self._cost_value(cell)
        if cell.table in ESTIMATOR_TABLES:
            return self._estimator_value(cell)
        if cell.method == "random":
            return None
        if cell.metric == "f1_micro_delta":
            return self._delta(cell)
        name = self.run_for(cell)
        loaded = self.runs.get(name) if name else None
        if loaded is None:
            return None
        return self._metric(loaded, cell.metric, scale(cell), f"{RUNS}/{name}")

    def run_for(self, cell: PublishedCell) -> str | None:
        """The planned run behind a cell of Tables 1-4 (None for the others)."""
        if cell.table in (COST_TABLE, *ESTIMATOR_TABLES) or cell.method == "random":
            return None
        if cell.method == "bird-on-anchor":
            return run_name(cell.dataset, cell.method, cell.variant or None)
        return run_name(cell.dataset, cell.method, None, (cell.variant,) if cell.variant else ())

    def why_missing(self, cell: PublishedCell) -> str:
        if cell.method == "random":
            return "chance level: no method to run"
        if cell.table == COST_TABLE:
            names = [run_name(PAIRWISE, "bird"), run_name(PAIRWISE, "anchor")]
        elif cell.table in ESTIMATOR_TABLES:
            names = [f"estimator-{cell.dataset}"]
        else:
            names = [n for n in [self.run_for(cell)] if n]
            if cell.metric == "f1_micro_delta":
                names.append(run_name(cell.dataset, "anchor"))
        for name in names:
            if name in self.missing:
                return f"{name}: {self.missing[name]}"
            if name not in self.runs and name not in self.analyses:
                return f"{name} is not in this reproduction"
        if cell.table == TRANSPLANT_TABLE and cell.metric.startswith("mapping_"):
            base = self.transplant_rows().get("bird-relaxed")
            if base is None:
                return f"{run_name(cell.dataset, 'bird-relaxed')}: not finished, so nothing to divide by"
            if not base.cost.tokens:
                return "the BIRD‡ baseline made no mapping request (no factor to map): nothing to divide by"
        return "no value (e.g. every prediction unknown)"

    @staticmethod
    def _metric(loaded: LoadedRun, metric: str, factor: float, source: str) -> Value | None:
        m = loaded.metrics
        mean = _num(m.mean.get(metric))
        if mean is None:
            # An F1 of a class the runs have no pair of is undefined, not 0: say so, in the table and the claims.
            absent = missing_class(m.runs, metric)
            return None if absent is None else Value(value=None, runs=m.n_runs, source=source, absent=absent)
        per_run = tuple(v * factor for r in m.runs if (v := _num(r.get(metric))) is not None)
        std = _num(m.std.get(metric))
        return Value(value=mean * factor, std=None if std is None else std * factor, runs=m.n_runs,
                     per_run=per_run, source=source)

    def _delta(self, cell: PublishedCell) -> Value | None:
        variant = self.runs.get(self.run_for(cell) or "")
        full = self.runs.get(run_name(cell.dataset, "anchor"))
        if variant is None or full is None:
            return None
        a = self._metric(variant, "f1_micro", 1.0, "")
        b = self._metric(full, "f1_micro", 1.0, "")
        if a is None or b is None or a.value is None or b.value is None:
            return None
        per_run = tuple(x - y for x, y in zip(a.per_run, b.per_run, strict=False))
        std = _std(per_run)
        return Value(value=a.value - b.value, std=std, runs=len(per_run), per_run=per_run,
                     source=f"{RUNS}/{self.run_for(cell)} − {RUNS}/{run_name(cell.dataset, 'anchor')}",
                     note="run by run against the full model")

    # ------------------------------------------------------------------ another model's reproduction

    def slice_difference(self, other: Ours, dataset: str) -> str | None:
        """How one of ``other``'s runs of ``dataset`` differs from ours in what it evaluates (None: every one is
        alike, or there is nothing to compare)."""
        mine = {name: lr.config for name, lr in self.runs.items() if lr.config.dataset == dataset}
        if not mine:
            return None
        for name, lr in other.runs.items():
            if lr.config.dataset != dataset:
                continue
            theirs, ours = lr.config, mine.get(name) or next(iter(mine.values()))
            for field_name in SLICE_FIELDS:
                if getattr(theirs, field_name) != getattr(ours, field_name):
                    return f"{field_name} {getattr(theirs, field_name)!r} there, {getattr(ours, field_name)!r} here"
            built = [((c.anchor_config or {}).get("build") or {}) for c in (theirs, ours)]
            for size in BUILD_FIELDS if all(built) else ():  # a baseline builds nothing
                if built[0].get(size) != built[1].get(size):
                    return f"build {size} {built[0].get(size)!r} there, {built[1].get(size)!r} here"
        return None

    def lookup_in(self, other: Ours, model: str) -> Callable[[PublishedCell], Value | None]:
        """``other``'s values (a reproduction standing for the paper's ``model``) for the claims: each named by
        its folder, and unfit when its runs of the cell's dataset are not like ours."""
        def lookup(cell: PublishedCell) -> Value | None:
            found = other.value(cell)
            if found is None:
                return None
            where = f"{other.out_dir}/{found.source}"
            diff = self.slice_difference(other, cell.dataset)
            unfit = f"{model}'s runs of {cell.dataset} in {other.out_dir} are not like ours ({diff})" if diff else ""
            return dataclasses.replace(found, source=where, unfit=found.unfit or unfit)
        return lookup

    # ------------------------------------------------------------------ Table 4, cost, estimator

    def transplant_rows(self) -> dict[str, TransplantRow]:
        """Table 4's rows by ``bird-relaxed`` / ``bird-on-anchor:<stage>`` (empty without a transplant run)."""
        if self._transplant is None:
            runs = [(lr.config, lr.metrics, lr.path, name) for name, lr in self.runs.items()
                    if lr.metrics.method in ("bird-relaxed", "bird-on-anchor") and lr.metrics.dataset == PAIRWISE]
            groups = transplant_groups(runs)
            self._transplant = {r.name: r for rows in groups.values() for r in rows}
        return self._transplant

    def _transplant_value(self, cell: PublishedCell) -> Value | None:
        row = self.transplant_rows().get(cell.row)
        if row is None:
            return None
        if cell.metric in ("f1_micro", "coverage"):
            loaded = self.runs[row.label]
            return self._metric(loaded, cell.metric, scale(cell), f"{RUNS}/{row.label}")
        ratio = row.tokens_ratio if cell.metric == "mapping_tokens_ratio" else row.seconds_ratio
        if ratio is None:
            return None
        base = self.transplant_rows().get("bird-relaxed")
        over = f" over {RUNS}/{base.label}" if base is not None and base.label != row.label else ""
        return Value(value=ratio, runs=row.metrics.n_runs, source=f"{RUNS}/{row.label}{over}",
                     note=f"cost from {row.cost.source}")

    def cost_comparison(self) -> dict[str, Any] | None:
        """``anchor cost`` of the BIRD† and ANCHOR runs (A = BIRD, B = ANCHOR); None without both."""
        if self._cost is None:
            bird, anchor = self.runs.get(run_name(PAIRWISE, "bird")), self.runs.get(run_name(PAIRWISE, "anchor"))
            if bird is None or anchor is None:
                return None
            try:
                self._cost = compare(bird.path, anchor.path)
            except CostCompareError as exc:
                self.missing["cost"] = str(exc)
                return None
        return self._cost

    def _cost_value(self, cell: PublishedCell) -> Value | None:
        doc = self.cost_comparison()
        if doc is None:
            return None
        what = {"seconds_ratio": "seconds", "tokens_ratio": "tokens", "calls_ratio": "requests"}[cell.metric]
        ratio = doc["per_scenario"]["total"]["ratio"][what]
        source = f"anchor cost of {RUNS}/{run_name(PAIRWISE, 'anchor')} over {RUNS}/{run_name(PAIRWISE, 'bird')}"
        note = "ANCHOR over BIRD†, per scenario" + ("; logical requests, retries not counted"
                                                     if what == "requests" else "")
        return None if ratio is None else Value(value=ratio, runs=doc["slice"]["runs"], source=source, note=note)

    def estimator_result(self, dataset: str) -> EstimatorAnalysis | None:
        found = self.analyses.get(f"estimator-{dataset}")
        return found if isinstance(found, EstimatorAnalysis) else None

    def factor_result(self) -> FactorCountAnalysis | None:
        found = self.analyses.get(f"factors-{PAIRWISE}")
        return found if isinstance(found, FactorCountAnalysis) else None

    def _estimator_value(self, cell: PublishedCell) -> Value | None:
        result = self.estimator_result(cell.dataset)
        source = f"{ANALYSES}/estimator-{cell.dataset}"
        if result is None or not result.comparisons:
            # No number, but the analysis may still say that it compared the model with itself.
            itself = estimator_itself(self.out_dir / ANALYSES / f"estimator-{cell.dataset}")
            return None if itself is None else Value(value=None, source=source, unfit=_itself(itself))
        c = result.comparisons[0]
        # Two estimators of one model differ only by their seed: the paper's comparison is of two models.
        unfit = _itself(c.main_model) if c.estimator_model == c.main_model else ""
        if cell.table == "tab:llm-calib-distribution" or cell.metric == "difference":
            v = _num(c.difference) if cell.metric == "difference" else _num(getattr(c.phi, cell.metric, None))
            return None if v is None else Value(value=v * scale(cell), source=source, unfit=unfit,
                                                note="the main model against itself" if unfit else "")
        scores = c.estimator if cell.model.startswith("GPT") else c.main
        v = _num(scores.score)
        note = ("estimator: the main model itself, another seed" if unfit else "estimator model") \
            if cell.model.startswith("GPT") else ""
        return None if v is None else Value(value=v * scale(cell), source=source, note=note)


def _itself(model: str) -> str:
    return (f"needs a second estimator: this one is the main model itself ({model}, another seed); give "
            "--estimator-base-url")


def _std(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
