"""The bench's figures on arrays: calibration against the truth, paired comparisons of two cells with an
interval that resamples worlds and then the cases within them, the map, crossovers along a sweep, and the
bins of a reliability diagram. Pure and seeded: the same results give the same figures.

Cases of one world share its network, its factor space and the LLM's systematic errors about it, so they
are not independent draws: an interval over cases alone is too narrow when a few worlds decide the mean.
The interval here is a two-stage bootstrap: draw the worlds with replacement, then, within each world
drawn, its cases with replacement; the mean paired difference of each resample weighted by cases.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from anchor.truth.scores import TRUTH_TIE, Figure
from anchor.truth_bench.plan import SweepName
from anchor.truth_bench.results import BenchResults, Comparison, Crossover

#: Equal-width bins of the estimate, as anchor report's ECE.
BINS = 10
#: Bootstrap resamples of a paired comparison, and their seed.
RESAMPLES = 2000
BOOTSTRAP_SEED = 0
#: The standard errors between a difference of 0 and the smallest one found with 80% power at 95%: 1.96 + 0.84.
POWER_FACTOR = 2.8


def _bin_of(p: np.ndarray) -> np.ndarray:
    return np.minimum((p * BINS).astype(int), BINS - 1)


def ece_truth(p: Sequence[float | None], p_true: Sequence[float]) -> Figure:
    """Mean |mean estimate - mean truth| over ten equal-width bins of the estimate, weighted by size, over
    the answered cases."""
    pairs = [(a, t) for a, t in zip(p, p_true, strict=True) if a is not None]
    if not pairs:
        return Figure(value=None, n=0, reason="no case was answered")
    est = np.array([a for a, _ in pairs], dtype=float)
    tru = np.array([t for _, t in pairs], dtype=float)
    bins = _bin_of(est)
    total = 0.0
    for b in np.unique(bins):
        mask = bins == b
        total += mask.sum() * abs(float(est[mask].mean()) - float(tru[mask].mean()))
    return Figure(value=total / len(pairs), n=len(pairs))


def reliability_bins(p: Sequence[float | None], p_true: Sequence[float]) -> list[tuple[float, float, int]]:
    """(mean estimate, mean truth, count) of each non-empty bin of the answered cases' estimates."""
    pairs = [(a, t) for a, t in zip(p, p_true, strict=True) if a is not None]
    if not pairs:
        return []
    est = np.array([a for a, _ in pairs], dtype=float)
    tru = np.array([t for _, t in pairs], dtype=float)
    bins = _bin_of(est)
    return [(float(est[bins == b].mean()), float(tru[bins == b].mean()), int((bins == b).sum()))
            for b in np.unique(bins)]


def decision_score(p: float, truth: float) -> float:
    """1 when ``p`` is on the truth's side of 0.5, 0 on the other, 0.5 at exactly 0.5 (no decision: a coin)."""
    if p == 0.5:
        return 0.5
    return float((p > 0.5) == (truth > 0.5))


def bootstrap_interval(d: np.ndarray, worlds: np.ndarray) -> tuple[float | None, float | None]:
    """The 95% percentile interval of the mean of ``d`` over seeded two-stage resamples: the worlds (the
    labels in ``worlds``), then each drawn world's entries."""
    if d.size < 2:
        return None, None
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    labels = list(dict.fromkeys(worlds.tolist()))
    # Each world's mean under RESAMPLES resamples of its own cases, and its size.
    means = np.empty((len(labels), RESAMPLES))
    sizes = np.empty(len(labels))
    for i, label in enumerate(labels):
        part = d[worlds == label]
        means[i] = part[rng.integers(0, part.size, size=(RESAMPLES, part.size))].mean(axis=1)
        sizes[i] = part.size
    drawn = rng.integers(0, len(labels), size=(RESAMPLES, len(labels)))
    rows = np.arange(RESAMPLES)[:, None]
    totals = (means[drawn, rows] * sizes[drawn]).sum(axis=1) / sizes[drawn].sum(axis=1)
    low, high = np.percentile(totals, [2.5, 97.5])
    return float(low), float(high)


def _pairs(results: BenchResults, groups: str | Sequence[str], a: tuple[str, str], b: tuple[str, str]
           ) -> list[tuple[str, float | None, float | None, float]] | None:
    """(world, a's estimate, b's estimate, truth) of every case of these groups; None when a cell has no run."""
    out = []
    for g in [groups] if isinstance(groups, str) else groups:
        ca, cb = results.cell(g, *a), results.cell(g, *b)
        if ca is None or cb is None or ca.scores is None or cb.scores is None:
            return None
        out += [(case.world, x, y, case.p_true) for case, x, y in zip(results.cases[g], ca.p, cb.p, strict=True)]
    return out


