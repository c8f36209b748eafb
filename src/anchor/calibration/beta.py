"""Beta calibration (Kull, Silva Filho and Flach, 2017): P' = sigmoid(a ln p - b ln(1 - p) + c).

A logistic regression on the two features ln p and -ln(1 - p), fitted with scikit-learn's
``LogisticRegression`` against the smoothed targets of :mod:`anchor.calibration.contract`. The map
is monotone only when a, b >= 0; as in the authors' reference code, a fit that gives one of them a
negative value is redone without that feature (its coefficient fixed at 0). With a = b it is Platt
scaling; unlike Platt it can bend the two ends of [0, 1] differently.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

import numpy as np
from numpy.typing import ArrayLike

from anchor.calibration.contract import (
    EPS,
    FiniteNumber,
    NonNegativeNumber,
    Parameters,
    as_outcomes,
    as_probabilities,
    fit_soft_logistic,
    sigmoid,
)


class BetaParameters(Parameters):
    a: NonNegativeNumber
    b: NonNegativeNumber
    c: FiniteNumber


def _features(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, EPS, 1.0 - EPS)
    return np.column_stack([np.log(q), -np.log1p(-q)])


class BetaCalibrator:
    kind: ClassVar[str] = "beta"

    def __init__(self, a: float = 1.0, b: float = 1.0, c: float = 0.0) -> None:
        self.a, self.b, self.c = float(a), float(b), float(c)

    def fit(self, p: ArrayLike, y: ArrayLike) -> Self:
        probs = as_probabilities(p)
        x, outcomes = _features(probs), as_outcomes(y, probs.size)
        coef, c = fit_soft_logistic(x, outcomes)
        a, b = float(coef[0]), float(coef[1])
        if a < 0 or b < 0:
            keep = 1 if a < b else 0  # drop the more negative coefficient, refit on the other feature
            coef, c = fit_soft_logistic(x[:, [keep]], outcomes)
            only = max(0.0, float(coef[0]))
            a, b = (0.0, only) if keep == 1 else (only, 0.0)
        self.a, self.b, self.c = a, b, c
        return self

    def predict(self, p: ArrayLike) -> np.ndarray:
        f = _features(as_probabilities(p))
        return sigmoid(self.a * f[:, 0] + self.b * f[:, 1] + self.c)

    def parameters(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "c": self.c}

    @classmethod
    def from_parameters(cls, params: dict[str, Any]) -> Self:
        p = BetaParameters.model_validate(params)
        return cls(p.a, p.b, p.c)

    def describe(self) -> str:
        return f"sigmoid({self.a:.3f} ln p - {self.b:.3f} ln(1-p) {self.c:+.3f})"
