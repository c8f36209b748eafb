"""``anchor analyze factors|retrieval|clustering|estimator``: the paper's analyses as commands.

Each subcommand but ``clustering`` evaluates a dataset slice several times with ANCHOR (one
``anchor eval`` run directory per cell, under ``OUT/runs``; see :mod:`anchor.analysis.runs`),
then writes ``OUT/<name>.json``, ``OUT/<name>.md`` and ``OUT/<name>.png`` and prints the table.
``clustering`` reads stored factor spaces and makes no LLM call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shlex
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from anchor.cli.build import JsonOut
from anchor.cli.console import RichReporter, emit_json, err, fail, friendly_errors, invocation, out
from anchor.cli.evaluate import SIZES
from anchor.cli.options import (
    FLAG_NAMES,
    BuildOptions,
    CacheOptions,
    ConnectionOptions,
    EstimatorOptions,
    InferenceOptions,
    MappingOptions,
    SeedOption,
    expand_options,
    llm_settings,
    opt,
)
from anchor.config import AnchorConfig
from anchor.evaluation.datasets import DATASET_NAMES
from anchor.files import check_directory
from anchor.rundir.records import RunConfig
from anchor.secrets import redact_argv
from anchor.settings.mapping import RETRIEVER_NAMES

# The machinery a command drives is imported inside the command, to keep start-up light: see anchor.cli.

SLICE_PANEL = "Dataset slice"
ANALYSIS_PANEL = "Analysis"
#: --quick: instances evaluated when --limit is not given.
QUICK_LIMIT = 2
FLAGS = {**FLAG_NAMES, "limit": "--limit", "runs": "--runs", "fixed_k": "--fixed-k"}

app = typer.Typer(help=(
    "The paper's analyses as commands: factor count, retrieval backend and (K1, K2), clustering algorithm, "
    "probability-estimator LLM. Each writes OUT/<name>.json, a Markdown table (OUT/<name>.md) and a figure "
    "(OUT/<name>.png). Run the same command again to resume it."), no_args_is_help=True)


@dataclasses.dataclass
class SliceOptions:
    """The dataset slice every cell of an analysis evaluates (as `anchor eval`)."""

    dataset: Annotated[str | None, opt("--dataset", "-d", panel=SLICE_PANEL, choices=DATASET_NAMES, help=(
        "The benchmark (bundled copies; --data reads another file of the same format). Default: factcheck "
        "for a .jsonl --data file."))] = None
    data: Annotated[Path | None, opt("--data", panel=SLICE_PANEL, help=(
        "Evaluate this file instead of the bundled copy (same format)."))] = None
    limit: Annotated[int | None, opt("--limit", panel=SLICE_PANEL, bound=(RunConfig, "limit"), help=(
        f"Only the first N instances (default: all; {QUICK_LIMIT} with --quick)."))] = None
    runs: Annotated[int, opt("--runs", panel=SLICE_PANEL, bound=(RunConfig, "runs"), default=1, help=(
        "Repetitions of every cell with seeds seed, seed+1, ... (the spaces are built once and shared)."))] = 1
    out_dir: Annotated[Path | None, opt("--out", "-o", panel=SLICE_PANEL, help=(
        "Output folder: the analysis files, and the cells' run directories in OUT/runs (default: "
        "runs/analyze-<analysis>-<dataset>-s<seed>). Run the same command again to resume."))] = None
    balance_outcomes: Annotated[bool, opt("--balance-outcomes", panel=SLICE_PANEL, show_default=False, help=(
        "Swap O1/O2 for about half the scenarios (the bundled Plasma and Today label every condition "
        "O1)."))] = False
    sizes: Annotated[str, opt("--sizes", panel=SLICE_PANEL, choices=SIZES, default="auto", help=(
        "ANCHOR build sizes: 'paper', 'quick' (16/4/4), or 'auto' = paper on a server, quick on the embedded "
        "model (and with --quick); --n-target etc. override."))] = "auto"
    quick: Annotated[bool, opt("--quick", panel=SLICE_PANEL, show_default=False, help=(
        f"A small run that shows the analysis working: --limit {QUICK_LIMIT} unless given, the quick build "
        "sizes, a coarser grid for `factors`; on the embedded model unless --base-url is given."))] = False


def _slice(name: str, sl: SliceOptions, build: BuildOptions, mapping: MappingOptions, inference: InferenceOptions,
           conn: ConnectionOptions, cache: CacheOptions, seed: SeedOption) -> tuple[Any, Path]:
    """The analysis's evaluation settings and output folder (checked before any request)."""
    from anchor.analysis.runs import EvalSlice
    from anchor.settings.space import default_build_params

    dataset = sl.dataset
    if dataset is None:
        if sl.data is not None and sl.data.suffix == ".jsonl":
            dataset = "factcheck"
        else:
            raise fail("give --dataset (or a .jsonl fact-checking file with --data)")
    if sl.data is not None and not sl.data.is_file():
        raise fail(f"--data {sl.data}: no such file")
    settings = llm_settings(conn, cache, seed)
    chosen = sl.sizes
    if chosen == "auto":
        chosen = "quick" if sl.quick or not settings.uses_server else "paper"
    params = build.params(default_build_params(dataset, settings.seed, chosen), seed=settings.seed)
    ablations = inference.ablations(build, mapping)
    config = AnchorConfig(build=params, mapping=mapping.config(), inference=inference.config()).with_ablations(
        ablations)
    limit = sl.limit if sl.limit is not None else (QUICK_LIMIT if sl.quick else None)
    data = EvalSlice(dataset=dataset, settings=settings, anchor_config=config, data_path=sl.data, limit=limit,
                     runs=sl.runs, balance_outcomes=sl.balance_outcomes,
                     command=shlex.join(redact_argv(invocation())))
    out_dir = sl.out_dir
    if out_dir is None:
        stem = sl.data.stem if sl.data is not None else dataset
        out_dir = Path("runs") / f"analyze-{name}-{stem}-s{settings.seed}"
    check_directory(out_dir, "--out")
    return data, out_dir


