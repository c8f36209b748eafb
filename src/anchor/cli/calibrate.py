"""``anchor calibrate fit`` and ``anchor calibrate report``: calibrated P(O1), held out.

``fit`` reads labelled evaluation runs (decision or fact-checking) and writes one calibrator file;
``anchor infer --calibrator`` and ``anchor eval --calibrator`` apply it. ``report`` says, by
scenario-grouped cross-validation, whether calibrating helps on those runs, and how accuracy trades
against coverage.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from anchor.calibration.registry import KINDS
from anchor.cli.audit import index_summary, write_html_indexes
from anchor.cli.build import JsonOut
from anchor.cli.console import emit_json, err, fail, friendly_errors, out
from anchor.evaluation.calibrate.folds import DEFAULT_FOLDS
from anchor.files import check_destination, check_directory

# The machinery a command drives is imported inside the command, to keep start-up light: see anchor.cli.

app = typer.Typer(help=(
    "Calibrated probabilities, held out: fit a calibrator on labelled evaluation runs (decision or fact-checking "
    "data), apply it with `anchor infer/eval --calibrator`, and check by scenario-grouped cross-validation whether "
    "it helps (Brier, log loss, ECE, the dataset's decision metric, risk-coverage)."), no_args_is_help=True)

RunDirs = Annotated[list[Path], typer.Argument(help="Run directories written by `anchor eval` on decision or "
                                               "fact-checking data (not common2sense-pairwise).", show_default=False)]


@app.command("fit")
def fit_command(
    run_dirs: RunDirs,
    kind: Annotated[str, typer.Option("--kind", "-k", help=(
        "platt (logistic regression on the log-odds), isotonic (a monotone step function), beta (Kull et al.'s "
        "three-parameter map) or temperature (one scale on the log-odds)."))] = "platt",
    out_path: Annotated[Path, typer.Option("--out", "-o", help="Where to write the calibrator (JSON).")] = Path(
        "calibrator.json"),
    json_out: JsonOut = False,
) -> None:
    """Fit a calibrator of P(O1) on every answered instance of the runs given (one method, one model).

    The file records what it was fitted on (runs, datasets, method, model, n, date); applying it to
    another model or method warns. Example: anchor calibrate fit runs/today-anchor-s0 --kind platt --out cal.json
    """
    from anchor.calibration.registry import read_calibrator, write_calibrator
    from anchor.evaluation.calibrate.fit import fit_calibrator

    with friendly_errors():
        if kind not in KINDS:
            raise fail(f"--kind {kind!r}: choose from {', '.join(KINDS)}")
        check_destination(out_path, "--out")
        file = fit_calibrator(run_dirs, kind)
        write_calibrator(file, out_path)
        applied = read_calibrator(out_path, "--out")  # what infer/eval will read: it must read back
        if json_out:
            emit_json({"path": str(out_path), **json.loads(file.model_dump_json())})
            return
        f = file.fitted_on
        out.print(f"[bold]{kind}[/bold] calibrator fitted on {f.n} answered instance(s) ({f.n_outcome1} with outcome 1 "
                  f"gold) of [bold]{escape(f.method)}[/bold] with model {escape(repr(f.model))} on "
                  f"{escape(', '.join(f.datasets))}: P' = {escape(applied.calibrator.describe())}",
                  highlight=False, soft_wrap=True)
        for note in file.notes:
            out.print(f"[bright_black]note: {escape(note)}[/bright_black]", highlight=False, soft_wrap=True)
        out.print(f"[bold]wrote[/bold] {escape(str(out_path))}  (held-out figures: anchor calibrate report "
                  f"{escape(' '.join(str(d) for d in run_dirs))})", highlight=False, soft_wrap=True)


@app.command("report")
def report_command(
    run_dirs: RunDirs,
    out_dir: Annotated[Path | None, typer.Option("--out", "-o", help=(
        "Where to write calibration-report.md, calibration-report.json and the PNGs (default: the first run "
        "directory)."))] = None,
    folds: Annotated[int, typer.Option("--folds", min=2, help=(
        "Cross-validation folds per dataset (fewer when there are fewer scenarios); a scenario is never split."))
    ] = DEFAULT_FOLDS,
    kinds: Annotated[list[str] | None, typer.Option("--kind", "-k", help=(
        "A calibrator to evaluate, repeatable (default: all four)."), show_default=False)] = None,
    no_html: Annotated[bool, typer.Option("--no-html", help=(
        "Do not rewrite each run's HTML index (DIR/index.html) with its calibration section."))] = False,
    json_out: JsonOut = False,
) -> None:
    """Cross-validated calibration before and after, per dataset and method, and risk-coverage per run.

    Folds are grouped by scenario and the same for every method. Writes Markdown, JSON (with every
    instance's fold and out-of-fold probabilities) and PNGs, DIR/calibration.json in each run, and a
    calibration section in each run's HTML index.
    """
    from anchor.evaluation.calibrate.report import REPORT_JSON, REPORT_MD, build_calibration_report

    with friendly_errors():
        chosen = list(dict.fromkeys(kinds or KINDS))
        bad = [k for k in chosen if k not in KINDS]
        if bad:
            raise fail(f"--kind {bad[0]!r}: choose from {', '.join(KINDS)}")
        target = out_dir or run_dirs[0]
        if out_dir is not None:
            check_directory(out_dir, "--out")
        report = build_calibration_report(run_dirs, target, n_folds=folds, kinds=chosen)
        indexes = [] if no_html else write_html_indexes([r.path for r in {id(r): r for g in report.groups
                                                                         for r in g.runs}.values()])
        if json_out:
            emit_json(report.data)
            return
        for g in report.groups:
            n = len(g.members)
            table = Table(title=None, header_style="bold", show_edge=False)
            for col in ("calibrator", "Brier", "log loss", "ECE", "ECE (mass)", "decision"):
                table.add_column(col, justify="left" if col == "calibrator" else "right")
            for name, s in g.scores.items():
                cells = ["–"] * 5 if s is None else [
                    "–" if s[k] is None else f"{s[k]:.3f}" for k in ("brier", "log_loss", "ece", "ece_equal_mass",
                                                                      "decision")]
                table.add_row("raw (before)" if name == "none" else name, *cells)
            small = " [embedded 135M model: pipeline check only]" if g.small_model else ""
            out.print(f"[bold]{escape(g.dataset)} · {escape(g.method)} · {escape(g.model)}[/bold]: {n} instance(s), "
                      f"{g.n_answered} answered; {g.n_folds or 0} folds by scenario; decision = "
                      f"{escape(g.decision_metric)}{escape(small)}", highlight=False, soft_wrap=True)
            out.print(table)
            for note in g.notes:
                out.print(f"[bright_black]note: {escape(note)}[/bright_black]", highlight=False, soft_wrap=True)
        for _, tag, curve in report.curves:
            aurc = "–" if curve["aurc"] is None else f"{curve['aurc']:.3f}"
            out.print(f"risk-coverage {escape(tag)}: AURC {aurc}, max coverage {curve['max_coverage'] or 0:.3f}",
                      highlight=False, soft_wrap=True)
        err.print(f"wrote {target / REPORT_MD}, {target / REPORT_JSON} and "
                  f"{sum(p.suffix == '.png' for p in report.written)} plot(s); {len(report.run_files)} run file(s) "
                  "(DIR/calibration.json)", highlight=False, soft_wrap=True)
        for index in indexes:
            err.print(index_summary(index), markup=False, highlight=False, soft_wrap=True)
