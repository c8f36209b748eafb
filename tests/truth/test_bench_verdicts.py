"""The bench's verdicts and crossovers on hand-made score tables: each claim held, did not hold, and not
checked (a missing run, or too few cases to tell), and a crossover found where the sign of the paired
difference changes, with its level interpolated by hand, or none in the swept range."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from anchor.truth.bench.compare import ece_truth, share
from anchor.truth.bench.plan import BenchPlan
from anchor.truth.bench.results import BenchResults, CaseInfo, CellResult
from anchor.truth.bench.verdicts import (
    claim_calibration,
    claim_estimator,
    claim_latent,
    claim_unknowns,
    judge,
)
from anchor.truth.scores import TruthRow, score_against_truth

STRUCTURES = ("naive-bayes", "latent")
N = 40  # cases a structure: 36 that state factors, 4 that state nothing
TRUTH = [0.2 + 0.6 * (i % 9) / 8 for i in range(N)]  # 0.2 ... 0.8, never a tie at 0.5 except i % 9 == 4
KINDS = ["nothing" if i % 10 == 9 else "factors" for i in range(N)]
PLAN = BenchPlan(quick=True, seed=0, worlds_per_structure=1, conditions_per_world=N, structures=STRUCTURES,
                 levels={"direct": (0.0, 1.0, 2.0), "factor": (1.0,), "factor_curve": (0.0, 1.0, 2.0, 4.0)},
                 latent_link=False)

Estimates = Callable[[int, float], float | None]  # (case index, truth) -> estimate, None = unknown


def cell(structure: str, setting: str, method: str, estimate: Estimates | None) -> CellResult:
    base = CellResult(structure=structure, setting=setting, method=method, run=f"runs/{setting}/{method}")
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


def results(table: dict[tuple[str, str], Estimates | None], structures: tuple[str, ...] = STRUCTURES) -> BenchResults:
    """A results object from (setting, method) -> estimates, the same in every structure."""
    cells = [cell(s, setting, method, est) for s in structures for (setting, method), est in table.items()]
    cases = {s: [CaseInfo(id=f"{s}-{i}", world=f"{s}-1", kind=k, p_true=t, label=1)
                 for i, (t, k) in enumerate(zip(TRUTH, KINDS, strict=True))] for s in structures}
    settings = {st.name: {"sweep": st.sweep, "level": st.level, **st.errors.model_dump(mode="json")}
                for st in PLAN.settings()}
    return BenchResults(anchor_version="test", plan=PLAN.model_copy(update={"structures": structures}),
                        settings=settings, worlds={s: [f"{s}-1"] for s in structures}, cases=cases, cells=cells)


# --------------------------------------------------------------------------- 1. unknowns


def test_unknowns_held_when_anchor_leaves_at_most_half_as_many_unknown_as_bird() -> None:
    v = claim_unknowns(results({("default", "anchor"): off(0.05, unknown_every=12),
                                ("default", "bird"): off(0.05, unknown_every=3)}))
    assert v.verdict == "held" and v.where_held == list(STRUCTURES)
    # of the 36 cases a structure that state factors: ANCHOR i = 0, 12, 24, 36; BIRD every third but 9 and 39
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


def test_calibration_held_did_not_hold_and_needs_more_cases() -> None:
    held = claim_calibration(results(direct_table(off(0.02), off(0.15))), [])
    assert held.verdict == "held", held.summary
    worse = claim_calibration(results(direct_table(off(0.15), off(0.02))), [])
    assert worse.verdict == "did not hold"
    # as far off on average, but not case by case: the paired interval straddles 0, the bench cannot tell
    coin = claim_calibration(results(direct_table(off(0.1), lambda i, t: t + (0.14 if i % 3 else -0.02))), [])
    assert coin.verdict == "not checked" and "more cases" in coin.summary
    missing = claim_calibration(results({("default", "anchor"): exact}), [])
    assert missing.verdict == "not checked" and "vanilla" in missing.summary


# --------------------------------------------------------------------------- crossovers


def test_a_crossover_is_found_where_the_direct_error_overtakes_anchors_and_interpolated() -> None:
    # ANCHOR 0.10 off at every level; vanilla 0.0, 0.05 and 0.15 off at direct levels 0, 1, 2:
    # differences 0.10, 0.05, -0.05: the sign changes between 1 and 2, at 1 + 0.05 / 0.10 = 1.5
    table = {("default", "anchor"): off(0.10), ("direct-0", "anchor"): off(0.10), ("direct-2", "anchor"): off(0.10),
             ("direct-0", "vanilla"): exact, ("default", "vanilla"): off(0.05), ("direct-2", "vanilla"): off(0.15)}
    r = judge(results(table))
    found = next(c for c in r.crossovers if c.sweep == "direct" and c.b == "vanilla" and c.structure == "latent")
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
    # a method not run at all: no levels to compare
    cot = next(c for c in r.crossovers if c.sweep == "direct" and c.b == "cot")
    assert cot.note == "not enough levels with both methods run"


# --------------------------------------------------------------------------- 3. the latent network


def test_latent_network_held_did_not_hold_and_not_checked() -> None:
    good = {("default", "no-nb"): off(0.02), ("default", "anchor"): off(0.04), ("default", "no-cbn"): off(0.12)}
    v = claim_latent(results(good))
    assert v.verdict == "held" and "latent worlds at default" in v.where_held
    bad = {("default", "no-nb"): off(0.12), ("default", "anchor"): off(0.08), ("default", "no-cbn"): off(0.02)}
    assert claim_latent(results(bad)).verdict == "did not hold"
    assert claim_latent(results(good, structures=("naive-bayes",))).verdict == "not checked"
    partial = {("default", "anchor"): exact, ("default", "no-cbn"): exact}
    assert "no-nb" in claim_latent(results(partial)).summary


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


def test_estimator_not_checked_without_the_levels_or_with_too_few_cases() -> None:
    no_sweep = claim_estimator(results({("default", "anchor"): exact}))
    assert no_sweep.verdict == "not checked" and "factor_curve" in no_sweep.summary
    one_flip = lambda i, t: 1.0 - t if i == 1 else t  # noqa: E731 - 2 of 64 decisions: an interval across -2.5
    unclear = claim_estimator(results(estimator_table(off(0.06), one_flip)))
    assert unclear.verdict == "not checked" and "more cases" in unclear.summary
