"""The bench's figures (PNG, drawn with anchor.plots: no pyplot): error to the truth against each sweep's
level, a panel per group and a line per method; the map of where ANCHOR is closer to the truth than
asking directly, a heat map per group; and reliability diagrams against the truth at the default errors,
a panel per method (the mean true probability of each bin of the estimate)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from anchor.plots import colours, new_figure, save_figure
from anchor.truth_bench.compare import reliability_bins
from anchor.truth_bench.plan import DEFAULT, DIRECT_METHODS, SWEEP_TITLES, SWEEPS, SweepName
from anchor.truth_bench.report import FIGURE_FILES
from anchor.truth_bench.results import BenchResults

MAX_COLUMNS = 5


def _style(method: str) -> str:
    if method in DIRECT_METHODS:
        return "--"
    if method.endswith("-paper"):
        return "-."
    return ":" if method.startswith("bird") else "-"


def _grid(n: int, width: float, height: float) -> tuple[object, list[object]]:
    cols = min(MAX_COLUMNS, max(1, n))
    rows = -(-n // cols)
    fig = new_figure(width * cols, height * rows)
    axes = fig.subplots(rows, cols, squeeze=False)
    flat = [axes[i // cols][i % cols] for i in range(rows * cols)]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _methods(results: BenchResults) -> list[str]:
    return [m for m in results.plan.methods
            if any((c := results.cell(g, DEFAULT, m)) is not None and c.scores is not None for g in results.groups)]


def sweep_figure(results: BenchResults, sweep: SweepName, path: Path) -> Path:
    plan = results.plan
    levels = plan.levels[sweep]
    groups = [g for g in results.groups
              if sum((c := results.cell(g, plan.setting_of(sweep, t), "anchor")) is not None and c.scores is not None
                     for t in levels) > 1]
    methods = _methods(results)
    fig, axes = _grid(max(1, len(groups)), 3.6, 3.3)
    palette = dict(zip(methods, colours(len(methods)), strict=True))
    for ax, g in zip(axes, groups, strict=False):
        for m in methods:
            xs, ys = [], []
            for t in levels:
                cell = results.cell(g, plan.setting_of(sweep, t), m)
                if cell is not None and cell.scores is not None and cell.scores.mae.value is not None:
                    xs.append(t)
                    ys.append(cell.scores.mae.value)
            if len(xs) > 1:
                ax.plot(xs, ys, _style(m), marker="o", markersize=3, color=palette[m], label=m, linewidth=1.3)
        ax.axvline(1.0, color="0.8", linewidth=0.8, zorder=0)
        ax.set_title(g, fontsize=9)
        ax.set_xlabel("level t (1 = defaults)", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    if groups:
        axes[0].set_ylabel("mean |p - p_true| (answered cases)", fontsize=7)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=min(6, max(1, len(labels))))
    fig.suptitle(f"Error to the truth along the '{sweep}' sweep: {SWEEP_TITLES[sweep]}", fontsize=9)
    fig.subplots_adjust(bottom=0.18, hspace=0.45)
    save_figure(fig, path)
    return path


def map_figure(results: BenchResults, path: Path) -> Path:
    """A heat map per group: ANCHOR at factor-error level (columns) minus vanilla at direct-error level (rows),
    error to the truth; blue where ANCHOR is closer, red where farther, a dot where the interval decides."""
    plan = results.plan
    direct, factor = list(plan.levels.get("direct", ())), list(plan.levels.get("factor", ()))
    groups = [g for g in results.groups if any(c.group == g for c in results.map)]
    fig, axes = _grid(max(1, len(groups)), 2.9, 2.7)
    values = [abs(c.diff) for c in results.map if c.diff is not None]
    scale = max(values) if values else 1.0
    image = None
    for ax, g in zip(axes, groups, strict=False):
        grid = np.full((len(direct), len(factor)), np.nan)
        for c in results.map:
            if c.group == g and c.diff is not None:
                i, j = direct.index(c.direct), factor.index(c.factor)
                grid[i, j] = c.diff
                if c.better or c.worse:  # the interval decides
                    ax.plot(j, i, "o", color="black", markersize=3)
        image = ax.imshow(grid, cmap="RdBu_r", vmin=-scale, vmax=scale, origin="lower", aspect="auto")
        ax.set_xticks(range(len(factor)), [f"{f:g}" for f in factor], fontsize=7)
        ax.set_yticks(range(len(direct)), [f"{d:g}" for d in direct], fontsize=7)
        ax.set_xlabel("factor-level error f", fontsize=7)
        ax.set_ylabel("direct error d", fontsize=7)
        ax.set_title(g, fontsize=9)
    fig.subplots_adjust(hspace=0.55, wspace=0.4, top=0.88)
    if image is not None:
        bar = fig.colorbar(image, ax=axes, shrink=0.8)
        bar.set_label("ANCHOR minus vanilla, error to the truth", fontsize=7)
        bar.ax.tick_params(labelsize=7)
    fig.suptitle("Where ANCHOR is closer to the truth than asking directly (blue; a dot: the 95% interval over "
                 "worlds and cases decides)", fontsize=9)
    save_figure(fig, path)
    return path


def reliability_figure(results: BenchResults, path: Path) -> Path:
    methods = _methods(results)
    groups = list(results.groups)
    fig, axes = _grid(max(1, len(methods)), 2.6, 2.7)
    palette = dict(zip(groups, colours(len(groups)), strict=True))
    for i, (ax, m) in enumerate(zip(axes, methods, strict=False)):
        ax.plot([0, 1], [0, 1], color="0.6", linewidth=0.8)
        for g in groups:
            cell = results.cell(g, DEFAULT, m)
            if cell is None or cell.scores is None:
                continue
            bins = reliability_bins(cell.p, [c.p_true for c in results.cases[g]])
            if bins:
                ax.scatter([b[0] for b in bins], [b[1] for b in bins], s=[6 + 3 * b[2] for b in bins],
                           color=palette[g], alpha=0.7, label=g, edgecolors="none")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_title(m, fontsize=9)
        ax.tick_params(labelsize=7)
        if i % MAX_COLUMNS == 0:
            ax.set_ylabel("mean p_true in the bin", fontsize=7)
        ax.set_xlabel("mean estimate in the bin", fontsize=7)
    if methods:
        axes[0].legend(fontsize=5, loc="upper left")
    fig.suptitle("Reliability against the truth at the default errors (dot size: cases in the bin)", fontsize=9)
    save_figure(fig, path)
    return path


def write_figures(results: BenchResults, out: Path) -> list[Path]:
    paths = [sweep_figure(results, sweep, out / FIGURE_FILES[sweep]) for sweep in SWEEPS if sweep in results.plan.levels]
    paths.append(map_figure(results, out / FIGURE_FILES["map"]))
    paths.append(reliability_figure(results, out / FIGURE_FILES["reliability"]))
    return paths
