"""A verdict for each claim, from the bench's cells: held, did not hold, or not checked (naming what it
needs), with its figures and the settings or region where it held.

Comparisons are paired: two cells on the cases both answered, the mean difference with a 95% interval
that resamples worlds and the cases within them (:mod:`.compare`). A claim holds when the interval is on
its side, does not hold when it is on the other side, and is not checked when the interval straddles the
line ("needs more worlds"). "ANCHOR" is what ``anchor predict`` answers (the consistent rule); the paper's
own computation is ``anchor-paper``.

1. ANCHOR has far fewer unknowns than BIRD: at the default errors, over the groups at even odds (where
   BIRD runs), ANCHOR leaves at most half BIRD's share of the cases that state factors unknown.
2. ANCHOR is closer to the truth than asking the LLM directly: at the default errors, over every group,
   ANCHOR is closer than each of vanilla, CoT and logits, and its calibration error against the truth is
   lower than theirs. The map says in which region of (direct error, factor-level error) it is closer.
3. The latent network corrects Naive Bayes where factors are dependent: in the latent groups at the
   default errors, ANCHOR's network is closer to the truth than its Naive Bayes (both read phi as the
   prompt asks). Beside it, the paper's pair each at its own best reading: its network where the LLM
   answers phi as its link, against its Naive Bayes where phi is the posterior the prompt asks for.
4. ANCHOR's answers are largely insensitive to the probability estimator while it gives coarse signals:
   along the factor_curve sweep above the defaults, at even odds, ANCHOR's agreement with the Bayes
   decision moves by less than :data:`TOLERANCE_POINTS` points from the default estimator's.
5. The consistent rule is at least as close to the truth as the paper's: at the default errors, in every
   structure at even odds its MAE is no worse beyond the interval, and at the most skewed prior it is at
   most half the paper's. The other groups beside it.
"""

from __future__ import annotations

from collections.abc import Sequence

from anchor.truth_bench.compare import (
    POWER_FACTOR,
    answer_shift,
    compare,
    compare_cells,
    compare_decisions,
    crossover,
)
from anchor.truth_bench.plan import DEFAULT, DEFAULT_LEVEL, DIRECT_METHODS, LATENT_LINK
from anchor.truth_bench.results import BenchResults, Comparison, Crossover, MapCell, Power, Verdict

#: Claim 1: "far fewer" unknowns = at most this share of BIRD's.
FAR_FEWER = 0.5
#: Claim 4: how far ANCHOR's agreement with the Bayes decision may move from the default estimator's, in
#: points (the paper: "all changes are within about 2.5 points" when it swaps the estimator LLM).
TOLERANCE_POINTS = 2.5
#: Claim 4: the coarsest estimator that still gives "coarse signals" (factor_curve level 4: steps of 0.2
#: and slope 0.55, so 0.2, 0.4, 0.6 or 0.8, mostly on the right side of 0.5).
COARSE_LEVEL = 4.0
#: Claim 5: at the most skewed prior the consistent rule's MAE is at most this share of the paper's.
SKEWED_SHARE = 0.5


def _needs_more(results: BenchResults) -> str:
    return f"more worlds (this bench has {results.plan.worlds_per_group} a group; the full plan, without --quick, " \
           "has more)"


def _missing(results: BenchResults, groups: Sequence[str], setting: str, methods: Sequence[str]) -> str:
    """The cells among these that have no run, and why ('' when every one has)."""
    missing = []
    for g in groups:
        for m in methods:
            cell = results.cell(g, setting, m)
            if cell is None:
                missing.append(f"{m} in {g} at {setting} (not in this bench)")
            elif cell.scores is None:
                missing.append(f"{m} in {g} at {setting} ({cell.not_run or 'no scores'})")
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
    return f"{c.diff:+.3f}{unit} [{c.low:+.3f}, {c.high:+.3f}] (n={c.n}, {c.worlds} worlds)"


