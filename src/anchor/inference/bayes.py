"""Posterior arithmetic for ANCHOR's two models and their aggregation (no LLM calls here).

Both models decide between two outcomes, O1 and O2, under a uniform outcome prior. Every factor
in the evidence is an *observed, active* binary variable, and its elicited number ``phi`` is read
as a symmetric likelihood pair: P(f=1 | O1) = phi and P(f=1 | O2) = 1 - phi for Naive Bayes, and
P(f=1 | L=1) = phi and P(f=1 | L=0) = 1 - phi for a factor whose latent parent is L in the
latent-augmented network Outcome -> L_i -> f_j.

Orientation convention for the network: ``L_i = 1`` is the latent state that makes factors with
phi > 0.5 likely. Latent parameters are ``(P(L_i=1 | O1), P(L_i=1 | O2))``. With this convention a
latent whose first number exceeds its second is an O1-leaning latent.

Everything is done with log-probabilities, so long evidence lists of near-certain factors neither
underflow nor turn into NaN; posteriors come out of a numerically stable logistic function (the
helpers are in ``anchor.inference.numeric``). The slow reference posteriors that tests and
benchmarks compare the closed form with live in ``anchor.inference.cbn_reference``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from enum import Enum

from anchor.inference.numeric import (
    as_real,
    check_cbn,
    check_closed_unit,
    check_open_unit,
    logaddexp,
    posterior_from_log_likelihoods,
    safe_log,
    safe_log1m,
    sigmoid,
)

__all__ = [
    "bayesian_model_average",
    "cbn_log_likelihoods",
    "cbn_posterior",
    "clip_probability",
    "label_prior_phi",
    "latent_params_from_counts",
    "linear_opinion_pool",
    "naive_bayes_posterior",
]

# Values this close outside [0, 1] are treated as rounding noise rather than as a caller's mistake.
_FLOAT_NOISE = 1e-9

_LABEL_PRIORS: dict[str, float] = {"outcome1": 0.75, "neutral": 0.5, "outcome2": 0.25}


# --------------------------------------------------------------------------- parameter preparation


def clip_probability(p: float, eps: float = 0.01) -> float:
    """Clamp a probability into ``[eps, 1 - eps]`` so that no single factor can be decisive.

    Values a hair outside [0, 1] (float noise up to 1e-9) are accepted and clamped; NaN and
    genuinely out-of-range values raise ``ValueError``.
    """
    e = as_real(eps, "eps")
    if not 0.0 <= e < 0.5:
        raise ValueError(f"eps must be in [0, 0.5), got {e!r}")
    x = as_real(p, "probability")
    if x < -_FLOAT_NOISE or x > 1.0 + _FLOAT_NOISE:
        raise ValueError(f"probability {x!r} is outside [0, 1]")
    return min(max(x, e), 1.0 - e)


def label_prior_phi(label: str | Enum) -> float:
    """Frequency-based stand-in for an elicited phi, from a factor's voted label.

    Accepts the label strings ``"outcome1"``, ``"neutral"``, ``"outcome2"`` or the matching
    ``anchor.types.FactorLabel`` member.
    """
    value = label.value if isinstance(label, Enum) else label
    if not isinstance(value, str):
        raise ValueError(f"label must be a string or FactorLabel, got {label!r}")
    key = value.strip().lower()
    if key not in _LABEL_PRIORS:
        raise ValueError(f"unknown factor label {value!r}; expected one of {sorted(_LABEL_PRIORS)}")
    return _LABEL_PRIORS[key]


def latent_params_from_counts(c1: int, c2: int, cn: int, smoothing: float = 0.5) -> tuple[float, float]:
    """Latent parameters ``(P(L=1|O1), P(L=1|O2))`` from the labels of the latent's factors.

    ``c1``/``c2``/``cn`` count the latent's factors labelled outcome1/outcome2/neutral. As in the
    paper's frequency rule, neutral factors count half towards each side and ``smoothing`` is added
    to both: t1 = c1 + cn/2 + smoothing, t2 = c2 + cn/2 + smoothing.

    Orientation: in this module ``L=1`` is the latent state that makes O1-leaning factors likely
    (a factor's CPT reads phi as P(f=1 | L=1)), so *which way* a group points is already carried by
    its factors' phi values. What the counts add is *how reliably* the concept tracks the outcome:
    a group whose labels agree is a strong concept, a mixed one is weak. So the result is
    ``(s, 1 - s)`` with ``s = max(t1, t2) / (t1 + t2)`` in [0.5, 1): the latent leans towards O1
    with probability ``s`` when O1 holds and ``1 - s`` when O2 holds. Reading the paper's two ratios
    literally as ``(t1 / total, t2 / total)`` instead would turn every O2-leaning group into
    evidence for O1 (the contribution of a latent is proportional to
    ``(2 P(L=1|O1) - 1)(prod phi - prod(1 - phi))``, whose sign would then never depend on the
    labels). With ``(s, 1 - s)`` swapping O1 and O2 leaves the parameters unchanged while every phi
    becomes 1 - phi, so the posterior is mirrored exactly.

    An empty or evenly split group gives (0.5, 0.5), an uninformative latent; for smoothing > 0
    both numbers stay strictly inside (0, 1). The two returned numbers sum to 1.
    """
    counts: list[int] = []
    for name, raw in (("c1", c1), ("c2", c2), ("cn", cn)):
        if isinstance(raw, bool):
            raise ValueError(f"{name} must be an integer count, got a bool")
        try:
            c = operator.index(raw)
        except TypeError as exc:
            raise ValueError(f"{name} must be an integer count, got {raw!r}") from exc
        if c < 0:
            raise ValueError(f"{name} must be non-negative, got {c}")
        counts.append(c)
    alpha = as_real(smoothing, "smoothing")
    if not (alpha >= 0.0 and math.isfinite(alpha)):
        raise ValueError(f"smoothing must be a finite non-negative number, got {alpha!r}")
    n1, n2, nn = counts
    t1 = n1 + 0.5 * nn + alpha
    t2 = n2 + 0.5 * nn + alpha
    total = t1 + t2
    if total <= 0.0:
        raise ValueError("no counts and zero smoothing: latent parameters are undefined")
    strength = max(t1, t2) / total
    return strength, 1.0 - strength


# --------------------------------------------------------------------------- Naive Bayes


def naive_bayes_posterior(phis: Sequence[float]) -> float:
    """P(O1 | E) for the Naive Bayes model with a uniform outcome prior.

    Each observed factor contributes its log likelihood ratio log(phi / (1 - phi)); the
    posterior is the logistic function of their sum. No evidence gives 0.5.
    Every phi must be strictly inside (0, 1).
    """
    values = check_open_unit(phis, "phis")
    # fsum is correctly rounded, so adding a non-negative term can never lower the total; the
    # ratio form makes phi = 0.5 contribute exactly 0.
    log_odds = math.fsum(math.log(p / (1.0 - p)) for p in values)
    return sigmoid(log_odds)


# --------------------------------------------------------------------------- latent CBN


def _group_terms(
    phis: list[float], assignment: list[int], params: list[tuple[float, float]]
) -> tuple[list[float], list[float], list[float]]:
    """Per-latent pieces of the closed-form likelihood.

    For latent i with observed group E_i, write S0_i = sum log(1 - phi) and D_i = sum log(phi/(1-phi))
    over E_i. Then log[a * prod(phi) + (1 - a) * prod(1 - phi)] = S0_i + g(a, D_i) with
    g(a, D) = log(a * e^D + 1 - a). Returns (S0, g(a1, D), g(a2, D)) per latent.
    """
    k = len(params)
    s0_parts: list[list[float]] = [[] for _ in range(k)]
    d_parts: list[list[float]] = [[] for _ in range(k)]
    for p, i in zip(phis, assignment, strict=True):
        s0_parts[i].append(math.log1p(-p))
        d_parts[i].append(math.log(p / (1.0 - p)))
    s0: list[float] = []
    g1: list[float] = []
    g2: list[float] = []
    for i, (a1, a2) in enumerate(params):
        d = math.fsum(d_parts[i])
        s0.append(math.fsum(s0_parts[i]))
        if d == 0.0:
            # No net evidence in this group (or no factors at all): the bracket is a*1 + (1-a)*1
            # times prod(1 - phi), exactly, whatever the latent's parameters are.
            g1.append(0.0)
            g2.append(0.0)
        else:
            g1.append(logaddexp(safe_log(a1) + d, safe_log1m(a1)))
            g2.append(logaddexp(safe_log(a2) + d, safe_log1m(a2)))
    return s0, g1, g2


def cbn_log_likelihoods(
    phis: Sequence[float],
    assignment: Sequence[int],
    latent_params: Sequence[tuple[float, float]],
) -> tuple[float, float]:
    """``(log P(E | O1), log P(E | O2))`` for the latent network, by per-latent factorisation.

    ``phis[j]`` is factor j's parameter (strictly inside (0, 1)), ``assignment[j]`` the index of
    its latent parent, and ``latent_params[i] = (P(L_i=1|O1), P(L_i=1|O2))``, each in [0, 1]
    (0 and 1 are allowed). Because latents are independent given the outcome and each factor hangs
    off one latent, the sum over all latent states splits into one two-term sum per latent, so the
    cost is linear in the number of factors. A latent with no observed factors contributes log 1.
    With phis strictly inside (0, 1) both values are always finite.
    """
    phi_list, assign, params = check_cbn(phis, assignment, latent_params)
    s0, g1, g2 = _group_terms(phi_list, assign, params)
    return math.fsum(s0 + g1), math.fsum(s0 + g2)


def cbn_posterior(
    phis: Sequence[float],
    assignment: Sequence[int],
    latent_params: Sequence[tuple[float, float]],
) -> float:
    """P(O1 | E) for the latent network with a uniform outcome prior (closed form).

    Same arguments as :func:`cbn_log_likelihoods`. The sum of log(1 - phi) is common to both
    outcomes, so it is left out before taking the difference, which keeps full precision even
    when the likelihoods themselves are astronomically small. If both likelihoods were zero the
    answer would be 0.5 rather than NaN (see ``posterior_from_log_likelihoods``).
    """
    phi_list, assign, params = check_cbn(phis, assignment, latent_params)
    _, g1, g2 = _group_terms(phi_list, assign, params)
    return posterior_from_log_likelihoods(math.fsum(g1), math.fsum(g2))


# --------------------------------------------------------------------------- aggregation


def _check_posteriors(posteriors: Mapping[str, float]) -> dict[str, float]:
    if not posteriors:
        raise ValueError("at least one model posterior is required")
    return {name: check_closed_unit(p, f"posterior of {name!r}") for name, p in posteriors.items()}


def _check_model_weights(
    weights: Mapping[str, float], models: dict[str, float], what: str
) -> dict[str, float]:
    """Non-negative finite weights over exactly the same models, renormalised to sum 1."""
    missing = set(models) - set(weights)
    extra = set(weights) - set(models)
    if missing or extra:
        raise ValueError(
            f"{what} must name exactly the models given; missing {sorted(missing)}, extra {sorted(extra)}"
        )
    out: dict[str, float] = {}
    for name in models:
        w = as_real(weights[name], f"{what} of {name!r}")
        if not (w >= 0.0 and math.isfinite(w)):
            raise ValueError(f"{what} of {name!r} must be finite and non-negative, got {w!r}")
        out[name] = w
    total = math.fsum(out.values())
    if total <= 0.0:
        raise ValueError(f"{what} sum to zero")
    return {name: w / total for name, w in out.items()}


def _convex_combination(posteriors: dict[str, float], weights: dict[str, float]) -> float:
    pooled = math.fsum(weights[name] * p for name, p in posteriors.items())
    return min(max(pooled, 0.0), 1.0)  # rounding can step a hair outside [0, 1]


def linear_opinion_pool(posteriors: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """Weighted average of per-model P(O1 | E).

    ``weights`` must cover exactly the models in ``posteriors``, be non-negative, and not all be
    zero; they are rescaled to sum to 1.
    """
    post = _check_posteriors(posteriors)
    w = _check_model_weights(weights, post, "weights")
    return _convex_combination(post, w)


def bayesian_model_average(
    posteriors: Mapping[str, float], prior: Mapping[str, float] | None = None
) -> tuple[float, dict[str, float]]:
    """Model averaging with ANCHOR's cheap stand-in for each model's evidence.

    A model's evidence is approximated by P(O1|E,M) * P(O2|E,M); multiplied by the model prior
    (uniform unless ``prior`` is given) and normalised, that gives the model weights. Returns the
    pooled P(O1 | E) and the weights. Note that this stand-in favours the *less* decisive model:
    p * (1 - p) peaks at p = 0.5. If every weighted evidence is zero (all models certain, or prior
    mass only on certain models), the normalised prior is used as the weights.
    """
    post = _check_posteriors(posteriors)
    if prior is None:
        prior_w = {name: 1.0 / len(post) for name in post}
    else:
        prior_w = _check_model_weights(prior, post, "prior")
    # In log space so that several near-certain models do not all underflow to a 0/0.
    log_w = {name: safe_log(prior_w[name]) + safe_log(p) + safe_log1m(p) for name, p in post.items()}
    top = max(log_w.values())
    if top == -math.inf:
        weights = dict(prior_w)
    else:
        raw = {name: math.exp(lw - top) for name, lw in log_w.items()}
        total = math.fsum(raw.values())
        weights = {name: r / total for name, r in raw.items()}
    return _convex_combination(post, weights), weights
