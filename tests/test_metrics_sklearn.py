"""anchor's numpy metrics against scikit-learn's on many random inputs.

``anchor.metrics`` no longer imports scikit-learn (its import cost more CPU than a small
eval spent on everything else); these tests hold it to scikit-learn's numbers: F1 per class and
micro, the confusion matrix, accuracy, balanced accuracy, Brier score and log loss with
scikit-learn's clipping at the float64 machine epsilon.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as sk

from anchor.metrics import (
    brier_score,
    cases_metrics,
    factcheck_metrics,
    log_loss,
    pairwise_metrics,
)

approx = pytest.approx

#: Probabilities with the edges and the values near them that clipping and ties are about.
PROBS = st.one_of(
    st.floats(0, 1),
    st.sampled_from([0.0, 1.0, 0.5, 0.9, 1e-17, 1 - 1e-17, 2.2e-16, 1 - 2.2e-16, 5e-324]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2, 3]), st.one_of(st.none(), st.sampled_from([1, 2, 3]))),
                min_size=1, max_size=40))
def test_pairwise_f1_and_confusion_match_sklearn(rows: list[tuple[int, int | None]]) -> None:
    human = [h for h, _ in rows]
    predicted = [p for _, p in rows]
    ours = pairwise_metrics(human, predicted)
    covered = [(h, p) for h, p in rows if p is not None]
    if not covered:
        assert ours["f1_micro"] is None
        return
    y, pred = [h for h, _ in covered], [p for _, p in covered]
    labels = [1, 2, 3]
    per_class = sk.f1_score(y, pred, labels=labels, average=None, zero_division=0)
    # scikit-learn's 0.0 for a class with no scored pair is ours None (undefined); the others are equal.
    expected = [float(f) if label in y else None for label, f in zip(labels, per_class, strict=True)]
    assert [ours["f1_context1"], ours["f1_context2"], ours["f1_same"]] == approx(expected, abs=1e-12)
    assert ours["support"] == [y.count(label) for label in labels]
    micro = sk.f1_score(y, pred, labels=labels, average="micro", zero_division=0)
    assert ours["f1_micro"] == approx(float(micro), abs=1e-12)
    assert ours["confusion"] == sk.confusion_matrix(y, pred, labels=labels).tolist()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2]), st.one_of(st.none(), PROBS)), min_size=1, max_size=40),
       st.sampled_from([0.9, 0.5, 0.0, 1.0, 0.3]))
def test_factcheck_accuracy_and_balanced_accuracy_match_sklearn(
    rows: list[tuple[int, float | None]], threshold: float
) -> None:
    labels = [y for y, _ in rows]
    probs = [p for _, p in rows]
    ours = factcheck_metrics(labels, probs, threshold=threshold)
    y_true = [1 if y == 1 else 0 for y in labels]
    y_pred = [1 if p is not None and p > threshold else 0 for p in probs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # one gold class: it warns, then averages the present
        balanced = sk.balanced_accuracy_score(y_true, y_pred)
    assert ours["balanced_accuracy"] == approx(float(balanced), abs=1e-12)
    assert ours["accuracy"] == approx(float(sk.accuracy_score(y_true, y_pred)), abs=1e-12)
    assert ours["n_predicted_support"] == sum(y_pred)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2]), st.one_of(st.none(), PROBS)), min_size=1, max_size=40))
def test_brier_and_log_loss_match_sklearn(rows: list[tuple[int, float | None]]) -> None:
    labels = [y for y, _ in rows]
    probs = [p for _, p in rows]
    brier, loss = brier_score(labels, probs), log_loss(labels, probs)
    kept = [(y, p) for y, p in rows if p is not None]
    assert brier["n"] == loss["n"] == len(kept)
    assert brier["n_skipped"] == loss["n_skipped"] == len(rows) - len(kept)
    if not kept:
        assert brier["brier"] is None and loss["log_loss"] is None
        return
    events = np.array([1 if y == 1 else 0 for y, _ in kept])
    values = np.array([p for _, p in kept], dtype=float)
    expected_brier = sk.brier_score_loss(events, values, pos_label=1, labels=[0, 1])
    assert brier["brier"] == approx(float(expected_brier), rel=1e-12, abs=1e-15)
    expected_loss = sk.log_loss(events, y_proba=values, labels=[0, 1])
    assert loss["log_loss"] == approx(float(expected_loss), rel=1e-12, abs=1e-15)


def test_log_loss_clips_at_the_machine_epsilon_like_sklearn() -> None:
    eps = np.finfo(np.float64).eps
    # A certain answer on the wrong side costs -log(eps), about 36.04, not infinity.
    assert log_loss([2], [1.0])["log_loss"] == approx(-math.log(eps))
    assert log_loss([1], [0.0])["log_loss"] == approx(-math.log(eps))
    # On the right side it costs -log(1 - eps), not 0, as scikit-learn's clipping gives.
    assert log_loss([1], [1.0])["log_loss"] == approx(-math.log(1 - eps))
    assert log_loss([1, 2], [1.0, 0.0])["log_loss"] == approx(float(sk.log_loss([1, 0], y_proba=[1.0, 0.0])))


def test_the_scoring_module_does_not_import_sklearn() -> None:
    import subprocess
    import sys

    code = ("import sys, anchor.metrics as m; m.pairwise_metrics([1, 2], [1, 2]);"
            " m.factcheck_metrics([1, 2], [0.95, 0.1]); m.brier_score([1], [0.5]); m.log_loss([1], [0.5]);"
            " print('sklearn' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_an_eval_scored_end_to_end_never_imports_sklearn(tmp_path):
    """The whole vanilla eval, its scoring and metrics.json included, in a fresh process."""
    import subprocess
    import sys

    code = f"""
import sys
from typer.testing import CliRunner
from anchor.cli import app
from tests.fakeserver import FakeOpenAIServer
with FakeOpenAIServer(deterministic=True) as server:
    result = CliRunner().invoke(app, ["eval", "--dataset", "today", "--method", "vanilla", "--limit", "3",
                                      "--base-url", server.base_url, "--cache-dir", r"{tmp_path / 'cache'}",
                                      "--out", r"{tmp_path / 'out'}", "--json"])
assert result.exit_code == 0, result.output
print(sorted({{m.split('.')[0] for m in sys.modules}} & {{'sklearn', 'scipy'}}))
"""
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert (tmp_path / "out" / "metrics.json").exists()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2]), st.one_of(st.none(), PROBS)), min_size=1, max_size=40))
def test_cases_balanced_accuracy_matches_sklearn_with_the_undecided_as_a_third_class(
    rows: list[tuple[int, float | None]]
) -> None:
    labels = [y for y, _ in rows]
    probs = [p for _, p in rows]
    decided = [0 if p is None or p == 0.5 else (1 if p > 0.5 else 2) for p in probs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a class only predicted (the undecided): left out
        expected = sk.balanced_accuracy_score(labels, decided)
    assert cases_metrics(labels, probs)["balanced_accuracy"] == approx(float(expected), abs=1e-12)
