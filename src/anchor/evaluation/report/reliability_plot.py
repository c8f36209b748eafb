"""``reliability.png``: the reliability diagram of every run with calibration data."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from anchor.evaluation.report.markdown import number
from anchor.evaluation.report.names import SMALL_MARK
from anchor.evaluation.report.runs import ReportedRun
from anchor.plots import colours, new_figure, save_figure


def _bins(r: ReportedRun) -> list[tuple[float, float, int]]:
    """(mean confidence, observed frequency, count) of the non-empty reliability bins."""
    out = []
    for b in (r.m.calibration or {}).get("reliability") or []:
        conf = number(b.get("mean_confidence"))
        obs = number(b.get("observed", b.get("observed_frequency")))
        count = int(b.get("count") or 0)
        if conf is not None and obs is not None and count > 0:
            out.append((conf, obs, count))
    return out


def plot_reliability(runs: Sequence[ReportedRun], glabels: dict[int, str], path: Path) -> str | None:
    data = [(r, _bins(r)) for r in runs]
    data = [(r, b) for r, b in data if b]
    if not data:
        return "no run has reliability bins with data (no calibration recorded, or every prediction unknown)"
    fig = new_figure(7.5, 6.0)
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="perfect calibration")
    palette = colours(len(data))
    biggest = max(c for _, b in data for _, _, c in b)
    for i, (r, bins) in enumerate(data):
        conf, obs, counts = zip(*sorted(bins), strict=True)
        cal = r.m.calibration or {}
        ece = number(cal.get("ece"))
        label = glabels[id(r)] + (f" (ECE {ece:.3f})" if ece is not None else "")
        if r.small:
            label += " (135M embedded)"
        ax.plot(conf, obs, color=palette[i], linewidth=1.2, alpha=0.8)
        sizes = [20 + 180 * c / biggest for c in counts]
        ax.scatter(conf, obs, s=sizes, color=palette[i], alpha=0.8, edgecolors="black", linewidths=0.4,
                   label=label)
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.03, 1.03)
    ax.set_aspect("equal")
    ax.set_xlabel("mean predicted probability in bin")
    ax.set_ylabel("observed frequency in bin")
    title = "Reliability diagram (marker area ∝ instances in bin)"
    if any(r.small for r, _ in data):
        title += f"\n{SMALL_MARK} includes embedded 135M-model runs: pipeline check only"
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    save_figure(fig, path)
    return None
