"""``anchor eval`` and ``anchor report``."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

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
from anchor.evaluation.datasets import DATASET_NAMES
from anchor.evaluation.datasets.sampling import SampleError, parse_sample_size
from anchor.extras import require_extra
from anchor.files import check_directory
from anchor.methods import METHODS
from anchor.rundir import RunDirectory
from anchor.rundir.records import MetricsReport, RunConfig
from anchor.secrets import redact_argv

# The machinery a command drives is imported inside the command, to keep start-up light: see anchor.cli.

EVAL_PANEL = "Evaluation"
SIZE_PANEL = "Factor space (stage 1)"
# A panel of its own: the --keep-failed column it needs would leave the Evaluation panel's help text
# a narrow strip at 80 columns.
RESUME_PANEL = "Resuming a run"
SIZES = ("auto", "paper", "quick")
STAGES = tuple(dict.fromkeys(s for spec in METHODS.values() for s in spec.stages))

EVAL_FLAGS = {**FLAG_NAMES, "limit": "--limit", "runs": "--runs", "decision_threshold": "--threshold",
              "stage": "--stage", "sample": "--sample", "sample_seed": "--sample-seed"}


def _sample_size(value: str | None) -> str | None:
    """--sample: a positive whole number or 'all', refused as a usage error naming the flag otherwise."""

    if value is None:
        return None
    try:
        parse_sample_size(value)
    except SampleError as exc:
        raise typer.BadParameter(str(exc), param_hint="--sample") from None
    return value


@expand_options
def eval_command(
    dataset: Annotated[str | None, opt("--dataset", "-d", panel=EVAL_PANEL, choices=DATASET_NAMES, help=(
        "The benchmark (bundled copies; --data reads another file of the same format). Default: factcheck "
        "for a .jsonl --data file."))] = None,
    method: Annotated[str, opt("--method", "-m", panel=EVAL_PANEL, choices=tuple(METHODS), default="anchor", help=(
        "anchor, a direct baseline (vanilla, cot and their -direct variants that only choose, logits), compare "
        "(pairwise only), factor-based (an oracle that sees the gold outcome), bird (BIRD, strict mapping), "
        "bird-relaxed (BIRD, relaxed mapping) or bird-on-anchor (BIRD's CPT on ANCHOR's factor space; needs "
        "--stage)."))] = "anchor",
    stage: Annotated[str | None, opt("--stage", panel=EVAL_PANEL, choices=STAGES, help=(
        "Only with --method bird-on-anchor (the paper's Table 4): 'factors' = BIRD's relaxed mapping and CPT on "
        "ANCHOR's factors, 'mapping' = the same CPT with ANCHOR's mapping, 'pool' = that pooled with ANCHOR's "
        "NB + CBN."))] = None,
    ablation: Annotated[list[str] | None, opt("--ablation", "-a", panel=EVAL_PANEL, choices=tuple(ABLATIONS), help=(
        "An ANCHOR ablation by name, repeatable; the same as its flag (--no-cbn, --no-nb, --no-cluster, "
        "--no-hierarchy, --no-pe-llm, --bma)."))] = None,
    data: Annotated[Path | None, opt("--data", panel=EVAL_PANEL, help=(
        "Evaluate this file instead of the bundled copy (same format; any COVID-Fact style JSONL for "
        "factcheck)."))] = None,
    limit: Annotated[int | None, opt("--limit", panel=EVAL_PANEL, bound=(RunConfig, "limit"),
                                     help="Only the first N instances (default: all); with a sample, the first "
                                          "N of the sample.")] = None,
    sample: Annotated[str | None, opt("--sample", panel=EVAL_PANEL, metavar="N|all", help=(
        "Score a seeded random sample of N instances ('all': every instance, in the seeded order), drawn "
        "before --limit and recorded in DIR/sample.json. Default: 100 for the fact-checking sets (cnn, xsum, "
        "expertqa, covid, factcheck: the paper's protocol), the whole file in file order otherwise."))] = None,
    sample_seed: Annotated[int | None, opt("--sample-seed", panel=EVAL_PANEL, help=(
        "Seed of the sample, 0 or more; the same data, size and seed give the same ids for every method. "
        "(default: 42)"))] = None,
    runs: Annotated[int, opt("--runs", panel=EVAL_PANEL, bound=(RunConfig, "runs"), default=1, help=(
        "Repetitions with seeds seed, seed+1, ...; the report gives mean ± std."))] = 1,
    out_dir: Annotated[Path | None, opt("--out", "-o", panel=EVAL_PANEL, help=(
        "Run directory (default: a folder in runs/ named after the dataset, method, stage, ablations and seed, "
        "e.g. runs/plasma-anchor-s0). Run the same command again to resume it."))] = None,
    negation: Annotated[str, opt("--negation", panel=EVAL_PANEL, choices=("template", "llm"), default="template",
                                 help="Fact checking: how outcome 2 is written from the claim.")] = "template",
    threshold: Annotated[float, opt("--threshold", panel=EVAL_PANEL, bound=(RunConfig, "decision_threshold"),
                                    help="Fact checking: a claim is 'supported' iff P(claim) > this.")] = 0.9,
    balance_outcomes: Annotated[bool, opt("--balance-outcomes", panel=EVAL_PANEL, show_default=False, help=(
        "Swap O1/O2 for about half the scenarios (the bundled Plasma and Today label every condition O1)."))] = False,
    spaces: Annotated[str, opt("--spaces", panel=EVAL_PANEL, choices=("per-run", "shared"), default="per-run", help=(
        "ANCHOR and BIRD: build a factor space (BIRD model) per scenario for every run (so the std over runs "
        "includes stage 1, our reading of the paper's '5 runs'), or once per scenario for all runs."))] = "per-run",
    spaces_from: Annotated[Path | None, opt("--spaces-from", panel=EVAL_PANEL, help=(
        "Reuse the factor spaces stored in this earlier run directory (e.g. for ablations of a finished run); "
        "their build cost is reported apart."))] = None,
    retry_failed: Annotated[bool, typer.Option("--retry-failed/--keep-failed", rich_help_panel=RESUME_PANEL, help=(
        "On resume, ask again for the predictions that failed (no usable answer, server unreachable); "
        "--keep-failed leaves them as they are."))] = True,
    sizes: Annotated[str, opt("--sizes", panel=SIZE_PANEL, choices=SIZES, default="auto", help=(
        "ANCHOR build sizes: 'paper' (80/10/20 for Common2Sense and Plasma, 40/5/10 otherwise), 'quick' "
        "(16/4/4), or 'auto' = paper on a server, quick on the embedded model; --n-target etc. override."))] = "auto",
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
    """Evaluate a method on a dataset; writes config.json, predictions.jsonl and metrics.json.

    Killed half-way? Run the same command again: finished instances are skipped and failed ones
    retried. Example: anchor eval --dataset common2sense-pairwise --method anchor --limit 20 --runs 2
    """
    from anchor.evaluation.driver import EvalRunner
    from anchor.evaluation.run_config import make_run_config
    from anchor.runs.errors import WorkersCapped
    from anchor.runs.session import RunOptions
    from anchor.settings.space import default_build_params

    sample = _sample_size(sample)
    with friendly_errors(EVAL_FLAGS), one_line_warnings(CalibratorMismatchWarning, WorkersCapped):
        calibrator = read_calibrator(calibrator_path) if calibrator_path is not None else None
        if dataset is None:
            if data is not None and data.suffix == ".jsonl":
                dataset = "factcheck"
            else:
                raise fail("give --dataset (or a .jsonl fact-checking file with --data)")
        spec = METHODS[method]
        if spec.extra is not None:
            require_extra(spec.extra, f"--method {method}")  # before the data is read or a request sent
        ablations = list(dict.fromkeys([*(ablation or []), *inference.ablations(build, mapping)]))
        # Contradictory ANCHOR settings are named whatever the method, before anything else.
        mapping_config, inference_config = mapping.config(), inference.config()
        settings = llm_settings(conn, cache, seed)
        anchor_config = None
        if spec.uses_anchor_config:
            chosen = ("paper" if settings.uses_server else "quick") if sizes == "auto" else sizes
            params = build.params(default_build_params(dataset, settings.seed, chosen), seed=settings.seed)
            anchor_config = AnchorConfig(build=params, mapping=mapping_config,
                                         inference=inference_config).with_ablations(ablations)
        else:
            knobs = list(dict.fromkeys([*given_flags(build, mapping, inference),
                                        *(f"--ablation {a}" for a in ablation or [])]))
            if knobs:
                raise fail(f"{', '.join(knobs)}: ANCHOR settings, which --method {method} does not use "
                           f"(drop them or pick an ANCHOR method)")
        config = make_run_config(dataset=dataset, method=method, data_path=data, ablations=ablations, limit=limit,
                                 runs=runs, seed=settings.seed, settings=settings, anchor_config=anchor_config,
                                 negation=negation, decision_threshold=threshold, balance_outcomes=balance_outcomes,
                                 spaces=spaces, spaces_from=spaces_from, stage=stage, sample=sample,
                                 sample_seed=sample_seed,
                                 command=shlex.join(redact_argv(invocation())))
        if out_dir is None:
            name = data.stem if data is not None else dataset
            out_dir = Path("runs") / "-".join([name, method, *([stage] if stage else []), *ablations,
                                               f"s{settings.seed}"])
        check_directory(out_dir, "--out")  # before the first request to the server
        RunDirectory(out_dir).check_target("--out")  # a folder of other files is not written over
        workers, ray = scale.resolve(settings.uses_server)
        runner = EvalRunner(config, out_dir, RunOptions(settings, anchor_config, calibrator=calibrator,
                                                        workers=workers, ray=ray),
                            retry_failed=retry_failed)
        instances = runner.load_instances()  # a broken data file fails here, before any directory is made
        with RichReporter(enabled=True) as report:
            runner.report = report
            metrics = asyncio.run(runner.run(instances))
        if json_out:
            emit_json(metrics.model_dump(mode="json"))
            return
        # The title on a line of its own: as the table's title it would wrap to the (narrow) table's width.
        out.print(f"[bold]{escape(method)}{escape(' + ' + ', '.join(ablations)) if ablations else ''} on "
                  f"{escape(config.dataset)} ({metrics.n_instances} instances x {metrics.n_runs} run(s))[/bold]",
                  highlight=False, soft_wrap=True)
        table = Table(header_style="bold", show_edge=False)
        table.add_column("metric")
        table.add_column("mean ± std", justify="right")
        for key, value in metrics.mean.items():
            sd = metrics.std.get(key)
            table.add_row(key, "–" if value is None else f"{value:.3f} ± {sd or 0.0:.3f}")
        out.print(table)
        t = metrics.cost.get("total")
        if t is not None:
            out.print(f"cost: {t.logical_requests} LLM requests in {t.llm_calls} attempts ({t.failed_attempts} "
                      f"failed; retries are attempts, not requests), {t.cache_hits} answered from the cache, "
                      f"{t.prompt_tokens}+{t.completion_tokens} tokens; requests were in flight for "
                      f"{t.wall_seconds:.1f} s ({t.llm_seconds:.1f} s summed over requests)"
                      + (f"; {t.interrupted} more interrupted by a kill (outcome unknown)" if t.interrupted else ""))
        n_pred = metrics.n_instances * metrics.n_runs
        unknown = metrics.n_unknown if metrics.n_unknown is not None else metrics.n_abstained + metrics.n_failed
        if unknown or metrics.fallback:
            out.print(f"unknown: {unknown} of {n_pred} prediction(s) without a decision, as metrics.json's "
                      f"runs[].unknown counts them: {unknown_parts(metrics, unknown)}" + (
                          f"; {metrics.method} said unknown for {metrics.n_fallback} more, which {metrics.fallback} "
                          "answered" if metrics.fallback else ""))
        if metrics.n_failed:
            out.print(f"[yellow]{metrics.n_failed} prediction(s) failed; run the same command again to retry "
                      "them[/yellow]")
        for note in metrics.notes:
            out.print(f"[bright_black]note: {escape(note)}[/bright_black]", highlight=False)
        out.print(f"[bold]wrote[/bold] {RunDirectory(out_dir).metrics_path}  (render with: anchor report {out_dir})")


def unknown_parts(metrics: MetricsReport, unknown: int) -> str:
    """What the unknown predictions are: abstained, failed and (decision data) ties at exactly 0.5."""
    ties = unknown - metrics.n_abstained - metrics.n_failed
    return f"{metrics.n_abstained} abstained, {metrics.n_failed} failed" + (
        f", {ties} a tie at exactly 0.5" if ties > 0 else "")


def report_command(
    run_dirs: Annotated[list[Path], typer.Argument(help="One or more run directories written by `anchor eval`.")],
    out_dir: Annotated[Path | None, typer.Option("--out", "-o", help="Where to write report.md and the PNG plots "
                                                 "(default: the first run directory).")] = None,
    no_html: Annotated[bool, typer.Option("--no-html", help="Do not write the HTML index of each run (DIR/index.html "
                                          "and DIR/explain/).")] = False,
) -> None:
    """Markdown tables laid out like the paper's Tables 1-3, plus cost and reliability plots (PNG).

    Also writes the HTML index of each run: DIR/index.html, one row per instance (filterable by
    correct / wrong / unknown), each row opening its explanation page in DIR/explain/.
    """
    from anchor.evaluation.report import build_report

    with friendly_errors():
        target = out_dir or run_dirs[0]
        if out_dir is not None:
            check_directory(out_dir, "--out")
        result = build_report(run_dirs, target)
        # soft_wrap: the Markdown as written to the file; hard-wrapped at the console width (80 columns
        # when stdout is not a terminal) its table rows would break.
        out.print(result.markdown.rstrip("\n"), markup=False, highlight=False, emoji=False, soft_wrap=True)
        err.print(f"wrote {result.path}" + (f" and {len(result.pngs)} plot(s)" if result.pngs else ""))
        if not no_html:
            for index in write_html_indexes(run_dirs):
                err.print(index_summary(index), markup=False, highlight=False, soft_wrap=True)
