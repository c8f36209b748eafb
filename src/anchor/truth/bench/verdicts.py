"""A verdict for each of the paper's claims, from the bench's cells: held, did not hold, or not checked
(naming what it needs), with its figures and the settings where it held.

Comparisons are paired: two cells on the cases both answered, the mean difference with a 95% bootstrap
interval over the cases (:mod:`.compare`). A claim holds when the interval is on its side, does not
hold when it is on the other side, and is not checked when the interval straddles the line: the bench
was too small to tell ("needs more cases").

1. ANCHOR has far fewer unknowns than BIRD: at the default errors, over every structure, the share of
   the cases that state factors which ANCHOR leaves unknown is at most half BIRD's (and BIRD leaves
   some). The "nothing" cases are left out: unknown is the right answer there. A count, not a
   comparison: held or not.
2. ANCHOR is better calibrated than asking the LLM directly: at the default errors, over every
   structure, ANCHOR is closer to the truth than each of vanilla, CoT and logits (paired), and its
   calibration error against the truth is lower than each of theirs. The crossovers along the direct
   and factor sweeps say where that changes.
3. The latent network corrects Naive Bayes where factors are dependent: in the latent worlds at the
   default errors, the network alone (no-nb) and the pooled ANCHOR are each closer to the truth than
   Naive Bayes alone (no-cbn). The other structures, and the latent-link reading of phi, beside it.
4. ANCHOR's answers are largely insensitive to the probability estimator while it gives coarse
   signals: along the factor_curve sweep above the defaults (an estimator as consistent as the default
   one whose numbers are coarser and flatter; the factor space and mapping stay those of the defaults,
   as in the paper's check that swaps the estimator LLM), at every level up to :data:`COARSE_LEVEL`,
   ANCHOR's agreement with the Bayes-optimal decision moves by less than :data:`TOLERANCE_POINTS`
   points from the default estimator's (the whole interval inside the margin). The change of its error
   to the truth, and the levels below the defaults, are reported beside it.
"""

from __future__ import annotations

from collections.abc import Sequence

from anchor.truth.bench.compare import answer_shift, compare, compare_cells, compare_decisions, crossover
from anchor.truth.bench.plan import DEFAULT_LEVEL, DIRECT_METHODS, BenchPlan
from anchor.truth.bench.results import BenchResults, Comparison, Crossover, Verdict

#: Claim 1: "far fewer" unknowns = at most this share of BIRD's.
FAR_FEWER = 0.5
#: Claim 4: how far ANCHOR's agreement with the Bayes decision may move from the default estimator's, in
#: points (the paper: "all changes are within about 2.5 points" when it swaps the estimator LLM).
TOLERANCE_POINTS = 2.5
#: Claim 4: the coarsest estimator that still gives "coarse signals" (factor_curve level 4: steps of 0.2
#: and slope 0.55, so 0.2, 0.4, 0.6 or 0.8, mostly on the right side of 0.5).
COARSE_LEVEL = 4.0
DEFAULT = "default"


def _more_cases(results: BenchResults) -> str:
    full = BenchPlan.make(quick=False).cases_per_structure
    mine = results.plan.cases_per_structure
    tail = f"; the full plan, without --quick, has {full}" if full > mine else ""
    return f"more cases (this bench has {mine} a structure{tail})"


def _missing(results: BenchResults, structures: Sequence[str], setting: str, methods: Sequence[str]) -> str:
    """The cells among these that have no run, and why ('' when every one has)."""
    missing = []
    for s in structures:
        for m in methods:
            cell = results.cell(s, setting, m)
            if cell is None:
                missing.append(f"{m} in {s} at {setting} (not in this bench)")
            elif cell.scores is None:
                missing.append(f"{m} in {s} at {setting} ({cell.not_run or 'no scores'})")
    return "; ".join(dict.fromkeys(missing))


def _word(c: Comparison | None) -> str:
    if c is None or c.diff is None:
        return "no cases in common"
    return "closer" if c.better else "farther" if c.worse else "no clear difference"


def _fmt(c: Comparison | None, unit: str = "") -> str:
    if c is None or c.diff is None:
        return "–"
    if c.low is None or c.high is None:
        return f"{c.diff:+.3f}{unit} (n={c.n})"
    return f"{c.diff:+.3f}{unit} [{c.low:+.3f}, {c.high:+.3f}] (n={c.n})"