def _cmp(c: Comparison | None) -> dict[str, object] | None:
    return None if c is None else {"n": c.n, "worlds": c.worlds, "diff": c.diff, "low": c.low, "high": c.high}


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _not_checked(claim: int, title: str, needs: str, figures: dict[str, object] | None = None,
                 summary: str = "") -> Verdict:
    return Verdict(claim=claim, title=title, verdict="not checked",
                   summary=(summary + " " if summary else "") + f"Not checked: needs {needs}.", figures=figures or {})


# --------------------------------------------------------------------------- 1. unknowns


def claim_unknowns(results: BenchResults) -> Verdict:
    title = "ANCHOR has far fewer unknowns than BIRD"
    groups = results.group_names(even=True)
    missing = _missing(results, groups, DEFAULT, ("anchor", "bird"))
    if not groups or missing:
        return _not_checked(1, title, f"anchor and bird at the default errors at even odds: {missing or 'no group'}")
    figures: dict[str, object] = {}
    counts = {"anchor": [0, 0], "bird": [0, 0]}
    lines, where = [], []
    for g in groups:
        shares = {}
        for m in counts:
            f = results.cell(g, DEFAULT, m).unknown_with_factors  # type: ignore[union-attr]
            assert f is not None
            shares[m] = f.value
            if f.value is not None:
                counts[m][0] += round(f.value * f.n)
                counts[m][1] += f.n
        figures[g] = {"anchor_unknown": shares["anchor"], "bird_unknown": shares["bird"]}
        if shares["anchor"] is not None and shares["bird"] is not None:
            if shares["bird"] > 0 and shares["anchor"] <= FAR_FEWER * shares["bird"]:
                where.append(g)
            lines.append(f"{g}: ANCHOR {_pct(shares['anchor'])}, BIRD {_pct(shares['bird'])}.")
    if counts["bird"][1] == 0:
        return _not_checked(1, title, "cases that state factors", figures)
    ua, ub = (counts[m][0] / counts[m][1] for m in ("anchor", "bird"))
    figures["all"] = {"anchor_unknown": ua, "bird_unknown": ub, "anchor_cases": counts["anchor"],
                      "bird_cases": counts["bird"]}
    held = ub > 0 and ua <= FAR_FEWER * ub
    lines.insert(0, f"Of the cases that state factors, at the default errors and even odds, ANCHOR left "
                    f"{counts['anchor'][0]}/{counts['anchor'][1]} ({_pct(ua)}) unknown, BIRD {counts['bird'][0]}/"
                    f"{counts['bird'][1]} ({_pct(ub)}); 'far fewer' = at most {FAR_FEWER:g} of BIRD's share. By group:")
    return Verdict(claim=1, title=title, verdict="held" if held else "did not hold", summary=" ".join(lines),
                   where_held=where, figures=figures)


# --------------------------------------------------------------------------- 2. calibration


def _pooled_ece(results: BenchResults, groups: Sequence[str], method: str) -> float | None:
    total = weight = 0.0
    for g in groups:
        cell = results.cell(g, DEFAULT, method)
        if cell is None or cell.ece_truth is None or cell.ece_truth.value is None:
            return None
        total += cell.ece_truth.value * cell.ece_truth.n
        weight += cell.ece_truth.n
    return total / weight if weight else None


