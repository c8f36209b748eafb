"""Risk against coverage: what answering less buys, per run.

A method may answer "unknown" (ANCHOR when nothing maps, BIRD† when its strict mapping finds nothing);
a baseline always answers. To put them on one plot, the abstention rule of ANCHOR's engine is
applied on top of every run's probabilities: at threshold tau an instance is answered when
max(P(O1), P(O2)) >= tau, and an instance the method left unknown (or that failed) is never
answered. Sweeping tau down from 1 traces accuracy of the answered instances (scored by the
dataset's own decision rule: P(O1) > 0.5 chooses O1 on decision data, ties at 0.5 are never
right; fact checking says "supported" iff P(claim) > its threshold) against coverage, the share of
all the run's instances answered. Risk is 1 - that accuracy.

The area under the risk-coverage curve (AURC) integrates the step curve from coverage 0 to the
largest coverage the run reaches; lower is better. A run that abstains more ends its curve
earlier, so compare AURC together with ``max_coverage`` (or read the curves).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def is_correct(label: int, p: float, kind: str, threshold: float) -> bool:
    """The dataset's decision for P(O1) = ``p``, scored against gold ``label`` (1 or 2)."""
    if kind == "factcheck":
        return (p > threshold) == (label == 1)
    if p == 0.5:
        return False
    return (p > 0.5) == (label == 1)


def risk_coverage(labels: Sequence[int], probs: Sequence[float | None], kind: str,
                  threshold: float = 0.9) -> dict[str, Any]:
    """The curve of one run: ``points`` (tau, coverage, accuracy, risk, answered) from the strictest
    tau to the loosest, ``aurc``, ``max_coverage``, ``accuracy_at_max`` and ``n``.

    ``probs`` holds each instance's P(O1), None for an unknown or failed one; ``kind`` is the run's
    task (``decision`` or ``factcheck``) and ``threshold`` its fact-check decision threshold.
    """
    if len(labels) != len(probs):
        raise ValueError(f"labels and probs have different lengths ({len(labels)} and {len(probs)})")
    n = len(labels)
    known = [(max(p, 1.0 - p), is_correct(y, p, kind, threshold)) for y, p in zip(labels, probs, strict=True)
             if p is not None]
    out: dict[str, Any] = {"n": n, "points": [], "aurc": None, "max_coverage": 0.0 if n else None,
                           "accuracy_at_max": None}
    if not n or not known:
        return out
    conf = np.array([c for c, _ in known])
    right = np.array([r for _, r in known], dtype=float)
    area, covered_before = 0.0, 0.0
    for tau in sorted(set(conf.tolist()), reverse=True):
        answered = conf >= tau
        count = int(answered.sum())
        coverage = count / n
        accuracy = float(right[answered].mean())
        area += (coverage - covered_before) * (1.0 - accuracy)
        covered_before = coverage
        out["points"].append({"tau": float(tau), "coverage": coverage, "accuracy": accuracy,
                              "risk": 1.0 - accuracy, "answered": count})
    last = out["points"][-1]
    out.update(aurc=area, max_coverage=last["coverage"], accuracy_at_max=last["accuracy"])
    return out