def _cmp(c: Comparison | None) -> dict[str, object] | None:
    return None if c is None else {"n": c.n, "diff": c.diff, "low": c.low, "high": c.high}


def _not_checked(claim: int, title: str, needs: str, figures: dict[str, object] | None = None,
                 summary: str = "") -> Verdict:
    return Verdict(claim=claim, title=title, verdict="not checked",
                   summary=(summary + " " if summary else "") + f"Not checked: needs {needs}.", figures=figures or {})


# --------------------------------------------------------------------------- 1. unknowns


def claim_unknowns(results: BenchResults) -> Verdict:
    title = "ANCHOR has far fewer unknowns than BIRD"
    structures = results.plan.structures
    missing = _missing(results, structures, DEFAULT, ("anchor", "bird"))
    if missing:
        return _not_checked(1, title, f"anchor and bird at the default errors: {missing}")
    figures: dict[str, object] = {}
    counts = {"anchor": [0, 0], "bird": [0, 0]}
    lines, where = [], []
    for s in structures:
        shares = {}
        for m in counts:
            f = results.cell(s, DEFAULT, m).unknown_with_factors  # type: ignore[union-attr]
            assert f is not None
            shares[m] = f.value
            if f.value is not None:
                counts[m][0] += round(f.value * f.n)
                counts[m][1] += f.n
        figures[s] = {"anchor_unknown": shares["anchor"], "bird_unknown": shares["bird"]}
        if shares["anchor"] is not None and shares["bird"] is not None:
            if shares["bird"] > 0 and shares["anchor"] <= FAR_FEWER * shares["bird"]:
                where.append(s)
            lines.append(f"{s}: ANCHOR {_pct(shares['anchor'])}, BIRD {_pct(shares['bird'])}.")
    if counts["bird"][1] == 0:
        return _not_checked(1, title, "cases that state factors", figures)
    ua, ub = (counts[m][0] / counts[m][1] for m in ("anchor", "bird"))
    figures["all"] = {"anchor_unknown": ua, "bird_unknown": ub, "anchor_cases": counts["anchor"],
                      "bird_cases": counts["bird"]}
    held = ub > 0 and ua <= FAR_FEWER * ub
    lines.insert(0, f"Of the cases that state factors, at the default errors, ANCHOR left {counts['anchor'][0]}/"
                    f"{counts['anchor'][1]} ({_pct(ua)}) unknown, BIRD {counts['bird'][0]}/{counts['bird'][1]} "
                    f"({_pct(ub)}); 'far fewer' = at most {FAR_FEWER:g} of BIRD's share. By structure:")
    return Verdict(claim=1, title=title, verdict="held" if held else "did not hold", summary=" ".join(lines),
                   where_held=where, figures=figures)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


# --------------------------------------------------------------------------- 2. calibration


def _pooled_ece(results: BenchResults, method: str) -> float | None:
    total = weight = 0.0
    for s in results.plan.structures:
        cell = results.cell(s, DEFAULT, method)
        if cell is None or cell.ece_truth is None or cell.ece_truth.value is None:
            return None
        total += cell.ece_truth.value * cell.ece_truth.n
        weight += cell.ece_truth.n
    return total / weight if weight else None


