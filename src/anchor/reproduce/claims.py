"""The paper's claims, checked on the user's own numbers.

A claim compares cells (:class:`anchor.reproduce.published.Claim`). The paper's cells are of
several models; the reproduction has one, so each cell is read as our cell of the same row, dataset
and metric, and the comparisons that then coincide are made once. The verdict is on the means over
runs; with several runs it also says in how many runs (paired by seed) the comparison held. A claim
whose table used more runs than ours (the paper's 5 for Tables 1 and 2) is marked as indicative, and
one whose cells we lack says which.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from anchor.reproduce.cells import TIMED_METRICS, Value
from anchor.reproduce.published import Claim, PublishedCell, PublishedNumbers

Verdict = Literal["held", "did not hold", "not checked", "qualitative"]
#: Qualitative claims that a finished analysis lets us check anyway (see :func:`check_factor_trend`).
FACTOR_TREND = "factors-more-helps"


@dataclass(frozen=True)
class ClaimCheck:
    claim: Claim
    verdict: Verdict
    ours: str
    """Our numbers, with the spread over runs."""
    paper: str
    caveat: str = ""
    timed: bool = False
    """True when a number behind it is a measured time (it differs between executions)."""


def _slot(cell: PublishedCell) -> tuple[str, ...]:
    """Our cell for a paper cell: the model drops out, except where it is a role (the estimator tables)."""
    role = cell.model if cell.table.startswith("tab:llm-calib") else ""
    return (cell.table, cell.row, cell.dataset, cell.metric, role)


def _describe(cell: PublishedCell, v: Value) -> str:
    assert v.value is not None
    text = f"{v.value:.{cell.decimals}f}"
    if v.std is not None and v.runs > 1:
        text = f"{text} ± {v.std:.{cell.decimals}f}"
    return f"{_name(cell)} {text}" + ("%" if cell.unit == "percent" else "")


def _name(cell: PublishedCell) -> str:
    """The cell as the paper labels it: row, then column (which names the dataset in Table 2)."""
    return f"{cell.row_label} {cell.column_label}"


def _paper(claim: Claim, cells: dict[str, PublishedCell]) -> str:
    shown = [cells[k] for k in claim.subject[:4]]
    text = "; ".join(f"{_name(c)} {c.text()}" + (f" ({c.model})" if c.model else "") for c in shown)
    if len(claim.subject) > len(shown):
        text += f"; and {len(claim.subject) - len(shown)} more"
    return text + (f" (text: {claim.stated})" if claim.stated else "")


def check_claim(claim: Claim, published: PublishedNumbers, ours: Callable[[PublishedCell], Value | None],
                our_runs: int, chance: Callable[[PublishedCell], float | None] | None = None) -> ClaimCheck:
    """One claim on our numbers (``ours(cell)``; ``chance(cell)`` the value of a row no method runs)."""
    cells = published.by_key
    paper = _paper(claim, cells) if claim.subject else (claim.stated or "(figure)")
    if claim.comparison == "qualitative":
        return ClaimCheck(claim, "qualitative", "see the figure", paper)
    timed = any(cells[k].metric in TIMED_METRICS for k in (*claim.subject, *claim.reference))
    slots: dict[tuple[str, ...], tuple[PublishedCell, Value | None]] = {}
    for key in (*claim.subject, *claim.reference):
        cell = cells[key]
        value = ours(cell)
        if value is None and chance is not None and (fixed := chance(cell)) is not None:
            value = Value(value=fixed, note="chance level, as printed")
        slots.setdefault(_slot(cell), (cell, value))
    missing = [_name(c) for c, v in slots.values() if v is None or v.value is None]
    if missing:
        shown = ", ".join(dict.fromkeys(missing))
        return ClaimCheck(claim, "not checked", f"missing: {shown}", paper, timed=timed)
    subject = list(dict.fromkeys(_slot(cells[k]) for k in claim.subject))
    caveat = ""
    if claim.runs is not None and our_runs < claim.runs:
        caveat = (f"from {our_runs} run{'s' if our_runs != 1 else ''}; the paper's table used {claim.runs}: "
                  "indicative, not a verdict")
    if claim.comparison in ("greater", "less"):
        return _compare(claim, slots, subject, paper, caveat, timed)
    return _threshold(claim, slots, subject, paper, caveat, timed)


def _compare(claim: Claim, slots: dict[tuple[str, ...], tuple[PublishedCell, Value | None]],
             subject: list[tuple[str, ...]], paper: str, caveat: str, timed: bool) -> ClaimCheck:
    sign = 1 if claim.comparison == "greater" else -1
    reference = [s for s in dict.fromkeys(_slot(c) for c, _ in slots.values()) if s not in subject]
    fields = {"dataset": 2, "metric": 3}
    pairs = [(a, b) for a in subject for b in reference
             if all(a[fields[f]] == b[fields[f]] for f in claim.match if f in fields)]
    if not pairs:
        return ClaimCheck(claim, "not checked", "nothing to compare with one model", paper, caveat, timed)
    margins = []
    held_runs, n_runs = 0, 0
    for a, b in pairs:
        va, vb = slots[a][1], slots[b][1]
        assert va is not None and vb is not None and va.value is not None and vb.value is not None
        margins.append((sign * (va.value - vb.value), a, b))
        if va.per_run and vb.per_run and len(va.per_run) > 1:
            runs = min(len(va.per_run), len(vb.per_run)) if len(vb.per_run) > 1 else len(va.per_run)
            for i in range(runs):
                other = vb.per_run[i] if len(vb.per_run) > 1 else vb.value
                held_runs += int(sign * (va.per_run[i] - other) > 0)
                n_runs += 1
    held = all(m > 0 for m, _, _ in margins)
    worst, a, b = min(margins, key=lambda m: m[0])
    ca, va = slots[a]
    cb, vb = slots[b]
    assert va is not None and vb is not None
    text = f"{_describe(ca, va)} against {_describe(cb, vb)} (the closest of {len(pairs)} comparison(s))"
    if n_runs:
        text += f"; held in {held_runs} of {n_runs} run-by-run comparisons"
    return ClaimCheck(claim, "held" if held else "did not hold", text, paper, caveat, timed)


def _threshold(claim: Claim, slots: dict[tuple[str, ...], tuple[PublishedCell, Value | None]],
               subject: list[tuple[str, ...]], paper: str, caveat: str, timed: bool) -> ClaimCheck:
    assert claim.threshold is not None
    limit = claim.threshold

    def ok(x: float) -> bool:
        if claim.comparison == "above":
            return x > limit
        if claim.comparison == "below":
            return x < limit
        assert claim.tolerance is not None
        return abs(x - limit) <= claim.tolerance

    parts, held, runs_ok, n_runs = [], True, 0, 0
    for s in subject:
        cell, v = slots[s]
        assert v is not None and v.value is not None
        held = held and ok(v.value)
        parts.append(_describe(cell, v))
        if len(v.per_run) > 1:
            runs_ok += sum(ok(x) for x in v.per_run)
            n_runs += len(v.per_run)
    what = (f"within {claim.tolerance:g} of {limit:g}" if claim.comparison == "within"
            else f"{claim.comparison} {limit:g}")
    text = "; ".join(parts) + f" (each must be {what})"
    if n_runs:
        text += f"; held in {runs_ok} of {n_runs} run values"
    return ClaimCheck(claim, "held" if held else "did not hold", text, paper, caveat, timed)


def check_factor_trend(claim: Claim, points: list[tuple[int, float | None, float | None]]) -> ClaimCheck:
    """The factor-count claim on our curve: ``points`` are (N, unknown rate, score); it holds when the
    largest N has a lower unknown rate and a higher score than the smallest."""
    usable = [(n, u, s) for n, u, s in sorted(points) if u is not None and s is not None]
    if len(usable) < 2:
        return ClaimCheck(claim, "not checked", "fewer than two factor counts with a score", "(figure)")
    (n0, u0, s0), (n1, u1, s1) = usable[0], usable[-1]
    assert u0 is not None and u1 is not None and s0 is not None and s1 is not None
    held = u1 < u0 and s1 > s0
    text = (f"N={n0}: unknown {u0 * 100:.1f}%, score {s0:.3f}; N={n1}: unknown {u1 * 100:.1f}%, score {s1:.3f} "
            "(smallest against largest count)")
    return ClaimCheck(claim, "held" if held else "did not hold", text, "(figure: a trend, no numbers)")
