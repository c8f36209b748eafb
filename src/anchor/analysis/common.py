"""What the four analyses share: the scores read off an evaluation, and how results are written.

Every analysis writes three files into its output directory, all named after the analysis:
``<name>.json`` (the typed result model), ``<name>.md`` (a Markdown table, with the figure
embedded) and ``<name>.png`` (the figure). Figures are drawn on :class:`matplotlib.figure.Figure`
objects rendered by the Agg canvas directly, never through ``pyplot``, as in
:mod:`anchor.evaluation.report`: nothing global is touched and no display is needed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from anchor.files import write_atomic
from anchor.rundir.records import Kind, MetricsReport

#: The headline score of each kind of task, as in the evaluation report.
HEADLINE_METRIC: dict[str, str] = {"pairwise": "f1_micro", "decision": "accuracy", "factcheck": "balanced_accuracy"}
#: Per-class F1 of the pairwise task (Common2Sense), with the paper's column names.
PAIRWISE_CLASSES: tuple[tuple[str, str], ...] = (
    ("f1_context1", "Context1"), ("f1_context2", "Context2"), ("f1_same", "Same"),
)
METRIC_LABELS: dict[str, str] = {
    "f1_micro": "F1 (micro avg)", "accuracy": "accuracy", "balanced_accuracy": "balanced accuracy",
}
DASH = "–"


class AnalysisModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


#: The layout of an analysis's ``<name>.json`` (docs/schemas.md); files written before it was recorded are 1.
ANALYSIS_SCHEMA_VERSION = 1


class AnalysisResult(AnalysisModel):
    """What one analysis writes to ``<name>.json`` (and ``anchor analyze ... --json`` prints)."""

    schema_version: int = Field(default=ANALYSIS_SCHEMA_VERSION, ge=1, le=ANALYSIS_SCHEMA_VERSION, description=(
        "The layout of this file; a newer one is refused by this anchor."))


class TaskScores(AnalysisModel):
    """The numbers an analysis plots for one evaluation run directory (``metrics.json``)."""

    kind: Kind
    n_predictions: int = Field(description="Predictions over all runs (instances x runs).")
    n_unknown: int
    unknown_rate: float | None = Field(description="n_unknown / n_predictions; None when nothing was predicted.")
    metric: str = Field(description="The headline metric: f1_micro (pairwise), accuracy or balanced_accuracy.")
    score: float | None = Field(description="Its mean over runs.")
    per_class_f1: dict[str, float | None] = Field(
        default_factory=dict, description="Pairwise only: F1 of Context1, Context2 and Same (mean over runs).")
    small_model: bool = Field(default=False, description="True when the numbers come from the embedded 135M model.")


def task_scores(report: MetricsReport) -> TaskScores:
    """Unknown rate, headline score and (pairwise) per-class F1 of one evaluation.

    The unknown rate pools the runs: unknown predictions over all predictions. Scores are the
    report's means over runs (for pairwise data over all pairs, an unknown side counting as 0.5).
    """
    n = sum(int(r.get("n") or 0) for r in report.runs)
    unknown = sum(int(r.get("unknown") or 0) for r in report.runs)
    metric = HEADLINE_METRIC[report.kind]
    per_class = {label: _num(report.mean.get(key)) for key, label in PAIRWISE_CLASSES} \
        if report.kind == "pairwise" else {}
    return TaskScores(kind=report.kind, n_predictions=n, n_unknown=unknown,
                      unknown_rate=unknown / n if n else None, metric=metric, score=_num(report.mean.get(metric)),
                      per_class_f1=per_class, small_model=report.small_model)


def _num(value: Any) -> float | None:
    if value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


# --------------------------------------------------------------------------- formatting


def fmt(value: float | None, digits: int = 3) -> str:
    return DASH if value is None else f"{value:.{digits}f}"


def pct(value: float | None, digits: int = 1) -> str:
    return DASH if value is None else f"{100 * value:.{digits}f}%"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str | None = None) -> list[str]:
    """A GitHub Markdown table; ``align`` is one character per column ('l' or 'r'), default: first
    column left, the others right."""
    align = align or "l" + "r" * (len(headers) - 1)
    if len(align) != len(headers) or any(len(r) != len(headers) for r in rows):
        raise ValueError("every table row needs one cell per header")
    rule = ["---" if a == "l" else "---:" for a in align]
    out = ["| " + " | ".join(headers) + " |", "| " + " | ".join(rule) + " |"]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return out


# --------------------------------------------------------------------------- figures


# --------------------------------------------------------------------------- files


class AnalysisFiles(AnalysisModel):
    """The three files one analysis wrote."""

    json_path: Path
    markdown_path: Path
    png_path: Path


def _atomic_write(path: Path, text: str) -> None:
    write_atomic(path, text)  # via a temporary file; the mode follows the umask, as every anchor output


def write_analysis(name: str, result: BaseModel, markdown_lines: Sequence[str], draw: Callable[[Path], None],
                   out_dir: Path | str, title: str) -> AnalysisFiles:
    """Write ``<name>.json``, ``<name>.png`` (drawn by ``draw(path)``) and ``<name>.md`` (the given
    lines with the figure embedded at the end) into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path, png_path = out / f"{name}.json", out / f"{name}.md", out / f"{name}.png"
    _atomic_write(json_path, result.model_dump_json(indent=2))
    draw(png_path)
    lines = [*markdown_lines]
    lines += ["", f"![{title}]({png_path.name})", ""]
    _atomic_write(md_path, "\n".join(lines).rstrip() + "\n")
    return AnalysisFiles(json_path=json_path, markdown_path=md_path, png_path=png_path)


def load_result(path: Path | str, model: type[BaseModel]) -> BaseModel:
    """Read back a ``<name>.json`` written by :func:`write_analysis`, with a one-line error."""
    path = Path(path)
    try:
        return model.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except ValueError as exc:
        first = str(exc).splitlines()[0]
        raise ValueError(f"{path}: not a {model.__name__} result ({first})") from None
