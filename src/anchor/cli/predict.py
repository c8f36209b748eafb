"""``anchor predict``: a user's own table of cases, answered row by row into a run directory."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from anchor.calibration.contract import CalibratorMismatchWarning
from anchor.calibration.registry import read_calibrator
from anchor.cli.audit import index_summary, write_html_indexes
from anchor.cli.build import JsonOut
from anchor.cli.console import (
    RichReporter,
    emit_json,
    err,
    fail,
    friendly_errors,
    invocation,
    one_line_warnings,
    out,
)
from anchor.cli.evaluate import SIZES, STAGES, unknown_parts
from anchor.cli.options import (
    FLAG_NAMES,
    BuildOptions,
    CacheOptions,
    CalibratorOption,
    ConnectionOptions,
    InferenceOptions,
    MappingOptions,
    ScaleOptions,
    SeedOption,
    expand_options,
    given_flags,
    llm_settings,
    opt,
)
from anchor.config import ABLATIONS, AnchorConfig
from anchor.files import check_directory
from anchor.methods import METHODS
from anchor.rundir import RunDirectory
from anchor.rundir.records import MetricsReport
from anchor.secrets import redact_argv
from anchor.settings.inference import USER_RULE

# The machinery a command drives is imported inside the command, to keep start-up light: see anchor.cli.

INPUT_PANEL = "Input"
OUTPUT_PANEL = "Output"
METHOD_PANEL = "Method"
#: Above this many rows the HTML index (one explanation page a row) is left for `anchor report`.
HTML_ROWS = 1000
PREDICT_FLAGS = {**FLAG_NAMES, "limit": "--limit", "max_condition_chars": "--max-condition-chars"}


@expand_options
def predict_command(
    cases: Annotated[Path | None, typer.Argument(metavar="CASES", help=(
        "The cases file: CSV, TSV, JSON lines, a JSON array or Parquet, one case a row with the columns "
        "scenario (may be empty), outcome1, outcome2, condition, and optionally id, label (1, 2 or the "
        "text of the outcome that holds) and p_true (the true P(outcome1), kept for `anchor truth score`). See "
        "docs/your-data.md."), show_default=False)] = None,
    example: Annotated[str | None, opt("--example", panel=INPUT_PANEL, choices=("decisions", "factcheck"), help=(
        "Instead of CASES, a small example file shipped with anchor: 'decisions' (3 scenarios x 4 "
        "conditions) or 'factcheck' (6 claims with their evidence), both labelled."))] = None,
    out_dir: Annotated[Path | None, opt("--out", "-o", panel=OUTPUT_PANEL, help=(
        "Run directory (default: runs/<file name>-<method>-s<seed>). Run the same command again to resume "
        "it."))] = None,
    column: Annotated[list[str] | None, opt("--column", panel=INPUT_PANEL, metavar="NAME=COLUMN", help=(
        "Read NAME (id, scenario, outcome1, outcome2, condition, label, p_true) from COLUMN of the file; "
        "repeatable."))] = None,
    input_format: Annotated[str | None, opt("--input-format", panel=INPUT_PANEL, help=(
        "csv, tsv, jsonl, json or parquet (default: from the file's suffix)."))] = None,
    max_condition_chars: Annotated[int | None, opt("--max-condition-chars", panel=INPUT_PANEL, help=(
        "Refuse conditions longer than this, in characters (default 16000; longer ones are cut to fit "
        "the model's context when they are allowed). A row's limit, 1 MiB, grows with it."))] = None,
    strict: Annotated[bool, opt("--strict", panel=INPUT_PANEL, show_default=False, help=(
        "Stop at the first bad row, before any request (default: list bad rows in DIR/rejected.jsonl and "
        "answer the others)."))] = False,
    limit: Annotated[int | None, opt("--limit", panel=INPUT_PANEL, help=(
        "Only the first N good rows (default: all)."))] = None,
    check: Annotated[bool, opt("--check", panel=INPUT_PANEL, show_default=False, help=(
        "Only read the file: rows, groups, bad rows, and the requests and tokens the run should need. "
        "No request is made and nothing is written."))] = False,
    table: Annotated[str, opt("--format", panel=OUTPUT_PANEL, choices=("jsonl", "csv", "parquet"), default="jsonl",
                              help=("DIR/predictions.jsonl is always written (full records, in input order); csv "
                                    "or parquet also writes the flat table DIR/predictions.csv or .parquet "
                                    "(parquet needs pyarrow)."))] = "jsonl",
    spaces: Annotated[Path | None, opt("--spaces", panel=OUTPUT_PANEL, help=(
        "A store of factor spaces (and BIRD models) shared with other runs: spaces are looked up there by "
        "their scenario and build settings, and what this run builds is added. Default: the run "
        "directory's own."))] = None,
    html: Annotated[bool | None, typer.Option("--html/--no-html", rich_help_panel=OUTPUT_PANEL, help=(
        f"Write DIR/index.html with an explanation page per row (default: when there are at most {HTML_ROWS} "
        "rows)."), show_default=False)] = None,
    method: Annotated[str, opt("--method", "-m", panel=METHOD_PANEL, choices=tuple(METHODS), default="anchor", help=(
        "anchor, or a baseline to compare with on the same cases: vanilla, cot, logits and their -direct "
        "variants, bird, bird-relaxed."))] = "anchor",
    stage: Annotated[str | None, opt("--stage", panel=METHOD_PANEL, choices=STAGES, help=(
        "Only with --method bird-on-anchor."))] = None,
    ablation: Annotated[list[str] | None, opt("--ablation", "-a", panel=METHOD_PANEL, choices=tuple(ABLATIONS),
                                              help="An ANCHOR ablation by name, repeatable.")] = None,
    sizes: Annotated[str, opt("--sizes", panel=METHOD_PANEL, choices=SIZES, default="auto", help=(
        "ANCHOR build sizes: 'paper' (40/5/10, the paper's for Today and fact checking), 'quick' (16/4/4), or "
        "'auto' = paper on a server, quick on the embedded model; --n-target etc. override."))] = "auto",
    retry_failed: Annotated[bool, typer.Option("--retry-failed/--keep-failed", rich_help_panel=OUTPUT_PANEL, help=(
        "On resume, ask again for rows whose prediction failed; --keep-failed leaves them."))] = True,
    build: BuildOptions = None,  # type: ignore[assignment]
    mapping: MappingOptions = None,  # type: ignore[assignment]
    inference: InferenceOptions = None,  # type: ignore[assignment]
    calibrator_path: CalibratorOption = None,
    json_out: JsonOut = False,
    conn: ConnectionOptions = None,  # type: ignore[assignment]
    cache: CacheOptions = None,  # type: ignore[assignment]
    seed: SeedOption = None,  # type: ignore[assignment]
    scale: ScaleOptions = None,  # type: ignore[assignment]
) -> None:
    """Answer every case of a table: P(outcome1) and P(outcome2) for each row, with the reason.

    Rows with the same scenario and outcomes share one factor space, built once. Bad rows are listed
    in DIR/rejected.jsonl with their line and reason. Killed half-way? Run the same command again: rows
    already answered are skipped. With labels, DIR/metrics.json scores the labelled rows. Example:
    anchor predict cases.csv --column condition=Evidence --out runs/my-cases --format csv
    """
    from anchor.cases import CaseLimits, example_file, parse_column_options
    from anchor.predict.config import CasesInput, check_predict_method, make_predict_config
    from anchor.predict.estimate import estimate_predict
    from anchor.predict.export import check_table_format
    from anchor.predict.runner import PredictRunner
    from anchor.runs.errors import WorkersCapped
    from anchor.runs.session import RunOptions
    from anchor.settings.space import default_build_params

    with friendly_errors(PREDICT_FLAGS), one_line_warnings(CalibratorMismatchWarning, WorkersCapped):
        if cases is None and example is None:
            raise fail("give a cases file (CASES), or --example decisions|factcheck for a shipped one")
        if cases is not None and example is not None:
            raise fail(f"CASES {cases} and --example {example}: give one of them")
        if example is not None:
            cases = Path(str(example_file(example)))
        assert cases is not None
        if str(cases) == "-":
            raise fail("CASES: give a file (it is read twice: once to check it, once to answer it)")
        if limit is not None and limit < 1:
            raise fail(f"--limit must be at least 1, got {limit}")
        if max_condition_chars is not None and max_condition_chars < 1:
            raise fail(f"--max-condition-chars must be at least 1, got {max_condition_chars}")
        check_predict_method(method, stage)
        limits = CaseLimits.for_condition_chars(max_condition_chars) if max_condition_chars else CaseLimits()
        source = CasesInput.of(cases, format=input_format, columns=parse_column_options(column or []), limits=limits)
        if not cases.is_file():
            raise fail(f"CASES {cases}: no such file")
        check_table_format(table)  # type: ignore[arg-type]
        calibrator = read_calibrator(calibrator_path) if calibrator_path is not None else None
        spec = METHODS[method]
        ablations = list(dict.fromkeys([*(ablation or []), *inference.ablations(build, mapping)]))
        mapping_config, inference_config = mapping.config(), inference.config(USER_RULE)
        settings = llm_settings(conn, cache, seed)
        anchor_config = None
        if spec.uses_anchor_config:
            chosen = ("paper" if settings.uses_server else "quick") if sizes == "auto" else sizes
            params = build.params(default_build_params("cases", settings.seed, chosen), seed=settings.seed)
            anchor_config = AnchorConfig(build=params, mapping=mapping_config,
                                         inference=inference_config).with_ablations(ablations)
        else:
            knobs = list(dict.fromkeys([*given_flags(build, mapping, inference),
                                        *(f"--ablation {a}" for a in ablation or [])]))
            if knobs:
                raise fail(f"{', '.join(knobs)}: ANCHOR settings, which --method {method} does not use "
                           f"(drop them or pick an ANCHOR method)")
        config = make_predict_config(cases=source, method=method, settings=settings, anchor_config=anchor_config,
                                     ablations=ablations, stage=stage, limit=limit, spaces=spaces,
                                     command=shlex.join(redact_argv(invocation())))
        if out_dir is None:
            out_dir = Path("runs") / "-".join([cases.stem, method, *([stage] if stage else []), *ablations,
                                               f"s{settings.seed}"])
        workers, ray = scale.resolve(settings.uses_server)
        runner = PredictRunner(config, out_dir, RunOptions(settings, anchor_config, calibrator=calibrator,
                                                           workers=workers, ray=ray),
                               cases=source, retry_failed=retry_failed, strict=strict,
                               table=table)  # type: ignore[arg-type]
        summary = runner.check_input()  # the whole file is read and checked before any request
        estimate = estimate_predict(summary, spec, anchor_config, limit)
        if check:
            if json_out:
                emit_json({"check": summary.model_dump(mode="json"), "estimate": estimate.model_dump(mode="json")},
                          "predict --check")
                return
            for line in summary.lines():
                out.print(escape(line), highlight=False, soft_wrap=True)
            out.print(escape(estimate.line()), highlight=False, soft_wrap=True)
            return
        check_directory(out_dir, "--out")  # before the first request to the server
        RunDirectory(out_dir).check_target("--out")  # a folder of other files is not written over
        if spaces is not None:
            check_directory(spaces, "--spaces")
        with RichReporter(enabled=True, remaining=True) as report:
            runner.report = report
            metrics = asyncio.run(runner.run())
        write_html = html if html is not None else metrics.n_instances <= HTML_ROWS
        index = write_html_indexes([out_dir])[0] if write_html else None
        if json_out:
            emit_json(_summary_json(runner, metrics, out_dir, index), "predict")
            return
        _print_summary(runner, metrics, out_dir, index, html)


def _summary_json(runner: Any, metrics: MetricsReport, out_dir: Path, index: Any) -> dict[str, Any]:
    return {"out": str(out_dir), "rows": metrics.n_instances, "rejected": runner.rejected,
            "unknown": metrics.n_unknown, "failed": metrics.n_failed,
            "metrics": metrics.mean if metrics.runs and metrics.runs[0].get("labelled") else None,
            "calibration": metrics.calibration, "cost": metrics.cost["total"].model_dump() if "total" in metrics.cost
            else None, "predictions": str(RunDirectory(out_dir).predictions.path),
            "table": str(runner.table_path) if runner.table_path else None,
            "index": str(index.index) if index is not None else None, "notes": metrics.notes}


def _print_summary(runner: Any, metrics: MetricsReport, out_dir: Path, index: Any, html: bool | None) -> None:
    n = metrics.n_instances
    run = metrics.runs[0] if metrics.runs else {}
    out.print(f"[bold]{escape(metrics.method)} on {escape(str(runner.cases.path))}[/bold]: {n} row(s) answered"
              + (f", {runner.rejected} bad row(s) in {escape(str(RunDirectory(out_dir).rejected_path))}" if runner.rejected
                 else ", no bad row"), highlight=False, soft_wrap=True)
    unknown = metrics.n_unknown or 0
    if unknown:
        out.print(f"unknown: {unknown} of {n} row(s) without a decision: {unknown_parts(metrics, unknown)}",
                  highlight=False)
    labelled = run.get("labelled") or 0
    if labelled:
        cal = metrics.calibration or {}
        figures = [f"{k} {v:.3f}" for k, v in metrics.mean.items() if v is not None]
        figures += [f"{k} {cal[k]:.3f}" for k in ("brier", "log_loss", "ece") if cal.get(k) is not None]
        out.print(f"on the {labelled} labelled row(s): " + ", ".join(figures), highlight=False, soft_wrap=True)
    else:
        out.print("no row has a label: nothing to score (predictions only)", highlight=False)
    t = metrics.cost.get("total")
    if t is not None:
        out.print(f"cost: {t.logical_requests} LLM requests in {t.llm_calls} attempts ({t.failed_attempts} failed; "
                  f"retries are attempts, not requests), {t.cache_hits} answered from the cache, "
                  f"{t.prompt_tokens}+{t.completion_tokens} tokens"
                  + (f"; {t.interrupted} more interrupted by a kill (sent again)" if t.interrupted else ""),
                  highlight=False, soft_wrap=True)
    if metrics.n_failed:
        out.print(f"[yellow]{metrics.n_failed} row(s) failed; run the same command again to retry them[/yellow]")
    for note in metrics.notes:
        out.print(f"[bright_black]note: {escape(note)}[/bright_black]", highlight=False, soft_wrap=True)
    run = RunDirectory(out_dir)
    wrote = [str(run.predictions.path), *([str(runner.table_path)] if runner.table_path else []),
             str(run.metrics_path)]
    out.print("[bold]wrote[/bold] " + escape(", ".join(wrote)), highlight=False, soft_wrap=True)
    if index is not None:
        err.print(index_summary(index), markup=False, highlight=False, soft_wrap=True)
    elif html is None:
        err.print(f"index.html not written: {n} rows (more than {HTML_ROWS}); --html writes it anyway",
                  markup=False, highlight=False, soft_wrap=True)
