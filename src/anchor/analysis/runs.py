"""Running the analyses: each is a handful of ordinary evaluations, one run directory per cell.

Every cell is an ``anchor eval`` run of ANCHOR on the same dataset slice, written by
:class:`~anchor.evaluation.driver.EvalRunner` under ``OUT/runs/<cell>``: the same resumable
run directories (``config.json``, ``predictions.jsonl``, ``traces.jsonl``, ``calls.jsonl``,
``metrics.json``), the same response cache and progress. Running an analysis again resumes every
cell where it stopped; a finished cell is read back without a request.

Factor spaces are built once, by the first cell, and every other cell reuses them through
``spaces_from`` (``RunConfig.spaces_from``), so the cells differ only in what the analysis
varies:

* **factors**: cell ``full`` builds the spaces; cell ``n<N>`` evaluates them truncated to their
  first ``N`` factors (``RunConfig.max_factors``) for each ``N`` of the grid below the largest
  built size (the largest size is the ``full`` cell itself).
* **retrieval**: cell ``<retriever>-k<K1>-<K2>`` per backend and (K1, K2), with
  ``mapping.retriever``, ``k1`` and ``k2`` set in its ANCHOR configuration.
* **estimator**: cell ``main`` (the main model does everything) and cell ``estimator`` (phi and
  the latent parameters from the second model, ``RunConfig.estimator``). The estimator cell asks
  the main model for the mapping again; with the response cache on (the default) these are the
  main cell's own requests and come back from the cache unchanged, so both cells map every
  condition to the same factors. The result says for how many conditions that held.

The clustering comparison runs no evaluation (it reads stored spaces; see
:mod:`anchor.analysis.clustering`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anchor.analysis.estimator import (
    EstimatorAnalysis,
    collect_phis,
    estimator_analysis,
    estimator_comparison,
)
from anchor.analysis.factors import FactorCountAnalysis, factor_count_analysis, factor_grid
from anchor.analysis.retrieval import DEFAULT_RETRIEVERS, K_SETTINGS, RetrievalAnalysis, retrieval_analysis
from anchor.config import AnchorConfig
from anchor.evaluation.driver import EvalRunner
from anchor.evaluation.run_config import make_run_config
from anchor.llm.settings import LLMSettings
from anchor.progress import ProgressEvent, Reporter, silent
from anchor.rundir import RunDirectory
from anchor.rundir.records import MetricsReport, RunConfig
from anchor.runs.errors import RunError
from anchor.runs.session import RunOptions
from anchor.settings.mapping import RETRIEVER_NAMES
from anchor.space.io import load_space
from anchor.types import FactorSpace, InferenceResult

RUNS_FOLDER = "runs"
#: Grid points of the factor-count analysis: about 8 on a real run, 4 with --quick.
FACTOR_POINTS = 8
QUICK_FACTOR_POINTS = 4


@dataclasses.dataclass
class EvalSlice:
    """What every cell of an analysis shares: the data, the LLM and ANCHOR's settings."""

    dataset: str
    settings: LLMSettings
    anchor_config: AnchorConfig
    data_path: Path | None = None
    limit: int | None = None
    runs: int = 1
    balance_outcomes: bool = False
    negation: str = "template"
    decision_threshold: float = 0.9
    retry_failed: bool = True
    command: str = ""


