"""``anchor calibrate report``: held-out calibration figures as Markdown, JSON and PNG, and each run's
``calibration.json`` (the section of its HTML index).

The JSON holds everything needed to check the figures by hand: per dataset the fold of every
scenario, and per group every instance (run directory, run, id, scenario, fold, gold label, raw
P(O1), and each calibrator's out-of-fold P(O1)), so that the scores can be recomputed from
``predictions.jsonl`` and this file with scikit-learn alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from anchor.calibration.registry import KINDS
from anchor.evaluation.calibrate.data import LabelledRun
from anchor.evaluation.calibrate.evaluate import (
    RAW,
    GroupResult,
    dataset_folds,
    evaluate_group,
    group_runs,
    run_curve,
)
from anchor.evaluation.calibrate.fit import load_runs
from anchor.evaluation.calibrate.folds import DEFAULT_FOLDS
from anchor.evaluation.calibrate.plots import plot_reliability, plot_risk_coverage
from anchor.files import write_atomic
from anchor.rundir import RunDirectory
from anchor.rundir.records import CalibrationRow, RunCalibration
from anchor.version import __version__

REPORT_MD = "calibration-report.md"
REPORT_JSON = "calibration-report.json"
REPORT_SCHEMA_VERSION = 1
FOLD_RULE = ("GroupKFold over the distinct instances of each dataset (all runs in the report), grouped by "
             "scenario: one scenario's instances are always in one fold; the same folds for every method")
SCORE_NAMES = {"brier": "Brier", "log_loss": "log loss", "ece": "ECE", "ece_equal_mass": "ECE (equal mass)"}


@dataclass
class CalibrationReport:
    """What :func:`build_calibration_report` computed and wrote."""

    groups: list[GroupResult]
    curves: list[tuple[LabelledRun, str, dict[str, Any]]]
    folds: dict[str, dict[str, int]]
    markdown: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)
    run_files: list[Path] = field(default_factory=list)


def _slug(*parts: str) -> str:
    return "-".join(re.sub(r"[^A-Za-z0-9_.+-]+", "_", p).strip("_.") or "x" for p in parts)


def _tags(runs: Sequence[LabelledRun]) -> dict[int, str]:
    """A short unique name per run directory: its folder name, with parents added while two clash."""
    depth = 1
    while True:
        names = ["/".join(r.path.resolve().parts[-depth:]) for r in runs]
        if len(set(names)) == len(names) or depth > 8:
            return {id(r): n for r, n in zip(runs, names, strict=True)}
        depth += 1


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def build_calibration_report(run_dirs: Sequence[Path | str], out_dir: Path | str, *,
                             n_folds: int = DEFAULT_FOLDS, kinds: Sequence[str] = tuple(KINDS),
                             write_runs: bool = True) -> CalibrationReport:
    """Evaluate every (dataset, method, model) of ``run_dirs`` by grouped cross-validation and write
    the report into ``out_dir`` (plus ``DIR/calibration.json`` in each run directory with ``write_runs``)."""
    runs = load_runs(run_dirs)
    tags = _tags(runs)
    folds = dataset_folds(runs, n_folds)
    groups = [evaluate_group(members, folds[key[0]], tags, kinds) for key, members in group_runs(runs).items()]
    curves = [(r, tags[id(r)], run_curve(r)) for r in runs]
    report = CalibrationReport(groups=groups, curves=curves, folds=folds)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plots: dict[int, list[str]] = {id(r): [] for r in runs}
    for g in groups:
        name = f"calibration-{_slug(g.dataset, g.method, g.model)}.png"
        plot_reliability(g, out / name)
        report.written.append(out / name)
        for r in g.runs:
            plots[id(r)].append(name)
    for dataset in dict.fromkeys(r.dataset for r in runs):
        mine = [(tags[id(r)] + f" ({r.method})", c) for r, _, c in curves if r.dataset == dataset]
        name = f"risk-coverage-{_slug(dataset)}.png"
        plot_risk_coverage(mine, dataset, out / name, small=any(r.small_model for r in runs if r.dataset == dataset))
        report.written.append(out / name)
        for r in runs:
            if r.dataset == dataset:
                plots[id(r)].append(name)
    report.data = _json(report, n_folds, [p.name for p in report.written])
    report.markdown = _markdown(report, [p.name for p in report.written])
    report.written += [write_atomic(out / REPORT_JSON, json.dumps(report.data, indent=1) + "\n"),
                       write_atomic(out / REPORT_MD, report.markdown)]
    if write_runs:
        for g in groups:
            for r in g.runs:
                curve = next(c for run, _, c in curves if run is r)
                summary = _run_summary(g, curve, out, plots[id(r)])
                report.run_files.append(RunDirectory(r.path).write_calibration(summary))
    return report


def _run_summary(g: GroupResult, curve: dict[str, Any], out: Path, plots: list[str]) -> RunCalibration:
    rows = [CalibrationRow(calibrator=k, **s) for k, s in g.scores.items() if s is not None]
    return RunCalibration(
        report=str(out / REPORT_MD), generated=datetime.now(UTC).isoformat(timespec="seconds"), dataset=g.dataset,
        method=g.method, model=g.model, small_model=g.small_model, n_folds=g.n_folds, n=len(g.members),
        n_answered=g.n_answered, decision_metric=g.decision_metric, rows=rows, aurc=curve["aurc"],
        max_coverage=curve["max_coverage"], plots=[str(out / p) for p in plots], notes=g.notes)


def _json(report: CalibrationReport, n_folds: int, files: list[str]) -> dict[str, Any]:
    groups = []
    for g in report.groups:
        groups.append({
            "dataset": g.dataset, "method": g.method, "model": g.model, "task": g.task,
            "decision_metric": g.decision_metric, "threshold": g.threshold, "small_model": g.small_model,
            "runs": [str(r.path) for r in g.runs], "n": len(g.members), "n_answered": g.n_answered,
            "coverage": g.n_answered / len(g.members) if g.members else None,
            "n_outcome1": sum(m.item.label == 1 for m in g.members), "n_folds": g.n_folds,
            "scores": g.scores, "reliability": g.reliability, "notes": g.notes,
            "instances": [{"run_dir": m.run_dir, "run": m.item.run, "id": m.item.id, "scenario": m.item.scenario,
                           "fold": m.fold, "label": m.item.label, "status": m.item.status, "p_raw": m.item.p_raw,
                           "calibrated": m.calibrated} for m in g.members],
        })
    curves = [{"run_dir": tag, "path": str(r.path), "dataset": r.dataset, "method": r.method, "model": r.model,
               **curve} for r, tag, curve in report.curves]
    return {
        "schema_version": REPORT_SCHEMA_VERSION, "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "anchor_version": __version__, "n_folds_requested": n_folds, "fold_rule": FOLD_RULE,
        "event": "outcome 1 is the gold outcome (label 1); P is each instance's raw P(O1)",
        "targets": "calibrators are fitted against Platt's smoothed targets (see docs/calibration.md)",
        "datasets": {name: {"n_folds": len(set(f.values())) or None, "scenarios": f} for name, f in report.folds.items()},
        "groups": groups, "risk_coverage": curves, "files": files,
    }


def _markdown(report: CalibrationReport, files: list[str]) -> str:
    lines = ["# Calibration report", "",
             "Every figure is held out: for each fold, the calibrators are fitted on the other folds and scored on "
             "this one, and the folds never split a scenario (the same folds for every method of a dataset). "
             "Scores are over the answered instances (before and after alike); the decision metric counts every "
             "instance, an unknown as no correct decision. Lower is better for Brier, log loss and ECE.", ""]
    if any(g.small_model for g in report.groups):
        lines += ["> Numbers from the embedded SmolLM2-135M model are a pipeline check, not evidence about "
                  "calibration.", ""]
    for dataset in dict.fromkeys(g.dataset for g in report.groups):
        folds = report.folds[dataset]
        lines += [f"## {dataset}", "",
                  f"{len(set(folds.values()))} folds over {len(folds)} scenarios." if folds else
                  "Fewer than two scenarios: nothing could be held out.", ""]
        for g in (g for g in report.groups if g.dataset == dataset):
            n = len(g.members)
            small = " (embedded 135M model)" if g.small_model else ""
            lines += [f"### {g.method} · model `{g.model}`{small}", "",
                      f"{n} instance(s), {g.n_answered} answered (coverage {g.n_answered / n:.3f}); decision metric: "
                      f"{g.decision_metric}.", "",
                      "| calibrator | " + " | ".join(SCORE_NAMES.values()) + " | decision |",
                      "|---|" + "---:|" * (len(SCORE_NAMES) + 1)]
            for kind, s in g.scores.items():
                label = "raw (before)" if kind == RAW else kind
                cells = ["not scored"] + [""] * len(SCORE_NAMES) if s is None else \
                    [_num(s[k]) for k in [*SCORE_NAMES, "decision"]]
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
            lines += [""] + [f"- {note}" for note in g.notes] + ([""] if g.notes else [])
            lines += [f"![reliability before and after](calibration-{_slug(g.dataset, g.method, g.model)}.png)", ""]
    lines += ["## Risk and coverage", "",
              "Each run's raw probabilities, answered iff max(P(O1), P(O2)) >= tau as tau sweeps down; instances "
              "the method left unknown are never answered. AURC: area under the risk-coverage curve up to the run's "
              "largest coverage (lower is better; compare it with that coverage).", "",
              "| run | dataset | method | max coverage | accuracy there | AURC |", "|---|---|---|---:|---:|---:|"]
    for r, tag, c in report.curves:
        lines.append(f"| {tag} | {r.dataset} | {r.method} | {_num(c['max_coverage'])} | "
                     f"{_num(c['accuracy_at_max'])} | {_num(c['aurc'])} |")
    lines += [""] + [f"![risk-coverage {name}]({name})" for name in files if name.startswith("risk-coverage-")]
    return "\n".join(lines).rstrip() + "\n"
