"""Retrieval analysis (the paper's Appendix A.7): candidate-search backend crossed with (K1, K2).

Each cell is one evaluation of the same dataset slice on the same factor spaces, with ANCHOR built
as ``Anchor(retriever=make_retriever(name), config=...)`` and ``config.mapping.k1/k2`` set to the
cell's pair. :func:`retrieval_analysis` collects the cells' metrics into the typed result; the
figure has one panel per (K1, K2) with unknown rate and per-class F1 per backend, as the paper's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import Field

from anchor.analysis.common import (
    PAIRWISE_CLASSES,
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
from anchor.mapping.retrievers import RETRIEVER_NAMES
from anchor.plots import colours, new_figure, save_figure
from anchor.rundir.records import MetricsReport

NAME = "retrieval"
#: The paper's (K1, K2) settings; (3, 5) is the default the main results use.
K_SETTINGS: tuple[tuple[int, int], ...] = ((2, 3), (3, 5), (4, 8))
#: The backends compared by default (FAISS as a flat, exact index; HNSW is available as well).
DEFAULT_RETRIEVERS: tuple[str, ...] = ("knn", "faiss-flat", "bm25")


class RetrievalCell(AnalysisModel):
    retriever: str
    k1: int
    k2: int
    scores: TaskScores


class RetrievalAnalysis(AnalysisResult):
    analysis: str = NAME
    dataset: str
    model: str = ""
    retrievers: list[str]
    k_settings: list[tuple[int, int]]
    cells: list[RetrievalCell]
    notes: list[str] = Field(default_factory=list)

    def cell(self, retriever: str, k1: int, k2: int) -> RetrievalCell | None:
        for c in self.cells:
            if (c.retriever, c.k1, c.k2) == (retriever, k1, k2):
                return c
        return None


def retrieval_analysis(dataset: str, reports: Mapping[tuple[str, int, int], MetricsReport],
                       model: str = "") -> RetrievalAnalysis:
    """Collect ``reports[(retriever, k1, k2)]`` (one evaluation each) into the typed result.

    Retriever names are those of :data:`~anchor.mapping.retrievers.RETRIEVER_NAMES`; rows and
    panels follow the order of first appearance.
    """
    if not reports:
        raise ValueError("no evaluations given: pass one metrics report per (retriever, k1, k2)")
    kinds = {r.kind for r in reports.values()}
    if len(kinds) > 1:
        raise ValueError(f"the evaluations mix task kinds {sorted(kinds)}; use one dataset")
    retrievers: list[str] = []
    settings: list[tuple[int, int]] = []
    cells = []
    for key, report in reports.items():
        try:
            name, k1, k2 = key
        except (TypeError, ValueError):
            raise ValueError(f"report keys must be (retriever, k1, k2), got {key!r}") from None
        if name not in RETRIEVER_NAMES:
            raise ValueError(f"unknown retriever {name!r}; choose from {', '.join(RETRIEVER_NAMES)}")
        for what, value in (("k1", k1), ("k2", k2)):
            if isinstance(value, bool) or int(value) != value or value < 1:
                raise ValueError(f"{what} must be a positive integer, got {value!r}")
        if name not in retrievers:
            retrievers.append(name)
        if (k1, k2) not in settings:
            settings.append((int(k1), int(k2)))
        cells.append(RetrievalCell(retriever=name, k1=k1, k2=k2, scores=task_scores(report)))
    notes = []
    if any(c.scores.small_model for c in cells):
        notes.append("Numbers from the embedded 135M model: they show the analysis runs, not the method's accuracy.")
    notes.append("Same factor spaces for every cell; only the candidate search and (K1, K2) change. BM25 returns "
                 "only factors sharing a word with the condition, so it can leave a condition without candidates.")
    return RetrievalAnalysis(dataset=dataset, model=model, retrievers=retrievers, k_settings=settings, cells=cells,
                             notes=notes)


def _columns(result: RetrievalAnalysis) -> list[tuple[str, str]]:
    """(header, key) of the score columns: unknown rate, the per-class F1 (pairwise) and the headline."""
    first = result.cells[0].scores
    cols = [("unknown rate", "unknown")]
    if first.kind == "pairwise":
        cols += [(f"F1 {label}", label) for _, label in PAIRWISE_CLASSES]
        cols += [("F1 Avg", "score")]
    else:
        cols += [(first.metric.replace("_", " "), "score")]
    return cols


def _value(scores: TaskScores, key: str) -> float | None:
    if key == "unknown":
        return scores.unknown_rate
    if key == "score":
        return scores.score
    return scores.per_class_f1.get(key)


def retrieval_markdown(result: RetrievalAnalysis) -> list[str]:
    cols = _columns(result)
    lines = [f"# Retrieval backends and (K1, K2): {result.dataset}" + (f" ({result.model})" if result.model else ""),
             ""]
    headers = ["retriever", "K1", "K2", *(h for h, _ in cols)]
    rows = []
    for k1, k2 in result.k_settings:
        for name in result.retrievers:
            c = result.cell(name, k1, k2)
            if c is None:
                continue
            rows.append([name, str(k1), str(k2),
                         *((pct if key == "unknown" else fmt)(_value(c.scores, key)) for _, key in cols)])
    lines += markdown_table(headers, rows, align="lrr" + "r" * len(cols))
    lines += [""] + [f"- {n}" for n in result.notes]
    return lines


def plot_retrieval(result: RetrievalAnalysis, path: Path) -> None:
    """One panel per (K1, K2): grouped bars, one group per measure, one bar per retriever."""
    cols = _columns(result)
    n_panels = len(result.k_settings)
    fig = new_figure(max(5.5, 4.6 * n_panels), 4.3)
    axes = fig.subplots(1, n_panels, sharey=True, squeeze=False)[0]
    palette = colours(len(result.retrievers))
    width = 0.8 / max(1, len(result.retrievers))
    for ax, (k1, k2) in zip(axes, result.k_settings, strict=True):
        for i, name in enumerate(result.retrievers):
            c = result.cell(name, k1, k2)
            heights = [(_value(c.scores, key) if c else None) for _, key in cols]
            xs = [j + (i - (len(result.retrievers) - 1) / 2) * width for j in range(len(cols))]
            ax.bar(xs, [h if h is not None else 0.0 for h in heights], width=width, color=palette[i], label=name)
            for x, h in zip(xs, heights, strict=True):
                if h is None:
                    ax.text(x, 0.01, "n/a", rotation=90, ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(cols)))
        ax.set_xticklabels([h for h, _ in cols], rotation=25, ha="right", fontsize=8)
        ax.set_title(f"K1={k1}, K2={k2}")
        ax.set_ylim(0, 1.05)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    axes[0].set_ylabel("rate / F1")
    axes[-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    title = f"Unknown rate and F1 per retrieval backend ({result.dataset})"
    if any(c.scores.small_model for c in result.cells):
        title += " — embedded 135M model: pipeline check only"
    fig.suptitle(title, fontsize=10)
    save_figure(fig, path)


def write_retrieval(result: RetrievalAnalysis, out_dir: Path | str) -> AnalysisFiles:
    """``retrieval.json``, ``retrieval.md`` and ``retrieval.png`` in ``out_dir``."""
    return write_analysis(NAME, result, retrieval_markdown(result), lambda p: plot_retrieval(result, p), out_dir,
                          "Unknown rate and per-class F1 per retrieval backend and (K1, K2)")
