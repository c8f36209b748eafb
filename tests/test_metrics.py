"""Evaluation metrics against hand-computed cases (the arithmetic is in the comments)."""

from __future__ import annotations

import math
import random
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from anchor.metrics import (
    brier_score,
    decision_accuracy,
    equal_mass_calibration_error,
    expected_calibration_error,
    factcheck_metrics,
    mean_std,
    pairwise_metrics,
    pairwise_prediction,
    reliability_bins,
)

# Every test in this module fails on any warning (scikit-learn's UndefinedMetricWarning included).
pytestmark = pytest.mark.filterwarnings("error")

approx = pytest.approx


# --------------------------------------------------------------------------- pairwise_prediction


def test_pairwise_prediction_basic_and_ties() -> None:
    assert pairwise_prediction(0.8, 0.6) == 1
    assert pairwise_prediction(0.6, 0.8) == 2
    assert pairwise_prediction(0.7, 0.7) == 3
    assert pairwise_prediction(0.0, 0.0) == 3
    # Exact comparison: 0.1 + 0.2 is 0.30000000000000004 in floating point, so it beats 0.3.
    assert pairwise_prediction(0.1 + 0.2, 0.3) == 1
    # With a tolerance, |0.71 - 0.70| = 0.01 <= 0.05 is a tie; 0.80 - 0.70 = 0.10 > 0.05 is not.
    assert pairwise_prediction(0.71, 0.70, tie_tol=0.05) == 3
    assert pairwise_prediction(0.70, 0.80, tie_tol=0.05) == 2


def test_pairwise_prediction_unknowns() -> None:
    assert pairwise_prediction(None, 0.3) is None
    assert pairwise_prediction(0.3, None) is None
    assert pairwise_prediction(None, None) is None
    # unknown_as=0.5 stands in for the missing side: 0.5 > 0.3 -> 1; 0.5 < 0.7 -> 2;
    # 0.5 == 0.5 -> 3; both missing -> 0.5 vs 0.5 -> 3.
    assert pairwise_prediction(None, 0.3, unknown_as=0.5) == 1
    assert pairwise_prediction(None, 0.7, unknown_as=0.5) == 2
    assert pairwise_prediction(0.5, None, unknown_as=0.5) == 3
    assert pairwise_prediction(None, None, unknown_as=0.5) == 3
    # unknown_as does not touch known values.
    assert pairwise_prediction(0.2, 0.4, unknown_as=0.5) == 2


def test_pairwise_prediction_rejects_bad_input() -> None:
    for bad in (1.2, -0.1, math.nan):
        with pytest.raises(ValueError):
            pairwise_prediction(bad, 0.5)
    with pytest.raises(ValueError):
        pairwise_prediction(None, 0.5, unknown_as=2.0)
    with pytest.raises(ValueError):
        pairwise_prediction(0.5, 0.5, tie_tol=-0.01)


@given(st.floats(0, 1), st.floats(0, 1), st.floats(0, 0.2))
def test_pairwise_prediction_is_antisymmetric(a: float, b: float, tol: float) -> None:
    flip = {1: 2, 2: 1, 3: 3}
    forward = pairwise_prediction(a, b, tie_tol=tol)
    assert forward in flip
    assert pairwise_prediction(b, a, tie_tol=tol) == flip[forward]


# --------------------------------------------------------------------------- pairwise_metrics


