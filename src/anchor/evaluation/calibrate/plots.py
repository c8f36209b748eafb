"""The PNGs of ``anchor calibrate report``: reliability before and after, and risk against coverage."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anchor.evaluation.calibrate.evaluate import RAW, GroupResult
from anchor.plots import colours, new_figure, save_figure

SMALL = "embedded 135M model: a pipeline check, not evidence"


def _points(bins: list[dict[str, Any]]) -> tuple[list[float], list[float], list[int]]:
    used = [b for b in bins if b["count"]]
    return ([b["mean_confidence"] for b in used], [b["observed_frequency"] for b in used],
            [b["count"] for b in used])


def _diagonal(ax: Any) -> None:
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1)
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.03, 1.03)
    ax.set_aspect("equal")
    ax.grid(alpha=0.3)
    ax.set_xlabel("mean P(O1) in bin")


def plot_reliability(group: GroupResult, path: Path) -> None:
    """Two panels: the raw probabilities, and every calibrator's out-of-fold ones (ten equal-width bins)."""
    fig = new_figure(11.0, 5.2)
    before, after = fig.subplots(1, 2)
    counts = [c for bins in group.reliability.values() for c in _points(bins)[2]] or [1]
    biggest = max(counts)
    raw = group.scores.get(RAW) or {}
    x, y, c = _points(group.reliability[RAW])
    before.plot(x, y, color="black", linewidth=1.2)
    before.scatter(x, y, s=[20 + 180 * n / biggest for n in c], color="black", alpha=0.7,
                   label=f"raw (ECE {raw.get('ece') or 0:.3f})")
    _diagonal(before)
    before.set_ylabel("share with O1 the gold outcome")
    before.set_title("before: the method's own P(O1)")
    before.legend(fontsize=8, loc="upper left")
    kinds = [k for k in group.reliability if k != RAW]
    for colour, kind in zip(colours(max(1, len(kinds))), kinds, strict=False):
        x, y, c = _points(group.reliability[kind])
        ece = (group.scores.get(kind) or {}).get("ece")
        after.plot(x, y, color=colour, linewidth=1.2, alpha=0.85)
        after.scatter(x, y, s=[20 + 180 * n / biggest for n in c], color=colour, alpha=0.7,
                      label=f"{kind} (ECE {ece or 0:.3f})")
    _diagonal(after)
    after.set_title(f"after: out-of-fold ({group.n_folds or 0} folds by scenario)")
    if kinds:
        after.legend(fontsize=8, loc="upper left")
    else:
        after.text(0.5, 0.5, "not cross-validated\n(fewer than two scenarios)", ha="center", va="center")
    title = f"{group.dataset} · {group.method} · {group.model}: {group.n_answered} answered of {len(group.members)}"
    if group.small_model:
        title += f"\n{SMALL}"
    fig.suptitle(title)
    save_figure(fig, path)


def plot_risk_coverage(curves: Sequence[tuple[str, dict[str, Any]]], dataset: str, path: Path,
                       small: bool = False) -> None:
    """Accuracy of the answered instances against the share answered, one step curve per run."""
    fig = new_figure(7.5, 5.5)
    ax = fig.subplots()
    for colour, (name, curve) in zip(colours(max(1, len(curves))), curves, strict=False):
        pts = curve["points"]
        if not pts:
            continue
        xs = [0.0] + [p["coverage"] for p in pts]
        ys = [pts[0]["accuracy"]] + [p["accuracy"] for p in pts]
        aurc = curve["aurc"]
        ax.step(xs, ys, where="pre", color=colour, linewidth=1.4,
                label=f"{name} (AURC {aurc:.3f}, max coverage {curve['max_coverage']:.2f})")
        ax.scatter([xs[-1]], [ys[-1]], color=colour, s=25)
    ax.set_xlim(0, 1.02)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("coverage (share of instances answered)")
    ax.set_ylabel("accuracy of the answered instances")
    title = f"{dataset}: risk-coverage (answer iff max(P(O1), P(O2)) >= tau)"
    if small:
        title += f"\n{SMALL}"
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    save_figure(fig, path)
