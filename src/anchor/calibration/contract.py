"""What every calibrator is, and the file a fitted one is kept in.

A calibrator maps a method's raw P(O1) to a calibrated P(O1). Each kind (``platt``, ``isotonic``,
``beta``, ``temperature``) lives in a module of its own beside this one and follows the scikit-learn
estimator shape on arrays: ``fit(p, y)`` with ``y`` 1 where outcome 1 is the gold outcome and 0
otherwise, then ``predict(p)``. Fitting may use scikit-learn; applying never does: a fitted
calibrator is a handful of numbers (coefficients, or isotonic breakpoints for ``np.interp``) that
``parameters()`` returns and ``from_parameters`` reads back, so ``anchor infer --calibrator`` costs
one JSON read and a few NumPy operations.

The shared fitting rules, in one place so that every kind is fitted alike:

* Probabilities are clipped to ``[EPS, 1 - EPS]`` before any log-odds is taken, so a method that
  answers exactly 0 or 1 still has a finite log-odds.
* The targets are not the bare 0/1 labels but Platt's smoothed ones: ``(n1 + 1) / (n1 + 2)`` for
  an instance whose gold outcome is O1 and ``1 / (n0 + 2)`` for one whose gold outcome is O2, where
  ``n1``/``n0`` count the two kinds in the training set. With few labels (or only one kind of
  gold outcome, as in the bundled Today file) a calibrator then never learns to say exactly 0 or 1,
  and logistic fits stay finite. Logistic models see each instance twice, once as a positive with
  weight ``t`` and once as a negative with weight ``1 - t`` (the same likelihood as the soft target).
* Logistic fits carry a weak L2 penalty on their slopes (``C = LOGISTIC_C``), which only matters
  when the training probabilities are (nearly) all the same.

:class:`CalibratorFile` is the versioned JSON file ``anchor calibrate fit`` writes: the kind, its
parameters, and what it was fitted on (run directories, datasets, method, model, n, date), so that
applying it to another model or method can be warned about (:meth:`CalibratorFile.mismatch`).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Protocol, Self, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike
from pydantic import BaseModel, ConfigDict, Field, field_validator

from anchor.errors import AnchorError

CALIBRATOR_SCHEMA_VERSION = 1
KindName = Literal["platt", "isotonic", "beta", "temperature"]
#: The data kinds a calibrator can be fitted on (pairwise runs have no per-instance event).
DataKind = Literal["pairwise", "decision", "factcheck", "cases"]
#: Below this many labelled instances, fit and report say that the figures rest on very little.
FEW_LABELS = 30

# The numbers of a calibrator file: JSON numbers (not strings, not true/false), finite (a NaN or an
# infinity read from the file would turn every probability into NaN or a value outside [0, 1]).
FiniteNumber = Annotated[float, Field(strict=True, allow_inf_nan=False)]
NonNegativeNumber = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0.0)]
UnitNumber = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0.0, le=1.0)]
#: Probabilities are kept this far from 0 and 1 before a log-odds is taken.
EPS = 1e-6
#: Inverse strength of the L2 penalty on the slopes of the logistic calibrators (scikit-learn's C).
LOGISTIC_C = 100.0


class CalibratorError(AnchorError, ValueError):
    """A calibrator that cannot be fitted, read or applied, with the reason."""


class CalibratorMismatchWarning(UserWarning):
    """A calibrator applied to another model or method than the one it was fitted on."""


@runtime_checkable
class Calibrator(Protocol):
    """Fit on (raw P(O1), outcome-1-is-gold) pairs; predict calibrated P(O1)."""

    kind: ClassVar[str]

    def fit(self, p: ArrayLike, y: ArrayLike) -> Self:
        ...

    def predict(self, p: ArrayLike) -> np.ndarray:
        ...

    def parameters(self) -> dict[str, Any]:
        """The fitted numbers, JSON-ready; ``from_parameters`` reads them back."""
        ...

    @classmethod
    def from_parameters(cls, params: dict[str, Any]) -> Self:
        ...

    def describe(self) -> str:
        """The fitted map in one line, for people."""
        ...


def method_label(method: str, stage: str | None = None, ablations: list[str] | tuple[str, ...] = ()) -> str:
    """How a calibrator names a method: ``anchor``, ``anchor+no-cbn``, ``bird-on-anchor[pool]``.
    Evaluation runs (method, --stage, ablations) and ``Anchor`` (its active ablations) use the same."""
    return method + (f"[{stage}]" if stage else "") + "".join(f"+{a}" for a in sorted(ablations))


# --------------------------------------------------------------------------- shared numerics


def as_probabilities(p: ArrayLike, what: str = "p") -> np.ndarray:
    """A 1-D float array of probabilities; NaN or values outside [0, 1] raise ``CalibratorError``."""
    arr = np.asarray(p, dtype=float).reshape(-1)
    if arr.size and (np.isnan(arr).any() or arr.min() < 0.0 or arr.max() > 1.0):
        raise CalibratorError(f"{what} must hold probabilities in [0, 1]")
    return arr


def as_outcomes(y: ArrayLike, n: int) -> np.ndarray:
    """A 1-D array of 0/1 outcomes of length ``n``."""
    arr = np.asarray(y, dtype=float).reshape(-1)
    if arr.size != n:
        raise CalibratorError(f"got {n} probabilities but {arr.size} outcomes")
    if n == 0:
        raise CalibratorError("nothing to fit: no labelled probabilities")
    if not np.isin(arr, (0.0, 1.0)).all():
        raise CalibratorError("outcomes must be 0 or 1 (1 = outcome 1 is the gold outcome)")
    return arr


def logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, EPS, 1.0 - EPS)
    return np.log(q) - np.log1p(-q)


def sigmoid(z: np.ndarray) -> np.ndarray:
    out = np.empty_like(z, dtype=float)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    ez = np.exp(z[~pos])
    out[~pos] = ez / (1.0 + ez)
    return out


def smoothed_targets(y: np.ndarray) -> np.ndarray:
    """Platt's targets: (n1 + 1) / (n1 + 2) for y = 1, 1 / (n0 + 2) for y = 0."""
    n1 = float(y.sum())
    n0 = float(y.size) - n1
    return np.where(y == 1.0, (n1 + 1.0) / (n1 + 2.0), 1.0 / (n0 + 2.0))


