"""The bench's verdicts, map, power and crossovers on hand-made score tables: each claim held, did not hold,
and not checked (a missing run, or too few worlds to tell), the interval resampling worlds as well as cases,
a crossover found where the sign of the paired difference changes (its level interpolated by hand), and the
map's cells decided where ANCHOR is clearly closer."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from anchor.truth.scores import TruthRow, score_against_truth
from anchor.truth_bench.compare import bootstrap_interval, ece_truth, share
from anchor.truth_bench.plan import BenchPlan
from anchor.truth_bench.results import BenchResults, CaseInfo, CellResult, GroupInfo
from anchor.truth_bench.verdicts import (
    claim_calibration,
    claim_consistent,
    claim_estimator,
    claim_latent,
    claim_unknowns,
    judge,
)

GROUPS = {"naive-bayes@0.5": ("naive-bayes", 0.5), "latent@0.5": ("latent", 0.5), "latent@0.15": ("latent", 0.15)}
N = 40  # cases a group, 10 in each of 4 worlds: 36 that state factors, 4 that state nothing
TRUTH = [0.2 + 0.6 * (i % 9) / 8 for i in range(N)]  # 0.2 ... 0.8, never a tie at 0.5 except i % 9 == 4
KINDS = ["nothing" if i % 10 == 9 else "factors" for i in range(N)]
PLAN = BenchPlan(quick=True, seed=0, worlds_per_group=4, conditions_per_world=10, structures=("naive-bayes", "latent"),
                 priors=(0.5, 0.15), levels={"direct": (0.0, 1.0, 2.0), "factor": (0.0, 1.0),
                                             "factor_curve": (0.0, 1.0, 2.0, 4.0)}, latent_link=False)

Estimates = Callable[[int, float], float | None]  # (case index, truth) -> estimate, None = unknown


def cell(group: str, setting: str, method: str, estimate: Estimates | None) -> CellResult:
    base = CellResult(group=group, setting=setting, method=method, run=f"runs/{setting}/{method}")
    if estimate is None:
        return base.model_copy(update={"run": None, "not_run": "not run in this table"})
    p = [None if KINDS[i] == "nothing" else estimate(i, t) for i, t in enumerate(TRUTH)]
    p = [None if x is None else min(0.99, max(0.01, x)) for x in p]
    rows = [TruthRow(p_true=t, p=x, status="ok" if x is not None else "unknown", label=1) for x, t in zip(p, TRUTH, strict=True)]
    return base.model_copy(update={
        "p": p, "status": ["ok" if x is not None else "unknown" for x in p], "scores": score_against_truth(rows),
        "ece_truth": ece_truth(p, TRUTH),
        "unknown_with_factors": share([x is None for x, k in zip(p, KINDS, strict=True) if k != "nothing"], "none"),
        "answered_nothing": share([], "none")})


def exact(i: int, t: float) -> float:
    return t


def off(by: float, unknown_every: int = 0) -> Estimates:
    """Off the truth by ``by`` (alternating sides), unknown on every ``unknown_every``-th case."""
    def estimate(i: int, t: float) -> float | None:
        if unknown_every and i % unknown_every == 0:
            return None
        return t + (by if i % 2 else -by)
    return estimate


def results(table: dict[tuple[str, str], Estimates | None], groups: tuple[str, ...] = tuple(GROUPS)) -> BenchResults:
    """A results object from (setting, method) -> estimates, the same in every group."""
    cells = [cell(g, setting, method, est) for g in groups for (setting, method), est in table.items()]
    cases = {g: [CaseInfo(id=f"{g}-{i}", world=f"{g}-w{i // 10}", kind=k, p_true=t, label=1)
                 for i, (t, k) in enumerate(zip(TRUTH, KINDS, strict=True))] for g in groups}
    settings = {st.name: {"sweep": st.sweep, "level": st.level, **st.errors.model_dump(mode="json")}
                for st in PLAN.settings()}
    info = {g: GroupInfo(structure=GROUPS[g][0], prior=GROUPS[g][1], cases_file=f"cases/{g}.csv",
                         worlds=[f"{g}-w{j}" for j in range(4)]) for g in groups}
    return BenchResults(anchor_version="test", plan=PLAN, settings=settings, groups=info, cases=cases, cells=cells)


# --------------------------------------------------------------------------- the interval


def test_the_interval_resamples_worlds_so_a_world_apart_widens_it():
    rng = np.random.default_rng(3)
    d = rng.normal(0.0, 0.05, size=40)
    worlds = np.repeat(np.arange(4), 10)
    low, high = bootstrap_interval(d, worlds)
    assert low < d.mean() < high
    shifted = d + np.where(worlds == 0, 0.3, 0.0)  # one world far from the others, its cases alike
    s_low, s_high = bootstrap_interval(shifted, worlds)
    assert s_high - s_low > 3 * (high - low)
    # cases alone would see 40 draws and a narrow interval; the worlds are four
    c_low, c_high = bootstrap_interval(shifted, np.arange(40))
    assert c_high - c_low < s_high - s_low
    assert bootstrap_interval(d[:1], worlds[:1]) == (None, None)


# --------------------------------------------------------------------------- 1. unknowns


def test_unknowns_held_when_anchor_leaves_at_most_half_as_many_unknown_as_bird() -> None:
    v = claim_unknowns(results({("default", "anchor"): off(0.05, unknown_every=12),
                                ("default", "bird"): off(0.05, unknown_every=3)}))
    assert v.verdict == "held" and v.where_held == ["naive-bayes@0.5", "latent@0.5"]  # BIRD runs at even odds
    # of the 36 cases a group that state factors: ANCHOR i = 0, 12, 24, 36; BIRD every third but 9 and 39
    assert v.figures["all"]["anchor_unknown"] == pytest.approx(8 / 72)
    assert v.figures["all"]["bird_unknown"] == pytest.approx(24 / 72)


def test_unknowns_did_not_hold_when_they_are_alike_and_are_not_checked_without_bird() -> None:
    alike = claim_unknowns(results({("default", "anchor"): off(0.05, unknown_every=4),
                                    ("default", "bird"): off(0.05, unknown_every=5)}))
    assert alike.verdict == "did not hold" and alike.where_held == []
    missing = claim_unknowns(results({("default", "anchor"): exact, ("default", "bird"): None}))
    assert missing.verdict == "not checked"
    assert "needs" in missing.summary and "bird" in missing.summary and "not run in this table" in missing.summary


# --------------------------------------------------------------------------- 2. calibration


def direct_table(anchor: Estimates, direct: Estimates) -> dict[tuple[str, str], Estimates | None]:
    return {("default", "anchor"): anchor, **{("default", d): direct for d in ("vanilla", "cot", "logits")}}


def test_calibration_held_did_not_hold_and_needs_more_worlds() -> None:
    held = claim_calibration(results(direct_table(off(0.02), off(0.15))), [])
    assert held.verdict == "held", held.summary
    worse = claim_calibration(results(direct_table(off(0.15), off(0.02))), [])
    assert worse.verdict == "did not hold"
    # as far off on average, but not case by case: the paired interval straddles 0, the bench cannot tell
    coin = claim_calibration(results(direct_table(off(0.1), lambda i, t: t + (0.14 if i % 3 else -0.02))), [])
    assert coin.verdict == "not checked" and "more worlds" in coin.summary
    missing = claim_calibration(results({("default", "anchor"): exact}), [])
    assert missing.verdict == "not checked" and "vanilla" in missing.summary


def test_the_map_decides_each_cell_and_calibration_names_the_region() -> None:
    # ANCHOR 0.05 off at factor level 0 and 0.10 at 1; vanilla 0.0, 0.08 and 0.2 off at direct levels 0, 1, 2
    table = {("factor-0", "anchor"): off(0.05), ("default", "anchor"): off(0.10), ("direct-0", "vanilla"): exact,
             ("default", "vanilla"): off(0.08), ("direct-2", "vanilla"): off(0.2), ("default", "cot"): off(0.08),
             ("default", "logits"): off(0.08)}
    r = judge(results(table))
    cells = {(c.group, c.direct, c.factor): c for c in r.map}
    assert len(cells) == len(GROUPS) * 3 * 2
    assert cells[("latent@0.5", 2.0, 1.0)].diff == pytest.approx(-0.10, abs=0.005) and cells[("latent@0.5", 2.0, 1.0)].high < 0
    assert cells[("latent@0.5", 0.0, 0.0)].diff == pytest.approx(0.05) and cells[("latent@0.5", 0.0, 0.0)].low > 0
    assert cells[("latent@0.5", 1.0, 0.0)].diff == pytest.approx(-0.03)
    v = next(v for v in r.verdicts if v.claim == 2)
    assert "latent@0.5 (1, 0), (2, 0), (2, 1)" in v.summary


def test_power_says_what_each_group_can_tell() -> None:
    r = judge(results({("default", "anchor"): lambda i, t: t + (0.1 if i % 3 else -0.05),
                       ("default", "vanilla"): off(0.05)}))
    assert [p.group for p in r.power] == [*GROUPS, "latent (every prior)", "every group"]
    for p in r.power:
        assert p.worlds == 4 * {"latent (every prior)": 2, "every group": 3}.get(p.group, 1)
        assert p.n == 36 * p.worlds // 4 and p.half_width > 0
        assert p.detectable == pytest.approx(2.8 * p.half_width / 1.96)
    # more worlds, a narrower interval
    assert r.power[-1].half_width < min(p.half_width for p in r.power[:3])


# --------------------------------------------------------------------------- crossovers


def test_a_crossover_is_found_where_the_direct_error_overtakes_anchors_and_interpolated() -> None:
    # ANCHOR 0.10 off at every level; vanilla 0.0, 0.05 and 0.15 off at direct levels 0, 1, 2:
    # differences 0.10, 0.05, -0.05: the sign changes between 1 and 2, at 1 + 0.05 / 0.10 = 1.5
    table = {("default", "anchor"): off(0.10), ("direct-0", "anchor"): off(0.10), ("direct-2", "anchor"): off(0.10),
             ("direct-0", "vanilla"): exact, ("default", "vanilla"): off(0.05), ("direct-2", "vanilla"): off(0.15)}
    r = judge(results(table))
    found = next(c for c in r.crossovers if c.sweep == "direct" and c.b == "vanilla" and c.group == "latent@0.5")
    assert found.diffs == pytest.approx([0.10, 0.05, -0.05])
    assert found.between == (1.0, 2.0) and found.at == pytest.approx(1.5) and found.a_better_above is True
    assert "between 1 and 2" in found.note


def test_no_crossover_when_anchor_is_closer_at_every_level() -> None:
    table = {(s, m): est for s in ("default", "direct-0", "direct-2")
             for m, est in (("anchor", off(0.01)), ("vanilla", off(0.2)))}
    r = judge(results(table))
    found = next(c for c in r.crossovers if c.sweep == "direct" and c.b == "vanilla")
    assert found.between is None and found.at is None
    assert "none in the swept range" in found.note and "closer" in found.note
    cot = next(c for c in r.crossovers if c.sweep == "direct" and c.b == "cot")
    assert cot.note == "not enough levels with both methods run"


# --------------------------------------------------------------------------- 3. the latent network


def test_latent_network_held_did_not_hold_and_not_checked() -> None:
    good = {("default", "anchor"): off(0.02), ("default", "nb"): off(0.12)}
    v = claim_latent(results(good))
    assert v.verdict == "held" and v.where_held == ["naive-bayes@0.5", "latent@0.5", "latent@0.15"]
    bad = {("default", "anchor"): off(0.12), ("default", "nb"): off(0.02)}
    assert claim_latent(results(bad)).verdict == "did not hold"
    assert claim_latent(results(good, groups=("naive-bayes@0.5",))).verdict == "not checked"
    partial = {("default", "anchor"): exact}
    assert "nb" in claim_latent(results(partial)).summary


# --------------------------------------------------------------------------- 4. the estimator


def estimator_table(level2: Estimates, level4: Estimates) -> dict[tuple[str, str], Estimates | None]:
    return {("factor_curve-0", "anchor"): exact, ("default", "anchor"): off(0.05),
            ("factor_curve-2", "anchor"): level2, ("factor_curve-4", "anchor"): level4}


def test_estimator_held_when_coarser_estimates_keep_every_decision() -> None:
    # coarser numbers that never cross 0.5 where the truth does not (the truth nearest it is 0.075 away)
    v = claim_estimator(results(estimator_table(off(0.06), off(0.07))))
    assert v.verdict == "held", v.summary
    assert v.where_held == ["factor_curve level 2", "factor_curve level 4"]
    assert v.figures["4"]["agreement_points"]["diff"] == 0.0


def test_estimator_did_not_hold_when_a_coarse_estimator_flips_many_decisions() -> None:
    flipped = lambda i, t: 1.0 - t if i % 2 else t  # noqa: E731 - half the cases on the wrong side
    v = claim_estimator(results(estimator_table(off(0.06), flipped)))
    assert v.verdict == "did not hold"
    assert v.figures["4"]["agreement_points"]["high"] < -2.5
    assert v.where_held == ["factor_curve level 2"]


def test_estimator_not_checked_without_the_levels_or_with_too_few_worlds() -> None:
    no_sweep = claim_estimator(results({("default", "anchor"): exact}))
    assert no_sweep.verdict == "not checked" and "factor_curve" in no_sweep.summary
    one_flip = lambda i, t: 1.0 - t if i == 1 else t  # noqa: E731 - 2 of 64 decisions: an interval across -2.5
    unclear = claim_estimator(results(estimator_table(off(0.06), one_flip)))
    assert unclear.verdict == "not checked" and "more worlds" in unclear.summary


# --------------------------------------------------------------------------- 5. the consistent rule


def test_consistent_rule_held_when_no_worse_at_even_odds_and_half_the_error_where_skewed() -> None:
    v = claim_consistent(results({("default", "anchor"): off(0.04), ("default", "anchor-paper"): off(0.1)}))
    assert v.verdict == "held", v.summary
    assert v.figures["latent@0.15"]["mae"] == pytest.approx(0.04) and v.figures["latent@0.15"]["mae_paper"] \
        == pytest.approx(0.1)
    # at even odds no worse, but at the skewed prior only a little better: not half
    v = claim_consistent(results({("default", "anchor"): off(0.08), ("default", "anchor-paper"): off(0.1)}))
    assert v.verdict == "did not hold" and "latent@0.5: no worse" in v.where_held
    # worse at even odds
    assert claim_consistent(results({("default", "anchor"): off(0.1),
                                     ("default", "anchor-paper"): off(0.02)})).verdict == "did not hold"
    missing = claim_consistent(results({("default", "anchor"): exact}))
    assert missing.verdict == "not checked" and "anchor-paper" in missing.summary


def test_a_negligible_difference_is_no_difference_however_narrow_its_interval() -> None:
    tiny = claim_latent(results({("default", "anchor"): lambda i, t: t + 0.0004, ("default", "nb"): exact}))
    assert tiny.verdict == "not checked" and tiny.where_held == []
