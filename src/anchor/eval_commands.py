"""``anchor eval`` and ``anchor report``."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from anchor.cli import (
    ApiKey,
    BaseUrl,
    CacheDir,
    Concurrency,
    JsonOut,
    Model,
    NoCache,
    ParseRetries,
    RichReporter,
    Seed,
    Timeout,
    app,
    emit_json,
    err,
    fail,
    friendly_errors,
    out,
    settings_from,
)

EVAL_PANEL = "Evaluation"
SIZE_PANEL = "ANCHOR factor-space sizes"


@app.command("eval")
def eval_command(
    dataset: Annotated[str | None, typer.Option("--dataset", "-d", help="common2sense-pairwise, common2sense, plasma, "
                                                "today or factcheck (default for a .jsonl --data file).",
                                                rich_help_panel=EVAL_PANEL)] = None,
    method: Annotated[str, typer.Option("--method", "-m", help="anchor, vanilla, vanilla-direct, cot, cot-direct, "
                                        "logits, compare (pairwise only) or factor-based (oracle).",
                                        rich_help_panel=EVAL_PANEL)] = "anchor",
    ablation: Annotated[list[str] | None, typer.Option("--ablation", "-a", help="ANCHOR ablation, repeatable: no-cbn, "
                                                       "no-nb, no-cluster, no-hierarchy, no-pe-llm, bma.",
                                                       rich_help_panel=EVAL_PANEL)] = None,
    data: Annotated[Path | None, typer.Option("--data", help="Evaluate this file instead of the bundled copy (same "
                                              "format; any COVID-Fact style JSONL for factcheck).",
                                              rich_help_panel=EVAL_PANEL)] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Only the first N instances.",
                                              rich_help_panel=EVAL_PANEL)] = None,
    runs: Annotated[int, typer.Option("--runs", help="Repetitions with seeds seed, seed+1, ...; mean ± std is "
                                      "reported.", rich_help_panel=EVAL_PANEL)] = 1,
    out_dir: Annotated[Path | None, typer.Option("--out", "-o", help="Run directory (default runs/<dataset>-<method>"
                                                 "[-ablations]-s<seed>). Rerun the same command to resume.",
                                                 rich_help_panel=EVAL_PANEL)] = None,
    negation: Annotated[str, typer.Option("--negation", help="Fact checking: how O2 is written from the claim: "
                                          "'template' or 'llm'.", rich_help_panel=EVAL_PANEL)] = "template",
    threshold: Annotated[float, typer.Option("--threshold", help="Fact checking: 'support' iff P(claim) > this.",
                                             rich_help_panel=EVAL_PANEL)] = 0.9,
    balance_outcomes: Annotated[bool, typer.Option("--balance-outcomes", help="Swap O1/O2 for about half the "
                                                   "scenarios (Plasma/Today label every condition O1).",
                                                   rich_help_panel=EVAL_PANEL)] = False,
    sizes: Annotated[str, typer.Option("--sizes", help="'paper' (80/10/20 for Common2Sense and Plasma, 40/5/10 "
                                       "otherwise), 'quick' (16/4/4), or 'auto': paper on a server, quick on the "
                                       "embedded model. --n-target etc. override.", rich_help_panel=SIZE_PANEL)] = "auto",
    n_target: Annotated[int | None, typer.Option("--n-target", rich_help_panel=SIZE_PANEL)] = None,
    batch_size: Annotated[int | None, typer.Option("--batch-size", rich_help_panel=SIZE_PANEL)] = None,
    max_rounds: Annotated[int | None, typer.Option("--max-rounds", rich_help_panel=SIZE_PANEL)] = None,
    patience: Annotated[int, typer.Option("--patience", rich_help_panel=SIZE_PANEL)] = 3,
    vote_samples: Annotated[int, typer.Option("--vote-samples", rich_help_panel=SIZE_PANEL)] = 3,
    json_out: JsonOut = False,
    base_url: BaseUrl = None, model: Model = None, api_key: ApiKey = None, no_cache: NoCache = False,
    cache_dir: CacheDir = None, seed: Seed = 0, timeout: Timeout = None, concurrency: Concurrency = None,
    parse_retries: ParseRetries = 20,
) -> None:
    """Evaluate a method on a dataset; writes config.json, predictions.jsonl and metrics.json.

    Killed half-way? Run the same command again: finished instances are skipped.
    Example: anchor eval --dataset common2sense-pairwise --method anchor --limit 20 --runs 2
    """
    import asyncio

    from anchor.evaluation.runner import EvalRunner, default_build_params, make_run_config
    from anchor.pipeline import ABLATIONS, AnchorConfig

    with friendly_errors():
        ablations = list(dict.fromkeys(ablation or []))
        for a in ablations:
            if a not in ABLATIONS:
                raise fail(f"unknown ablation {a!r}; choose from {', '.join(ABLATIONS)}")
        if dataset is None:
            if data is not None and data.suffix == ".jsonl":
                dataset = "factcheck"
            else:
                raise fail("give --dataset (or a .jsonl fact-checking file with --data)")
        if negation not in ("template", "llm"):
            raise fail("--negation must be 'template' or 'llm'")
        settings = settings_from(base_url, model, api_key, no_cache, cache_dir, seed, timeout, concurrency,
                                 parse_retries)
        anchor_config = None
        if sizes not in ("auto", "paper", "quick"):
            raise fail("--sizes must be auto, paper or quick")
        if sizes == "auto":
            sizes = "paper" if settings.uses_server else "quick"
        if method == "anchor":
            build = default_build_params(dataset, seed, sizes).model_copy(update={
                k: v for k, v in {"n_target": n_target, "batch_size": batch_size, "max_rounds": max_rounds,
                                  "patience": patience, "vote_samples": vote_samples}.items() if v is not None})
            anchor_config = AnchorConfig(build=build).with_ablations(ablations)
        config = make_run_config(dataset=dataset, method=method, data_path=data, ablations=ablations, limit=limit,
                                 runs=runs, seed=seed, settings=settings, anchor_config=anchor_config,
                                 negation=negation, decision_threshold=threshold, balance_outcomes=balance_outcomes,
                                 command=shlex.join(["anchor", *sys.argv[1:]]))
        if out_dir is None:
            name = data.stem if data is not None else dataset
            out_dir = Path("runs") / "-".join([name, method, *ablations, f"s{seed}"])
        with RichReporter(enabled=True) as report:
            runner = EvalRunner(config, out_dir, settings=settings, anchor_config=anchor_config, report=report)
            metrics = asyncio.run(runner.run())
        if json_out:
            emit_json(metrics.model_dump(mode="json"))
            return
        table = Table(title=f"{method}{' + ' + ', '.join(ablations) if ablations else ''} on {config.dataset} "
                            f"({metrics.n_instances} instances x {metrics.n_runs} run(s))",
                      title_justify="left", header_style="bold", show_edge=False)
        table.add_column("metric")
        table.add_column("mean ± std", justify="right")
        for key, value in metrics.mean.items():
            sd = metrics.std.get(key)
            table.add_row(key, "–" if value is None else f"{value:.3f} ± {sd or 0.0:.3f}")
        out.print(table)
        t = metrics.cost.get("total")
        if t is not None:
            out.print(f"cost: {t.llm_calls} LLM calls ({t.failed_attempts} failed, {t.cache_hits} cached), "
                      f"{t.prompt_tokens}+{t.completion_tokens} tokens, {t.wall_seconds:.1f} s of LLM time")
        for note in metrics.notes:
            out.print(f"[bright_black]note: {note}[/bright_black]")
        out.print(f"[bold]wrote[/bold] {out_dir}/metrics.json  (render with: anchor report {out_dir})")


@app.command("report")
def report_command(
    run_dirs: Annotated[list[Path], typer.Argument(help="One or more run directories written by `anchor eval`.")],
    out_dir: Annotated[Path | None, typer.Option("--out", "-o", help="Where to write report.md and the PNG plots "
                                                 "(default: the first run directory).")] = None,
) -> None:
    """Markdown tables laid out like the paper's Tables 1-3, plus cost and reliability plots (PNG)."""
    from anchor.evaluation.report import build_report

    with friendly_errors():
        target = out_dir or run_dirs[0]
        result = build_report(run_dirs, target)
        out.print(result.markdown, markup=False, highlight=False)
        err.print(f"wrote {result.path}" + (f" and {len(result.pngs)} plot(s)" if result.pngs else ""))
