"""Scores against the truth, on rows whose every figure is worked out by hand below."""

from __future__ import annotations

import math

import pytest

from anchor.truth.scores import CLIP, TRUTH_SCORES_SCHEMA_VERSION, TruthRow, TruthScores, score_against_truth

ROWS = [
    TruthRow(p_true=0.8, p=0.6, label=1),   # A: decided, right side of 0.5
    TruthRow(p_true=0.3, p=0.5, label=2),   # B: an estimate of exactly 0.5 (a tie)
    TruthRow(p_true=0.5, p=0.9, label=1),   # C: a truth of 0.5 (a tie)
    TruthRow(p_true=0.2, p=0.7),            # D: decided, wrong side; no label
    TruthRow(p_true=0.7, p=None, status="unknown", label=1),
    TruthRow(p_true=0.4, p=None, status="failed", label=2),
]


def kl(t: float, q: float) -> float:
    return t * math.log(t / q) + (1 - t) * math.log((1 - t) / (1 - q))


def cross(t: float, q: float) -> float:
    return -(t * math.log(q) + (1 - t) * math.log(1 - q))


def test_every_figure_by_hand():
    s = score_against_truth(ROWS, requests=10, tokens=1234)
    assert (s.n, s.answered, s.unknown, s.failed, s.schema_version) == (6, 4, 1, 1, TRUTH_SCORES_SCHEMA_VERSION)
    assert s.coverage.value == pytest.approx(4 / 6) and s.coverage.n == 6
    # Errors p - t over the answered rows: -0.2, +0.2, +0.4, +0.5.
    assert s.mae.value == pytest.approx((0.2 + 0.2 + 0.4 + 0.5) / 4) and s.mae.n == 4
    assert s.brier_truth.value == pytest.approx((0.04 + 0.04 + 0.16 + 0.25) / 4)
    assert s.rmse.value == pytest.approx(math.sqrt(0.49 / 4)) and s.rmse.n == 4
    assert s.kl.value == pytest.approx((kl(0.8, 0.6) + kl(0.3, 0.5) + kl(0.5, 0.9) + kl(0.2, 0.7)) / 4)
    assert s.cross_entropy.value == pytest.approx((cross(0.8, 0.6) + cross(0.3, 0.5) + cross(0.5, 0.9)
                                                   + cross(0.2, 0.7)) / 4)
    # Against the labels: A, B and C (D has none). Brier: (0.6-1)^2, (0.5-0)^2, (0.9-1)^2.
    assert s.brier_labels.value == pytest.approx((0.16 + 0.25 + 0.01) / 3) and s.brier_labels.n == 3
    # ECE, ten bins: 0.6 alone in [0.6, 0.7) with outcome 1 (gap 0.4), 0.5 in [0.5, 0.6) with outcome 2
    # (gap 0.5), 0.9 in [0.9, 1] with outcome 1 (gap 0.1); each a third of the rows.
    assert s.ece_labels.value == pytest.approx((0.4 + 0.5 + 0.1) / 3) and s.ece_labels.n == 3
    # The Bayes decision: B and C are ties; A is right, D wrong.
    assert (s.decision_accuracy.value, s.decision_accuracy.n, s.decision_ties) == (0.5, 2, 2)
    assert (s.requests, s.tokens, s.cost_note) == (10, 1234, None)


def test_a_truth_that_enumeration_rounded_off_half_is_still_a_tie():
    s = score_against_truth([TruthRow(p_true=0.49999999999999994, p=0.7),
                             TruthRow(p_true=0.5000000000000001, p=0.2), TruthRow(p_true=0.4, p=0.3)])
    assert (s.decision_ties, s.decision_accuracy.value, s.decision_accuracy.n) == (2, 1.0, 1)


def test_certain_estimates_are_clipped_and_a_certain_truth_is_not():
    s = score_against_truth([TruthRow(p_true=0.3, p=0.0), TruthRow(p_true=0.0, p=0.0)])
    q = CLIP
    assert s.cross_entropy.value == pytest.approx((cross(0.3, q) + -math.log(1 - q)) / 2)
    assert s.kl.value == pytest.approx((kl(0.3, q) + -math.log(1 - q)) / 2)
    assert math.isfinite(s.kl.value) and s.kl.value > 0


def test_no_rows_and_no_answers_give_none_with_a_reason_never_zero():
    empty = score_against_truth([])
    for name in TruthScores.FIGURES:
        figure = getattr(empty, name)
        assert figure.value is None and figure.n == 0 and figure.reason == "no row has a true probability"
    silent = score_against_truth([TruthRow(p_true=0.6, p=None, status="unknown", label=1)],
                                 cost_note="the run has not finished")
    assert silent.coverage.value == 0.0 and silent.coverage.n == 1  # a share of rows: 0 answered is a figure
    assert silent.mae.value is None and silent.mae.reason == "no row was answered"
    assert silent.ece_labels.reason == "no row was answered" and silent.cost_note == "the run has not finished"
    unlabelled = score_against_truth([TruthRow(p_true=0.6, p=0.6)])
    assert unlabelled.mae.value == 0.0 and unlabelled.brier_labels.value is None
    assert unlabelled.brier_labels.reason == "no answered row has a label"
    tied = score_against_truth([TruthRow(p_true=0.6, p=0.5)])
    assert tied.decision_accuracy.value is None and tied.decision_accuracy.reason == "every answered row is a tie at 0.5"


@pytest.mark.parametrize("kwargs", [dict(p_true=1.2, p=0.5), dict(p_true=0.5, p=-0.1),
                                    dict(p_true=0.5, p=None), dict(p_true=0.5, p=0.4, status="unknown")])
def test_a_row_that_is_not_a_probability_or_contradicts_its_status_is_refused(kwargs):
    with pytest.raises(ValueError):
        TruthRow(**kwargs)


def test_the_json_has_a_schema_version_and_every_figure_with_its_rows():
    data = score_against_truth(ROWS).model_dump(mode="json")
    assert data["schema_version"] == 1
    assert all(set(data[name]) == {"value", "n", "reason"} for name in TruthScores.FIGURES)
