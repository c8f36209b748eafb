"""The bench's figures on arrays: calibration against the truth, paired comparisons of two methods with a
bootstrap interval, crossovers along a sweep, and the bins of a reliability diagram. Pure and seeded:
the same results give the same figures."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from anchor.truth.bench.plan import SweepName
from anchor.truth.bench.results import BenchResults, Comparison, Crossover
from anchor.truth.scores import TRUTH_TIE, Figure

#: Equal-width bins of the estimate, as anchor report's ECE.
BINS = 10
#: Bootstrap resamples of a paired comparison, and their seed.
RESAMPLES = 2000
BOOTSTRAP_SEED = 0


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


def paired_errors(pa: Sequence[float | None], pb: Sequence[float | None], p_true: Sequence[float]) -> np.ndarray:
    """|a - t| - |b - t| on every case both answered."""
    return np.array([abs(a - t) - abs(b - t) for a, b, t in zip(pa, pb, p_true, strict=True)
                     if a is not None and b is not None], dtype=float)


def bootstrap_interval(d: np.ndarray) -> tuple[float | None, float | None]:
    """The 95% percentile interval of the mean of ``d`` over seeded resamples of its entries."""
    if d.size < 2:
        return None, None
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = d[rng.integers(0, d.size, size=(RESAMPLES, d.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def _pool(results: BenchResults, structures: str | Sequence[str], a: tuple[str, str], b: tuple[str, str]
          ) -> list[tuple[list[float | None], list[float | None], list[float]]] | None:
    """(a's estimates, b's estimates, truths) of each structure; None when a cell has no run."""
    out = []
    for s in [structures] if isinstance(structures, str) else structures:
        ca, cb = results.cell(s, *a), results.cell(s, *b)
        if ca is None or cb is None or ca.scores is None or cb.scores is None:
            return None
        out.append((ca.p, cb.p, [c.p_true for c in results.cases[s]]))
    return out


def _comparison(d: np.ndarray, structures: str | Sequence[str], a: tuple[str, str], b: tuple[str, str]
                ) -> Comparison:
    low, high = bootstrap_interval(d)
    where = structures if isinstance(structures, str) else "+".join(structures)
    return Comparison(a=a[1], b=b[1], structure=where, setting=a[0] if a[0] == b[0] else f"{a[0]} vs {b[0]}",
                      n=int(d.size), diff=float(d.mean()) if d.size else None, low=low, high=high)


def compare_cells(results: BenchResults, structures: str | Sequence[str], a: tuple[str, str], b: tuple[str, str]
                  ) -> Comparison | None:
    """The cell (setting, method) ``a`` against the cell ``b``, on the cases both answered in one structure
    or several pooled (None when a cell has no run)."""
    pooled = _pool(results, structures, a, b)
    if pooled is None:
        return None
    d = np.concatenate([paired_errors(pa, pb, t) for pa, pb, t in pooled]) if pooled else np.array([])
    return _comparison(d, structures, a, b)


def decision_score(p: float, truth: float) -> float:
    """1 when ``p`` is on the truth's side of 0.5, 0 on the other, 0.5 at exactly 0.5 (no decision: a coin)."""
    if p == 0.5:
        return 0.5
    return float((p > 0.5) == (truth > 0.5))


def compare_decisions(results: BenchResults, structures: str | Sequence[str], a: tuple[str, str],
                      b: tuple[str, str]) -> Comparison | None:
    """a's agreement with the Bayes decision minus b's, in points (per 100 cases), on the cases both answered
    whose truth is not a tie, with its bootstrap interval."""
    pooled = _pool(results, structures, a, b)
    if pooled is None:
        return None
    d = np.array([100.0 * (decision_score(x, t) - decision_score(y, t)) for pa, pb, ts in pooled
                  for x, y, t in zip(pa, pb, ts, strict=True)
                  if x is not None and y is not None and abs(t - 0.5) > TRUTH_TIE], dtype=float)
    return _comparison(d, structures, a, b)


def compare(results: BenchResults, structure: str, setting: str, a: str, b: str) -> Comparison | None:
    """Method ``a`` against method ``b`` in one structure and setting (None when either cell has no run)."""
    return compare_cells(results, structure, (setting, a), (setting, b))


def answer_shift(results: BenchResults, structure: str, a: tuple[str, str], b: tuple[str, str]) -> float | None:
    """Mean |p_a - p_b| over the cases both cells answered: how far one cell's answers moved from the other's."""
    ca, cb = results.cell(structure, *a), results.cell(structure, *b)
    if ca is None or cb is None or not ca.p or not cb.p:
        return None
    moved = [abs(x - y) for x, y in zip(ca.p, cb.p, strict=True) if x is not None and y is not None]
    return sum(moved) / len(moved) if moved else None


def crossover(results: BenchResults, sweep: SweepName, structure: str, a: str, b: str) -> Crossover:
    """Where along ``sweep`` the sign of a's minus b's error to the truth first changes."""
    levels = list(results.plan.levels[sweep])
    diffs: list[float | None] = []
    for t in levels:
        found = compare(results, structure, results.plan.setting_of(sweep, t), a, b)
        diffs.append(None if found is None else found.diff)
    out = Crossover(sweep=sweep, structure=structure, a=a, b=b, levels=levels, diffs=diffs)
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
