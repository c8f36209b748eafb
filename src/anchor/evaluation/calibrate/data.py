"""The labelled probabilities of finished evaluation runs, ready to calibrate.

What is calibrated is each instance's raw P(O1) against the event "outcome 1 is the gold outcome"
(``Prediction.label == 1``). Only decision and fact-checking runs have that event per instance; a
pairwise run (Common2Sense pairs) judges which of two conditions supports the gold outcome more and
is refused. The raw probability is the method's own: ``p_outcome1_raw`` when the run itself applied
a calibrator (``anchor eval --calibrator``), else ``p_outcome1``. Instances without one (the method
said unknown, or the prediction failed) are kept, with ``p_raw`` None: they are left out of fitting
and of the probability scores, and counted in the coverage and in the decision metric, as
``metrics.json`` counts them.

Each instance also carries its scenario, the unit the cross-validation folds never split. It is the
scenario's :func:`~anchor.evaluation.datasets.scenario_key` read from the run's dataset file, taken
in the same orientation whether or not the run swapped the outcomes (``--balance-outcomes``), so the
same scenario gets the same key in every run.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

from anchor.calibration.contract import CalibratorError, method_label
from anchor.evaluation.datasets.factcheck import DatasetWarning
from anchor.evaluation.datasets.selection import scored_instances
from anchor.evaluation.report.loading import ReportError, load_run
from anchor.evaluation.report.run_index import natural_key
from anchor.rundir import RunDirectory
from anchor.rundir.records import RunConfig
from anchor.types import Scenario, scenario_key


@dataclass(frozen=True)
class LabelledInstance:
    """One (run, instance) of a run directory: its scenario, gold outcome and raw P(O1)."""

    run: int
    id: str
    scenario: str
    label: int
    """1: outcome 1 is the gold outcome; 2: outcome 2 is."""
    p_raw: float | None
    """The method's own P(O1); None when it said unknown or failed."""
    status: str

    @property
    def outcome1(self) -> int:
        return 1 if self.label == 1 else 0


@dataclass
class LabelledRun:
    """A finished decision or fact-checking run directory, read for calibration."""

    path: Path
    config: RunConfig
    small_model: bool
    instances: list[LabelledInstance] = field(default_factory=list)

    @property
    def dataset(self) -> str:
        return self.config.dataset

    @property
    def method(self) -> str:
        return method_label(self.config.method, self.config.stage, self.config.ablations)

    @property
    def model(self) -> str:
        return str(self.config.llm.get("model") or "?")

    @property
    def threshold(self) -> float:
        return self.config.decision_threshold

    @property
    def answered(self) -> list[LabelledInstance]:
        return [i for i in self.instances if i.p_raw is not None]


def canonical_scenario_key(scenario: Scenario) -> str:
    """The scenario's key in a fixed orientation (the smaller of its key and its swapped key)."""
    return min(scenario_key(scenario), scenario_key(scenario.swapped()))


def load_labelled_run(path: Path | str) -> LabelledRun:
    """Read a finished run directory. ``CalibratorError`` names the directory when it is not one, is
    pairwise, or its dataset file has changed since the run (the scenarios could not be trusted)."""
    path = Path(path)
    try:
        loaded = load_run(path)
    except ReportError as exc:
        raise CalibratorError(str(exc)) from None
    config = loaded.config
    if config.kind == "pairwise":
        raise CalibratorError(
            f"{path}: {config.dataset} is pairwise data: an instance there compares two conditions and has no "
            "gold outcome of its own to calibrate P(O1) against; use decision (common2sense, plasma, today) or "
            "fact-checking runs")
    run = RunDirectory(path, error=CalibratorError)
    scenarios = _scenarios(run, config)
    use_raw = config.calibrator is not None
    field = "p_outcome1_raw" if use_raw else "p_outcome1"
    preds_path = run.predictions.path
    instances = []
    # Strictly: a calibrator fitted on what a damaged file leaves would not say what it lost.
    for line, pred in run.numbered_predictions().values():
        if pred.id not in scenarios or pred.run >= config.runs:
            continue
        where = f"{preds_path}, line {line} ({pred.id}, run {pred.run})"
        if pred.label not in (1, 2):
            raise CalibratorError(f"{where}: label {pred.label!r}, where a gold outcome 1 or 2 is needed")
        p = pred.p_outcome1_raw if use_raw else pred.p_outcome1
        if p is not None and not 0.0 <= p <= 1.0:  # NaN fails both comparisons
            raise CalibratorError(f"{where}: {field} is {p!r}, not a probability in [0, 1]")
        instances.append(LabelledInstance(run=pred.run, id=pred.id, scenario=scenarios[pred.id], label=pred.label,
                                          p_raw=p, status=pred.status))
    instances.sort(key=lambda i: natural_key(i.run, i.id))
    if not instances:
        raise CalibratorError(f"{preds_path}: no labelled predictions")
    expected = len(scenarios) * config.runs
    if len(instances) < expected:
        # A finished run has a line for every (run, instance), failed ones included: fewer means the file
        # was cut (or copied half-way), and a calibrator fitted on what is left would not say so.
        raise CalibratorError(f"{preds_path}: predictions for {len(instances)} of the {expected} (run, instance) "
                              f"pairs the run scored ({len(scenarios)} instance(s) x {config.runs} run(s)); the file "
                              "was cut short or is not this run's (rerun `anchor eval` with the same arguments to "
                              "complete it)")
    return LabelledRun(path=path, config=config, small_model=loaded.metrics.small_model, instances=instances)


def _scenarios(run: RunDirectory, config: RunConfig) -> dict[str, str]:
    """Instance id -> canonical scenario key, of the instances the run kept (instances.jsonl), or, for a run
    without them, of those selected again from its dataset file (which must be the one the run read)."""
    try:
        with warnings.catch_warnings():
            # Rows the run skipped are counted in its metrics.json already.
            warnings.simplefilter("ignore", DatasetWarning)
            instances, _ = scored_instances(run, config)
    except (OSError, ValueError) as exc:
        raise CalibratorError(f"{run.path}: its instances cannot be grouped by scenario: "
                              f"{str(exc).splitlines()[0]}") from None
    return {inst.id: canonical_scenario_key(inst.scenario) for inst in instances}
