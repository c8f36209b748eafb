"""``anchor reproduce``: the paper's tables, figures and appendix analyses on the user's model, each cell
beside the paper's (see docs/reproduce.md and :mod:`anchor.reproduce`)."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from anchor.cli.build import JsonOut
from anchor.cli.console import RichReporter, emit_json, err, fail, friendly_errors, invocation, out
from anchor.cli.options import (
    FLAG_NAMES,
    ConnectionOptions,
    EstimatorOptions,
    ScaleOptions,
    SeedOption,
    expand_options,
    llm_settings,
    opt,
)
from anchor.files import check_directory
from anchor.reproduce.published import load_published
from anchor.reproduce.selection import APPENDIX, TABLES, make_selection
from anchor.secrets import redact_argv

# The machinery a command drives is imported inside the command, to keep start-up light: see anchor.cli.

PANEL = "Reproduction"
# Panels of their own: their long flag names would leave the others' help a narrow strip at 80 columns.
BUDGET_PANEL = "Cost: plan and budget"
RESUME_PANEL = "Resuming"
#: Exit status when --budget-requests / --budget-tokens stopped the reproduction before a run.
STOPPED_BY_BUDGET = 3
#: How far --plan's figures can be off, measured on the test server (docs/reproduce.md).
ESTIMATES_NOTE = (
    "How far off: an extrapolated figure scales up what the scenarios done so far cost, so a run whose cost varies "
    "from scenario to scenario (BIRD's, with the factors it finds) can need twice its estimate or more; counted "
    "figures are exact, and the total is closer than most runs, as their errors partly cancel (docs/reproduce.md).")
#: Exit status after Ctrl-C (128 + SIGINT, as a shell reports it).
INTERRUPTED = 130
FLAGS = {**FLAG_NAMES, "runs": "--runs"}


def _paper_models() -> tuple[str, ...]:
    return tuple(sorted({c.model for c in load_published().cells if c.model and " vs " not in c.model}))


@expand_options
def reproduce_command(
    tables: Annotated[list[str] | None, opt("--tables", panel=PANEL, metavar="LIST", help=(
        f"The paper's tables to reproduce, comma-separated: {', '.join(TABLES)}. Naming any of --tables, --figures "
        "and --appendix selects those parts only; naming none selects all tables and figures and the retrieval "
        "and clustering analyses. Given twice, the lists add up."))] = None,
    figures: Annotated[list[str] | None, opt("--figures", panel=PANEL, metavar="LIST", help=(
        "Figures: cost (ANCHOR against BIRD per scenario), factors (unknown rate and F1 against the number of "
        "factors)."))] = None,
    appendix: Annotated[list[str] | None, opt("--appendix", panel=PANEL, metavar="LIST", help=(
        f"Appendix analyses: {', '.join(APPENDIX)} (estimator needs --estimator-base-url, or --quick)."))] = None,
    runs: Annotated[int | None, opt("--runs", panel=PANEL, min=1, show_default=False, help=(
        "Runs of every method, seeds seed, seed+1, ... (default: 5, the paper's; 1 with --quick)."))] = None,
    out_dir: Annotated[Path | None, opt("--out", "-o", panel=PANEL, help=(
        "The reproduction's folder: runs/, analyses/, report.md, report.html, figures/ (default: runs/reproduce, "
        "runs/reproduce-quick with --quick). Run the same command again to resume it."))] = None,
    quick: Annotated[bool, opt("--quick", panel=PANEL, show_default=False, help=(
        "A tiny slice of every selected part (a few instances, the quick build sizes, one run): shows the whole "
        "reproduction working in minutes, on the embedded model unless --base-url is given."))] = False,
    data: Annotated[list[str] | None, opt("--data", panel=PANEL, metavar="DATASET=FILE", help=(
        "Read a dataset from this file instead of the bundled copy, repeatable; e.g. covid=COVIDFACT_dataset.jsonl "
        "(the bundled COVID-Fact is a 12-row sample)."))] = None,
    budget_requests: Annotated[int | None, opt("--budget-requests", panel=BUDGET_PANEL, min=1, show_default=False, help=(
        "Stop before a run expected to take the reproduction's requests (all runs together, earlier passes "
        "included; each request once, however many attempts a server's faults made it take) past N."))] = None,
    budget_tokens: Annotated[int | None, opt("--budget-tokens", panel=BUDGET_PANEL, min=1, show_default=False, help=(
        "The same for tokens (prompt + completion, as the server reports them)."))] = None,
    plan_only: Annotated[bool, opt("--plan", panel=BUDGET_PANEL, show_default=False, help=(
        "Print the runs and the requests and tokens each is expected to need, then stop. The estimates come from "
        "the ledgers of finished runs, or from a pilot: the first scenario of every run not yet started, run "
        "for real and kept (the runs go on from it)."))] = False,
    paper_model: Annotated[str | None, opt("--paper-model", panel=PANEL, help=(
        "The paper's model whose cells are shown beside ours: Qwen2.5-72B, Qwen2.5-32B, DeepSeek-V3-671B or GPT-4 "
        "(default: the one the served model's name points to, else Qwen2.5-72B)."))] = None,
    model_runs: Annotated[list[str] | None, opt("--model-runs", panel=PANEL, metavar="PAPER_MODEL=DIR", help=(
        "A finished reproduction of another model, standing for that paper model: the claims that compare two "
        "of the paper's models (ANCHOR with 32B above the 72B baselines) read its runs, e.g. "
        "Qwen2.5-32B=runs/reproduce-32b; its runs must be of the same slice as ours. Repeatable."))] = None,
    retry_failed: Annotated[bool, typer.Option("--retry-failed/--keep-failed", rich_help_panel=RESUME_PANEL, help=(
        "On a new attempt, ask again for the predictions that failed (no usable answer, server unreachable); "
        "--keep-failed counts a run whose only gaps are failures as finished."))] = True,
    json_out: JsonOut = False,
    conn: ConnectionOptions = None,  # type: ignore[assignment]
    est: EstimatorOptions = None,  # type: ignore[assignment]
    seed: SeedOption = None,  # type: ignore[assignment]
    scale: ScaleOptions = None,  # type: ignore[assignment]
) -> None:
    """Check the paper on your model: Tables 1-4, the cost and factor-count figures and the appendix
    analyses, each cell beside the paper's with the difference, and the paper's claims checked.

    Plans every run the selection needs (sharing factor spaces and BIRD models where the paper's protocol
    allows), runs them in this process, resumably, and writes OUT/report.md and OUT/report.html. Killed?
    Run the same command again. Example: anchor reproduce --base-url URL --model M --tables 1,4 --figures
    cost --runs 1 --quick
    """
    from anchor.reproduce.execute import Budget, Reproduction, hold, write_state
    from anchor.reproduce.plan import make_plan
    from anchor.reproduce.report import build_report
    from anchor.reproduce.selection import check_model_runs, paper_model_for

    with friendly_errors(FLAGS):
        settings = llm_settings(conn, None, seed)
        selection = make_selection(tables=_joined(tables), figures=_joined(figures), appendix=_joined(appendix),
                                   runs=runs, quick=quick,
                                   data=data or (), paper_model=paper_model, known_models=_paper_models(),
                                   embedded=not settings.uses_server, model_runs=model_runs or ())
        estimator = None
        if "estimator" in selection.appendix:
            if est.base_url is None and not quick:
                raise fail("--appendix estimator needs --estimator-base-url (the second LLM's server; env "
                           "ANCHOR_ESTIMATOR_BASE_URL), or --quick to compare the model with itself at another seed")
            estimator = est.settings(settings) if est.base_url else settings.model_copy(
                update={"seed": settings.seed + 1})
        out_dir = out_dir or Path("runs/reproduce-quick" if quick else "runs/reproduce")
        check_directory(out_dir, "--out")
        plan = make_plan(selection)
        budget = Budget(requests=budget_requests, tokens=budget_tokens)
        command = shlex.join(redact_argv(invocation()))
        out_dir.mkdir(parents=True, exist_ok=True)
        with hold(out_dir):  # a second process on the same folder is refused here, before anything else
            resolved, est_resolved = asyncio.run(_resolve(settings, estimator))
            chosen = selection if paper_model else selection.model_copy(
                update={"paper_model": paper_model_for(resolved.model, _paper_models())})
            check_model_runs(chosen)
            workers, ray = scale.resolve(settings.uses_server)
            repro = Reproduction(plan.model_copy(update={"selection": chosen}), out_dir, settings=resolved,
                                 estimator=est_resolved, command=command, retry_failed=retry_failed, budget=budget,
                                 workers=workers, ray=ray)
            for note in repro.notes():
                err.print(f"[bold]note:[/bold] {escape(note)}", highlight=False, soft_wrap=True)
            repro.check_resumable()  # before any request: a folder of another reproduction is refused
            try:
                with RichReporter(enabled=True) as report:
                    repro.report = report
                    outcome = asyncio.run(repro.pilot() if plan_only else repro.run_all())
                write_state(out_dir, outcome)
                if plan_only:
                    _show_plan(repro, outcome, json_out)
                else:
                    files = build_report(repro.plan, out_dir, model=str(repro.settings.model),
                                         small=not repro.settings.uses_server, states=outcome.states,
                                         errors=outcome.errors,
                                         estimator=repro.estimator.model if repro.estimator is not None else None)
                    _show_outcome(outcome, files, json_out)
            except KeyboardInterrupt:
                # Every run keeps what it wrote (one prediction per line, files replaced whole): the same command
                # goes on from there.
                write_state(out_dir, repro.interrupted())
                raise fail(f"interrupted: every prediction made so far is kept in {out_dir}; run the same command "
                           f"again to resume it: {command}", code=INTERRUPTED) from None
        if outcome.stopped:
            err.print(f"[yellow]{escape(outcome.stopped)}[/yellow]; run again with a larger budget to go on",
                      highlight=False, soft_wrap=True)
            raise typer.Exit(STOPPED_BY_BUDGET)
        unfinished = [n for n, s in outcome.states.items() if s in ("failed", "waiting")]
        if unfinished and not plan_only:
            raise fail(f"{len(unfinished)} run(s) did not finish ({', '.join(unfinished[:4])}"
                       f"{', ...' if len(unfinished) > 4 else ''}); the report says why; run the same command "
                       "again to retry them", code=1)


def _joined(given: list[str] | None) -> str | None:
    """A list option given several times, as one comma-separated list (None: not given)."""
    return None if given is None else ",".join(given)


async def _resolve(settings: Any, estimator: Any) -> tuple[Any, Any]:
    """Both models named (the server's first listed model when none was given), before anything runs."""
    from anchor.reproduce.execute import resolve_model

    return await resolve_model(settings), (await resolve_model(estimator) if estimator is not None else None)


def _show_plan(repro: Any, outcome: Any, json_out: bool) -> None:
    rows = outcome.estimates
    known = [e for e in rows if e.requests is not None]
    total_requests = sum(e.requests for e in known)
    total_tokens = sum(e.tokens or 0 for e in known)
    if json_out:
        emit_json({"runs": [{**e.model_dump(mode="json"), "state": outcome.states.get(e.name)} for e in rows],
                   "total": {"requests": total_requests, "tokens": total_tokens, "unknown": len(rows) - len(known)},
                   "spent": outcome.spent.model_dump(), "stopped": outcome.stopped,
                   "notes": [*repro.notes(), ESTIMATES_NOTE]}, "reproduce --plan")
        return
    planned = (*repro.plan.runs, *repro.plan.analyses)
    parts = {r.name: ", ".join(r.parts) for r in planned}
    datasets = {r.name: r.dataset or "" for r in planned}
    # Runs are listed under their dataset, by what follows the dataset in their name: at 80 columns
    # the whole directory name ("common2sense-pairwise-bird-on-anchor-mapping") folded into three lines.
    table = Table(header_style="bold", show_edge=False, pad_edge=False, collapse_padding=True)
    for head, justify in (("run", "left"), ("for", "left"), ("state", "left"), ("requests", "right"),
                          ("tokens", "right"), ("from", "left")):
        table.add_column(head, justify=justify, overflow="fold")  # type: ignore[arg-type]
    shown = None
    for e in rows:
        dataset = datasets.get(e.name, "")
        if dataset and dataset != shown:
            table.add_row(f"[bold]{escape(dataset)}[/bold]", "", "", "", "", "")
            shown = dataset
        name = e.name.removeprefix(f"{dataset}-") if dataset and e.name.startswith(f"{dataset}-") else e.name
        table.add_row(escape(("  " if dataset else "") + name), parts.get(e.name, ""), outcome.states.get(e.name, ""),
                      "?" if e.requests is None else f"{e.requests:,}", "?" if e.tokens is None else f"{e.tokens:,}",
                      escape(e.source + (f": {e.note}" if e.note else "")))
    out.print(table)
    unknown = len(rows) - len(known)
    out.print(f"expected in all: {total_requests:,} requests, {total_tokens:,} tokens"
              + (f" (and {unknown} part(s) without an estimate)" if unknown else "")
              + f"; spent so far: {outcome.spent.requests:,} requests ({outcome.spent.attempts:,} attempts), "
              f"{outcome.spent.tokens:,} tokens (the pilot "
              "is kept: the runs go on from it)", highlight=False, soft_wrap=True)
    out.print(ESTIMATES_NOTE, highlight=False, soft_wrap=True)


def _show_outcome(outcome: Any, files: Any, json_out: bool) -> None:
    if json_out:
        emit_json({"complete": outcome.complete, "states": outcome.states, "errors": outcome.errors,
                   "spent": outcome.spent.model_dump(), "report": str(files.markdown), "html": str(files.html)},
                  "reproduce")
        return
    done = sum(1 for s in outcome.states.values() if s in ("finished", "empty"))
    empty = [n for n, s in outcome.states.items() if s == "empty"]
    out.print(f"{done} of {len(outcome.states)} runs and analyses finished; {outcome.spent.requests:,} requests "
              f"({outcome.spent.attempts:,} attempts) and {outcome.spent.tokens:,} tokens in all", highlight=False,
              soft_wrap=True)
    if empty:
        out.print(f"{len(empty)} with nothing to compare ({', '.join(empty)}): the report says why",
                  highlight=False, soft_wrap=True)
    err.print(f"[bold]wrote[/bold] {escape(str(files.markdown))} and {escape(files.html.name)}", highlight=False)