def _run(name: str, data: Any, out_dir: Path, work: Callable[[Any], Coroutine[Any, Any, Any]]) -> Any:
    from anchor.analysis.runs import AnalysisRunner

    runner = AnalysisRunner(name, data, out_dir)
    runner.load_instances()  # a broken data file fails here, before any request
    with RichReporter(enabled=True) as report:
        runner.report = report
        return asyncio.run(work(runner))


def _show(result: Any, files: Any, lines: list[str], json_out: bool) -> None:
    paths = {"json": str(files.json_path), "markdown": str(files.markdown_path), "png": str(files.png_path)}
    if json_out:
        emit_json({**result.model_dump(mode="json"), "files": paths})
        return
    out.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)
    err.print(f"[bold]wrote[/bold] {escape(paths['json'])}, {escape(Path(paths['markdown']).name)} and "
              f"{escape(Path(paths['png']).name)}", highlight=False)


def _refuse_varied(name: str, flags: dict[str, Any]) -> None:
    given = [flag for flag, value in flags.items() if value is not None]
    if given:
        raise fail(f"{', '.join(given)}: `anchor analyze {name}` varies this itself; drop it")


# --------------------------------------------------------------------------- factors


@app.command("factors")
@expand_options
def factors_command(
    sl: SliceOptions = None,  # type: ignore[assignment]
    points: Annotated[int | None, opt("--points", panel=ANALYSIS_PANEL, min=2, show_default=False, help=(
        "About how many factor counts N to evaluate, evenly spaced up to the largest built space (default: 8; "
        "4 with --quick)."))] = None,
    step: Annotated[int | None, opt("--step", panel=ANALYSIS_PANEL, min=1, help=(
        "Evaluate N = step, 2 x step, ... instead (overrides --points)."))] = None,
    build: BuildOptions = None,  # type: ignore[assignment]
    mapping: MappingOptions = None,  # type: ignore[assignment]
    inference: InferenceOptions = None,  # type: ignore[assignment]
    json_out: JsonOut = False,
    conn: ConnectionOptions = None,  # type: ignore[assignment]
    cache: CacheOptions = None,  # type: ignore[assignment]
    seed: SeedOption = None,  # type: ignore[assignment]
) -> None:
    """Unknown rate and F1 (or accuracy) as the factor space grows (the paper's §5.4 figure).

    The spaces are built once at full size (OUT/runs/full) and evaluated again truncated to their
    first N factors by abduction order (OUT/runs/n<N>). Example:
    anchor analyze factors --dataset common2sense-pairwise --limit 20 --base-url ... --model ...
    """
    from anchor.analysis.factors import factor_count_markdown, write_factor_count
    from anchor.analysis.runs import FACTOR_POINTS, QUICK_FACTOR_POINTS, run_factor_analysis

    with friendly_errors(FLAGS):
        data, out_dir = _slice("factors", sl, build, mapping, inference, conn, cache, seed)
        n_points = points or (QUICK_FACTOR_POINTS if sl.quick else FACTOR_POINTS)
        result = _run("factors", data, out_dir, lambda r: run_factor_analysis(r, points=n_points, step=step))
        files = write_factor_count(result, out_dir)
        _show(result, files, factor_count_markdown(result), json_out)


