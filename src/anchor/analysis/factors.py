"""Factor-count analysis (the paper's §5.4 figure): unknown rate and F1 as the factor space grows.

Spaces are built once, at full size; :func:`~anchor.space.truncate.truncate_space` then gives the
space as it stood after its first ``N`` factors in abduction order, for each ``N`` of
:func:`factor_grid` (see that module for what truncation keeps). Evaluating a dataset slice on the
truncated spaces (one evaluation per ``N``, ``RunConfig.max_factors = N``, reusing the full-size
spaces; :mod:`anchor.analysis.runs` does this for ``anchor analyze factors``) gives one
:class:`~anchor.analysis.common.TaskScores` per ``N``, which :func:`factor_count_analysis` collects
into the typed result.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import Field

from anchor.analysis.common import (
    AnalysisFiles,
    AnalysisModel,
    AnalysisResult,
    TaskScores,
    fmt,
    markdown_table,
    pct,
    task_scores,
    write_analysis,
)
from anchor.plots import colours, new_figure, save_figure
from anchor.rundir.records import MetricsReport
from anchor.space.truncate import truncate_space
from anchor.types import FactorSpace

NAME = "factors"


# --------------------------------------------------------------------------- grid


def factor_grid(size: int, *, step: int | None = None, points: int = 8) -> list[int]:
    """Factor counts to evaluate, ``step, 2*step, ...`` up to ``size``, always ending at ``size``.

    ``step`` defaults to ``ceil(size / points)`` (about ``points`` values): 80 factors give
    10, 20, ..., 80 and 16 give 2, 4, ..., 16.
    """
    for what, value in (("size", size), ("points", points)):
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"{what} must be a positive integer, got {value!r}")
    if step is None:
        step = math.ceil(size / points)
    elif isinstance(step, bool) or int(step) != step or step < 1:
        raise ValueError(f"step must be a positive integer, got {step!r}")
    grid = list(range(int(step), int(size), int(step)))
    return [*grid, int(size)]


def space_sizes(spaces: Sequence[FactorSpace]) -> list[int]:
    return [len(s.factors) for s in spaces]


# --------------------------------------------------------------------------- result


class FactorCountPoint(AnalysisModel):
    n_factors: int = Field(description="N: every space truncated to its first N factors (smaller spaces whole).")
    mean_searchable: float | None = Field(
        default=None, description="Mean number of searchable (unpruned) factors per space at this N.")
    spaces_smaller: int = Field(default=0, description="Spaces with fewer than N factors, used whole.")
    scores: TaskScores


class FactorCountAnalysis(AnalysisResult):
    analysis: str = NAME
    dataset: str
    model: str = Field(default="", description="The LLM, as the evaluation recorded it.")
    built_sizes: list[int] = Field(default_factory=list, description="Factors per space as built.")
    points: list[FactorCountPoint]
    notes: list[str] = Field(default_factory=list)


def factor_count_analysis(dataset: str, reports: Mapping[int, MetricsReport],
                          spaces: Sequence[FactorSpace] = (), model: str = "") -> FactorCountAnalysis:
    """Collect one evaluation per factor count ``N`` (``reports[N]``) into the typed result.

    ``spaces`` are the full-size spaces the slice was evaluated on; with them each point also says
    how many factors were searchable on average and how many spaces were smaller than ``N``.
    """
    if not reports:
        raise ValueError("no evaluations given: pass one metrics report per factor count")
    kinds = {r.kind for r in reports.values()}
    if len(kinds) > 1:
        raise ValueError(f"the evaluations mix task kinds {sorted(kinds)}; use one dataset")
    points = []
    for n in sorted(reports):
        if isinstance(n, bool) or int(n) != n or n < 1:
            raise ValueError(f"factor counts must be positive integers, got {n!r}")
        searchable = [len(truncate_space(s, n).active_factor_ids()) for s in spaces]
        points.append(FactorCountPoint(
            n_factors=n, mean_searchable=sum(searchable) / len(searchable) if searchable else None,
            spaces_smaller=sum(1 for s in spaces if len(s.factors) < n), scores=task_scores(reports[n])))
    notes = []
    if any(p.scores.small_model for p in points):
        notes.append("Numbers from the embedded 135M model: they show the analysis runs, not the method's accuracy.")
    notes.append("Spaces are built once and truncated to their first N factors by abduction order; clusters and "
                 "themes are those of the full build.")
    return FactorCountAnalysis(dataset=dataset, model=model, built_sizes=space_sizes(spaces), points=points,
                               notes=notes)


# --------------------------------------------------------------------------- outputs


def factor_count_markdown(result: FactorCountAnalysis) -> list[str]:
    pairwise = bool(result.points) and result.points[0].scores.kind == "pairwise"
    metric = result.points[0].scores.metric if result.points else "score"
    headers = ["N factors", "searchable (mean)", "unknown rate", metric]
    if pairwise:
        headers += [f"F1 {label}" for label in ("Context1", "Context2", "Same")]
    rows = []
    for p in result.points:
        row = [str(p.n_factors), fmt(p.mean_searchable, 1), pct(p.scores.unknown_rate), fmt(p.scores.score)]
        if pairwise:
            row += [fmt(p.scores.per_class_f1.get(label)) for label in ("Context1", "Context2", "Same")]
        rows.append(row)
    lines = [f"# Factor count: {result.dataset}" + (f" ({result.model})" if result.model else ""), ""]
    if result.built_sizes:
        lines += [f"{len(result.built_sizes)} space(s) built with {min(result.built_sizes)}–{max(result.built_sizes)} "
                  "factors.", ""]
    lines += markdown_table(headers, rows)
    lines += [""] + [f"- {n}" for n in result.notes]
    return lines


def plot_factor_count(result: FactorCountAnalysis, path: Path) -> None:
    """Unknown rate and F1 (per class, dashed, for pairwise data) against the number of factors."""
    fig = new_figure(7.0, 4.5)
    ax = fig.subplots()
    xs = [p.n_factors for p in result.points]
    palette = colours(5)

    def series(values: list[float | None]) -> tuple[list[int], list[float]]:
        pairs = [(x, v) for x, v in zip(xs, values, strict=True) if v is not None]
        return [x for x, _ in pairs], [v for _, v in pairs]

    ax.plot(*series([p.scores.unknown_rate for p in result.points]), marker="o", color=palette[3],
            label="unknown rate")
    metric = result.points[0].scores.metric if result.points else "score"
    ax.plot(*series([p.scores.score for p in result.points]), marker="s", color=palette[0],
            label=metric.replace("_", " "))
    if result.points and result.points[0].scores.kind == "pairwise":
        for label, colour in zip(("Context1", "Context2", "Same"), (palette[1], palette[2], palette[4]), strict=True):
            ax.plot(*series([p.scores.per_class_f1.get(label) for p in result.points]), linestyle="--",
                    linewidth=1, marker=".", color=colour, label=f"F1 {label}")
    ax.set_xlabel("number of factors (first N by abduction order)")
    ax.set_ylabel("rate / score")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xticks(xs)
    title = f"Unknown rate and F1 as the number of factors grows ({result.dataset})"
    if any(p.scores.small_model for p in result.points):
        title += "\n(embedded 135M model: pipeline check only)"
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    save_figure(fig, path)


def write_factor_count(result: FactorCountAnalysis, out_dir: Path | str) -> AnalysisFiles:
    """``factors.json``, ``factors.md`` and ``factors.png`` in ``out_dir``."""
    return write_analysis(NAME, result, factor_count_markdown(result), lambda p: plot_factor_count(result, p),
                          out_dir, "Unknown rate and F1 against the number of factors")
