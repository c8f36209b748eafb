"""Temperature scaling: P' = sigmoid(logit(p) / T), one number.

For two outcomes this is Platt scaling without the intercept; it is fitted as such, with
scikit-learn's ``LogisticRegression(fit_intercept=False)`` on the log-odds against the smoothed
targets of :mod:`anchor.calibration.contract`. The fitted coefficient is 1/T. A temperature has to
be positive: a fit whose coefficient comes out negative (the raw probabilities point the wrong
way) is kept at 0, which answers 0.5 everywhere, rather than turning the method's answers around.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

import numpy as np
from numpy.typing import ArrayLike

from anchor.calibration.contract import (
    NonNegativeNumber,
    Parameters,
    as_outcomes,
    as_probabilities,
    fit_soft_logistic,
    logit,
    sigmoid,
)


class TemperatureParameters(Parameters):
    inverse_temperature: NonNegativeNumber


class TemperatureCalibrator:
    kind: ClassVar[str] = "temperature"

    def __init__(self, inverse_temperature: float = 1.0) -> None:
        self.inverse_temperature = float(inverse_temperature)

    @property
    def temperature(self) -> float:
        return float("inf") if self.inverse_temperature <= 0 else 1.0 / self.inverse_temperature

    def fit(self, p: ArrayLike, y: ArrayLike) -> Self:
        probs = as_probabilities(p)
        coef, _ = fit_soft_logistic(logit(probs)[:, None], as_outcomes(y, probs.size), fit_intercept=False)
        self.inverse_temperature = max(0.0, float(coef[0]))
        return self

    def predict(self, p: ArrayLike) -> np.ndarray:
        return sigmoid(self.inverse_temperature * logit(as_probabilities(p)))

    def parameters(self) -> dict[str, Any]:
        return {"inverse_temperature": self.inverse_temperature}

    @classmethod
    def from_parameters(cls, params: dict[str, Any]) -> Self:
        return cls(TemperatureParameters.model_validate(params).inverse_temperature)

    def describe(self) -> str:
        return f"sigmoid(logit(p) / {self.temperature:.3f})"