# --------------------------------------------------------------------------- retrieval


@app.command("retrieval")
@expand_options
def retrieval_command(
    sl: SliceOptions = None,  # type: ignore[assignment]
    retrievers: Annotated[list[str] | None, opt("--retrievers", panel=ANALYSIS_PANEL, choices=RETRIEVER_NAMES,
                                                help="A backend to compare, repeatable (default: knn, faiss-flat, "
                                                     "bm25).")] = None,
    build: BuildOptions = None,  # type: ignore[assignment]
    mapping: MappingOptions = None,  # type: ignore[assignment]
    inference: InferenceOptions = None,  # type: ignore[assignment]
    json_out: JsonOut = False,
    conn: ConnectionOptions = None,  # type: ignore[assignment]
    cache: CacheOptions = None,  # type: ignore[assignment]
    seed: SeedOption = None,  # type: ignore[assignment]
) -> None:
    """Retrieval backends (KNN, FAISS, BM25) crossed with (K1, K2) in {(2,3), (3,5), (4,8)} (Appendix A.7).

    Same spaces for every cell (built by the first, OUT/runs/<retriever>-k<K1>-<K2>); unknown rate
    and per-class F1 per cell. Example:
    anchor analyze retrieval --dataset common2sense-pairwise --limit 20 --base-url ... --model ...
    """
    from anchor.analysis.retrieval import DEFAULT_RETRIEVERS, retrieval_markdown, write_retrieval
    from anchor.analysis.runs import run_retrieval_analysis

    with friendly_errors(FLAGS):
        _refuse_varied("retrieval", {"--k1": mapping.k1, "--k2": mapping.k2, "--retriever": mapping.retriever})
        data, out_dir = _slice("retrieval", sl, build, mapping, inference, conn, cache, seed)
        names = tuple(dict.fromkeys(retrievers)) if retrievers else DEFAULT_RETRIEVERS
        result = _run("retrieval", data, out_dir, lambda r: run_retrieval_analysis(r, retrievers=names))
        files = write_retrieval(result, out_dir)
        _show(result, files, retrieval_markdown(result), json_out)


# --------------------------------------------------------------------------- clustering


