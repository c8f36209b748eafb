"""The bar chart of ``anchor cost --out``: time, tokens and (logical) requests per scenario of
the two runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from anchor.plots import new_figure


def plot(doc: dict[str, Any], path: Path) -> Path:
    """Bar chart like the paper's cost figure: time, tokens and requests per scenario for A and B, each
    bar stacked by phase, the ratio B/A written above B's bar."""
    fig = new_figure(10, 3.6)
    phases = doc["per_scenario"]["phases"]
    phase_colours = {"construction": "#4C72B0", "mapping": "#DD8452", "inference": "#55A868", "baseline": "#8172B3",
               "other": "#937860"}
    who = [doc["a"]["method"] + (f" ({doc['a']['stage']})" if doc["a"]["stage"] else ""),
           doc["b"]["method"] + (f" ({doc['b']['stage']})" if doc["b"]["stage"] else "")]
    for i, (key, title) in enumerate((("seconds", "Time per scenario (s)"), ("tokens", "Tokens per scenario"),
                                      ("requests", "Requests per scenario"))):
        ax = fig.add_subplot(1, 3, i + 1)
        bottoms = [0.0, 0.0]
        for ph, r in phases.items():
            vals = [r["a"][key], r["b"][key]]
            ax.bar([0, 1], vals, bottom=bottoms, color=phase_colours.get(ph, "#999999"), label=ph, width=0.6)
            bottoms = [bottoms[0] + vals[0], bottoms[1] + vals[1]]
        ratio = doc["per_scenario"]["total"]["ratio"][key]
        if ratio is not None:
            ax.text(1, bottoms[1], f"{ratio:.2f}x", ha="center", va="bottom", fontsize=9)
        ax.set_ylim(0, max(bottoms) * 1.15 or 1.0)
        ax.set_xticks([0, 1], who, fontsize=8)
        ax.set_title(title, fontsize=10)
        if i == 0:
            ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path