def test_pairwise_metrics_hand_computed() -> None:
    human = [1, 1, 2, 2, 3, 1]
    predicted = [1, 2, 2, None, 3, 1]
    m = pairwise_metrics(human, predicted)
    # Covered: indices 0, 1, 2, 4, 5 -> human [1, 1, 2, 3, 1], predicted [1, 2, 2, 3, 1].
    # Class 1: TP 2 (0, 5), FP 0, FN 1 (1) -> P 1, R 2/3, F1 = 2 * (2/3) / (5/3) = 0.8.
    # Class 2: TP 1 (2), FP 1 (1), FN 0 -> P 1/2, R 1, F1 = 2 * 0.5 / 1.5 = 2/3.
    # Class 3: TP 1, FP 0, FN 0 -> 1.0.   Micro: 4 of 5 right -> 0.8.
    assert m["f1_context1"] == approx(0.8)
    assert m["f1_context2"] == approx(2 / 3)
    assert m["f1_same"] == approx(1.0)
    assert m["f1_micro"] == approx(0.8)
    assert (m["n"], m["n_covered"]) == (6, 5)
    assert m["coverage"] == approx(5 / 6)
    # Rows are human 1..3, columns predicted 1..3.
    assert m["confusion"] == [[2, 1, 0], [0, 1, 0], [0, 0, 1]]


def test_pairwise_metrics_all_unknown() -> None:
    m = pairwise_metrics([1, 2, 3], [None, None, None])
    assert m["coverage"] == 0.0
    assert (m["n"], m["n_covered"]) == (3, 0)
    assert m["f1_context1"] is None and m["f1_context2"] is None
    assert m["f1_same"] is None and m["f1_micro"] is None
    assert m["confusion"] == [[0, 0, 0], [0, 0, 0], [0, 0, 0]]


def test_pairwise_metrics_single_class() -> None:
    # Human all 1, predicted [1, 1, 2]: class 1 TP 2, FN 1 -> P 1, R 2/3, F1 0.8. Class 2 has no pair
    # (its prediction is a false positive, which costs class 1 its recall and the micro F1) and class
    # 3 none either: their F1 is undefined, None, not scikit-learn's 0.0. Micro 2/3.
    m = pairwise_metrics([1, 1, 1], [1, 1, 2])
    assert m["f1_context1"] == approx(0.8)
    assert m["f1_context2"] is None
    assert m["f1_same"] is None
    assert m["f1_micro"] == approx(2 / 3)
    assert m["support"] == [3, 0, 0]
    # Everything "same" and predicted "same": that class is perfect, the absent ones have no F1.
    m = pairwise_metrics([3, 3], [3, 3])
    assert (m["f1_context1"], m["f1_context2"], m["f1_same"], m["f1_micro"]) == (None, None, 1.0, 1.0)


def test_a_class_with_pairs_but_none_covered_has_no_f1() -> None:
    """The F1 of a class is over the scored pairs: pairs of it that were all unknown leave it without one."""
    m = pairwise_metrics([1, 2, 3], [1, 1, None])
    assert m["support"] == [1, 1, 0]
    assert m["f1_same"] is None
    assert m["f1_context2"] == 0.0  # a Context2 pair was scored, and missed: a real 0


def test_pairwise_metrics_with_unknown_as_half() -> None:
    probs = [(0.9, 0.4), (None, 0.6), (0.7, None), (None, None)]
    human = [1, 1, 1, 3]
    strict = [pairwise_prediction(a, b) for a, b in probs]
    assert strict == [1, None, None, None]
    m = pairwise_metrics(human, strict)
    # Only pair 0 is covered and it is right.
    assert m["coverage"] == 0.25 and m["f1_micro"] == 1.0
    filled = [pairwise_prediction(a, b, unknown_as=0.5) for a, b in probs]
    # 0.9 > 0.4 -> 1; 0.5 < 0.6 -> 2; 0.7 > 0.5 -> 1; 0.5 == 0.5 -> 3.
    assert filled == [1, 2, 1, 3]
    m = pairwise_metrics(human, filled)
    # human [1, 1, 1, 3] vs [1, 2, 1, 3]: class 1 TP 2, FN 1 -> F1 0.8; class 2 has no pair -> None;
    # class 3 TP 1 -> 1.0; micro 3/4.
    assert m["coverage"] == 1.0
    assert m["f1_context1"] == approx(0.8)
    assert m["f1_context2"] is None  # no pair has human label 2: predicting it once is a false positive only
    assert m["f1_same"] == 1.0
    assert m["f1_micro"] == approx(0.75)