def claim_calibration(results: BenchResults, crossovers: list[Crossover]) -> Verdict:
    title = "ANCHOR is better calibrated than asking the LLM directly"
    structures = results.plan.structures
    needed = ("anchor", *DIRECT_METHODS)
    missing = _missing(results, structures, DEFAULT, needed)
    if missing:
        return _not_checked(2, title, f"anchor, vanilla, cot and logits at the default errors: {missing}")
    comps = {d: compare_cells(results, structures, (DEFAULT, "anchor"), (DEFAULT, d)) for d in DIRECT_METHODS}
    ece = {m: _pooled_ece(results, m) for m in needed}
    figures: dict[str, object] = {"all": {"vs": {d: _cmp(c) for d, c in comps.items()}, "ece_truth": ece}}
    lines = ["At the default errors, over every structure, ANCHOR's error to the truth minus the direct method's "
             "(paired, 95% interval): " + ", ".join(f"{d} {_fmt(c)} ({_word(c)})" for d, c in comps.items())
             + "; calibration error against the truth: " + ", ".join(
                 f"{m} {'–' if v is None else f'{v:.3f}'}" for m, v in ece.items()) + "."]
    where = []
    for s in structures:
        per = {d: compare(results, s, DEFAULT, "anchor", d) for d in DIRECT_METHODS}
        figures[s] = {d: _cmp(c) for d, c in per.items()}
        lines.append(f"{s}: " + ", ".join(f"{d} {_word(c)}" for d, c in per.items()) + ".")
        levels = [t for t in results.plan.levels["direct"]
                  if all((c := compare(results, s, results.plan.setting_of("direct", t), "anchor", d)) is not None
                         and c.better for d in DIRECT_METHODS)]
        if levels:
            where.append(f"{s}: closer than all three at direct error level {', '.join(f'{t:g}' for t in levels)}")
    for sweep, what in (("direct", "direct-error"), ("factor", "factor-error")):
        found = [c for c in crossovers if c.sweep == sweep and c.b == "vanilla"]
        if found:
            lines.append(f"Along the {what} sweep, ANCHOR against vanilla: "
                         + "; ".join(f"{c.structure}: {c.note}" for c in found) + ".")
    calibrated = ece["anchor"] is not None and all(ece[d] is not None and ece["anchor"] < ece[d]  # type: ignore[operator]
                                                   for d in DIRECT_METHODS)
    if any(c is not None and c.worse for c in comps.values()):
        word = "did not hold"
    elif all(c is not None and c.better for c in comps.values()):
        word = "held" if calibrated else "did not hold"
        if not calibrated:
            lines.append("ANCHOR is closer to the truth, but its calibration error against the truth is not the "
                         "lowest.")
    else:
        return _not_checked(2, title, _more_cases(results) + ": some intervals include 0", figures, " ".join(lines))
    return Verdict(claim=2, title=title, verdict=word, summary=" ".join(lines), where_held=where, figures=figures)


# --------------------------------------------------------------------------- 3. the latent network


def claim_latent(results: BenchResults) -> Verdict:
    title = "The latent network corrects Naive Bayes where factors are dependent"
    needed = ("anchor", "no-nb", "no-cbn")
    if "latent" not in results.plan.structures:
        return _not_checked(3, title, "latent worlds in the bench")
    missing = _missing(results, ["latent"], DEFAULT, needed)
    if missing:
        return _not_checked(3, title, f"anchor, no-nb and no-cbn in the latent worlds at the default errors: {missing}")
    figures: dict[str, object] = {}
    lines = []
    for s in results.plan.structures:
        if _missing(results, [s], DEFAULT, needed):
            continue
        net, pooled = compare(results, s, DEFAULT, "no-nb", "no-cbn"), compare(results, s, DEFAULT, "anchor", "no-cbn")
        figures[s] = {"no-nb vs no-cbn": _cmp(net), "anchor vs no-cbn": _cmp(pooled)}
        lines.append(f"{s}: the network alone minus Naive Bayes alone {_fmt(net)} ({_word(net)}), pooled ANCHOR "
                     f"minus Naive Bayes {_fmt(pooled)} ({_word(pooled)}).")
    where = []
    for name, setting in results.settings.items():
        net = compare(results, "latent", name, "no-nb", "no-cbn")
        pooled = compare(results, "latent", name, "anchor", "no-cbn")
        if setting.get("phi_reading") == "latent-link" and not setting.get("sweep"):
            figures[f"latent, {name}"] = {"no-nb vs no-cbn": _cmp(net), "anchor vs no-cbn": _cmp(pooled)}
            lines.append(f"With the LLM answering phi as P(f | its latent), the number the network uses, instead of "
                         f"P(O1 | f) (setting {name}): the network alone minus Naive Bayes {_fmt(net)} ({_word(net)}), "
                         f"pooled {_fmt(pooled)} ({_word(pooled)}).")
        if net is not None and pooled is not None and net.better and pooled.better:
            where.append(f"latent worlds at {name}")
    lines.insert(0, "Checked in the latent worlds at the default errors (the other structures beside it):")
    net, pooled = (compare(results, "latent", DEFAULT, m, "no-cbn") for m in ("no-nb", "anchor"))
    assert net is not None and pooled is not None
    if net.better and pooled.better:
        word = "held"
    elif net.worse or pooled.worse:
        word = "did not hold"
    else:
        return _not_checked(3, title, _more_cases(results) + ": the intervals in the latent worlds include 0", figures,
                            " ".join(lines))
    return Verdict(claim=3, title=title, verdict=word, summary=" ".join(lines), where_held=where, figures=figures)


