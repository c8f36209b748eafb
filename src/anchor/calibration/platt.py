"""Platt scaling: a logistic regression on the log-odds, P' = sigmoid(a * logit(p) + b).

Fitted with scikit-learn's ``LogisticRegression`` against the smoothed targets of
:mod:`anchor.calibration.contract`; applied with NumPy from the two numbers ``a`` and ``b``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

import numpy as np
from numpy.typing import ArrayLike

from anchor.calibration.contract import (
    FiniteNumber,
    Parameters,
    as_outcomes,
    as_probabilities,
    fit_soft_logistic,
    logit,
    sigmoid,
)


class PlattParameters(Parameters):
    slope: FiniteNumber
    intercept: FiniteNumber


class PlattCalibrator:
    kind: ClassVar[str] = "platt"

    def __init__(self, slope: float = 1.0, intercept: float = 0.0) -> None:
        self.slope = float(slope)
        self.intercept = float(intercept)

    def fit(self, p: ArrayLike, y: ArrayLike) -> Self:
        probs = as_probabilities(p)
        coef, self.intercept = fit_soft_logistic(logit(probs)[:, None], as_outcomes(y, probs.size))
        self.slope = float(coef[0])
        return self

    def predict(self, p: ArrayLike) -> np.ndarray:
        return sigmoid(self.slope * logit(as_probabilities(p)) + self.intercept)

    def parameters(self) -> dict[str, Any]:
        return {"slope": self.slope, "intercept": self.intercept}

    @classmethod
    def from_parameters(cls, params: dict[str, Any]) -> Self:
        p = PlattParameters.model_validate(params)
        return cls(p.slope, p.intercept)

    def describe(self) -> str:
        return f"sigmoid({self.slope:.3f} * logit(p) {self.intercept:+.3f})"
