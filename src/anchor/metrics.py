"""Metrics for the ANCHOR experiments: pairwise F1, decision accuracy, fact-check balanced accuracy,
calibration and run summaries.

Conventions shared by every function here:

* A probability is ``P(outcome1)`` (or, for the pairwise task, ``P(gold outcome)``) in ``[0, 1]``;
  ``None`` means the method answered "unknown" (abstained). NaN or values outside ``[0, 1]`` raise
  ``ValueError``: they are bugs upstream, not abstentions.
* Decision labels are 1 (outcome1 is right) or 2 (outcome2 is right); pairwise labels are 1, 2 or
  3 as in the human annotation (1: the first condition supports the gold outcome more, 2: the
  second does, 3: both the same).
* Empty inputs and sequences of different lengths raise ``ValueError``.
* Comparisons are exact unless a tolerance is passed: a difference of one ulp decides a
  pairwise comparison, and only exactly 0.5 is a tie in a decision.
* Calibration bins do not depend on float accidents or on row order. Equal-width bin ``b`` of
  ``n`` is [b/n, (b+1)/n) with each edge the correctly rounded ``b / n``: a value on an edge (an
  answer of exactly 0.3 with ten bins) goes to the bin above it, and 1.0 to the last bin.
  Equal-mass bins never split equal values.

Everything is computed with numpy, to the definitions scikit-learn uses (``tests/test_metrics.py``
compares the two on many random inputs): F1 as ``2 tp / (2 tp + fp + fn)``, except that the F1 of a
class with no instance among the scored pairs is None, not scikit-learn's 0.0 (its recall has no
denominator: the run says nothing about that class); balanced accuracy as the mean recall over the gold
classes present, Brier as the mean squared error and log loss with scikit-learn's clipping (see
:func:`log_loss`). Degenerate inputs (one class only, nothing predicted for a class) give numbers,
never warnings.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

# No scikit-learn here: importing it costs one to three seconds of CPU, more than a small eval spends
# on everything else, for arithmetic numpy does in a few lines.

__all__ = [
    "brier_score",
    "decision_accuracy",
    "equal_mass_bins",
    "equal_mass_calibration_error",
    "expected_calibration_error",
    "factcheck_metrics",
    "log_loss",
    "mean_std",
    "pairwise_metrics",
    "pairwise_prediction",
    "reliability_bins",
]

PAIRWISE_LABELS = (1, 2, 3)

# --------------------------------------------------------------------------- validation helpers


def _prob(value: Any, what: str) -> float:
    try:
        p = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a probability or None, got {value!r}") from None
    if math.isnan(p) or p < 0.0 or p > 1.0:
        raise ValueError(f"{what} must lie in [0, 1], got {value!r}")
    return p


def _opt_probs(values: Sequence[float | None], what: str) -> list[float | None]:
    return [None if v is None else _prob(v, f"{what}[{i}]") for i, v in enumerate(values)]


def _label_list(values: Sequence[Any], allowed: tuple[int, ...], what: str) -> list[int]:
    out: list[int] = []
    for i, v in enumerate(values):
        try:
            if isinstance(v, bool):
                raise TypeError
            x = operator.index(v)
        except TypeError:
            raise ValueError(f"{what}[{i}] must be one of {allowed}, got {v!r}") from None
        if x not in allowed:
            raise ValueError(f"{what}[{i}] must be one of {allowed}, got {v!r}")
        out.append(x)
    return out


def _same_length(a: Sequence[Any], b: Sequence[Any], names: str) -> int:
    if len(a) != len(b):
        raise ValueError(f"{names} have different lengths ({len(a)} and {len(b)})")
    if len(a) == 0:
        raise ValueError(f"{names} are empty")
    return len(a)


# --------------------------------------------------------------------------- pairwise


def pairwise_prediction(
    p_gold_1: float | None,
    p_gold_2: float | None,
    *,
    unknown_as: float | None = None,
    tie_tol: float = 0.0,
) -> int | None:
    """Which context supports the gold outcome more: 1, 2, or 3 for "the same".

    ``p_gold_1`` is P(gold | S + u1) and ``p_gold_2`` is P(gold | S + u2). The answer is 1 when
    ``p_gold_1 - p_gold_2 > tie_tol``, 2 when ``p_gold_2 - p_gold_1 > tie_tol`` and 3 otherwise; with
    the default ``tie_tol=0`` only exactly equal probabilities are a tie (no rounding is applied).
    When a side is unknown (None) the answer is None, unless ``unknown_as`` is given, in which case
    that value (0.5 in the paper's "all pairs" variant) stands in for each missing side; two unknown
    sides then compare equal and give 3.

    Only P(gold | .) is compared, as in BIRD's evaluation; the paper's longer chain
    P(O1|C1) > P(O1|C2) > P(O2|C2) > P(O2|C1) additionally asks that both contexts favour the gold
    outcome, which this function does not require.
    """
    if not (tie_tol >= 0.0) or math.isinf(tie_tol):
        raise ValueError(f"tie_tol must be a finite number >= 0, got {tie_tol!r}")
    if p_gold_1 is None or p_gold_2 is None:
        if unknown_as is None:
            return None
        fill = _prob(unknown_as, "unknown_as")
        p_gold_1 = fill if p_gold_1 is None else p_gold_1
        p_gold_2 = fill if p_gold_2 is None else p_gold_2
    a = _prob(p_gold_1, "p_gold_1")
    b = _prob(p_gold_2, "p_gold_2")
    diff = a - b
    if abs(diff) <= tie_tol:
        return 3
    return 1 if diff > 0 else 2


def pairwise_metrics(human: Sequence[int], predicted: Sequence[int | None]) -> dict[str, Any]:
    """Per-class and micro F1 of pairwise predictions against the human labels.

    Scores are computed on the *covered* pairs only, those with a prediction (not None); the share
    of such pairs is ``coverage``. For the paper's "all pairs" variant build the predictions with
    ``pairwise_prediction(..., unknown_as=0.5)``, which leaves nothing uncovered.

    Returns ``f1_context1``, ``f1_context2``, ``f1_same`` (F1 of classes 1, 2, 3), ``f1_micro``
    (micro-averaged over the three classes, which equals accuracy on the covered pairs),
    ``coverage``, ``n``, ``n_covered``, ``support`` (covered pairs of each human label 1..3) and
    ``confusion`` (3x3 counts, rows = human label 1..3, columns = predicted label 1..3, covered
    pairs only).

    The F1 of a class that no covered pair has as its human label is None, not 0.0: its recall has
    no denominator, so there is no evidence about that class (a prediction of it is still a false
    positive, which lowers the other classes' recall and the micro F1). When nothing is covered the
    four F1 values are None: there is no evidence about quality, only a coverage of 0.
    """
    n = _same_length(human, predicted, "human and predicted")
    gold = _label_list(human, PAIRWISE_LABELS, "human")
    covered = [i for i, p in enumerate(predicted) if p is not None]
    pred = _label_list([predicted[i] for i in covered], PAIRWISE_LABELS, "predicted (covered)")
    y = [gold[i] for i in covered]
    out: dict[str, Any] = {"n": n, "n_covered": len(covered), "coverage": len(covered) / n}
    if not covered:
        out.update(f1_context1=None, f1_context2=None, f1_same=None, f1_micro=None,
                   support=[0 for _ in PAIRWISE_LABELS], confusion=[[0, 0, 0] for _ in PAIRWISE_LABELS])
        return out
    confusion = _confusion(y, pred, PAIRWISE_LABELS)
    tp = np.diag(confusion)
    fp = confusion.sum(axis=0) - tp
    fn = confusion.sum(axis=1) - tp
    support = confusion.sum(axis=1)
    per_class = [_f1(int(a), int(b), int(c)) if count else None
                 for a, b, c, count in zip(tp, fp, fn, support, strict=True)]
    out.update(
        support=support.tolist(),
        f1_context1=per_class[0],
        f1_context2=per_class[1],
        f1_same=per_class[2],
        f1_micro=_f1(int(tp.sum()), int(fp.sum()), int(fn.sum())),
        confusion=confusion.tolist(),
    )
    return out


def _confusion(gold: Sequence[int], pred: Sequence[int], labels: tuple[int, ...]) -> np.ndarray:
    """Counts with rows = gold label, columns = predicted label, in the order of ``labels``."""
    where = {label: i for i, label in enumerate(labels)}
    out = np.zeros((len(labels), len(labels)), dtype=np.int64)
    np.add.at(out, ([where[g] for g in gold], [where[p] for p in pred]), 1)
    return out


def _f1(tp: int, fp: int, fn: int) -> float:
    """F1 from its counts; 0.0 when there is nothing to score (scikit-learn's ``zero_division=0``)."""
    denominator = 2 * tp + fp + fn
    return 2 * tp / denominator if denominator else 0.0


# --------------------------------------------------------------------------- decisions


def decision_accuracy(labels: Sequence[int], p_outcome1: Sequence[float | None]) -> dict[str, Any]:
    """Accuracy of choosing the more probable outcome.

    The decision is outcome1 when P(outcome1) > 0.5 and outcome2 when it is < 0.5. Exactly 0.5 is
    a tie and an unknown (None) makes no decision; neither is ever counted as correct. Returns
    ``accuracy`` (correct / all instances), ``accuracy_covered`` (correct / instances with a
    probability, ties included; None when there are none), ``coverage`` (share with a probability),
    and the counts ``n``, ``n_covered``, ``n_correct``, ``n_ties``.
    """
    n = _same_length(labels, p_outcome1, "labels and p_outcome1")
    gold = _label_list(labels, (1, 2), "labels")
    probs = _opt_probs(p_outcome1, "p_outcome1")
    n_covered = n_correct = n_ties = 0
    for y, p in zip(gold, probs, strict=True):
        if p is None:
            continue
        n_covered += 1
        if p == 0.5:
            n_ties += 1
        elif (p > 0.5) == (y == 1):
            n_correct += 1
    return {
        "accuracy": n_correct / n,
        "accuracy_covered": n_correct / n_covered if n_covered else None,
        "coverage": n_covered / n,
        "n": n,
        "n_covered": n_covered,
        "n_correct": n_correct,
        "n_ties": n_ties,
    }


def cases_metrics(labels: Sequence[int], p_outcome1: Sequence[float | None]) -> dict[str, Any]:
    """A user's labelled cases: :func:`decision_accuracy` plus ``balanced_accuracy``.

    The decision is that of :func:`decision_accuracy` (outcome 1 above 0.5, outcome 2 below; a tie or
    an unknown decides nothing). ``balanced_accuracy`` is the mean over the gold outcomes present of
    the share of their cases decided right, so an unknown counts against its gold outcome; with one
    outcome in the labels it is that outcome's share (scikit-learn's ``balanced_accuracy_score`` with
    the undecided as a third class gives the same).
    """
    out = decision_accuracy(labels, p_outcome1)
    gold = np.asarray(_label_list(labels, (1, 2), "labels"))
    probs = _opt_probs(p_outcome1, "p_outcome1")
    decided = np.array([0 if p is None or p == 0.5 else (1 if p > 0.5 else 2) for p in probs])
    recalls = [float(np.mean(decided[gold == y] == y)) for y in (1, 2) if np.any(gold == y)]
    out["balanced_accuracy"] = sum(recalls) / len(recalls) if recalls else None
    return out


def factcheck_metrics(
    labels: Sequence[int], p_outcome1: Sequence[float | None], threshold: float = 0.9
) -> dict[str, Any]:
    """Fact-check scores with the paper's fixed decision threshold (tau_dec = 0.9).

    A claim (outcome1) is predicted "support" only when P(outcome1) > ``threshold``; everything
    else, unknowns included, is "not support". Label 1 means the claim is supported. Returns
    ``balanced_accuracy`` (mean recall of the two classes; with only one class in the labels, its
    recall), ``accuracy``, ``coverage`` (share with a probability), ``n``, ``n_covered``,
    ``n_predicted_support`` and ``threshold``.
    """
    thr = _prob(threshold, "threshold")
    n = _same_length(labels, p_outcome1, "labels and p_outcome1")
    gold = _label_list(labels, (1, 2), "labels")
    probs = _opt_probs(p_outcome1, "p_outcome1")
    y_true = np.array([1 if y == 1 else 0 for y in gold])
    y_pred = np.array([1 if (p is not None and p > thr) else 0 for p in probs])
    # The mean recall over the gold classes present: with one gold class, its recall (scikit-learn's
    # balanced_accuracy_score gives the same, after warning about the class y_true lacks).
    recalls = [float(np.mean(y_pred[y_true == c] == c)) for c in (0, 1) if np.any(y_true == c)]
    n_covered = sum(p is not None for p in probs)
    return {
        "balanced_accuracy": sum(recalls) / len(recalls),
        "accuracy": float(np.mean(y_true == y_pred)),
        "coverage": n_covered / n,
        "n": n,
        "n_covered": n_covered,
        "n_predicted_support": int(y_pred.sum()),
        "threshold": thr,
    }


# --------------------------------------------------------------------------- calibration


def _calibration_inputs(
    labels: Sequence[int], p: Sequence[float | None]
) -> tuple[np.ndarray, np.ndarray, int]:
    """(event indicators, probabilities, number skipped) over the instances with a probability."""
    _same_length(labels, p, "labels and p")
    gold = _label_list(labels, (1, 2), "labels")
    probs = _opt_probs(p, "p")
    keep = [i for i, q in enumerate(probs) if q is not None]
    events = np.array([1.0 if gold[i] == 1 else 0.0 for i in keep], dtype=float)
    values = np.array([probs[i] for i in keep], dtype=float)
    return events, values, len(probs) - len(keep)


def _check_bins(n_bins: int) -> int:
    try:
        if isinstance(n_bins, bool):
            raise TypeError
        k = operator.index(n_bins)
    except TypeError:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}") from None
    if k < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    return k


def _bin_of(values: np.ndarray, n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Equal-width bins on [0, 1]: bin ``b`` is [b/n, (b+1)/n), the last one closed at 1.

    The edges are ``b / n`` each computed by one correctly rounded division, which is the float a
    decimal such as ``0.3`` is read as, so a value on an edge is compared with that edge exactly and
    goes to the bin above it, for every edge alike. (``np.linspace`` builds its edges by repeated
    addition instead: its 0.30000000000000004 put an answer of exactly 0.3 in the bin below while
    0.2 and 0.4 went above.)
    """
    edges = np.arange(n_bins + 1, dtype=float) / n_bins
    idx = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, n_bins - 1)
    return idx, edges


def equal_mass_bins(values: np.ndarray, n_bins: int) -> list[np.ndarray]:
    """Indices of ``values`` in bins of (nearly) equal counts that never split equal values.

    The values are sorted and cut where ``numpy.array_split`` would cut ``min(n_bins, n)`` groups
    whose sizes differ by at most one; a cut that falls inside a run of equal values moves to the
    end of that run, so equal values always share one bin (and there may be fewer bins, some
    larger). The bins depend on the values only, never on the order they came in.
    """
    order = np.argsort(values, kind="stable")
    ranked = values[order]
    n = int(values.size)
    k = min(n_bins, n)
    size, extra = divmod(n, k)
    cuts: list[int] = []
    for i in range(1, k):
        cut = i * size + min(i, extra)
        if ranked[cut] == ranked[cut - 1]:
            cut = int(np.searchsorted(ranked, ranked[cut - 1], side="right"))
        if cut < n and (not cuts or cut > cuts[-1]):
            cuts.append(cut)
    return np.split(order, cuts)


def brier_score(labels: Sequence[int], p: Sequence[float | None]) -> dict[str, Any]:
    """Mean squared error of P(outcome1) against the event "label == 1".

    Unknowns are skipped. Returns ``brier`` (None when every instance is unknown), ``n`` (instances
    used) and ``n_skipped``.
    """
    events, values, skipped = _calibration_inputs(labels, p)
    if events.size == 0:
        return {"brier": None, "n": 0, "n_skipped": skipped}
    score = np.mean((values - events) ** 2)
    return {"brier": float(score), "n": int(events.size), "n_skipped": skipped}


def log_loss(labels: Sequence[int], p: Sequence[float | None]) -> dict[str, Any]:
    """Mean negative log-likelihood of the gold outcome under P(outcome1), in nats.

    Unknowns are skipped. The probability of the gold outcome (``p``, or ``1 - p`` computed first) is
    clipped to [eps, 1 - eps] with eps the float64 machine epsilon (about 2.2e-16), as scikit-learn's
    ``log_loss`` does, so an exact 0 or 1 on the wrong side costs about 36 rather than infinity (and
    the right side about 2.2e-16 rather than 0). Returns ``log_loss`` (None when every instance is
    unknown), ``n`` and ``n_skipped``.
    """
    events, values, skipped = _calibration_inputs(labels, p)
    if events.size == 0:
        return {"log_loss": None, "n": 0, "n_skipped": skipped}
    eps = np.finfo(np.float64).eps
    p_gold = np.clip(np.where(events == 1.0, values, 1.0 - values), eps, 1.0 - eps)
    return {"log_loss": float(-np.mean(np.log(p_gold))), "n": int(events.size), "n_skipped": skipped}


def reliability_bins(
    labels: Sequence[int], p: Sequence[float | None], n_bins: int = 10
) -> list[dict[str, Any]]:
    """Reliability diagram data: one dict per equal-width bin of P(outcome1), empty bins included.

    Each dict has ``bin`` (index), ``lo``, ``hi`` (edges; a bin is [lo, hi), the last one [lo, 1];
    a value equal to an edge, as the float that edge's decimal is read as, is in the bin above it),
    ``count``, ``mean_confidence`` (mean P(outcome1) in the bin) and ``observed_frequency`` (share
    of label 1 in the bin); both are None for an empty bin. Unknowns are skipped; how many is
    ``len(p) - sum(count)`` (also reported by :func:`expected_calibration_error`).
    """
    k = _check_bins(n_bins)
    events, values, _ = _calibration_inputs(labels, p)
    idx, edges = _bin_of(values, k)
    out: list[dict[str, Any]] = []
    for b in range(k):
        mask = idx == b
        count = int(mask.sum())
        out.append({
            "bin": b,
            "lo": float(edges[b]),
            "hi": float(edges[b + 1]),
            "count": count,
            "mean_confidence": float(values[mask].mean()) if count else None,
            "observed_frequency": float(events[mask].mean()) if count else None,
        })
    return out


def expected_calibration_error(
    labels: Sequence[int], p: Sequence[float | None], n_bins: int = 10
) -> dict[str, Any]:
    """ECE of P(outcome1): sum over bins of (bin share) * |mean confidence - observed frequency|.

    This is the calibration of the outcome1 probability itself (the bins of
    :func:`reliability_bins`), not the "top-label" ECE that bins max(p, 1 - p). Unknowns are
    skipped. Returns ``ece`` (None when every instance is unknown), ``n``, ``n_skipped``, ``n_bins``.
    """
    k = _check_bins(n_bins)
    bins = reliability_bins(labels, p, k)
    used = sum(b["count"] for b in bins)
    skipped = len(p) - used
    if used == 0:
        return {"ece": None, "n": 0, "n_skipped": skipped, "n_bins": k}
    ece = sum(
        b["count"] / used * abs(b["mean_confidence"] - b["observed_frequency"]) for b in bins if b["count"]
    )
    return {"ece": float(ece), "n": used, "n_skipped": skipped, "n_bins": k}


def equal_mass_calibration_error(
    labels: Sequence[int], p: Sequence[float | None], n_bins: int = 10
) -> dict[str, Any]:
    """ECE of P(outcome1) over bins of (nearly) equal counts instead of equal width.

    The known probabilities are binned by :func:`equal_mass_bins`: up to ``n_bins`` consecutive groups
    of the sorted values whose sizes differ by at most one, except that equal values are never split
    (a method that answers 0.5 everywhere gets one bin). ECE is then the count-weighted mean of
    |mean confidence - observed frequency| over the groups, as in :func:`expected_calibration_error`.
    Unknowns are skipped. Returns ``ece`` (None when every instance is unknown), ``n``, ``n_skipped``,
    ``n_bins`` (the bins used) and ``bins`` (count, mean_confidence, observed_frequency of each).
    """
    k = _check_bins(n_bins)
    events, values, skipped = _calibration_inputs(labels, p)
    if events.size == 0:
        return {"ece": None, "n": 0, "n_skipped": skipped, "n_bins": 0, "bins": []}
    bins = []
    ece = 0.0
    for chunk in equal_mass_bins(values, k):
        conf, freq = float(values[chunk].mean()), float(events[chunk].mean())
        bins.append({"count": int(chunk.size), "mean_confidence": conf, "observed_frequency": freq})
        ece += chunk.size / events.size * abs(conf - freq)
    return {"ece": float(ece), "n": int(events.size), "n_skipped": skipped, "n_bins": len(bins), "bins": bins}


# --------------------------------------------------------------------------- summaries


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof=1) over runs, as the paper's "mean ± std over 5 runs".

    With a single value the standard deviation is reported as 0.0 (it is undefined with ddof=1).
    Empty input, None or NaN values raise ``ValueError``.
    """
    if len(values) == 0:
        raise ValueError("mean_std needs at least one value")
    if any(v is None for v in values):
        raise ValueError("mean_std got None; drop or fill unknown results first")
    arr = np.asarray(values, dtype=float)
    if np.isnan(arr).any():
        raise ValueError("mean_std got NaN")
    mean = float(arr.mean())
    std = float(arr.std(ddof=1)) if arr.size >= 2 else 0.0
    return mean, std
