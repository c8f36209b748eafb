"""A run's scores from its predictions: the per-run metrics, their mean and std over runs, and the
calibration block of ``metrics.json``.

One function, :func:`score_runs`, used where a run is scored (``runner.scoring``, for
``metrics.json``) and where a report scores runs again on the instances they share
(``report.shared``), so that both give the same numbers for the same predictions. It reads only
the predictions: which instances they cover is the caller's choice.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from anchor.metrics import (
    brier_score,
    cases_metrics,
    decision_accuracy,
    expected_calibration_error,
    factcheck_metrics,
    log_loss,
    mean_std,
    pairwise_metrics,
    pairwise_prediction,
    reliability_bins,
)
from anchor.rundir.records import METRIC_KEYS, Kind, Prediction

COVERED_KEYS = ("f1_context1", "f1_context2", "f1_same", "f1_micro")
#: The per-class F1 keys of pairwise data and the class each scores (human label 1, 2, 3).
PAIRWISE_CLASSES = {"f1_context1": "context1", "f1_context2": "context2", "f1_same": "same"}
#: The classes as the paper names them.
CLASS_NAMES = {"context1": "Context1", "context2": "Context2", "same": "Same"}


@dataclass
class RunScores:
    """What :func:`score_runs` computes: ``MetricsReport``'s runs, mean, std and calibration."""

    runs: list[dict[str, Any]]
    mean: dict[str, float | None]
    std: dict[str, float | None]
    calibration: dict[str, Any] | None


def _run_entry(kind: Kind, preds: Iterable[Prediction], *, pairwise_only: bool, threshold: float
               ) -> tuple[dict[str, Any], list[int], list[float | None]]:
    """One repetition's metrics, and the (label, P) pairs its calibration is scored on. The predictions are
    read once, keeping only the columns the metrics need (a predict run's may be millions)."""
    n = unknown = abstained = failed = 0
    labels: list[int] = []
    probs: list[float | None] = []
    human: list[int | None] = []
    all_pred: list[int | None] = []
    covered: list[int | None] = []
    for p in preds:
        n += 1
        unknown += p.unknown
        abstained += p.status == "abstained"
        failed += p.status == "failed"
        if kind == "pairwise":
            human.append(p.human)
            if pairwise_only:
                all_pred.append(p.choice)
                continue
            all_pred.append(pairwise_prediction(p.p_gold_1, p.p_gold_2, unknown_as=0.5))
            covered.append(pairwise_prediction(p.p_gold_1, p.p_gold_2))
            for pg in (p.p_gold_1, p.p_gold_2):
                labels.append(p.gold)  # type: ignore[arg-type]
                probs.append(None if pg is None else (pg if p.gold == 1 else 1.0 - pg))
        elif kind != "cases" or p.label is not None:
            # A user's cases are scored on the rows that carry a label; rows without one are predictions only.
            labels.append(p.label)  # type: ignore[arg-type]
            probs.append(p.p_outcome1)
    # 'unknown': no decision at all (abstained, failed, or a decision tie at exactly 0.5), as the headline
    # metrics count it; 'abstained' and 'failed' say which of them are which.
    entry: dict[str, Any] = {"n": n, "unknown": unknown, "abstained": abstained, "failed": failed}
    if kind == "pairwise":
        if pairwise_only:
            covered = all_pred
        m_all = pairwise_metrics(human, all_pred)
        m_cov = pairwise_metrics(human, covered)
        entry.update({k: m_all[k] for k in METRIC_KEYS["pairwise"]})
        # Pairs of each human label in the run, and among those scored: a class with none has no F1 (None).
        entry["pairs_per_class"] = {c: sum(h == label for h in human)
                                    for label, c in enumerate(PAIRWISE_CLASSES.values(), start=1)}
        entry["scored_per_class"] = dict(zip(PAIRWISE_CLASSES.values(), m_all["support"], strict=True))
        entry["coverage"] = m_cov["coverage"]
        entry["covered"] = {k: m_cov[k] for k in COVERED_KEYS}
        entry["n_covered"] = m_cov["n_covered"]
    elif kind == "cases":
        entry["labelled"] = len(labels)
        m = cases_metrics(labels, probs) if labels else {}
        entry.update({k: m.get(k) for k in METRIC_KEYS[kind]})
    else:
        if kind == "factcheck":
            m = factcheck_metrics(labels, probs, threshold=threshold)
        else:
            m = decision_accuracy(labels, probs)
        entry.update({k: m.get(k) for k in METRIC_KEYS[kind]})
    return entry, labels, probs