def claim_calibration(results: BenchResults, crossovers: list[Crossover]) -> Verdict:
    title = "ANCHOR is closer to the truth than asking the LLM directly"
    groups = list(results.groups)
    needed = ("anchor", *DIRECT_METHODS)
    missing = _missing(results, groups, DEFAULT, needed)
    if missing:
        return _not_checked(2, title, f"anchor, vanilla, cot and logits at the default errors: {missing}")
    comps = {d: compare_cells(results, groups, (DEFAULT, "anchor"), (DEFAULT, d)) for d in DIRECT_METHODS}
    ece = {m: _pooled_ece(results, groups, m) for m in needed}
    figures: dict[str, object] = {"all": {"vs": {d: _cmp(c) for d, c in comps.items()}, "ece_truth": ece}}
    lines = ["At the default errors, over every group, ANCHOR's error to the truth minus the direct method's "
             "(paired, 95% interval over worlds and cases): " + ", ".join(f"{d} {_fmt(c)} ({_word(c)})"
                                                                           for d, c in comps.items())
             + "; calibration error against the truth: " + ", ".join(
                 f"{m} {'–' if v is None else f'{v:.3f}'}" for m, v in ece.items()) + "."]
    for g in groups:
        per = {d: compare(results, g, DEFAULT, "anchor", d) for d in DIRECT_METHODS}
        figures[g] = {d: _cmp(c) for d, c in per.items()}
        lines.append(f"{g}: " + ", ".join(f"{d} {_word(c)}" for d, c in per.items()) + ".")
    where = _map_region(results.map)
    if where:
        lines.append("On the map (vanilla at direct-error level d, ANCHOR at factor-error level f), ANCHOR is "
                     "closer in: " + "; ".join(where) + ".")
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
        return _not_checked(2, title, _needs_more(results) + ": some intervals include 0", figures, " ".join(lines))
    return Verdict(claim=2, title=title, verdict=word, summary=" ".join(lines), where_held=where, figures=figures)


def _map_region(cells: list[MapCell]) -> list[str]:
    """For each group, the map's cells (d, f) where ANCHOR is closer to the truth than vanilla."""
    out = []
    for g in dict.fromkeys(c.group for c in cells):
        won = [f"({c.direct:g}, {c.factor:g})" for c in cells if c.group == g and c.b == "vanilla" and c.better]
        if won:
            out.append(f"{g} {', '.join(won)}")
    return out


# --------------------------------------------------------------------------- 3. the latent network


def claim_latent(results: BenchResults) -> Verdict:
    title = "The latent network corrects Naive Bayes where factors are dependent"
    groups = results.group_names(structure="latent")
    missing = _missing(results, groups, DEFAULT, ("anchor", "nb"))
    if not groups or missing:
        return _not_checked(3, title, f"anchor and nb in the latent groups at the default errors: "
                                      f"{missing or 'no latent group'}")
    figures: dict[str, object] = {}
    lines = ["In the latent groups at the default errors, ANCHOR's network minus its Naive Bayes (both read phi as "
             "the prompt asks, the base rate counted once):"]
    where = []
    for g in results.groups:
        c = compare(results, g, DEFAULT, "anchor", "nb")
        if c is None:
            continue
        figures[g] = {"anchor vs nb": _cmp(c)}
        lines.append(f"{g}: {_fmt(c)} ({_word(c)}).")
        if c.better:
            where.append(g)
    pooled = compare_cells(results, groups, (DEFAULT, "anchor"), (DEFAULT, "nb"))
    figures["latent"] = _cmp(pooled)
    lines.append(f"All latent groups: {_fmt(pooled)}.")
    even = [g for g in groups if results.groups[g].prior == 0.5]
    for g in even:
        best = compare_cells(results, g, (LATENT_LINK, "net-paper"), (DEFAULT, "nb-paper"))
        same = compare(results, g, DEFAULT, "net-paper", "nb-paper")
        if best is not None or same is not None:
            figures[f"{g} paper"] = {"net-paper at its link reading vs nb-paper": _cmp(best),
                                     "both at the posterior reading": _cmp(same)}
            lines.append(f"The paper's network minus its Naive Bayes in {g}, each at its own reading (the network "
                         f"given phi as its link, setting {LATENT_LINK}; Naive Bayes given the posterior): "
                         f"{_fmt(best)} ({_word(best)}); both given the posterior: {_fmt(same)} ({_word(same)}).")
    assert pooled is not None
    if pooled.better:
        word = "held"
    elif pooled.worse:
        word = "did not hold"
    else:
        return _not_checked(3, title, _needs_more(results) + ": the interval includes 0", figures, " ".join(lines))
    return Verdict(claim=3, title=title, verdict=word, summary=" ".join(lines), where_held=where, figures=figures)


