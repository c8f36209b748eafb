"""Isotonic calibration: the best non-decreasing step function from raw to calibrated P(O1).

Fitted with scikit-learn's ``IsotonicRegression`` (bounded to [0, 1], clipped outside the training
range) against the smoothed targets of :mod:`anchor.calibration.contract`; least squares on a soft
target is the same fit as on the 0/1 labels weighted t and 1 - t. The fitted function is kept as
its breakpoints and applied with ``np.interp`` (linear between breakpoints, flat beyond them), which
is exactly what scikit-learn's ``predict`` does.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

import numpy as np
from numpy.typing import ArrayLike
from pydantic import Field, model_validator

from anchor.calibration.contract import (
    CalibratorError,
    Parameters,
    UnitNumber,
    as_outcomes,
    as_probabilities,
    smoothed_targets,
)


class IsotonicParameters(Parameters):
    """Breakpoints (x, y) of a non-decreasing map of [0, 1] into [0, 1]: x increasing, y never decreasing."""

    x: list[UnitNumber] = Field(min_length=1)
    y: list[UnitNumber] = Field(min_length=1)

    @model_validator(mode="after")
    def _a_monotone_map(self) -> IsotonicParameters:
        if len(self.x) != len(self.y):
            raise ValueError(f"x and y must be of the same length (got {len(self.x)} and {len(self.y)})")
        for i in range(1, len(self.x)):
            if not self.x[i] > self.x[i - 1]:
                raise ValueError(f"x must increase: x[{i}] = {self.x[i]!r} after x[{i - 1}] = {self.x[i - 1]!r}")
            if self.y[i] < self.y[i - 1]:
                raise ValueError(f"y must not decrease: y[{i}] = {self.y[i]!r} after y[{i - 1}] = {self.y[i - 1]!r}")
        return self


class IsotonicCalibrator:
    kind: ClassVar[str] = "isotonic"

    def __init__(self, x: list[float] | None = None, y: list[float] | None = None) -> None:
        self.x = [0.0, 1.0] if x is None else [float(v) for v in x]
        self.y = [0.0, 1.0] if y is None else [float(v) for v in y]
        if len(self.x) != len(self.y) or not self.x:
            raise CalibratorError("isotonic breakpoints: x and y must be non-empty and of the same length")
        if any(b < a for a, b in zip(self.x, self.x[1:], strict=False)):
            raise CalibratorError("isotonic breakpoints: x must be non-decreasing")

    def fit(self, p: ArrayLike, y: ArrayLike) -> Self:
        from sklearn.isotonic import IsotonicRegression  # fitting only: see platt.py

        probs = as_probabilities(p)
        targets = smoothed_targets(as_outcomes(y, probs.size))
        model = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip").fit(probs, targets)
        self.x = [float(v) for v in model.X_thresholds_]
        self.y = [float(v) for v in model.y_thresholds_]
        return self

    def predict(self, p: ArrayLike) -> np.ndarray:
        return np.interp(as_probabilities(p), self.x, self.y)

    def parameters(self) -> dict[str, Any]:
        return {"x": self.x, "y": self.y}

    @classmethod
    def from_parameters(cls, params: dict[str, Any]) -> Self:
        p = IsotonicParameters.model_validate(params)
        return cls(p.x, p.y)

    def describe(self) -> str:
        return f"step function with {len(self.x)} breakpoints"