def soft_logistic_data(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features, labels, weights) for a logistic fit against the smoothed targets: every row twice,
    as a positive weighted ``t`` and as a negative weighted ``1 - t``."""
    t = smoothed_targets(y)
    features = np.concatenate([x, x])
    labels = np.concatenate([np.ones(len(x), dtype=int), np.zeros(len(x), dtype=int)])
    return features, labels, np.concatenate([t, 1.0 - t])


def fit_soft_logistic(x: np.ndarray, y: np.ndarray, *, fit_intercept: bool = True) -> tuple[np.ndarray, float]:
    """Coefficients (one per column of ``x``) and intercept of scikit-learn's ``LogisticRegression``
    (``C`` = :data:`LOGISTIC_C`) fitted against the smoothed targets of outcomes ``y``; the fit behind
    Platt, temperature and beta calibration."""
    # scikit-learn costs seconds to import; only fitting needs it (applying a calibrator is NumPy).
    from sklearn.linear_model import LogisticRegression

    features, labels, weights = soft_logistic_data(x, y)
    model = LogisticRegression(C=LOGISTIC_C, fit_intercept=fit_intercept).fit(features, labels, sample_weight=weights)
    return model.coef_[0].astype(float), float(model.intercept_[0]) if fit_intercept else 0.0


# --------------------------------------------------------------------------- the file


class _Model(BaseModel):
    # Strict: a count or a version written as "40" or true is not a number; the file is JSON and
    # `anchor calibrate fit` writes every field with its own type.
    model_config = ConfigDict(extra="forbid", strict=True)


class Parameters(_Model):
    """The parameters of one calibrator kind, as its file holds them: each kind declares its own
    fields and bounds (:meth:`Calibrator.from_parameters` validates with it)."""


class FittedOn(_Model):
    """What a calibrator was fitted on."""

    runs: list[str] = Field(description="The run directories, as given to `anchor calibrate fit`.")
    datasets: list[str]
    method: str = Field(description="The method, with its stage and ablations (e.g. 'anchor+no-cbn').")
    model: str = Field(description="The LLM that answered (config.json's llm.model).")
    backend: str | None = None
    n: int = Field(ge=1, description="Labelled instances with a probability (over all runs given).")
    n_outcome1: int = Field(ge=0, description="Of those, how many have outcome 1 as the gold outcome.")
    n_unanswered: int = Field(default=0, ge=0, description="Instances left out: unknown (abstained) or failed.")
    kinds: list[DataKind] = Field(default_factory=list, description=(
        "The data kinds of the runs (decision, factcheck); empty in files written before it was recorded."))
    small_model: bool = Field(default=False, description="True when the runs used the embedded 135M model.")
    date: str = Field(description="When it was fitted (UTC, ISO 8601).")
    anchor_version: str = ""

    def summary(self) -> str:
        return (f"{self.method} with model {self.model!r} on {', '.join(self.datasets)} "
                f"(n={self.n}, fitted {self.date[:10]})")


class CalibratorFile(_Model):
    """The JSON file of a fitted calibrator (``anchor calibrate fit --out cal.json``)."""

    schema_version: int = CALIBRATOR_SCHEMA_VERSION
    kind: KindName
    parameters: dict[str, Any]
    fitted_on: FittedOn
    targets: str = Field(default="platt-smoothed", description="The fitting targets (see anchor.calibration).")
    notes: list[str] = Field(default_factory=list)

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != CALIBRATOR_SCHEMA_VERSION:
            raise ValueError(f"version {value} is not one this anchor reads (it reads {CALIBRATOR_SCHEMA_VERSION}); "
                             "fit the calibrator again with this version")
        return value

    def mismatch(self, *, model: str | None, method: str | None, kind: str | None = None) -> str | None:
        """One line naming both sides when ``model``, ``method`` or the data ``kind`` (decision,
        factcheck, pairwise) differs from the fitted ones; None when all match (or are unknown)."""
        f = self.fitted_on
        odd = []
        if model is not None and model != f.model:
            odd.append(f"model {f.model!r}, applied to model {model!r}")
        if method is not None and method != f.method:
            odd.append(f"method {f.method!r}, applied to method {method!r}")
        if kind is not None and f.kinds and kind not in f.kinds:
            odd.append(f"{' and '.join(f.kinds)} data, applied to {kind} data")
        if not odd:
            return None
        return f"the {self.kind} calibrator was fitted on " + "; and on ".join(odd) + (
            ": its probabilities may be off for these answers")
