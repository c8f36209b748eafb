"""The report's section of scores against the truth, for runs whose predictions carry ``p_true``
(``anchor predict`` on the cases of ``anchor truth make``), beside the label-based scores."""

from __future__ import annotations

from collections.abc import Sequence

from anchor.evaluation.report.markdown import md_table
from anchor.evaluation.report.names import DASH
from anchor.evaluation.report.runs import ReportedRun, row_labels
from anchor.scoring.truth import run_truth_scores
from anchor.truth.scores import Figure, TruthScores

#: (column, figure) of the table, in order.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("MAE", "mae"), ("RMSE", "rmse"), ("KL", "kl"), ("Cross-ent.", "cross_entropy"),
    ("Brier (truth)", "brier_truth"), ("Brier (labels)", "brier_labels"), ("ECE (labels)", "ece_labels"),
    ("Bayes decision", "decision_accuracy"),
)


def figure_cell(figure: Figure, *, percent: bool = False) -> str:
    if figure.value is None:
        return DASH
    return f"{figure.value * 100:.1f}%" if percent else f"{figure.value:.3f}"


def truth_section(runs: Sequence[ReportedRun]) -> list[str]:
    """Each run with a true probability on its rows: how far its P(O1) is from the truth. Empty when none has."""
    scored: list[tuple[ReportedRun, TruthScores]] = []
    for r in sorted(runs, key=ReportedRun.sort_key):
        scores = run_truth_scores(r.loaded.directory)
        if scores is not None:
            scored.append((r, scores))
    if not scored:
        return []
    labels = row_labels([r for r, _ in scored], lambda r: (r.name, r.model))
    header = ["Method", "Model", "Rows", "Answered", "Unknown", "Failed", *(c for c, _ in COLUMNS), "Ties",
              "Requests", "Tokens"]
    rows = []
    for r, s in scored:
        cells = [figure_cell(getattr(s, key), percent=key == "decision_accuracy") for _, key in COLUMNS]
        rows.append([labels[id(r)], r.model_cell, str(s.n), str(s.answered), str(s.unknown), str(s.failed), *cells,
                     str(s.decision_ties), DASH if s.requests is None else f"{s.requests:,}",
                     DASH if s.tokens is None else f"{s.tokens:,}"])
    lines = ["## Against the truth", ""]
    lines += md_table(header, rows, ["l", "l"] + ["r"] * (len(header) - 2))
    lines.append("")
    notes = [
        "Rows: the run's rows that carry a true probability (p_true). MAE, RMSE, KL(truth ‖ estimate), "
        "cross-entropy (nats) and Brier (truth) are over the Answered rows; the estimate is clipped to "
        "[1e-6, 1 − 1e-6] for KL and cross-entropy. Brier and ECE (labels) are over the answered rows with a "
        "label drawn from the truth. Bayes decision: how often the estimate falls on the same side of 0.5 as "
        "the truth, over the answered rows that are not Ties (an estimate of exactly 0.5, or a truth of 0.5).",
    ]
    if len({s.n for _, s in scored}) > 1:
        notes.append("Each run is scored over its own rows with a true probability (their numbers differ).")
    for r, s in scored:
        missing = [f"{column} ({getattr(s, key).reason})" for column, key in COLUMNS
                   if getattr(s, key).value is None]
        extra = ([f"cost: {s.cost_note}"] if s.cost_note else []) + s.notes
        if missing or extra:
            notes.append(f"{labels[id(r)]}: " + "; ".join([*(f"no {m}" for m in missing), *extra]) + ".")
    lines += [f"- {n}" for n in notes]
    lines.append("")
    return lines
