"""The parts of ``anchor calibrate``'s study computed by hand: the scores it reports, the scenario folds
and the risk-coverage curve."""

from __future__ import annotations

import math

import pytest

from anchor.evaluation.calibrate.folds import scenario_folds
from anchor.evaluation.calibrate.risk_coverage import risk_coverage
from anchor.metrics import equal_mass_calibration_error, log_loss


def test_log_loss_and_equal_mass_ece_by_hand():
    assert log_loss([1, 2, 1], [0.8, 0.4, None])["log_loss"] == pytest.approx(-(math.log(0.8) + math.log(0.6)) / 2)
    # Two bins of two: (0.1, 0.2) with one O1 -> |0.15 - 0.5|; (0.8, 0.9) both O1 -> |0.85 - 1|.
    ece = equal_mass_calibration_error([1, 2, 1, 1], [0.9, 0.1, 0.8, 0.2], n_bins=2)
    assert ece["ece"] == pytest.approx(0.5 * 0.35 + 0.5 * 0.15)
    assert [b["count"] for b in ece["bins"]] == [2, 2]
    assert equal_mass_calibration_error([1], [None])["ece"] is None


def test_folds_never_split_a_scenario_and_do_not_depend_on_order():
    pairs = [(f"d:{i}:{k}", f"s{i % 7}") for i in range(30) for k in range(i % 3 + 1)]
    folds = scenario_folds(pairs, 5)
    assert set(folds) == {f"s{j}" for j in range(7)} and set(folds.values()) == set(range(5))
    assert scenario_folds(list(reversed(pairs)) + pairs[:4], 5) == folds
    assert len(set(scenario_folds(pairs[:3], 5).values())) == 2  # fewer scenarios than folds: one fold each
    assert scenario_folds([("a", "s"), ("b", "s")], 5) == {}
    with pytest.raises(ValueError, match="two scenarios"):
        scenario_folds([("a", "s1"), ("a", "s2"), ("b", "s3")])


def test_risk_coverage_by_hand():
    # Confidences 0.9 (right), 0.7 (P(O1) 0.7 but O2 gold: wrong), 0.6 (right); the fourth is unknown.
    curve = risk_coverage([1, 2, 1, 1], [0.9, 0.7, 0.6, None], "decision")
    assert [p["coverage"] for p in curve["points"]] == pytest.approx([0.25, 0.5, 0.75])
    assert [p["accuracy"] for p in curve["points"]] == pytest.approx([1.0, 0.5, 2 / 3])
    assert curve["aurc"] == pytest.approx(0.25 * 0 + 0.25 * 0.5 + 0.25 * (1 / 3))
    assert curve["max_coverage"] == 0.75
    # Fact checking: "supported" iff P > 0.9; 0.8 on a supported claim is a wrong "not supported".
    fc = risk_coverage([1, 1, 2], [0.95, 0.8, 0.2], "factcheck", 0.9)
    assert fc["points"][-1]["accuracy"] == pytest.approx(2 / 3)
    # A tie at 0.5 is never right; nothing answered gives no area.
    assert risk_coverage([1], [0.5], "decision")["accuracy_at_max"] == 0.0
    assert risk_coverage([1, 2], [None, None], "decision")["aurc"] is None
