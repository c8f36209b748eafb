"""The appendix analyses and the factor-count figure of a reproduction, run as ``anchor analyze`` runs
them (:mod:`anchor.analysis.runs`), in ``DIR/analyses/<name>``.

Each writes ``<analysis>.json``, ``.md`` and ``.png`` there, and ``reproduce.json``: the planned
analysis and its inputs, so that a finished one is recognised (and not run again) only when it was
made for the same plan. An estimator analysis whose slice gave no factor a phi (every condition
unknown, none failed) has no result to write: it ends with ``no-result.json``, which says why,
since another attempt would only ask the same questions again.

Their cells read and write the reproduction's shared response cache, so a cell that asks what a
planned run asked (the same slice, model and seed) finds the answer there.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anchor.analysis.clustering import collect_spaces, compare_clustering, write_clustering
from anchor.analysis.estimator import write_estimator
from anchor.analysis.factors import write_factor_count
from anchor.analysis.retrieval import write_retrieval
from anchor.analysis.runs import (
    AnalysisRunner,
    EvalSlice,
    NothingToCompare,
    run_estimator_analysis,
    run_factor_analysis,
    run_retrieval_analysis,
)
from anchor.files import write_atomic
from anchor.llm.settings import LLMSettings
from anchor.progress import Reporter
from anchor.reproduce.plan import PlannedAnalysis
from anchor.runs.errors import RunError

MARKER = "reproduce.json"
NO_RESULT = "no-result.json"
#: The layout of both files (docs/schemas.md); a marker written before it was recorded is read as the same.
BOOKKEEPING_SCHEMA_VERSION = 1


def result_path(folder: Path, analysis: PlannedAnalysis) -> Path:
    return folder / f"{analysis.analysis}.json"


def analysis_done(folder: Path, analysis: PlannedAnalysis, marker: dict[str, Any]) -> bool:
    """True when ``folder`` holds the result of this analysis, made for the same plan (``marker``)."""
    try:
        found = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if isinstance(found, dict):
        found.pop("schema_version", None)  # the file's layout, not what the analysis was made for
    return (result_path(folder, analysis).exists() or (folder / NO_RESULT).exists()) and found == marker


def estimator_itself(folder: Path) -> str | None:
    """The model of an estimator analysis made with the main model as its own estimator (None: another
    model, or not made)."""
    try:
        llm = json.loads((folder / MARKER).read_text(encoding="utf-8"))["llm"]
        model, estimator = llm["model"], llm["estimator"]["model"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return str(model) if model == estimator else None


def no_result(folder: Path) -> str | None:
    """Why a finished analysis has no result (None when it has one, or has not finished)."""
    try:
        return str(json.loads((folder / NO_RESULT).read_text(encoding="utf-8"))["reason"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


async def run_analysis(folder: Path, analysis: PlannedAnalysis, marker: dict[str, Any], *, data: EvalSlice | None,
                       inputs: Sequence[Path] = (), estimator: LLMSettings | None = None,
                       report: Reporter) -> None:
    """Run (or resume) one analysis in ``folder`` and write its files: ``data`` is the slice its cells
    evaluate, ``inputs`` the run directories whose spaces the clustering reads, ``estimator`` the second
    LLM of the estimator analysis."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / NO_RESULT).unlink(missing_ok=True)  # from an attempt made for another plan
    if analysis.analysis == "clustering":
        if not inputs:
            raise RunError("no finished ANCHOR run has factor spaces to cluster")
        write_clustering(compare_clustering(collect_spaces(list(inputs)), report=report), folder)
    else:
        if data is None:
            raise RunError(f"the {analysis.analysis} analysis needs a dataset slice")
        runner = AnalysisRunner(analysis.analysis, data, folder, report=report)
        runner.load_instances()
        if analysis.analysis == "factors":
            write_factor_count(await run_factor_analysis(runner, points=analysis.points or 8), folder)
        elif analysis.analysis == "retrieval":
            write_retrieval(await run_retrieval_analysis(runner), folder)
        else:
            if estimator is None:
                raise RunError("the estimator analysis needs --estimator-base-url (or --quick)")
            try:
                write_estimator(await run_estimator_analysis(runner, estimator), folder)
            except NothingToCompare as exc:
                result_path(folder, analysis).unlink(missing_ok=True)
                write_atomic(folder / NO_RESULT, json.dumps({"schema_version": BOOKKEEPING_SCHEMA_VERSION,
                                                             "reason": str(exc)}, indent=2))
    write_atomic(folder / MARKER, json.dumps({"schema_version": BOOKKEEPING_SCHEMA_VERSION, **marker}, indent=2))