# --------------------------------------------------------------------------- 4. the estimator


def claim_estimator(results: BenchResults) -> Verdict:
    title = "ANCHOR's answers are largely insensitive to the probability estimator while it gives coarse signals"
    groups = results.group_names(even=True)
    levels = list(results.plan.levels.get("factor_curve", ()))
    coarse = [t for t in levels if DEFAULT_LEVEL < t <= COARSE_LEVEL]
    settings = [results.plan.setting_of("factor_curve", t) for t in levels]
    missing = "; ".join(m for st in settings if (m := _missing(results, groups, st, ("anchor",))))
    if not groups or not coarse or missing:
        return _not_checked(4, title, f"ANCHOR at the defaults and along the factor_curve sweep above them, up to "
                                      f"level {COARSE_LEVEL:g}, at even odds{': ' + missing if missing else ''}")
    figures: dict[str, object] = {}
    lines = ["Against the default estimator (level 1), over the groups at even odds: ANCHOR's agreement with the "
             "Bayes decision (paired, in points per 100 cases, 95% interval), its error to the truth, and how far "
             "its answers moved:"]
    verdicts: dict[float, str] = {}
    for t in levels:
        if t == DEFAULT_LEVEL:
            continue
        setting = results.plan.setting_of("factor_curve", t)
        agree = compare_decisions(results, groups, (setting, "anchor"), (DEFAULT, "anchor"))
        error = compare_cells(results, groups, (setting, "anchor"), (DEFAULT, "anchor"))
        moved = [v for g in groups if (v := answer_shift(results, g, (setting, "anchor"), (DEFAULT, "anchor")))
                 is not None]
        shift = sum(moved) / len(moved) if moved else None
        curve = results.settings[setting]["factor_curve"]
        figures[f"{t:g}"] = {"setting": setting, "agreement_points": _cmp(agree), "error_change": _cmp(error),
                             "answer_shift": shift, "factor_curve": curve}
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
        return _not_checked(4, title, _needs_more(results) + f": the intervals are wider than the "
                                                             f"±{TOLERANCE_POINTS:g}-point margin", figures,
                            " ".join(lines))
    return Verdict(claim=4, title=title, verdict=word, summary=" ".join(lines), where_held=where, figures=figures)


# --------------------------------------------------------------------------- 5. the consistent rule


def claim_consistent(results: BenchResults) -> Verdict:
    title = "The consistent rule is at least as close to the truth as the paper's"
    groups = list(results.groups)
    missing = _missing(results, groups, DEFAULT, ("anchor", "anchor-paper"))
    if missing:
        return _not_checked(5, title, f"anchor and anchor-paper at the default errors: {missing}")
    priors = sorted({g.prior for g in results.groups.values() if g.prior is not None})
    skewed = min(priors, key=lambda p: -abs(p - 0.5)) if priors and any(p != 0.5 for p in priors) else None
    figures: dict[str, object] = {}
    lines = ["At the default errors (the base rate's error included), ANCHOR under the consistent rule minus the "
             "paper's ANCHOR, error to the truth (paired, 95% interval), and the two MAEs:"]
    checks: list[bool | None] = []
    where = []
    for g, info in results.groups.items():
        c = compare(results, g, DEFAULT, "anchor", "anchor-paper")
        mine, paper = (results.cell(g, DEFAULT, m).scores.mae.value  # type: ignore[union-attr]
                       for m in ("anchor", "anchor-paper"))
        figures[g] = {"vs paper": _cmp(c), "mae": mine, "mae_paper": paper}
        lines.append(f"{g}: {_fmt(c)}, MAE {_num(mine)} against {_num(paper)}.")
        if info.prior == 0.5:
            ok = None if c is None or c.low is None else c.low <= 0.0
            checks.append(ok)
            if ok:
                where.append(f"{g}: no worse")
        if skewed is not None and info.prior == skewed and info.structure != "network":
            ok = None if mine is None or paper is None else mine <= SKEWED_SHARE * paper
            checks.append(ok)
            if ok:
                where.append(f"{g}: at most {SKEWED_SHARE:g} of the paper's MAE")
    lines.append(f"Criterion: in every structure at even odds the interval is not wholly above 0, and at prior "
                 f"{'–' if skewed is None else f'{skewed:g}'} ANCHOR's MAE is at most {SKEWED_SHARE:g} of the paper's.")
    if not checks:
        return _not_checked(5, title, "groups at even odds", figures, " ".join(lines))
    if all(checks):
        word = "held"
    elif any(c is False for c in checks):
        word = "did not hold"
    else:
        return _not_checked(5, title, _needs_more(results), figures, " ".join(lines))
    return Verdict(claim=5, title=title, verdict=word, summary=" ".join(lines), where_held=where, figures=figures)


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