class AnalysisRunner:
    """Runs the cells of one analysis under ``out_dir/runs``, one :class:`EvalRunner` each."""

    def __init__(self, name: str, data: EvalSlice, out_dir: Path | str, *, report: Reporter = silent) -> None:
        self.name = name
        self.data = data
        self.out_dir = Path(out_dir)
        self.report = report
        self._instances: list[Any] | None = None
        #: The configuration each cell ran with (models resolved), by cell name.
        self.configs: dict[str, RunConfig] = {}

    def run_dir(self, cell: str) -> Path:
        return self.out_dir / RUNS_FOLDER / cell

    def _runner(self, cell: str, *, anchor_config: AnchorConfig | None = None, spaces_from: Path | None = None,
                max_factors: int | None = None, estimator: LLMSettings | None = None) -> EvalRunner:
        d = self.data
        config = anchor_config or d.anchor_config
        run_config = make_run_config(
            dataset=d.dataset, method="anchor", data_path=d.data_path, ablations=config.active_ablations(),
            limit=d.limit, runs=d.runs, seed=d.settings.seed, settings=d.settings, anchor_config=config,
            negation=d.negation, decision_threshold=d.decision_threshold, balance_outcomes=d.balance_outcomes,
            spaces="shared", spaces_from=spaces_from, command=d.command, max_factors=max_factors,
            estimator=estimator, spaces_relative_to=self.run_dir(cell) if spaces_from is not None else None)

        def relabel(event: ProgressEvent) -> None:
            self.report(dataclasses.replace(event, stage=f"{self.name}: {cell}"))

        return EvalRunner(run_config, self.run_dir(cell), RunOptions(d.settings, config, estimator_settings=estimator),
                          report=relabel, retry_failed=d.retry_failed)

    def load_instances(self) -> list[Any]:
        """The slice's instances, read once (a broken data file fails here, before any request)."""
        if self._instances is None:
            self._instances = self._runner("check").load_instances()
        return self._instances

    async def evaluate(self, cell: str, **kwargs: Any) -> MetricsReport:
        """One cell: evaluate the slice (or resume it) and return its metrics."""
        runner = self._runner(cell, **kwargs)
        report = await runner.run(self.load_instances())
        self.configs[cell] = runner.config
        return report

    def built_spaces(self, cell: str) -> list[FactorSpace]:
        folder = RunDirectory(self.run_dir(cell)).artefacts()
        return [load_space(p) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


# --------------------------------------------------------------------------- factors


async def run_factor_analysis(runner: AnalysisRunner, *, points: int = FACTOR_POINTS,
                              step: int | None = None) -> FactorCountAnalysis:
    """Build the spaces once (cell ``full``), then evaluate them at each smaller size of the grid."""
    full = await runner.evaluate("full")
    spaces = runner.built_spaces("full")
    if not spaces:
        raise RunError(f"no factor space could be built (see {RunDirectory(runner.run_dir('full')).metrics_path}, "
                        "'failures'); nothing to truncate")
    largest = max(len(s.factors) for s in spaces)
    grid = factor_grid(largest, step=step, points=points)
    reports: dict[int, MetricsReport] = {}
    for n in grid:
        if n >= largest:
            reports[n] = full
        else:
            reports[n] = await runner.evaluate(f"n{n}", spaces_from=runner.run_dir("full"), max_factors=n)
    result = factor_count_analysis(runner.data.dataset, reports, spaces, model=str(full.llm.get("model") or ""))
    result.notes.append(f"Run directories, in the analysis's folder: {RUNS_FOLDER}/full (the spaces as built, N = "
                        f"{largest}) and {RUNS_FOLDER}/n<N> (the same spaces truncated).")
    return result


# --------------------------------------------------------------------------- retrieval


def retrieval_cell(retriever: str, k1: int, k2: int) -> str:
    return f"{retriever}-k{k1}-{k2}"


async def run_retrieval_analysis(runner: AnalysisRunner, *, retrievers: Sequence[str] = DEFAULT_RETRIEVERS,
                                 k_settings: Sequence[tuple[int, int]] = K_SETTINGS) -> RetrievalAnalysis:
    """Every backend crossed with every (K1, K2) on the same spaces (built by the first cell)."""
    unknown = [r for r in retrievers if r not in RETRIEVER_NAMES]
    if unknown:
        raise RunError(f"unknown retriever {unknown[0]!r}; choose from {', '.join(RETRIEVER_NAMES)}")
    if not retrievers or not k_settings:
        raise RunError("the retrieval analysis needs at least one retriever and one (K1, K2) setting")
    base = runner.data.anchor_config
    first: Path | None = None
    reports: dict[tuple[str, int, int], MetricsReport] = {}
    for k1, k2 in k_settings:
        for name in dict.fromkeys(retrievers):
            config = base.model_copy(update={"mapping": base.mapping.model_copy(
                update={"k1": k1, "k2": k2, "retriever": name})})
            cell = retrieval_cell(name, k1, k2)
            reports[(name, k1, k2)] = await runner.evaluate(cell, anchor_config=config, spaces_from=first)
            first = first or runner.run_dir(cell)
    model = str(next(iter(reports.values())).llm.get("model") or "")
    result = retrieval_analysis(runner.data.dataset, reports, model=model)
    result.notes.append(f"Run directories, in the analysis's folder: {RUNS_FOLDER}/<retriever>-k<K1>-<K2>; the "
                        f"spaces were built by {first.name if first else '-'} and reused by the others.")
    return result


# --------------------------------------------------------------------------- estimator


class NothingToCompare(RunError):
    """The estimator analysis ran to its end, but no condition got a factor with a phi: a result of the slice
    (another attempt would ask the same), not a failure."""


def read_traces(run_dir: Path) -> dict[tuple[int, str, int], InferenceResult]:
    """The last trace of every (run, instance, side) of a run directory (a retried instance
    appends new traces; the last one is the one its prediction used)."""
    traces, _ = RunDirectory(run_dir, error=RunError).anchor_traces()
    return {(run, iid, side): t.result for (run, iid), sides in traces.items() for side, t in sides.items()}


def same_mapping(a: InferenceResult, b: InferenceResult) -> bool:
    return a.mapping is not None and b.mapping is not None and a.mapping.mapped == b.mapping.mapped


async def run_estimator_analysis(runner: AnalysisRunner, estimator: LLMSettings) -> EstimatorAnalysis:
    """The main model alone (cell ``main``), then with phi and the latent parameters from ``estimator``
    on the same spaces and mapping (cell ``estimator``); both task scores and the phi statistics."""
    main = await runner.evaluate("main")
    other = await runner.evaluate("estimator", spaces_from=runner.run_dir("main"), estimator=estimator)
    main_traces, other_traces = read_traces(runner.run_dir("main")), read_traces(runner.run_dir("estimator"))
    main_phis = collect_phis(main_traces.values())
    other_phis = collect_phis(other_traces.values())
    if not main_phis or not other_phis:
        cell = "main" if not main_phis else "estimator"
        which = "main model" if not main_phis else "estimator"
        metrics = RunDirectory(runner.run_dir(cell)).metrics_path
        if main.n_failed or other.n_failed:  # another attempt asks the failed ones again
            raise RunError(f"the {which} gave no factor a phi on this slice (every condition unknown or failed; "
                            f"see {metrics}): nothing to compare; run it again to retry the failed ones")
        raise NothingToCompare(f"the {which} gave no factor a phi on this slice: every condition of its "
                               f"{len(runner.load_instances())} instance(s) was unknown and none failed (see "
                               f"{RUNS_FOLDER}/{cell}/metrics.json in the analysis's folder); a larger slice may "
                               "have some")
    main_model = str(main.llm.get("model") or "")
    estimator_model = str((runner.configs["estimator"].estimator or {}).get("model") or estimator.model or "")
    comparison = estimator_comparison(runner.data.dataset, main, other, main_phis, other_phis,
                                      main_model=main_model, estimator_model=estimator_model)
    result = estimator_analysis([comparison])
    shared = [k for k in main_traces if k in other_traces]
    same = sum(same_mapping(main_traces[k], other_traces[k]) for k in shared)
    result.notes.append(f"Mapping: {same} of {len(shared)} condition(s) answered by both cells were mapped to the "
                        "same factors (the estimator cell's mapping requests are the main cell's, answered from "
                        "the response cache; with --no-cache a sampling server may map differently).")
    if estimator.base_url is None:
        result.notes.append("The estimator is the embedded 135M model (another seed): the comparison shows the "
                            "analysis runs, not how two real models differ.")
    result.notes.append(f"Run directories, in the analysis's folder: {RUNS_FOLDER}/main and {RUNS_FOLDER}/estimator.")
    return result