def test_pairwise_metrics_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="different lengths"):
        pairwise_metrics([1, 2], [1])
    with pytest.raises(ValueError, match="empty"):
        pairwise_metrics([], [])
    with pytest.raises(ValueError, match=r"human\[1\]"):
        pairwise_metrics([1, 4], [1, 1])
    with pytest.raises(ValueError, match="predicted"):
        pairwise_metrics([1, 2], [1, 0])
    with pytest.raises(ValueError):
        pairwise_metrics([True, 2], [1, 1])


# --------------------------------------------------------------------------- decisions


def test_decision_accuracy_hand_computed() -> None:
    labels = [1, 2, 1, 2, 1]
    probs = [0.9, 0.2, 0.5, None, 0.4]
    # 0: 0.9 > 0.5 -> 1, right. 1: 0.2 < 0.5 -> 2, right. 2: tie, not right. 3: unknown.
    # 4: 0.4 -> 2, wrong. Correct 2 of 5 -> 0.4; of the 4 covered -> 0.5; coverage 4/5.
    m = decision_accuracy(labels, probs)
    assert m["accuracy"] == approx(0.4)
    assert m["accuracy_covered"] == approx(0.5)
    assert m["coverage"] == approx(0.8)
    assert (m["n"], m["n_covered"], m["n_correct"], m["n_ties"]) == (5, 4, 2, 1)


def test_decision_accuracy_all_unknown_and_single_class() -> None:
    m = decision_accuracy([1, 2], [None, None])
    assert m["accuracy"] == 0.0 and m["accuracy_covered"] is None and m["coverage"] == 0.0
    # All gold outcome1 (as in the bundled Plasma/Today): 0.6, 0.51 right, 0.49 wrong -> 2/3.
    m = decision_accuracy([1, 1, 1], [0.6, 0.51, 0.49])
    assert m["accuracy"] == approx(2 / 3) and m["accuracy_covered"] == approx(2 / 3)
    with pytest.raises(ValueError):
        decision_accuracy([1, 3], [0.5, 0.5])
    with pytest.raises(ValueError):
        decision_accuracy([1], [1.5])


def test_factcheck_metrics_hand_computed() -> None:
    labels = [1, 1, 2, 2, 2]
    probs = [0.95, 0.9, 0.95, 0.1, None]
    # Support iff p > 0.9: [yes, no (0.9 is not > 0.9), yes, no, no (unknown)].
    # Supported claims (0, 1): recall 1/2. Refuted claims (2, 3, 4): 3 and 4 right -> recall 2/3.
    # Balanced accuracy (1/2 + 2/3) / 2 = 7/12. Accuracy: 0, 3, 4 right -> 3/5. Coverage 4/5.
    m = factcheck_metrics(labels, probs)
    assert m["balanced_accuracy"] == approx(7 / 12)
    assert m["accuracy"] == approx(0.6)
    assert m["coverage"] == approx(0.8)
    assert (m["n"], m["n_covered"], m["n_predicted_support"], m["threshold"]) == (5, 4, 2, 0.9)
    # Threshold 0.5: predictions [yes, yes, yes, no, no] -> recalls 2/2 and 2/3 -> 5/6; accuracy 4/5.
    m = factcheck_metrics(labels, probs, threshold=0.5)
    assert m["balanced_accuracy"] == approx(5 / 6)
    assert m["accuracy"] == approx(0.8)


def test_factcheck_metrics_single_class_and_unknowns() -> None:
    # Only refuted claims: balanced accuracy is the recall of that class, 2/3 (0.95 is a false support).
    m = factcheck_metrics([2, 2, 2], [0.95, 0.1, None])
    assert m["balanced_accuracy"] == approx(2 / 3)
    assert m["accuracy"] == approx(2 / 3)
    # All unknown: nothing is supported; supported claims are all missed -> recall 0, refuted 1 -> 0.5.
    m = factcheck_metrics([1, 2], [None, None])
    assert m["balanced_accuracy"] == approx(0.5)
    assert m["coverage"] == 0.0


