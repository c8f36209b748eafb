"""The bench's figures (PNG, drawn with anchor.plots: no pyplot): error to the truth against each sweep's
level, a panel per structure and a line per method; and reliability diagrams against the truth at the
default errors, a panel per method (the mean true probability of each bin of the estimate)."""

from __future__ import annotations

from pathlib import Path

from anchor.plots import colours, new_figure, save_figure
from anchor.truth.bench.compare import reliability_bins
from anchor.truth.bench.plan import DIRECT_METHODS, SWEEP_TITLES, SweepName
from anchor.truth.bench.report import FIGURE_FILES
from anchor.truth.bench.results import BenchResults


def _style(method: str) -> str:
    if method in DIRECT_METHODS:
        return "--"
    return ":" if method.startswith("bird") else "-"


def sweep_figure(results: BenchResults, sweep: SweepName, path: Path) -> Path:
    structures = results.plan.structures
    levels = results.plan.levels[sweep]
    methods = [m for m in results.plan.methods
               if any((c := results.cell(s, "default", m)) is not None and c.scores is not None for s in structures)]
    fig = new_figure(4.2 * len(structures), 4.0)
    axes = fig.subplots(1, len(structures), sharey=True, squeeze=False)[0]
    palette = dict(zip(methods, colours(len(methods)), strict=True))
    for ax, s in zip(axes, structures, strict=True):
        for m in methods:
            xs, ys = [], []
            for t in levels:
                cell = results.cell(s, results.plan.setting_of(sweep, t), m)
                if cell is not None and cell.scores is not None and cell.scores.mae.value is not None:
                    xs.append(t)
                    ys.append(cell.scores.mae.value)
            ax.plot(xs, ys, _style(m), marker="o", markersize=3, color=palette[m], label=m, linewidth=1.4)
        ax.axvline(1.0, color="0.8", linewidth=0.8, zorder=0)
        ax.set_title(s)
        ax.set_xlabel("level t (1 = defaults)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("mean |p - p_true| (answered cases)")
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(f"Error to the truth along the '{sweep}' sweep: {SWEEP_TITLES[sweep]}", fontsize=9)
    save_figure(fig, path)
    return path


def reliability_figure(results: BenchResults, path: Path) -> Path:
    structures = results.plan.structures
    methods = [m for m in results.plan.methods
               if any((c := results.cell(s, "default", m)) is not None and c.scores is not None for s in structures)]
    cols = min(5, max(1, len(methods)))
    rows = -(-len(methods) // cols) if methods else 1
    fig = new_figure(2.6 * cols, 2.7 * rows)
    axes = fig.subplots(rows, cols, squeeze=False)
    palette = dict(zip(structures, colours(len(structures)), strict=True))
    for i in range(rows * cols):
        ax = axes[i // cols][i % cols]
        if i >= len(methods):
            ax.set_visible(False)
            continue
        m = methods[i]
        ax.plot([0, 1], [0, 1], color="0.6", linewidth=0.8)
        for s in structures:
            cell = results.cell(s, "default", m)
            if cell is None or cell.scores is None:
                continue
            bins = reliability_bins(cell.p, [c.p_true for c in results.cases[s]])
            if bins:
                ax.scatter([b[0] for b in bins], [b[1] for b in bins], s=[8 + 4 * b[2] for b in bins],
                           color=palette[s], alpha=0.75, label=s, edgecolors="none")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_title(m, fontsize=9)
        ax.tick_params(labelsize=7)
        if i % cols == 0:
            ax.set_ylabel("mean p_true in the bin", fontsize=7)
        if i // cols == rows - 1:
            ax.set_xlabel("mean estimate in the bin", fontsize=7)
    axes[0][0].legend(fontsize=6, loc="upper left")
    fig.suptitle("Reliability against the truth at the default errors (dot size: cases in the bin)", fontsize=9)
    save_figure(fig, path)
    return path


def write_figures(results: BenchResults, out: Path) -> list[Path]:
    paths = [sweep_figure(results, sweep, out / FIGURE_FILES[sweep]) for sweep in ("direct", "factor", "factor_curve")]
    paths.append(reliability_figure(results, out / FIGURE_FILES["reliability"]))
    return paths
