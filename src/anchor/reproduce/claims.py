"""The paper's claims, checked on the user's own numbers.

A claim compares cells (:class:`anchor.reproduce.published.Claim`). The paper's cells are of several
models; a reproduction runs one, which stands for one of the paper's (``--paper-model``: the one the
served model's name points to, else Qwen2.5-72B). How each comparison is read:

* two cells of one model (or a cell and the chance row): as the same comparison on our model, so the
  comparisons that then coincide are made once (ANCHOR against CoT with 32B and with 72B is one
  comparison of our ANCHOR and CoT runs);
* cells of two models ("ANCHOR with 32B above the 72B baselines"): only with runs standing for both,
  ours and those of a reproduction of the other model (``--model-runs``); without them the comparison
  is not made. A claim with no comparison left is "not checked: needs runs of <model>"; one whose
  comparisons within a model all held but some across models were not made is "partly checked"
  (one that failed refutes it: "did not hold");
* a size ("about 0.74x the time"): each of our figures within the claim's tolerance of the paper's;
* a threshold ("above 99%"): each of our figures against it.

The verdict is on the means over runs; with several runs it also says in how many runs (paired by
seed) the comparison held. Every check says what it compared (the cells, the run directories they
come from, how many runs each); a claim whose table used more runs than ours (the paper's 5 for Tables
1 and 2) is marked as indicative. A value that cannot stand for the paper's cell (Table 8 with the main
model as its own estimator) leaves the claim not checked, and says why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from anchor.reproduce.cells import ESTIMATOR_TABLES, TIMED_METRICS, Value
from anchor.reproduce.published import Claim, PublishedCell, PublishedNumbers, near

Verdict = Literal["held", "did not hold", "partly checked", "not checked", "qualitative"]
#: Qualitative claims that a finished analysis lets us check anyway (see :func:`check_factor_trend`).
FACTOR_TREND = "factors-more-helps"
#: Whose runs give a cell's value: ours (""), or the paper model whose runs were given.
Lookup = Callable[[PublishedCell], Value | None]
OURS = ""
CHANCE = "chance level"
#: Run directories named in a check's "compared" text before the rest are counted.
MAX_LISTED = 8


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
    compared: str = ""
    """What was compared: the cells, the runs they come from and how many runs each."""


@dataclass(frozen=True)
class Numbers:
    """Where a claim's cells find our values: ``ours`` for the model this reproduction ran (standing for
    the paper's ``model``), ``others`` for paper models whose runs were given, ``chance`` for the rows no
    method runs."""

    ours: Lookup
    model: str
    others: Mapping[str, Lookup]
    chance: Callable[[PublishedCell], float | None] | None = None


Slot = tuple[str, ...]


def _slot(cell: PublishedCell, who: str) -> Slot:
    """Our cell for a paper cell, read from ``who``'s runs: the model drops out, except where it is a
    role (the estimator tables)."""
    role = cell.model if cell.table in ESTIMATOR_TABLES else ""
    return (cell.table, cell.row, cell.dataset, cell.metric, role, who)


def _transfer(model: str, numbers: Numbers) -> str:
    """Whose runs answer a comparison within one paper model: that model's when given, else ours (the
    same comparison on our model)."""
    return model if model in numbers.others else OURS


def _whose(cell: PublishedCell, numbers: Numbers) -> str | None:
    """Whose runs stand for the cell's model in a comparison across models (None: nobody's)."""
    if cell.model in numbers.others:
        return cell.model
    return OURS if cell.model == numbers.model else None


def _one_model(a: PublishedCell, b: PublishedCell) -> bool:
    """The two cells compare within one model (the chance row has none; the estimator tables' model is a role)."""
    return a.model == b.model or "" in (a.model, b.model) or a.table in ESTIMATOR_TABLES


def _mark(cell: PublishedCell) -> str:
    return {"percent": "%", "ratio": "x"}.get(cell.unit, "")


def _fmt(cell: PublishedCell, x: float) -> str:
    return f"{x:.{cell.decimals}f}{_mark(cell)}"


def _bound(cell: PublishedCell, x: float) -> str:
    """A tolerance's bound, to the digits it has (0.555, not the cell's 0.55 or 0.56)."""
    return f"{x:.4g}{_mark(cell)}"


def _describe(cell: PublishedCell, v: Value) -> str:
    assert v.value is not None
    text = f"{v.value:.{cell.decimals}f}"
    if v.std is not None and v.runs > 1:
        text = f"{text} ± {v.std:.{cell.decimals}f}"
    return f"{_name(cell)} {text}{_mark(cell)}"


def _name(cell: PublishedCell) -> str:
    """The cell as the paper labels it: row, then column (which names the dataset in Table 2)."""
    return f"{cell.row_label} {cell.column_label}"


def _paper(claim: Claim, cells: dict[str, PublishedCell]) -> str:
    shown = [cells[k] for k in claim.subject[:4]]
    text = "; ".join(f"{_name(c)} {c.text()}" + (f" ({c.model})" if c.model else "") for c in shown)
    if len(claim.subject) > len(shown):
        text += f"; and {len(claim.subject) - len(shown)} more"
    return text + (f" (text: {claim.stated})" if claim.stated else "")


def _value(cell: PublishedCell, who: str, numbers: Numbers) -> Value | None:
    value = (numbers.others[who] if who else numbers.ours)(cell)
    if value is None and numbers.chance is not None and (fixed := numbers.chance(cell)) is not None:
        value = Value(value=fixed, source=CHANCE, note="chance level, as printed")
    return value


def check_claim(claim: Claim, published: PublishedNumbers, ours: Lookup, our_runs: int,
                chance: Callable[[PublishedCell], float | None] | None = None, *, model: str = "",
                others: Mapping[str, Lookup] | None = None) -> ClaimCheck:
    """One claim on our numbers: ``ours(cell)`` from our runs, which stand for the paper's ``model``;
    ``others`` the runs given for other paper models; ``chance(cell)`` the value of a row no method runs."""
    numbers = Numbers(ours=ours, model=model, others=dict(others or {}), chance=chance)
    cells = published.by_key
    paper = _paper(claim, cells) if claim.subject else (claim.stated or "(figure)")
    if claim.comparison == "qualitative":
        return ClaimCheck(claim, "qualitative", "see the figure", paper)
    timed = any(cells[k].metric in TIMED_METRICS for k in (*claim.subject, *claim.reference))
    caveat = ""
    if claim.runs is not None and our_runs < claim.runs:
        caveat = (f"from {our_runs} run{'s' if our_runs != 1 else ''}; the paper's table used {claim.runs}: "
                  "indicative, not a verdict")
    if claim.comparison in ("greater", "less"):
        pairs, across = _pairs(claim, published, numbers)
        needed = [s for pair in pairs for s in pair]
    else:
        subject = [(_slot(cells[k], _transfer(cells[k].model, numbers)), cells[k]) for k in claim.subject]
        needed = [s for s, _ in subject]
    slots: dict[Slot, tuple[PublishedCell, Value | None]] = {}
    for s in needed:
        cell = next(cells[k] for k in (*claim.subject, *claim.reference) if _slot(cells[k], s[-1]) == s)
        slots.setdefault(s, (cell, _value(cell, s[-1], numbers)))
    compared = _compared(slots)
    # A value that cannot stand for its cell leaves the claim unchecked whatever else is missing: say so first.
    unfit = list(dict.fromkeys(v.unfit for _, v in slots.values() if v is not None and v.unfit))
    # A figure the runs hold no data for (an F1 of a class with no pair) is not a figure of 0: say why.
    absent = list(dict.fromkeys(f"{v.absent} ({_name(c)}{_by(s)})" for s, (c, v) in slots.items()
                                if v is not None and v.value is None and v.absent))
    missing = [_name(c) + _by(s) for s, (c, v) in slots.items()
               if (v is None or v.value is None) and not (v is not None and v.absent)]
    if missing or unfit or absent:
        text = "; ".join([*unfit, *absent, *(["missing: " + ", ".join(dict.fromkeys(missing))] if missing else [])])
        return ClaimCheck(claim, "not checked", text, paper, caveat, timed, compared)
    if claim.comparison in ("greater", "less"):
        return _compare(claim, slots, pairs, across, numbers, paper, caveat, timed, compared)
    return _threshold(claim, slots, subject, paper, caveat, timed, compared)


def _pairs(claim: Claim, published: PublishedNumbers,
           numbers: Numbers) -> tuple[list[tuple[Slot, Slot]], list[tuple[PublishedCell, PublishedCell]]]:
    """The comparisons we can make, as (subject, reference) slots, each once; and the pairs of cells across
    models that no runs stand for."""
    cells = published.by_key
    out: dict[tuple[Slot, Slot], None] = {}
    across: list[tuple[PublishedCell, PublishedCell]] = []
    for ka, kb in published.pairs(claim):
        a, b = cells[ka], cells[kb]
        if _one_model(a, b):
            who = _transfer(a.model or b.model, numbers)
            out[(_slot(a, who), _slot(b, who))] = None
            continue
        wa, wb = _whose(a, numbers), _whose(b, numbers)
        if wa is None or wb is None:
            across.append((a, b))
        else:
            out[(_slot(a, wa), _slot(b, wb))] = None
    return list(out), across


def _compared(slots: Mapping[Slot, tuple[PublishedCell, Value | None]]) -> str:
    """The cells compared, and the run directories (or analyses) they come from with their run counts."""
    names = list(dict.fromkeys(_name(cell) + _by(s) for s, (cell, _) in slots.items()))
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    sources: dict[str, int | None] = {}
    for s, (_, v) in slots.items():
        if v is not None and v.source:
            where = f"{s[-1]}'s {v.source}" if s[-1] else v.source
            sources.setdefault(where, None if v.source == CHANCE else v.runs)
    counts = [n for n in sources.values() if n is not None]
    runs = ""
    if counts:
        runs = (f" ({counts[0]} run{'s' if counts[0] != 1 else ''} each)" if len(set(counts)) == 1
                else " (runs: " + ", ".join(map(str, counts)) + ")")
    where = list(sources)
    listed = ", ".join(where[:MAX_LISTED])
    if len(where) > MAX_LISTED:
        listed += f" and {len(where) - MAX_LISTED} more"
    return f"cells: {shown}" + (f"; from {listed}{runs}" if sources else "")


def _compare(claim: Claim, slots: Mapping[Slot, tuple[PublishedCell, Value | None]],
             pairs: list[tuple[Slot, Slot]], across: list[tuple[PublishedCell, PublishedCell]], numbers: Numbers,
             paper: str, caveat: str, timed: bool, compared: str) -> ClaimCheck:
    sign = 1 if claim.comparison == "greater" else -1
    missing_models = sorted({c.model for pair in across for c in pair if _whose(c, numbers) is None})
    needs = f"needs runs of {', '.join(missing_models)}"
    if not pairs:
        models = sorted({c.model for pair in across for c in pair})
        text = (f"{needs}: the claim compares cells of {' and '.join(models)}, and this reproduction ran one model "
                f"(standing for {numbers.model or 'none of them'}); give a reproduction of each with --model-runs")
        return ClaimCheck(claim, "not checked", text, paper, caveat, False, "")
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
    text = (f"{_describe(ca, va)}{_by(a)} against {_describe(cb, vb)}{_by(b)} (the closest of {len(pairs)} "
            f"comparison(s){' within one model' if across else ''})")
    if n_runs:
        text += f"; held in {held_runs} of {n_runs} run-by-run comparisons"
    if across:
        text += f"; {len(across)} comparison(s) across models not made: {needs}"
        # A comparison that failed refutes the claim; one not made leaves it open.
        return ClaimCheck(claim, "did not hold" if not held else "partly checked", text, paper, caveat, timed,
                          compared)
    return ClaimCheck(claim, "held" if held else "did not hold", text, paper, caveat, timed, compared)


def _by(slot: Slot) -> str:
    return f" ({slot[-1]}'s runs)" if slot[-1] else ""


def _threshold(claim: Claim, slots: Mapping[Slot, tuple[PublishedCell, Value | None]],
               subject: list[tuple[Slot, PublishedCell]], paper: str, caveat: str, timed: bool,
               compared: str) -> ClaimCheck:
    assert claim.threshold is not None or claim.comparison == "about"
    tolerance = claim.tolerance

    def ok(x: float, cell: PublishedCell) -> bool:
        if claim.comparison == "about":
            assert tolerance is not None
            return near(x, cell.value, tolerance)
        assert claim.threshold is not None
        if claim.comparison == "above":
            return x > claim.threshold
        if claim.comparison == "below":
            return x < claim.threshold
        assert tolerance is not None
        return abs(x - claim.threshold) <= tolerance

    # Cells of several models read from one of our cells are one figure, except for a size, which each
    # published value sets.
    figures: dict[object, tuple[Slot, PublishedCell]] = {}
    for s, cell in subject:
        figures.setdefault((s, cell.value) if claim.comparison == "about" else s, (s, cell))
    parts, held, runs_ok, n_runs = [], True, 0, 0
    for s, cell in figures.values():
        v = slots[s][1]
        assert v is not None and v.value is not None
        held = held and ok(v.value, cell)
        if claim.comparison == "about":
            assert tolerance is not None
            low, high = sorted((cell.value * (1 - tolerance), cell.value * (1 + tolerance)))
            parts.append(f"{_describe(cell, v)}{_by(s)} against the paper's {_fmt(cell, cell.value)} "
                         f"(within ±{tolerance:.0%}: {_bound(cell, low)}-{_bound(cell, high)})")
        else:
            parts.append(_describe(cell, v) + _by(s))
        if len(v.per_run) > 1:
            runs_ok += sum(ok(x, cell) for x in v.per_run)
            n_runs += len(v.per_run)
    if claim.comparison == "about":
        text = "; ".join(parts)
    else:
        limit = claim.threshold
        what = (f"within {tolerance:g} of {limit:g}" if claim.comparison == "within"
                else f"{claim.comparison} {limit:g}")
        text = "; ".join(parts) + f" (each must be {what})"
    if n_runs:
        text += f"; held in {runs_ok} of {n_runs} run values"
    return ClaimCheck(claim, "held" if held else "did not hold", text, paper, caveat, timed, compared)


def check_factor_trend(claim: Claim, points: list[tuple[int, float | None, float | None]],
                       source: str = "") -> ClaimCheck:
    """The factor-count claim on our curve: ``points`` are (N, unknown rate, score); it holds when the
    largest N has a lower unknown rate and a higher score than the smallest."""
    usable = [(n, u, s) for n, u, s in sorted(points) if u is not None and s is not None]
    if len(usable) < 2:
        return ClaimCheck(claim, "not checked", "fewer than two factor counts with a score", "(figure)",
                          compared=source)
    (n0, u0, s0), (n1, u1, s1) = usable[0], usable[-1]
    assert u0 is not None and u1 is not None and s0 is not None and s1 is not None
    held = u1 < u0 and s1 > s0
    text = (f"N={n0}: unknown {u0 * 100:.1f}%, score {s0:.3f}; N={n1}: unknown {u1 * 100:.1f}%, score {s1:.3f} "
            "(smallest against largest count)")
    return ClaimCheck(claim, "held" if held else "did not hold", text, "(figure: a trend, no numbers)",
                      compared=source)