# --------------------------------------------------------------------------- calibration


def test_brier_score_hand_computed() -> None:
    # Used: (1, 0.8), (2, 0.3), (2, 0.5); event = label 1 -> [1, 0, 0].
    # ((0.8 - 1)^2 + 0.3^2 + 0.5^2) / 3 = (0.04 + 0.09 + 0.25) / 3 = 0.38 / 3.
    m = brier_score([1, 2, 1, 2], [0.8, 0.3, None, 0.5])
    assert m["brier"] == approx(0.38 / 3)
    assert (m["n"], m["n_skipped"]) == (3, 1)
    m = brier_score([1, 2], [None, None])
    assert m == {"brier": None, "n": 0, "n_skipped": 2}
    # Single class: all label 1 with p 1.0 and 0.5 -> (0 + 0.25) / 2.
    assert brier_score([1, 1], [1.0, 0.5])["brier"] == approx(0.125)


def test_ece_hand_computed() -> None:
    labels = [1, 1, 2, 2, 1]
    probs = [0.9, 0.6, 0.4, 0.2, None]
    # Two bins. [0, 0.5): p 0.4, 0.2 -> mean 0.3, events 0, 0 -> freq 0, gap 0.3.
    # [0.5, 1]: p 0.9, 0.6 -> mean 0.75, events 1, 1 -> freq 1, gap 0.25.
    # ECE = 2/4 * 0.3 + 2/4 * 0.25 = 0.275.
    m = expected_calibration_error(labels, probs, n_bins=2)
    assert m["ece"] == approx(0.275)
    assert (m["n"], m["n_skipped"], m["n_bins"]) == (4, 1, 2)
    assert expected_calibration_error([1], [None]) == {"ece": None, "n": 0, "n_skipped": 1, "n_bins": 10}


def test_reliability_bins_edges() -> None:
    # Four bins of width 0.25; a value on an edge goes to the bin above, 1.0 to the last bin.
    bins = reliability_bins([2, 1, 2, 1], [0.0, 0.25, 0.5, 1.0], n_bins=4)
    assert [(b["lo"], b["hi"]) for b in bins] == [(0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.0)]
    assert [b["count"] for b in bins] == [1, 1, 1, 1]
    assert [b["mean_confidence"] for b in bins] == [0.0, 0.25, 0.5, 1.0]
    assert [b["observed_frequency"] for b in bins] == [0.0, 1.0, 0.0, 1.0]
    # ECE = 1/4 * (|0 - 0| + |0.25 - 1| + |0.5 - 0| + |1 - 1|) = 1/4 * 1.25 = 0.3125.
    assert expected_calibration_error([2, 1, 2, 1], [0.0, 0.25, 0.5, 1.0], n_bins=4)["ece"] == approx(0.3125)


def test_round_answers_on_an_edge_go_to_the_bin_above_every_edge_alike() -> None:
    # An LLM answers round decimals. With ten bins, 0.0, 0.1, ..., 0.9 each open bin k and 1.0 joins
    # the last bin; np.linspace's edges (0.30000000000000004, 0.6000000000000001, 0.7000000000000001)
    # put 0.3, 0.6 and 0.7 in the bin below.
    values = [float(f"0.{k}") for k in range(10)] + [1.0]
    bins = reliability_bins([1] * 11, values)
    assert [b["count"] for b in bins] == [1] * 9 + [2]
    assert [b["mean_confidence"] for b in bins[:9]] == values[:9]
    assert [b["lo"] for b in bins] == values[:10]
    # Labels: O1 gold for odd k. Gaps |mean - observed| per bin: 0, 0.9, 0.2, 0.7, 0.4, 0.5, 0.6, 0.3, 0.8
    # (one value each) and the last bin {0.9 (O1), 1.0 (O2)}: |0.95 - 0.5| = 0.45 over two values.
    # ECE = (4.4 + 2 * 0.45) / 11 = 5.3 / 11. (linspace's edges gave 3.9 / 11.)
    labels = [1 if k % 2 else 2 for k in range(11)]
    assert expected_calibration_error(labels, values)["ece"] == approx(5.3 / 11)
    # The same rule with other bin counts: the decimal j/n opens bin j.
    for n in (4, 5, 8, 20, 100):
        on_edges = [float(str(Decimal(j) / Decimal(n))) for j in range(n)]
        idx = [next(i for i, b in enumerate(reliability_bins([1], [v], n_bins=n)) if b["count"]) for v in on_edges]
        assert idx == list(range(n)), n