# --------------------------------------------------------------------------- all of them


def find_crossovers(results: BenchResults) -> list[Crossover]:
    """ANCHOR against each direct method along the direct-error sweep, and against vanilla along the
    factor-error sweep, in every group."""
    out = []
    for g in results.groups:
        for d in DIRECT_METHODS:
            out.append(crossover(results, "direct", g, "anchor", d))
        out.append(crossover(results, "factor", g, "anchor", "vanilla"))
    return out


def find_map(results: BenchResults, direct: str = "vanilla") -> list[MapCell]:
    """ANCHOR at each factor-error level against ``direct`` at each direct-error level, in every group."""
    plan = results.plan
    out = []
    for g in results.groups:
        for d in plan.levels.get("direct", ()):
            for f in plan.levels.get("factor", ()):
                c = compare_cells(results, g, (plan.setting_of("factor", f), "anchor"),
                                  (plan.setting_of("direct", d), direct))
                if c is not None:
                    out.append(MapCell(group=g, direct=d, factor=f, a="anchor", b=direct, n=c.n, worlds=c.worlds,
                                       diff=c.diff, low=c.low, high=c.high))
    return out


def find_power(results: BenchResults) -> list[Power]:
    """The interval for ANCHOR against vanilla at the default errors, as a detectable difference: in each
    group, in each generated structure over its priors, and over every group."""
    pools: list[tuple[str, list[str]]] = [(g, [g]) for g in results.groups]
    structures = list(dict.fromkeys(g.structure for g in results.groups.values() if g.prior is not None))
    for s in structures:
        groups = results.group_names(structure=s)
        if len(groups) > 1:
            pools.append((f"{s} (every prior)", groups))
    if len(results.groups) > 1:
        pools.append(("every group", list(results.groups)))
    out = []
    for name, groups in pools:
        c = compare_cells(results, groups, (DEFAULT, "anchor"), (DEFAULT, "vanilla"))
        if c is None:
            continue
        half = None if c.low is None or c.high is None else (c.high - c.low) / 2
        out.append(Power(group=name, worlds=c.worlds, n=c.n, half_width=half,
                         detectable=None if half is None else POWER_FACTOR * half / 1.96))
    return out


def judge(results: BenchResults) -> BenchResults:
    """``results`` with its map, power, crossovers and verdicts filled in."""
    results = results.model_copy(update={"map": find_map(results), "power": find_power(results)})
    crossovers = find_crossovers(results)
    verdicts = [claim_unknowns(results), claim_calibration(results, crossovers), claim_latent(results),
                claim_estimator(results), claim_consistent(results)]
    return results.model_copy(update={"crossovers": crossovers, "verdicts": verdicts})