def missing_class(runs: Sequence[dict[str, Any]], key: str) -> str | None:
    """Why the per-class F1 ``key`` (``f1_same``, ``covered_f1_context1``, ...) of these runs (metrics.json's
    ``runs``) has no value when the reason is its class: "no Same pair in this run", or none of its pairs
    scored. None when ``key`` is not a per-class F1, when a run has a value for it, or when the runs did
    not record their classes (a metrics.json written before they were)."""
    base = key.removeprefix("covered_")
    name = PAIRWISE_CLASSES.get(base)
    if name is None or not runs or any("pairs_per_class" not in r for r in runs):
        return None
    values = [(r.get("covered") or {}).get(base) if key != base else r.get(key) for r in runs]
    if any(v is not None for v in values):
        return None
    label = CLASS_NAMES[name]
    if all(r["pairs_per_class"].get(name) == 0 for r in runs):
        return f"no {label} pair in this run"
    return f"no {label} pair with both sides known" if key != base else f"no {label} pair answered"


def score_runs(kind: Kind, runs: Iterable[tuple[int, int, Iterable[Prediction]]], *, pairwise_only: bool = False,
               threshold: float = 0.9) -> RunScores:
    """Scores of the repetitions ``runs``, each ``(run index, seed, its predictions)``; each run's
    predictions are read once, in their order.

    ``pairwise_only``: the method chooses between a pair's conditions (``Prediction.choice``) instead
    of giving probabilities (the Compare baseline). ``threshold``: the fact-check decision threshold.
    """
    entries: list[dict[str, Any]] = []
    cal_labels: list[int] = []
    cal_probs: list[float | None] = []
    per_run_cal: list[tuple[float | None, float | None]] = []
    for run, seed, preds in runs:
        entry, labels, probs = _run_entry(kind, preds, pairwise_only=pairwise_only, threshold=threshold)
        entry = {"run": run, "seed": seed, **entry}
        if labels:
            b = brier_score(labels, probs)
            e = expected_calibration_error(labels, probs)
            per_run_cal.append((b["brier"], e["ece"]))
            entry["brier"], entry["ece"] = b["brier"], e["ece"]
            if kind == "cases":
                entry["log_loss"] = log_loss(labels, probs)["log_loss"]
            cal_labels.extend(labels)
            cal_probs.extend(probs)
        entries.append(entry)

    keys = list(METRIC_KEYS[kind])
    flat_runs = [dict(r) for r in entries]
    if kind == "pairwise":
        for fr in flat_runs:
            for k, v in fr.get("covered", {}).items():
                fr[f"covered_{k}"] = v
        keys += [f"covered_{k}" for k in COVERED_KEYS]
    mean: dict[str, float | None] = {}
    std: dict[str, float | None] = {}
    for k in keys:
        vals = [v for v in (fr.get(k) for fr in flat_runs) if v is not None]
        if vals:
            mean[k], std[k] = mean_std(vals)
        else:
            mean[k] = std[k] = None

    calibration = None
    if cal_labels:
        briers = [b for b, _ in per_run_cal if b is not None]
        eces = [e for _, e in per_run_cal if e is not None]
        bins = reliability_bins(cal_labels, cal_probs)
        calibration = {
            "event": "outcome1" if kind != "pairwise" else "the gold outcome, per condition (as P(outcome1))",
            "brier": sum(briers) / len(briers) if briers else None,
            "ece": sum(eces) / len(eces) if eces else None,
            **({"log_loss": log_loss(cal_labels, cal_probs)["log_loss"]} if kind == "cases" else {}),
            "n_skipped": sum(1 for p in cal_probs if p is None),
            "reliability": [{"lo": b["lo"], "hi": b["hi"], "count": b["count"],
                             "mean_confidence": b["mean_confidence"], "observed": b["observed_frequency"]}
                            for b in bins],
        }
    return RunScores(runs=entries, mean=mean, std=std, calibration=calibration)
