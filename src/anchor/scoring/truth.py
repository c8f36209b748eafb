"""A run directory's scores against the truth (:mod:`anchor.truth.scores`), from its predictions alone.

``anchor predict`` keeps each row's ``p_true`` (the cases file's true probability, as the cases of
``anchor truth make`` carry it) in ``predictions.jsonl``, so a finished run is scored without its
cases file. Cost (requests and tokens) comes from ``metrics.json``, written when the run finishes.
"""

from __future__ import annotations

from pathlib import Path

from anchor.rundir import RunDirectory
from anchor.rundir.records import Prediction
from anchor.truth.scores import RowStatus, TruthRow, TruthScores, score_against_truth


def truth_rows(predictions: list[Prediction]) -> list[TruthRow]:
    """The predictions that carry a true probability, as rows to score (the last one of each (run, id))."""
    latest = {(p.run, p.id): p for p in predictions}
    rows = []
    for pred in latest.values():
        if pred.p_true is None:
            continue
        status: RowStatus = "failed" if pred.status == "failed" else "ok" if pred.p_outcome1 is not None else "unknown"
        rows.append(TruthRow(p_true=pred.p_true, p=pred.p_outcome1 if status == "ok" else None, status=status,
                             label=pred.label if pred.label in (1, 2) else None))
    return rows


def run_truth_scores(run: RunDirectory | Path | str) -> TruthScores | None:
    """The run's scores against the truth; None when no prediction of it carries ``p_true``."""
    directory = run if isinstance(run, RunDirectory) else RunDirectory(run)
    directory.require()
    predictions = list(directory.iter_predictions(without_cost=True))
    rows = truth_rows(predictions)
    if not rows:
        return None
    requests = tokens = None
    cost_note = None
    if directory.has_metrics():
        total = directory.read_metrics().cost.get("total")
        if total is not None:
            requests = total.logical_requests if total.logical_requests is not None else total.llm_calls
            tokens = total.prompt_tokens + total.completion_tokens
        else:
            cost_note = "metrics.json records no total cost"
    else:
        cost_note = "the run has not finished (no metrics.json yet)"
    scores = score_against_truth(rows, requests=requests, tokens=tokens, cost_note=cost_note)
    without = sum(1 for p in {(q.run, q.id): q for q in predictions}.values() if p.p_true is None)
    if without:
        scores.notes.append(f"{without} prediction(s) without a true probability are left out")
    return scores