# --------------------------------------------------------------------------- 4. the estimator


def claim_estimator(results: BenchResults) -> Verdict:
    title = "ANCHOR's answers are largely insensitive to the probability estimator while it gives coarse signals"
    structures = results.plan.structures
    levels = list(results.plan.levels["factor_curve"])
    coarse = [t for t in levels if DEFAULT_LEVEL < t <= COARSE_LEVEL]
    reference = results.plan.setting_of("factor_curve", DEFAULT_LEVEL)
    settings = [results.plan.setting_of("factor_curve", t) for t in levels]
    missing = "; ".join(m for st in settings if (m := _missing(results, structures, st, ("anchor",))))
    if not coarse or missing:
        return _not_checked(4, title, f"ANCHOR at the defaults and along the factor_curve sweep above them, up to "
                                      f"level {COARSE_LEVEL:g}, in every structure{': ' + missing if missing else ''}")
    figures: dict[str, object] = {}
    lines = ["Against the default estimator (level 1), over every structure: ANCHOR's agreement with the Bayes "
             "decision (paired, in points per 100 cases, 95% interval), its error to the truth, and how far its "
             "answers moved:"]
    verdicts: dict[float, str] = {}
    for t in levels:
        if t == DEFAULT_LEVEL:
            continue
        setting = results.plan.setting_of("factor_curve", t)
        agree = compare_decisions(results, structures, (setting, "anchor"), (reference, "anchor"))
        error = compare_cells(results, structures, (setting, "anchor"), (reference, "anchor"))
        moved = [v for s in structures if (v := answer_shift(results, s, (setting, "anchor"), (reference, "anchor")))
                 is not None]
        shift = sum(moved) / len(moved) if moved else None
        figures[f"{t:g}"] = {"setting": setting, "agreement_points": _cmp(agree), "error_change": _cmp(error),
                             "answer_shift": shift, "factor_curve": results.settings[setting]["factor_curve"]}
        curve = results.settings[setting]["factor_curve"]
        lines.append(f"level {t:g} (slope {curve['slope']:g}, noise {curve['noise']:g}, steps of {curve['step']:g}): "
                     f"agreement {_fmt(agree, ' points')}, error {_fmt(error)}, answers moved "
                     f"{'–' if shift is None else f'{shift:.3f}'}.")
        if t in coarse:
            if agree is None or agree.low is None or agree.high is None:
                verdicts[t] = "unclear"
            elif -TOLERANCE_POINTS < agree.low and agree.high < TOLERANCE_POINTS:
                verdicts[t] = "within"
            elif agree.high < -TOLERANCE_POINTS or agree.low > TOLERANCE_POINTS:
                verdicts[t] = "beyond"
            else:
                verdicts[t] = "unclear"
    lines.append(f"Criterion: at every coarser level up to {COARSE_LEVEL:g}, the interval of the change in agreement "
                 f"inside ±{TOLERANCE_POINTS:g} points (the paper's own margin when it swaps the estimator LLM).")
    where = [f"factor_curve level {t:g}" for t, v in verdicts.items() if v == "within"]
    if all(v == "within" for v in verdicts.values()):
        word = "held"
    elif any(v == "beyond" for v in verdicts.values()):
        word = "did not hold"
    else:
        return _not_checked(4, title, _more_cases(results) + f": the intervals are wider than the ±{TOLERANCE_POINTS:g}-point "
                                                   "margin", figures, " ".join(lines))
    return Verdict(claim=4, title=title, verdict=word, summary=" ".join(lines), where_held=where, figures=figures)


# --------------------------------------------------------------------------- all of them


def find_crossovers(results: BenchResults) -> list[Crossover]:
    """ANCHOR against each direct method along the direct-error sweep, and against vanilla along the
    factor-error sweep, in every structure."""
    out = []
    for s in results.plan.structures:
        for d in DIRECT_METHODS:
            out.append(crossover(results, "direct", s, "anchor", d))
        out.append(crossover(results, "factor", s, "anchor", "vanilla"))
    return out


def judge(results: BenchResults) -> BenchResults:
    """``results`` with its crossovers and verdicts filled in."""
    crossovers = find_crossovers(results)
    verdicts = [claim_unknowns(results), claim_calibration(results, crossovers), claim_latent(results),
                claim_estimator(results)]
    return results.model_copy(update={"crossovers": crossovers, "verdicts": verdicts})
