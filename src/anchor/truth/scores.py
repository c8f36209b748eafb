"""Scores of estimates against the truth: how far each P(O1) is from the true P(O1 | condition).

Input: one :class:`TruthRow` per case with a known truth (its ``p_true``), holding the method's
estimate (None when it said "unknown" or failed) and the sampled label when there is one. Every
figure says over how many rows it is computed; a figure without rows is None with the reason, never 0.

* coverage: the share of rows answered; unknown and failed rows are counted apart;
* ``mae``, ``rmse``: mean absolute and root mean squared error |p - p_true| over the answered rows;
* ``kl``: mean KL(truth || estimate) of the two-outcome distributions, and ``cross_entropy``: mean
  -(t log q + (1 - t) log(1 - q)), in nats, with the estimate q clipped to [1e-6, 1 - 1e-6] so that a
  certain answer costs a large finite amount (the truth itself is never clipped; 0 log 0 = 0);
* ``brier_truth``: mean (p - p_true)^2 (= rmse squared); ``brier_labels`` and ``ece_labels``: the Brier
  score and the ECE (ten equal-width bins, as ``anchor report``) against the sampled labels, over the
  answered rows that have one (:mod:`anchor.metrics`);
* ``decision_accuracy``: how often the estimate's decision (outcome 1 when p > 0.5, outcome 2 when
  p < 0.5) is the Bayes-optimal one (the truth's side of 0.5), over the answered rows where neither is
  a tie. An estimate of exactly 0.5, and a truth within :data:`TRUTH_TIE` of 0.5 (a "nothing"
  condition's truth is the prior 0.5, which enumeration may give as 0.49999999999999994), are counted
  apart, as ties;
* cost: requests and tokens, when the caller passes them (from the run's ledger).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from anchor.metrics import brier_score, expected_calibration_error

TRUTH_SCORES_SCHEMA_VERSION = 1
#: Estimates are clipped to [CLIP, 1 - CLIP] for the KL divergence and the cross-entropy.
CLIP = 1e-6
#: A truth this close to 0.5 is a tie for the decision (the enumeration's rounding, not a lean).
TRUTH_TIE = 1e-12

RowStatus = Literal["ok", "unknown", "failed"]


@dataclass(frozen=True)
class TruthRow:
    """One case: its true P(O1), the estimate (None unless answered), its status and its label."""

    p_true: float
    p: float | None
    status: RowStatus = "ok"
    label: int | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.p_true <= 1.0:
            raise ValueError(f"p_true {self.p_true!r} is not a probability")
        if self.p is not None and not 0.0 <= self.p <= 1.0:
            raise ValueError(f"estimate {self.p!r} is not a probability")
        if (self.status == "ok") != (self.p is not None):
            raise ValueError(f"status {self.status!r} with estimate {self.p!r}: an answered row has one, others none")


class Figure(BaseModel):
    """One score: its value over ``n`` rows, or None and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float | None
    n: int = Field(ge=0, description="Rows the figure is computed over.")
    reason: str | None = Field(default=None, description="Why there is no value (None when there is one).")


