"""``cost_per_stage.png``: LLM requests, tokens and wall time per stage, one bar per run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from anchor.evaluation.report.cost_table import stage_costs, stage_sort_key, tokens_of
from anchor.evaluation.report.names import SMALL_MARK
from anchor.evaluation.report.runs import ReportedRun
from anchor.plots import colours, new_figure, save_figure
from anchor.types import StageCost


def plot_cost(runs: Sequence[ReportedRun], glabels: dict[int, str], path: Path) -> str | None:
    """Grouped bars per stage (requests, tokens, seconds), one colour per run. Returns a skip reason or None.

    Requests are logical requests; where a run's report was written before they were counted, every run's
    attempts are drawn instead (so that the bars stay comparable), and the axis says so."""
    data = [(r, dict(stage_costs(r))) for r in runs if stage_costs(r)]
    if not any(c.llm_calls or tokens_of(c) or c.wall_seconds for _, st in data for c in st.values()):
        return "no run recorded any LLM calls, tokens or time per stage (no cost data, or fully cached runs)"
    stages = sorted({s for _, st in data for s in st}, key=stage_sort_key)
    known = all(c.logical_requests is not None for _, st in data for c in st.values())
    metrics: list[tuple[str, Callable[[StageCost], float]]] = [
        ("LLM requests", lambda c: c.logical_requests or 0) if known else
        ("LLM attempts (retries included)", lambda c: c.llm_calls),
        ("tokens (prompt + completion)", lambda c: tokens_of(c)),
        ("wall seconds", lambda c: c.wall_seconds),
    ]
    n = len(data)
    width = 0.8 / n
    fig = new_figure(max(7.0, 0.9 * len(stages) + 2.5), 8.5)
    axes = fig.subplots(3, 1, sharex=True)
    palette = colours(n)
    xs = list(range(len(stages)))
    for ax, (title, get) in zip(axes, metrics, strict=True):
        for i, (r, st) in enumerate(data):
            heights = [float(get(st[s])) if s in st else 0.0 for s in stages]
            offset = (i - (n - 1) / 2) * width
            label = glabels[id(r)] + (" (135M embedded)" if r.small else "")
            ax.bar([x + offset for x in xs], heights, width=width, color=palette[i], label=label)
        ax.set_ylabel(title)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    axes[-1].set_xticks(xs)
    axes[-1].set_xticklabels(stages, rotation=35, ha="right")
    title = "LLM cost per stage"
    if any(r.small for r, _ in data):
        title += f"\n({SMALL_MARK} embedded 135M-model runs: pipeline check only)"
    axes[0].set_title(title)
    axes[0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    save_figure(fig, path)
    return None
