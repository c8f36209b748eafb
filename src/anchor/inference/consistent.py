"""The consistent estimator: ANCHOR's two models, reading every elicited number as what its prompt asks.

The paper's arithmetic (:mod:`anchor.inference.bayes`) reads an elicited phi = P(O1 | f) as a
symmetric likelihood pair under even odds, and uses the same number again as the link P(f | L) from
a factor to its latent. Both readings agree with "phi is the probability of outcome 1 once the factor
is known" only when the two outcomes are equally likely beforehand and, for the network, when the
latent passes its factor's evidence on unchanged. This module keeps phi as that posterior and adds
the scenario's base rate pi = P(O1 | S), elicited once per scenario, so that both models are exact
whenever the world has their shape, whatever pi is.

Naive Bayes. Bayes' rule turns each phi into the factor's likelihood ratio,
``P(f | O1) / P(f | O2) = odds(phi) / odds(pi)``; with the factors independent given the outcome the
ratios multiply onto the prior odds, so the prior is counted once:

    logit P(O1 | f1..fn) = logit(pi) + sum_j [logit(phi_j) - logit(pi)]
                         = (1 - n) logit(pi) + sum_j logit(phi_j).

Latent network ``O -> L_k -> f_j``, with ``a = P(L_k=1 | O1)`` and ``b = P(L_k=1 | O2)``. The
posterior depends on a factor's link only through its ratio ``rho_j = P(f_j | L_k=1) / P(f_j | L_k=0)``:
a group's likelihood under an outcome with probability ``p`` of ``L_k = 1`` is, up to a factor common
to both outcomes, ``p * prod(rho) + 1 - p``. The ratio is solved so that the factor alone reproduces
its phi, i.e. its likelihood ratio through the latent equals ``R_j = odds(phi_j) / odds(pi)``:

    (a rho + 1 - a) / (b rho + 1 - b) = R   =>   rho = (R (1 - b) - (1 - a)) / (a - R b).

A latent can carry at most the evidence of knowing its own state: the single-factor ratio lies
between ``(1 - a) / (1 - b)`` (rho -> 0) and ``a / b`` (rho -> infinity). A phi stronger than its
latent allows is read as that limit (the factor reveals the latent's state, :data:`LINK_CAP` on the
log scale); a latent with ``a = b`` passes nothing on, whatever its factors say. A latent with
``(a, b) = (1, 0)`` is the outcome itself, and the network is then Naive Bayes exactly.

Everything is in log space, as in :mod:`anchor.inference.bayes`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from anchor.inference.numeric import (
    as_real,
    check_cbn,
    check_open_unit,
    logaddexp,
    safe_log,
    safe_log1m,
    sigmoid,
)

__all__ = ["LINK_CAP", "clip_evidence", "consistent_cbn_posterior", "consistent_naive_bayes", "lean_as_posterior",
           "link_log_ratios", "logit", "pooled_base_rate"]

#: The largest |log rho| a solved link takes: a factor at this ratio reveals its latent's state
#: (rho = e**60, about 1e26), far beyond any stated probability, yet finite so sums stay exact.
LINK_CAP = 60.0


def logit(p: float) -> float:
    # The paper's Naive Bayes writes it this way: at even odds the two estimators then agree bit for bit.
    return math.log(p / (1.0 - p))


def _prior(prior: float) -> float:
    pi = as_real(prior, "prior")
    if not 0.0 < pi < 1.0:
        raise ValueError(f"prior = {pi!r} is not strictly inside (0, 1); clip it first")
    return pi


def pooled_base_rate(samples: Sequence[float], eps: float = 0.01) -> float:
    """Several stated base rates as one: each kept inside [eps, 1 - eps], their log-odds averaged (the
    geometric mean of the odds, so that 0.1 and 0.9 pool to 0.5)."""
    values = [min(max(as_real(p, "base rate"), eps), 1.0 - eps) for p in samples]
    if not values:
        raise ValueError("no base rate to pool")
    return sigmoid(math.fsum(logit(p) for p in values) / len(values))


def clip_evidence(phi: float, prior: float, eps: float = 0.01) -> float:
    """``phi`` with the evidence it carries bounded as the paper bounds it at even odds: its likelihood ratio
    odds(phi) / odds(prior) kept within [eps / (1 - eps), (1 - eps) / eps] (at most 99 for eps = 0.01), so that
    no single factor is decisive. Clipping phi itself to [eps, 1 - eps] would do that only at even odds; at
    a prior of 0.01 it would forbid any factor to count against outcome 1."""
    bound = logit(1.0 - eps) if eps > 0.0 else LINK_CAP
    x = min(max(as_real(phi, "phi"), 1e-12), 1.0 - 1e-12)
    ratio = logit(x) - logit(_prior(prior))
    if -bound <= ratio <= bound:
        return x  # as stated, not through a round trip of the log-odds
    return sigmoid(logit(prior) + max(-bound, min(bound, ratio)))


def lean_as_posterior(lean: float, prior: float) -> float:
    """An even-odds lean (0.5 = favours neither; the voting labels' 0.75 / 0.5 / 0.25) as P(O1 | f) at the
    prior: the lean is the factor's likelihood ratio, odds(lean)."""
    return sigmoid(logit(_prior(prior)) + logit(check_open_unit([lean], "lean")[0]))


def consistent_naive_bayes(phis: Sequence[float], prior: float) -> float:
    """P(O1 | E) by Naive Bayes with each phi read as P(O1 | f) and the base rate ``prior`` counted once.

    Every phi and the prior must be strictly inside (0, 1). No evidence gives the prior; a prior of
    0.5 gives the paper's Naive Bayes exactly.
    """
    values = check_open_unit(phis, "phis")
    pi = _prior(prior)
    terms = [logit(p) for p in values]
    if pi != 0.5:  # (1 - n) * 0 would add nothing; skipping it keeps even odds bit-identical to the paper
        terms.append((1 - len(values)) * logit(pi))
    return sigmoid(math.fsum(terms))


def link_log_ratio(phi: float, prior: float, a: float, b: float) -> float:
    """log rho: the link ratio P(f | L=1) / P(f | L=0) under which the factor alone gives P(O1 | f) = phi,
    for a latent with P(L=1 | O1) = a, P(L=1 | O2) = b and the outcome's prior ``prior``."""
    if a == b:
        return 0.0  # the latent carries nothing, so no link can
    ratio = math.exp(logit(phi) - logit(prior))
    num = ratio * (1.0 - b) - (1.0 - a)
    den = a - ratio * b
    if num != 0.0 and den != 0.0 and (num > 0.0) == (den > 0.0):
        return max(-LINK_CAP, min(LINK_CAP, math.log(num / den)))
    # Outside what the latent can carry: rho -> infinity gives the ratio a / b, rho -> 0 gives
    # (1 - a) / (1 - b); the target lies beyond a / b exactly when den * (a - b) <= 0.
    return LINK_CAP if den * (a - b) <= 0.0 else -LINK_CAP


def link_log_ratios(phis: Sequence[float], assignment: Sequence[int],
                    latent_params: Sequence[tuple[float, float]], prior: float) -> list[float]:
    """Each factor's solved log link ratio (see :func:`link_log_ratio`), for the network's arguments."""
    phi_list, assign, params = check_cbn(phis, assignment, latent_params)
    pi = _prior(prior)
    return [link_log_ratio(phi, pi, *params[i]) for phi, i in zip(phi_list, assign, strict=True)]


def _group_bracket(p: float, total: float) -> float:
    """log(p * e**total + 1 - p): a group's likelihood under an outcome with P(L=1) = p, up to a
    factor both outcomes share."""
    if total == 0.0:
        return 0.0
    return logaddexp(safe_log(p) + total, safe_log1m(p))


def consistent_cbn_posterior(phis: Sequence[float], assignment: Sequence[int],
                             latent_params: Sequence[tuple[float, float]], prior: float) -> float:
    """P(O1 | E) for the latent network with the links solved from phi and the base rate at the root.

    Arguments as :func:`anchor.inference.bayes.cbn_posterior`, plus ``prior`` = P(O1) (strictly inside
    (0, 1)). Latent parameters may be 0 or 1: (1, 0) makes a latent the outcome itself.
    """
    phi_list, assign, params = check_cbn(phis, assignment, latent_params)
    pi = _prior(prior)
    totals: list[list[float]] = [[] for _ in params]
    for phi, i in zip(phi_list, assign, strict=True):
        totals[i].append(link_log_ratio(phi, pi, *params[i]))
    log_odds = [logit(pi)]
    for (a, b), parts in zip(params, totals, strict=True):
        total = math.fsum(parts)
        log_odds.append(_group_bracket(a, total))
        log_odds.append(-_group_bracket(b, total))
    return sigmoid(math.fsum(log_odds))