def test_equal_mass_bins_keep_equal_values_together_whatever_the_order() -> None:
    # A calibrator that answers 0.5 for all 46 instances, 22 with O1 gold: one bin, |0.5 - 22/46|,
    # whichever order the instances come in (cut in id order it gave 0.174).
    labels = [1] * 22 + [2] * 24
    m = equal_mass_calibration_error(labels, [0.5] * 46)
    assert m["ece"] == approx(abs(0.5 - 22 / 46))
    assert (m["n_bins"], [b["count"] for b in m["bins"]]) == (1, [46])
    shuffled = labels[:]
    random.Random(3).shuffle(shuffled)
    assert equal_mass_calibration_error(shuffled, [0.5] * 46)["ece"] == m["ece"]
    # Six values, four bins asked: array_split would cut 2 | 2 | 1 | 1, inside both runs of equal values;
    # each cut moves to the end of its run -> {0.2 x 3} and {0.8 x 3}.
    # Gaps: |0.2 - 1/3| and |0.8 - 2/3|, half the weight each.
    m = equal_mass_calibration_error([1, 2, 2, 1, 1, 2], [0.2, 0.2, 0.2, 0.8, 0.8, 0.8], n_bins=4)
    assert [b["count"] for b in m["bins"]] == [3, 3]
    assert m["ece"] == approx(0.5 * abs(0.2 - 1 / 3) + 0.5 * abs(0.8 - 2 / 3))
    # Distinct values still make bins of nearly equal size: 5 values, 2 bins -> 3 and 2.
    assert [b["count"] for b in equal_mass_calibration_error([1] * 5, [0.1, 0.2, 0.3, 0.4, 0.5],
                                                             n_bins=2)["bins"]] == [3, 2]


def test_reliability_bins_empty_bins_and_skips() -> None:
    bins = reliability_bins([1, 2, 1], [0.05, 0.07, None])
    assert len(bins) == 10
    # Both known values fall into [0, 0.1): mean (0.05 + 0.07) / 2 = 0.06, one of two is label 1.
    assert bins[0]["count"] == 2
    assert bins[0]["mean_confidence"] == approx(0.06)
    assert bins[0]["observed_frequency"] == 0.5
    assert all(b["count"] == 0 and b["mean_confidence"] is None and b["observed_frequency"] is None
               for b in bins[1:])
    with pytest.raises(ValueError):
        reliability_bins([1], [0.5], n_bins=0)


# --------------------------------------------------------------------------- summaries


def test_mean_std() -> None:
    # Mean 0.6; deviations -0.1, 0.1, 0 -> sum of squares 0.02; / (3 - 1) = 0.01; sqrt -> 0.1.
    mean, std = mean_std([0.5, 0.7, 0.6])
    assert mean == approx(0.6) and std == approx(0.1)
    # [1, 3]: mean 2, sample variance ((-1)^2 + 1^2) / 1 = 2 -> std sqrt(2).
    assert mean_std([1.0, 3.0]) == approx((2.0, math.sqrt(2)))
    assert mean_std([0.4]) == (0.4, 0.0)
    with pytest.raises(ValueError):
        mean_std([])
    with pytest.raises(ValueError):
        mean_std([0.1, math.nan])
