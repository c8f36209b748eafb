"""The calibrators and the calibrator file, against values computed by hand or by an independent
optimiser (scipy on the same objective). The study that fits and scores them on runs is tested in
tests/evaluation/test_calibrate_study.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.isotonic import IsotonicRegression

from anchor.calibration import (
    KINDS,
    CalibratorError,
    CalibratorFile,
    FittedOn,
    make_calibrator,
    read_calibrator,
)
from anchor.calibration.contract import LOGISTIC_C, logit, method_label, smoothed_targets

P = np.array([0.05, 0.2, 0.3, 0.45, 0.55, 0.6, 0.7, 0.8, 0.9, 0.97, 0.4, 0.65])
Y = np.array([0, 0, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0], dtype=float)


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def soft_nll(z: np.ndarray, y: np.ndarray) -> float:
    """The negative log-likelihood of Platt's smoothed targets under P' = sigmoid(z)."""
    t = smoothed_targets(y)
    q = sigmoid(z)
    return float(-np.sum(t * np.log(q) + (1 - t) * np.log(1 - q)))


# --------------------------------------------------------------------------- the fitting rules


def test_smoothed_targets_by_hand():
    # 3 with outcome 1, 2 without: (3 + 1) / (3 + 2) and 1 / (2 + 2).
    assert smoothed_targets(np.array([1, 1, 0, 1, 0.0])).tolist() == [0.8, 0.8, 0.25, 0.8, 0.25]
    # One kind only: the targets stay inside (0, 1).
    assert smoothed_targets(np.ones(4)).tolist() == [5 / 6] * 4


def test_platt_is_the_penalised_maximum_likelihood_fit():
    cal = make_calibrator("platt").fit(P, Y)
    x = logit(P)

    def objective(v):
        return soft_nll(v[0] * x + v[1], Y) + v[0] ** 2 / (2 * LOGISTIC_C)

    best = minimize(objective, [1.0, 0.0], method="BFGS", options={"gtol": 1e-10}).x
    assert [cal.slope, cal.intercept] == pytest.approx(best.tolist(), abs=1e-3)
    assert cal.predict([0.7]) == pytest.approx(sigmoid(best[0] * math.log(0.7 / 0.3) + best[1]), abs=1e-4)


def test_platt_on_one_kind_of_label_says_the_smoothed_rate():
    # All three answers 0.6 with outcome 1 gold: the best constant is the target (3 + 1) / (3 + 2).
    cal = make_calibrator("platt").fit([0.6, 0.6, 0.6], [1, 1, 1])
    assert cal.predict([0.6])[0] == pytest.approx(0.8, abs=1e-4)


def test_temperature_is_platt_without_intercept_and_never_turns_answers_round():
    cal = make_calibrator("temperature").fit(P, Y)
    x = logit(P)
    best = minimize(lambda v: soft_nll(v[0] * x, Y) + v[0] ** 2 / (2 * LOGISTIC_C), [1.0], method="BFGS").x
    assert cal.inverse_temperature == pytest.approx(best[0], abs=1e-3)
    assert cal.predict([0.5])[0] == pytest.approx(0.5)
    # Answers that point the wrong way: a negative scale would turn them round; it is kept at 0 (0.5 everywhere).
    wrong = make_calibrator("temperature").fit([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1])
    assert wrong.inverse_temperature == 0.0
    assert wrong.predict([0.99, 0.01]).tolist() == [0.5, 0.5]


def test_beta_matches_a_bounded_optimiser_and_stays_monotone():
    cal = make_calibrator("beta").fit(P, Y)
    q = np.clip(P, 1e-6, 1 - 1e-6)
    f1, f2 = np.log(q), -np.log1p(-q)

    def objective(v):
        return soft_nll(v[0] * f1 + v[1] * f2 + v[2], Y) + (v[0] ** 2 + v[1] ** 2) / (2 * LOGISTIC_C)

    best = minimize(objective, [1.0, 1.0, 0.0], method="L-BFGS-B", bounds=[(0, None), (0, None), (None, None)],
                    options={"ftol": 1e-14, "gtol": 1e-10}).x
    assert cal.predict(P) == pytest.approx(sigmoid(best[0] * f1 + best[1] * f2 + best[2]), abs=2e-3)
    grid = np.linspace(0, 1, 101)
    assert np.all(np.diff(cal.predict(grid)) >= -1e-12)
    assert cal.a >= 0 and cal.b >= 0


def test_beta_drops_a_coefficient_that_would_make_it_decreasing():
    # High probabilities right, low ones wrong: the ln p coefficient comes out negative unbounded.
    p = np.array([0.02, 0.05, 0.1, 0.15, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99])
    y = np.array([1, 1, 0, 1, 0, 0, 1, 1, 1, 1.0])
    cal = make_calibrator("beta").fit(p, y)
    assert min(cal.a, cal.b) == 0.0 and max(cal.a, cal.b) > 0
    assert np.all(np.diff(cal.predict(np.linspace(0, 1, 101))) >= -1e-12)


def test_isotonic_by_hand_and_as_scikit_learn_predicts():
    # Targets 1/4, 3/4, 1/4, 3/4 (two of each kind); pooling the violators gives 0.25, 0.5, 0.5, 0.75.
    cal = make_calibrator("isotonic").fit([0.1, 0.2, 0.3, 0.4], [0, 1, 0, 1])
    assert cal.predict([0.1, 0.25, 0.4]).tolist() == pytest.approx([0.25, 0.5, 0.75])
    assert cal.predict([0.0, 1.0]).tolist() == pytest.approx([0.25, 0.75])  # flat beyond the data
    sk = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(P, smoothed_targets(Y))
    grid = np.linspace(0, 1, 57)
    assert make_calibrator("isotonic").fit(P, Y).predict(grid) == pytest.approx(sk.predict(grid), abs=1e-12)


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_fitted_calibrator_is_its_parameters(kind):
    cal = make_calibrator(kind).fit(P, Y)
    again = KINDS[kind].from_parameters(json.loads(json.dumps(cal.parameters())))
    grid = np.linspace(0, 1, 41)
    assert again.predict(grid).tolist() == cal.predict(grid).tolist()
    assert np.all((again.predict(grid) >= 0) & (again.predict(grid) <= 1))


@pytest.mark.parametrize("kind", list(KINDS))
def test_bad_inputs_are_refused(kind):
    with pytest.raises(CalibratorError, match="probabilities"):
        make_calibrator(kind).fit([0.2, 1.2], [0, 1])
    with pytest.raises(CalibratorError, match="0 or 1"):
        make_calibrator(kind).fit([0.2, 0.3], [0, 2])
    with pytest.raises(CalibratorError, match="outcomes"):
        make_calibrator(kind).fit([0.2, 0.3], [0])


# --------------------------------------------------------------------------- the file


def _file(kind="platt", params=None, **fitted) -> CalibratorFile:
    on = {"runs": ["r"], "datasets": ["today"], "method": "anchor", "model": "model-a", "n": 10, "n_outcome1": 5,
          "date": "2025-01-01T00:00:00+00:00", **fitted}
    return CalibratorFile(kind=kind, parameters=params or {"slope": 2.0, "intercept": -0.5}, fitted_on=FittedOn(**on))


def test_the_file_reads_back_and_applies_with_numpy(tmp_path):
    path = tmp_path / "cal.json"
    path.write_text(_file().model_dump_json())
    applied = read_calibrator(path)
    assert applied.calibrate(0.8) == pytest.approx(sigmoid(2 * math.log(4) - 0.5))
    assert applied.describe()["sha256"] and applied.describe()["kind"] == "platt"


def test_mismatch_names_both_sides():
    f = _file()
    assert f.mismatch(model="model-a", method="anchor") is None
    message = f.mismatch(model="model-b", method="anchor")
    assert "'model-a'" in message and "'model-b'" in message and "\n" not in message
    both = f.mismatch(model="model-b", method="vanilla")
    assert "'anchor'" in both and "'vanilla'" in both
    assert method_label("anchor", None, ["no-nb", "bma"]) == method_label("anchor", None, ["bma", "no-nb"])


@pytest.mark.parametrize("text, needle", [
    ("{not json", "not a JSON calibrator file"),
    ('{"kind": "platt"}', "parameters"),
    ('{"kind": "magic", "parameters": {}, "fitted_on": {}}', "kind"),
])
def test_a_bad_file_is_one_clear_error(tmp_path, text, needle):
    path = tmp_path / "cal.json"
    path.write_text(text)
    with pytest.raises(CalibratorError, match=needle) as info:
        read_calibrator(path)
    assert str(info.value).startswith(f"--calibrator {path}")
    with pytest.raises(CalibratorError, match="No such file"):
        read_calibrator(tmp_path / "missing.json")
    path.write_text(_file(params={"slope": "x"}).model_dump_json())
    with pytest.raises(CalibratorError, match="unusable"):
        read_calibrator(path)


def _written(tmp_path: Path, kind: str = "platt", params: dict | None = None, **top) -> Path:
    """A calibrator file as `anchor calibrate fit` writes it, with ``params`` and top-level fields
    replaced; written with json.dumps, which writes NaN and Infinity as Python's json reads them."""
    data = json.loads(_file(kind).model_dump_json())
    data.update(top)
    if params is not None:
        data["parameters"] = params
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(data))
    return path


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("kind, params, top, field", [
    ("platt", {"slope": NAN, "intercept": 0.0}, {}, "parameters.slope"),
    ("platt", {"slope": 1.0, "intercept": -INF}, {}, "parameters.intercept"),
    ("platt", {"slope": "1.5", "intercept": 0.0}, {}, "parameters.slope"),
    ("platt", {"slope": True, "intercept": 0.0}, {}, "parameters.slope"),
    ("platt", {"slope": 1.0}, {}, "parameters.intercept"),
    ("temperature", {"inverse_temperature": -0.5}, {}, "parameters.inverse_temperature"),
    ("beta", {"a": 1.0, "b": -1.0, "c": 0.0}, {}, "parameters.b"),
    ("isotonic", {"x": [0.0, 0.5, 1.0], "y": [0.1, 5.0, 0.9]}, {}, "parameters.y.1"),
    ("isotonic", {"x": [0.0, 0.5, 1.5], "y": [0.1, 0.5, 0.9]}, {}, "parameters.x.2"),
    ("isotonic", {"x": [0.0, 0.7, 0.5], "y": [0.1, 0.5, 0.9]}, {}, "x must increase"),
    ("isotonic", {"x": [0.0, 0.5, 1.0], "y": [0.1, 0.6, 0.5]}, {}, "y must not decrease"),
    ("isotonic", {"x": [0.0, 0.5], "y": [0.1, 0.5, 0.9]}, {}, "same length"),
    ("isotonic", {"x": [], "y": []}, {}, "parameters.x"),
    ("platt", None, {"schema_version": 2}, "schema_version"),
    ("platt", None, {"schema_version": "1"}, "schema_version"),
])
def test_a_calibrator_file_is_validated_when_read(tmp_path, kind, params, top, field):
    """NaN, infinite, out-of-range and non-numeric parameters, isotonic breakpoints that are not a
    monotone map of [0, 1], and an unknown schema_version: one error naming the file and the field."""
    path = _written(tmp_path, kind, params, **top)
    with pytest.raises(CalibratorError) as info:
        read_calibrator(path)
    message = str(info.value)
    assert message.startswith(f"--calibrator {path}: ") and field in message and "\n" not in message


def test_the_counts_of_a_calibrator_file_are_numbers(tmp_path):
    data = json.loads(_file().model_dump_json())
    data["fitted_on"]["n"] = "10"
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CalibratorError, match="fitted_on.n: "):
        read_calibrator(path)


def test_fitted_kinds_are_recorded_and_another_kind_is_named():
    f = _file(kinds=["decision"])
    assert f.mismatch(model="model-a", method="anchor", kind="decision") is None
    assert f.mismatch(model="model-a", method="anchor", kind="pairwise") == (
        "the platt calibrator was fitted on decision data, applied to pairwise data: its probabilities may be off "
        "for these answers")
    assert _file().mismatch(model="model-a", method="anchor", kind="pairwise") is None  # older file: kind unknown