class TruthScores(BaseModel):
    """A run's (or any set of estimates') scores against the truth; JSON with a schema version."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = TRUTH_SCORES_SCHEMA_VERSION
    n: int = Field(ge=0, description="Rows with a true probability.")
    answered: int = Field(ge=0)
    unknown: int = Field(ge=0, description="Rows the method answered 'unknown' (abstained).")
    failed: int = Field(ge=0, description="Rows without a usable answer (an error).")
    coverage: Figure
    mae: Figure
    rmse: Figure
    kl: Figure
    cross_entropy: Figure
    brier_truth: Figure
    brier_labels: Figure
    ece_labels: Figure
    decision_accuracy: Figure
    decision_ties: int = Field(ge=0, description="Answered rows left out of decision_accuracy: the estimate is "
                                                 "exactly 0.5 or the truth is 0.5.")
    requests: int | None = Field(default=None, description="LLM requests of the run (its ledger).")
    tokens: int | None = Field(default=None, description="Prompt and completion tokens of the run (its ledger).")
    cost_note: str | None = Field(default=None, description="Why there is no cost, when there is none.")
    clip: float = Field(default=CLIP, description="Estimates are clipped to [clip, 1 - clip] for kl and "
                                                  "cross_entropy.")
    notes: list[str] = Field(default_factory=list)

    FIGURES: ClassVar[tuple[str, ...]] = ("coverage", "mae", "rmse", "kl", "cross_entropy", "brier_truth", "brier_labels",
                                "ece_labels", "decision_accuracy")


def _none(reason: str) -> Figure:
    return Figure(value=None, n=0, reason=reason)


def _mean(values: np.ndarray, reason: str) -> Figure:
    return Figure(value=float(values.mean()), n=int(values.size)) if values.size else _none(reason)


def score_against_truth(rows: Sequence[TruthRow], *, requests: int | None = None, tokens: int | None = None,
                        cost_note: str | None = None) -> TruthScores:
    """Every figure of the module's docstring over ``rows``."""
    answered = [r for r in rows if r.status == "ok"]
    none_answered = "no row was answered" if rows else "no row has a true probability"
    t = np.array([r.p_true for r in answered], dtype=float)
    p = np.array([r.p for r in answered], dtype=float)
    err = p - t
    q = np.clip(p, CLIP, 1.0 - CLIP)
    cross = -(_xlogy(t, q) + _xlogy(1.0 - t, 1.0 - q))
    entropy = -(_xlogy(t, t) + _xlogy(1.0 - t, 1.0 - t))
    labelled = [r for r in answered if r.label in (1, 2)]
    labels = [int(r.label) for r in labelled]  # type: ignore[arg-type]
    estimates: list[float | None] = [r.p for r in labelled]
    no_labels = none_answered if not answered else "no answered row has a label"
    decided = [r for r in answered if not _tie(r)]
    right = np.array([(r.p > 0.5) == (r.p_true > 0.5) for r in decided], dtype=float)  # type: ignore[operator]
    if rows:
        coverage = Figure(value=len(answered) / len(rows), n=len(rows))
    else:
        coverage = _none("no row has a true probability")
    brier_l = brier_score(labels, estimates)["brier"] if labelled else None
    ece_l = expected_calibration_error(labels, estimates)["ece"] if labelled else None
    return TruthScores(
        n=len(rows), answered=len(answered), unknown=sum(r.status == "unknown" for r in rows),
        failed=sum(r.status == "failed" for r in rows), coverage=coverage,
        mae=_mean(np.abs(err), none_answered),
        rmse=Figure(value=math.sqrt(float(np.mean(err ** 2))), n=int(err.size)) if err.size else _none(none_answered),
        kl=_mean(np.maximum(cross - entropy, 0.0), none_answered),  # >= 0; rounding could dip below
        cross_entropy=_mean(cross, none_answered),
        brier_truth=_mean(err ** 2, none_answered),
        brier_labels=Figure(value=brier_l, n=len(labelled)) if labelled else _none(no_labels),
        ece_labels=Figure(value=ece_l, n=len(labelled)) if labelled else _none(no_labels),
        decision_accuracy=_mean(right, none_answered if not answered else "every answered row is a tie at 0.5"),
        decision_ties=len(answered) - len(decided), requests=requests, tokens=tokens,
        cost_note=cost_note if requests is None else None,
    )


def _tie(row: TruthRow) -> bool:
    return row.p == 0.5 or abs(row.p_true - 0.5) <= TRUTH_TIE


def _xlogy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x * log(y), with 0 where x is 0 (so 0 log 0 = 0)."""
    out = np.zeros_like(x, dtype=float)
    mask = x > 0
    out[mask] = x[mask] * np.log(y[mask])
    return out
