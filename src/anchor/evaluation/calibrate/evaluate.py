"""Held-out figures: is P(O1) better calibrated after a calibrator, on instances it never saw?

Runs are grouped by dataset, method and model (runs of one group are pooled). For each group and
each calibrator kind, the calibrator is fitted on the answered instances of all folds but one and
applied to the one left out, fold after fold, so that every answered instance gets an out-of-fold
calibrated probability. The scores before (the raw probabilities) and after (the out-of-fold ones)
are computed on exactly the same instances with the functions of :mod:`anchor.metrics`:
Brier score, log loss, ECE over ten equal-width and ten equal-mass bins, and the dataset's decision
metric (accuracy of P(O1) > 0.5 on decision data; balanced accuracy of "supported" iff P > the
run's threshold on fact checking), which, like ``metrics.json``, counts every instance and scores an
unknown as no correct decision. The folds (:mod:`.folds`) are made per dataset and shared by every
group of that dataset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from anchor.calibration.contract import FEW_LABELS, CalibratorError
from anchor.calibration.registry import KINDS, make_calibrator
from anchor.evaluation.calibrate.data import LabelledInstance, LabelledRun
from anchor.evaluation.calibrate.folds import DEFAULT_FOLDS, fold_count, scenario_folds
from anchor.evaluation.calibrate.risk_coverage import risk_coverage
from anchor.metrics import (
    brier_score,
    decision_accuracy,
    equal_mass_calibration_error,
    expected_calibration_error,
    factcheck_metrics,
    log_loss,
    reliability_bins,
)

RAW = "none"
SCORES = ("brier", "log_loss", "ece", "ece_equal_mass", "decision")


@dataclass
class Member:
    """One (run directory, run, instance) of a group, with its fold and out-of-fold probabilities."""

    run_dir: str
    item: LabelledInstance
    fold: int | None
    calibrated: dict[str, float | None] = field(default_factory=dict)


@dataclass
class GroupResult:
    """The cross-validated figures of one (dataset, method, model)."""

    dataset: str
    method: str
    model: str
    task: str
    threshold: float
    runs: list[LabelledRun]
    n_folds: int | None
    members: list[Member]
    scores: dict[str, dict[str, float | None] | None]
    """``"none"`` (raw) and each calibrator kind -> SCORES; None when the kind could not be scored."""
    reliability: dict[str, list[dict[str, Any]]]
    notes: list[str] = field(default_factory=list)

    @property
    def decision_metric(self) -> str:
        if self.task == "factcheck":
            return f"balanced accuracy, 'supported' iff P > {self.threshold:g}"
        return "accuracy, O1 iff P(O1) > 0.5"

    @property
    def small_model(self) -> bool:
        return any(r.small_model for r in self.runs)

    @property
    def n_answered(self) -> int:
        return sum(m.item.p_raw is not None for m in self.members)


def scores(labels: Sequence[int], probs: Sequence[float | None], task: str, threshold: float) -> dict[str, float | None]:
    """The SCORES of P(O1) ``probs`` (None = no answer) against gold ``labels`` (1 or 2)."""
    if task == "factcheck":
        decision = factcheck_metrics(labels, probs, threshold)["balanced_accuracy"]
    else:
        decision = decision_accuracy(labels, probs)["accuracy"]
    return {"brier": brier_score(labels, probs)["brier"], "log_loss": log_loss(labels, probs)["log_loss"],
            "ece": expected_calibration_error(labels, probs)["ece"],
            "ece_equal_mass": equal_mass_calibration_error(labels, probs)["ece"], "decision": decision}


def group_runs(runs: Sequence[LabelledRun]) -> dict[tuple[str, str, str], list[LabelledRun]]:
    """Runs by (dataset, method, model), in the order given."""
    groups: dict[tuple[str, str, str], list[LabelledRun]] = {}
    for run in runs:
        groups.setdefault((run.dataset, run.method, run.model), []).append(run)
    return groups


def dataset_folds(runs: Sequence[LabelledRun], n_folds: int = DEFAULT_FOLDS) -> dict[str, dict[str, int]]:
    """Dataset -> (scenario key -> fold), over every run of that dataset."""
    by_dataset: dict[str, list[tuple[str, str]]] = {}
    for run in runs:
        by_dataset.setdefault(run.dataset, []).extend((i.id, i.scenario) for i in run.instances)
    return {name: scenario_folds(pairs, n_folds) for name, pairs in by_dataset.items()}


def evaluate_group(runs: Sequence[LabelledRun], folds: dict[str, int], tags: dict[int, str],
                   kinds: Sequence[str] = tuple(KINDS)) -> GroupResult:
    """Cross-validated scores of one group (runs of one dataset, method and model) over ``folds``.
    ``tags`` names each run (by ``id(run)``) in the per-instance rows."""
    first = runs[0]
    tasks = {r.config.kind for r in runs}
    thresholds = {r.threshold for r in runs}
    if len(tasks) > 1 or len(thresholds) > 1:
        raise CalibratorError(f"runs of {first.dataset} / {first.method} differ in task or --threshold "
                              f"({', '.join(str(r.path) for r in runs)}); report them separately")
    task, threshold = tasks.pop(), thresholds.pop()
    members = [Member(tags[id(r)], i, folds.get(i.scenario)) for r in runs for i in r.instances]
    labels = [m.item.label for m in members]
    raw = [m.item.p_raw for m in members]
    result = GroupResult(dataset=first.dataset, method=first.method, model=first.model, task=task, threshold=threshold,
                         runs=list(runs), n_folds=fold_count(folds) or None, members=members,
                         scores={RAW: scores(labels, raw, task, threshold)},
                         reliability={RAW: reliability_bins(labels, raw)})
    answered = [m for m in members if m.item.p_raw is not None]
    if not answered:
        result.notes.append("No instance was answered: there is nothing to calibrate.")
        return result
    if len(answered) < FEW_LABELS:
        result.notes.append(f"Only {len(answered)} answered instance(s): every calibrator here is fitted on fewer "
                            "still (the other folds), so these held-out figures rest on very little and swing "
                            "from fold to fold.")
    outcomes = {m.item.outcome1 for m in answered}
    if len(outcomes) == 1:
        which = "outcome 1" if outcomes == {1} else "outcome 2"
        result.notes.append(f"Every answered instance has {which} as its gold outcome: a calibrator can only learn "
                            "to lean towards it, which says nothing about data where the other outcome is right "
                            "(for Plasma and Today, evaluate with --balance-outcomes).")
    if result.n_folds is None:
        result.notes.append("Fewer than two scenarios: no held-out figures (a calibrator would be scored on the "
                            "scenario it was fitted on).")
        return result
    p = np.array([m.item.p_raw for m in answered], dtype=float)
    y = np.array([m.item.outcome1 for m in answered], dtype=float)
    fold_of = np.array([m.fold for m in answered])
    for kind in kinds:
        oof = np.full(len(answered), np.nan)
        for fold in sorted(set(fold_of.tolist())):
            test, train = fold_of == fold, fold_of != fold
            if not train.any():
                break
            oof[test] = make_calibrator(kind).fit(p[train], y[train]).predict(p[test])
        if np.isnan(oof).any():
            result.scores[kind] = None
            for m in answered:
                m.calibrated[kind] = None
            result.notes.append(f"{kind}: not scored, every answered instance is in one fold (nothing to fit on "
                                "when it is held out).")
            continue
        for m, value in zip(answered, oof, strict=True):
            m.calibrated[kind] = float(value)
        probs = [m.calibrated.get(kind) for m in members]
        result.scores[kind] = scores(labels, probs, task, threshold)
        ties = int(np.sum(oof == 0.5))
        if ties and task == "decision":
            result.notes.append(f"{kind}: {ties} calibrated answer(s) exactly 0.5, which choose neither outcome and "
                                "count as no correct decision.")
        result.reliability[kind] = reliability_bins(labels, probs)
    return result


def run_curve(run: LabelledRun) -> dict[str, Any]:
    """The risk-coverage curve of one run directory (its raw probabilities, every repetition pooled)."""
    return risk_coverage([i.label for i in run.instances], [i.p_raw for i in run.instances], run.config.kind,
                         run.threshold)