def _fixed_k(value: str) -> str | int:
    if value in ("sqrt", "hdbscan"):
        return value
    try:
        k = int(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not 'sqrt', 'hdbscan' or an integer", param_hint="--fixed-k") from None
    if k < 2:
        raise typer.BadParameter(f"a fixed k must be at least 2 (got {k})", param_hint="--fixed-k")
    return k


@app.command("clustering")
def clustering_command(
    spaces: Annotated[list[Path], typer.Option("--spaces", rich_help_panel=ANALYSIS_PANEL, help=(
        "Stored factor spaces, repeatable: an `anchor eval` run directory (its spaces/), a folder of space "
        ".json files (the folder name is the dataset), one space file, or a folder of such folders."))],
    out_dir: Annotated[Path, typer.Option("--out", "-o", rich_help_panel=ANALYSIS_PANEL, help=(
        "Where to write clustering.json, .md and .png."))] = Path("runs/analyze-clustering"),
    fixed_k: Annotated[str, typer.Option("--fixed-k", rich_help_panel=ANALYSIS_PANEL, help=(
        "k of KMeans and Agglomerative: 'sqrt' = round(sqrt(m/2)) for m distinct factors (6 for 80), "
        "'hdbscan' = HDBSCAN's own count on the same space, or an integer >= 2. (default: sqrt)"))] = "sqrt",
    json_out: JsonOut = False,
) -> None:
    """HDBSCAN against DBSCAN, KMeans and Agglomerative on stored factor embeddings (Appendix A.8).

    No LLM call and no embedding: the vectors stored in the spaces are reduced with UMAP as the
    build did, and the four algorithms cluster the same points; silhouette and number of clusters
    per dataset and algorithm. Example: anchor analyze clustering --spaces runs/
    """
    from anchor.analysis.clustering import (
        ClusteringSettings,
        clustering_markdown,
        collect_spaces,
        compare_clustering,
        write_clustering,
    )

    with friendly_errors(FLAGS):
        settings = ClusteringSettings(fixed_k=_fixed_k(fixed_k))
        check_directory(out_dir, "--out")
        found = collect_spaces(spaces)
        with RichReporter(enabled=True) as report:
            result = compare_clustering(found, settings, report=report)
        files = write_clustering(result, out_dir)
        _show(result, files, clustering_markdown(result), json_out)


# --------------------------------------------------------------------------- estimator


@app.command("estimator")
@expand_options
def estimator_command(
    sl: SliceOptions = None,  # type: ignore[assignment]
    est: EstimatorOptions = None,  # type: ignore[assignment]
    build: BuildOptions = None,  # type: ignore[assignment]
    mapping: MappingOptions = None,  # type: ignore[assignment]
    inference: InferenceOptions = None,  # type: ignore[assignment]
    json_out: JsonOut = False,
    conn: ConnectionOptions = None,  # type: ignore[assignment]
    cache: CacheOptions = None,  # type: ignore[assignment]
    seed: SeedOption = None,  # type: ignore[assignment]
) -> None:
    """Swap the probability-estimator LLM with the space and mapping fixed (Table 6, A.7.1).

    The main model (--base-url/--model) builds the spaces and maps the conditions; the estimator
    (--estimator-base-url/--estimator-model) elicits phi and the latent parameters. Reports both
    task scores and their difference, and the JS divergence, Wasserstein distance and KS test
    between the two phi distributions, with their smoothed densities. Example:
    anchor analyze estimator --dataset today --limit 20 --base-url URL1 --model M1
    --estimator-base-url URL2 --estimator-model M2
    """
    from anchor.analysis.estimator import estimator_markdown, write_estimator
    from anchor.analysis.runs import run_estimator_analysis

    with friendly_errors(FLAGS):
        if est.base_url is None and not sl.quick:
            raise fail("give --estimator-base-url (the probability-estimator LLM's server; env "
                       "ANCHOR_ESTIMATOR_BASE_URL), or --quick to compare the embedded model with itself at another "
                       "seed")
        data, out_dir = _slice("estimator", sl, build, mapping, inference, conn, cache, seed)
        estimator = est.settings(data.settings)
        if (estimator.base_url, estimator.model, estimator.seed) == (data.settings.base_url, data.settings.model,
                                                                      data.settings.seed):
            raise fail("the estimator is the main model with the same seed (same server, model and seed): give "
                       "another --estimator-base-url/--estimator-model, or another --estimator-seed")
        result = _run("estimator", data, out_dir, lambda r: run_estimator_analysis(r, estimator))
        files = write_estimator(result, out_dir)
        _show(result, files, estimator_markdown(result), json_out)
