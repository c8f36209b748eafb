"""Log-space arithmetic and argument checks for the posterior code (``bayes``, ``cbn_reference``).

Log-probabilities keep long evidence lists of near-certain factors from underflowing or turning
into NaN; the checks turn a caller's bad number into a ``ValueError`` that names the argument.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

# --------------------------------------------------------------------------- scalar helpers


def sigmoid(x: float) -> float:
    """Logistic function that never overflows: only ever exponentiates a non-positive number."""
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def safe_log(p: float) -> float:
    """log(p), with log(0) = -inf instead of an exception."""
    return -math.inf if p == 0.0 else math.log(p)


def safe_log1m(p: float) -> float:
    """log(1 - p), with log(0) = -inf instead of an exception."""
    return -math.inf if p == 1.0 else math.log1p(-p)


def logaddexp(a: float, b: float) -> float:
    """log(exp(a) + exp(b)) without overflow; two -inf inputs give -inf, not NaN."""
    hi = max(a, b)
    if hi == -math.inf:
        return -math.inf
    return hi + math.log1p(math.exp(-abs(a - b)))


def logsumexp(values: np.ndarray) -> float:
    if values.size == 0:
        return -math.inf
    hi = float(values.max())
    if hi == -math.inf:
        return -math.inf
    return hi + math.log(float(np.exp(values - hi).sum()))


def posterior_from_log_likelihoods(log_l1: float, log_l2: float) -> float:
    """P(O1 | E) under a uniform prior from the two (possibly unnormalised) log-likelihoods.

    When both likelihoods are zero the evidence is impossible under either outcome and Bayes'
    rule is 0/0; we answer 0.5 (no information) instead of propagating NaN.
    """
    if math.isnan(log_l1) or math.isnan(log_l2):
        raise ValueError("log-likelihoods must not be NaN")
    if log_l1 == log_l2:  # covers both -inf, where the difference would be NaN
        return 0.5
    return sigmoid(log_l1 - log_l2)


# --------------------------------------------------------------------------- validation


def as_real(value: object, what: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a number, got a bool")
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be a number, got {value!r}") from exc
    if math.isnan(x):
        raise ValueError(f"{what} is NaN")
    return x


def check_open_unit(values: Sequence[float], what: str) -> list[float]:
    """Every value must lie strictly inside (0, 1): callers clip before inference."""
    out: list[float] = []
    for j, value in enumerate(values):
        x = as_real(value, f"{what}[{j}]")
        if not 0.0 < x < 1.0:
            raise ValueError(f"{what}[{j}] = {x!r} is not strictly inside (0, 1); clip it first")
        out.append(x)
    return out


def check_closed_unit(value: object, what: str) -> float:
    x = as_real(value, what)
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"{what} = {x!r} is outside [0, 1]")
    return x


def check_cbn(
    phis: Sequence[float],
    assignment: Sequence[int],
    latent_params: Sequence[tuple[float, float]],
) -> tuple[list[float], list[int], list[tuple[float, float]]]:
    phi_list = check_open_unit(phis, "phis")
    params: list[tuple[float, float]] = []
    for i, pair in enumerate(latent_params):
        if len(pair) != 2:
            raise ValueError(f"latent_params[{i}] must be a pair (P(L=1|O1), P(L=1|O2)), got {pair!r}")
        params.append(
            (
                check_closed_unit(pair[0], f"latent_params[{i}][0]"),
                check_closed_unit(pair[1], f"latent_params[{i}][1]"),
            )
        )
    if len(assignment) != len(phi_list):
        raise ValueError(f"assignment has {len(assignment)} entries but there are {len(phi_list)} factors")
    k = len(params)
    assign: list[int] = []
    for j, raw in enumerate(assignment):
        if isinstance(raw, bool):
            raise ValueError(f"assignment[{j}] must be an integer latent index, got a bool")
        try:
            idx = operator.index(raw)
        except TypeError as exc:
            raise ValueError(f"assignment[{j}] must be an integer latent index, got {raw!r}") from exc
        if not 0 <= idx < k:
            raise ValueError(f"assignment[{j}] = {idx} is not a valid latent index (there are {k} latents)")
        assign.append(idx)
    return phi_list, assign, params