def _comparison(d: np.ndarray, worlds: np.ndarray, groups: str | Sequence[str], a: tuple[str, str],
                b: tuple[str, str]) -> Comparison:
    low, high = bootstrap_interval(d, worlds)
    where = groups if isinstance(groups, str) else "+".join(groups)
    return Comparison(a=a[1], b=b[1], group=where, setting=a[0] if a[0] == b[0] else f"{a[0]} vs {b[0]}",
                      n=int(d.size), worlds=len(set(worlds.tolist())), diff=float(d.mean()) if d.size else None,
                      low=low, high=high)


def compare_cells(results: BenchResults, groups: str | Sequence[str], a: tuple[str, str], b: tuple[str, str]
                  ) -> Comparison | None:
    """The cell (setting, method) ``a`` against the cell ``b``: the mean of |a - t| - |b - t| on the cases both
    answered, in one group or several pooled (None when a cell has no run)."""
    pairs = _pairs(results, groups, a, b)
    if pairs is None:
        return None
    kept = [(w, abs(x - t) - abs(y - t)) for w, x, y, t in pairs if x is not None and y is not None]
    return _comparison(np.array([v for _, v in kept], dtype=float), np.array([w for w, _ in kept]), groups, a, b)


def compare_decisions(results: BenchResults, groups: str | Sequence[str], a: tuple[str, str],
                      b: tuple[str, str]) -> Comparison | None:
    """a's agreement with the Bayes decision minus b's, in points (per 100 cases), on the cases both answered
    whose truth is not a tie."""
    pairs = _pairs(results, groups, a, b)
    if pairs is None:
        return None
    kept = [(w, 100.0 * (decision_score(x, t) - decision_score(y, t))) for w, x, y, t in pairs
            if x is not None and y is not None and abs(t - 0.5) > TRUTH_TIE]
    return _comparison(np.array([v for _, v in kept], dtype=float), np.array([w for w, _ in kept]), groups, a, b)


def compare(results: BenchResults, group: str, setting: str, a: str, b: str) -> Comparison | None:
    """Method ``a`` against method ``b`` in one group and setting (None when either cell has no run)."""
    return compare_cells(results, group, (setting, a), (setting, b))


def answer_shift(results: BenchResults, group: str, a: tuple[str, str], b: tuple[str, str]) -> float | None:
    """Mean |p_a - p_b| over the cases both cells answered: how far one cell's answers moved from the other's."""
    ca, cb = results.cell(group, *a), results.cell(group, *b)
    if ca is None or cb is None or not ca.p or not cb.p:
        return None
    moved = [abs(x - y) for x, y in zip(ca.p, cb.p, strict=True) if x is not None and y is not None]
    return sum(moved) / len(moved) if moved else None


def crossover(results: BenchResults, sweep: SweepName, group: str, a: str, b: str) -> Crossover:
    """Where along ``sweep`` the sign of a's minus b's error to the truth first changes."""
    levels = list(results.plan.levels[sweep])
    diffs: list[float | None] = []
    for t in levels:
        found = compare(results, group, results.plan.setting_of(sweep, t), a, b)
        diffs.append(None if found is None else found.diff)
    out = Crossover(sweep=sweep, group=group, a=a, b=b, levels=levels, diffs=diffs)
    known = [(t, d) for t, d in zip(levels, diffs, strict=True) if d is not None]
    if len(known) < 2:
        out.note = "not enough levels with both methods run"
        return out
    for (t0, d0), (t1, d1) in zip(known, known[1:], strict=False):
        if d0 * d1 < 0 or (d0 != 0 and d1 == 0):
            out.between = (t0, t1)
            out.at = t0 + (t1 - t0) * d0 / (d0 - d1)
            out.a_better_above = d1 < d0
            side = "closer to the truth above it" if out.a_better_above else "farther from the truth above it"
            out.note = f"{a} is {side}: the sign changes between {t0:g} and {t1:g} (at about {out.at:.2f})"
            return out
    if known[0][1] == 0 and all(d == 0 for _, d in known):
        out.note = f"{a} and {b} are equally far from the truth at every level"
    else:
        side = "closer to" if known[0][1] < 0 else "farther from"
        out.note = f"none in the swept range: {a} is {side} the truth than {b} at every level"
    return out


def share(flags: Sequence[bool], reason: str) -> Figure:
    """The share of true flags, over their number (None with ``reason`` when there are none)."""
    if not flags:
        return Figure(value=None, n=0, reason=reason)
    return Figure(value=sum(flags) / len(flags), n=len(flags))
