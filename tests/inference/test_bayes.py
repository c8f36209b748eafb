"""Properties and hand-worked cases for stage 3 arithmetic (anchor.inference.bayes)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anchor.inference.bayes import (
    bayesian_model_average,
    cbn_log_likelihoods,
    cbn_posterior,
    clip_probability,
    label_prior_phi,
    latent_params_from_counts,
    linear_opinion_pool,
    naive_bayes_posterior,
)
from anchor.inference.cbn_reference import (
    _cbn_log_likelihoods_enumeration,
    cbn_posterior_enumeration,
    cbn_posterior_pgmpy,
)
from anchor.inference.numeric import check_cbn, posterior_from_log_likelihoods
from anchor.types import FactorLabel

# --------------------------------------------------------------------------- strategies

# Anything strictly inside (0, 1), including subnormals and 1 - 2**-53.
open_phi = st.floats(min_value=0.0, max_value=1.0, exclude_min=True, exclude_max=True)
# Dyadic values k / 2**30: the complement 1 - phi is then exact, so swap tests measure the
# implementation rather than the rounding of 1 - phi (which costs ~1e-7 relative near 1e-9).
_DYADIC = 2**30
swappable_phi = st.integers(min_value=1, max_value=_DYADIC - 1).map(lambda i: i / _DYADIC)
swappable_latent_p = st.integers(min_value=0, max_value=_DYADIC).map(lambda i: i / _DYADIC)
# Where linear-space products are still meaningful at 1e-9 (used against pgmpy).
moderate_phi = st.floats(min_value=0.05, max_value=0.95)
# Near-certain factors, either way.
extreme_phi = st.one_of(
    st.floats(min_value=1e-12, max_value=1e-3), st.floats(min_value=1 - 1e-3, max_value=1 - 1e-12)
)
latent_p = st.floats(min_value=0.0, max_value=1.0)  # 0 and 1 are legal for latents


@st.composite
def networks(
    draw, phi=open_phi, latent=latent_p, max_latents: int = 12, max_factors: int = 60, min_factors: int = 0
):
    """A random latent network: (phis, assignment, latent_params)."""
    k = draw(st.integers(min_value=1, max_value=max_latents))
    n = draw(st.integers(min_value=min_factors, max_value=max_factors))
    phis = draw(st.lists(phi, min_size=n, max_size=n))
    assignment = draw(st.lists(st.integers(min_value=0, max_value=k - 1), min_size=n, max_size=n))
    params = draw(st.lists(st.tuples(latent, latent), min_size=k, max_size=k))
    return phis, assignment, params


def _in_unit(p: float) -> bool:
    return not math.isnan(p) and 0.0 <= p <= 1.0


# --------------------------------------------------------------------------- Naive Bayes


def test_nb_hand_computed() -> None:
    # 0.8*0.6 / (0.8*0.6 + 0.2*0.4) = 0.48 / 0.56
    assert naive_bayes_posterior([0.8, 0.6]) == pytest.approx(6 / 7, abs=1e-12)
    # 0.9*0.3 / (0.9*0.3 + 0.1*0.7) = 0.27 / 0.34
    assert naive_bayes_posterior([0.9, 0.3]) == pytest.approx(27 / 34, abs=1e-12)
    assert naive_bayes_posterior([0.7]) == pytest.approx(0.7, abs=1e-12)
    assert naive_bayes_posterior([]) == 0.5


def test_nb_survives_where_linear_products_underflow() -> None:
    # 0.999**150 * 0.001**149 is ~1e-447 and underflows; the odds are 999**150 / 999**149 = 999.
    phis = [0.999] * 150 + [0.001] * 149
    assert naive_bayes_posterior(phis) == pytest.approx(0.999, abs=1e-9)
    assert naive_bayes_posterior(list(reversed(phis))) == pytest.approx(0.999, abs=1e-9)


@pytest.mark.parametrize("phi", [0.999, 0.001, 1e-12, 1 - 1e-12, 5e-324])
def test_nb_200_extreme_factors(phi: float) -> None:
    p = naive_bayes_posterior([phi] * 200)
    assert _in_unit(p)
    assert p == (1.0 if phi > 0.5 else 0.0)


@given(st.lists(open_phi, max_size=250))
def test_nb_in_unit_interval(phis: list[float]) -> None:
    assert _in_unit(naive_bayes_posterior(phis))


@given(st.lists(extreme_phi, min_size=200, max_size=200))
def test_nb_in_unit_interval_200_near_certain(phis: list[float]) -> None:
    assert _in_unit(naive_bayes_posterior(phis))


@given(st.integers(min_value=0, max_value=300))
def test_nb_all_half_is_exactly_half(n: int) -> None:
    assert naive_bayes_posterior([0.5] * n) == 0.5


@given(st.lists(swappable_phi, max_size=80))
def test_nb_swapping_outcomes_complements(phis: list[float]) -> None:
    p = naive_bayes_posterior(phis)
    q = naive_bayes_posterior([1.0 - x for x in phis])
    assert q == pytest.approx(1.0 - p, abs=1e-9)


@given(
    st.lists(open_phi, max_size=100),
    st.floats(min_value=0.5, max_value=1.0, exclude_min=True, exclude_max=True),
)
def test_nb_supporting_factor_never_lowers(phis: list[float], extra: float) -> None:
    before = naive_bayes_posterior(phis)
    for position in (0, len(phis)):  # order must not matter either
        after = naive_bayes_posterior(phis[:position] + [extra] + phis[position:])
        assert after >= before


@given(st.lists(swappable_phi, min_size=1, max_size=40))
def test_nb_is_order_invariant(phis: list[float]) -> None:
    assert naive_bayes_posterior(phis) == naive_bayes_posterior(list(reversed(phis)))


@pytest.mark.parametrize(
    "bad", [[0.0], [1.0], [0.5, float("nan")], [1.5], [-0.2], [0.5, float("inf")], ["x"]]
)
def test_nb_rejects_values_outside_open_interval(bad: list[object]) -> None:
    with pytest.raises(ValueError):
        naive_bayes_posterior(bad)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- CBN: hand-computed


def test_cbn_two_factors_one_latent_hand_computed() -> None:
    phis, assignment, params = [0.8, 0.6], [0, 0], [(0.7, 0.2)]
    # P(E|O1) = 0.7*0.8*0.6 + 0.3*0.2*0.4 = 0.36 ; P(E|O2) = 0.2*0.48 + 0.8*0.08 = 0.16
    l1, l2 = cbn_log_likelihoods(phis, assignment, params)
    assert l1 == pytest.approx(math.log(0.36), abs=1e-12)
    assert l2 == pytest.approx(math.log(0.16), abs=1e-12)
    expected = 0.36 / 0.52
    assert cbn_posterior(phis, assignment, params) == pytest.approx(expected, abs=1e-12)
    assert cbn_posterior_enumeration(phis, assignment, params) == pytest.approx(expected, abs=1e-12)
    # A shared latent makes the two factors partly redundant: less confident than NB's 6/7.
    assert cbn_posterior(phis, assignment, params) < naive_bayes_posterior(phis)


def test_cbn_two_latents_hand_computed() -> None:
    # Latent 1 has equal parameters under both outcomes, so its factor carries no information:
    # 0.7*0.8 + 0.3*0.2 = 0.62 versus 0.2*0.8 + 0.8*0.2 = 0.32.
    p = cbn_posterior([0.8, 0.6], [0, 1], [(0.7, 0.2), (0.5, 0.5)])
    assert p == pytest.approx(0.62 / 0.94, abs=1e-12)


def test_cbn_factor_orientation_must_match_latent_orientation() -> None:
    # An O2-supporting factor (phi = 0.2) under an O1-leaning latent lowers P(O1): 0.38.
    assert cbn_posterior([0.2], [0], [(0.7, 0.3)]) == pytest.approx(0.38, abs=1e-12)
    # Under an O2-leaning latent the same factor pushes L to 0, which now favours O1: 0.62.
    # So relabelling the outcomes needs more than swapping each latent pair (see the tests below).
    assert cbn_posterior([0.2], [0], [(0.3, 0.7)]) == pytest.approx(0.62, abs=1e-12)


def test_cbn_without_latents_or_evidence_is_half() -> None:
    assert cbn_posterior([], [], []) == 0.5
    assert cbn_posterior([], [], [(0.9, 0.1)]) == 0.5
    assert cbn_log_likelihoods([], [], [(0.9, 0.1), (0.0, 1.0)]) == (0.0, 0.0)
    assert cbn_posterior_enumeration([], [], []) == 0.5


def test_cbn_degenerate_latents_are_finite() -> None:
    # P(L=1|O1)=1, P(L=1|O2)=0 makes the latent a copy of the outcome.
    phis = [0.999] * 100 + [0.001] * 100
    assignment = [i % 3 for i in range(200)]
    params = [(1.0, 0.0), (0.0, 1.0), (1.0, 1.0)]
    l1, l2 = cbn_log_likelihoods(phis, assignment, params)
    assert math.isfinite(l1) and math.isfinite(l2)
    assert _in_unit(cbn_posterior(phis, assignment, params))


def test_posterior_guard_for_impossible_evidence() -> None:
    assert posterior_from_log_likelihoods(-math.inf, -math.inf) == 0.5
    assert posterior_from_log_likelihoods(-math.inf, -3.0) == 0.0
    assert posterior_from_log_likelihoods(-3.0, -math.inf) == 1.0
    assert posterior_from_log_likelihoods(math.log(0.3), math.log(0.1)) == pytest.approx(0.75, abs=1e-12)


# --------------------------------------------------------------------------- CBN: properties


@given(networks(phi=st.one_of(open_phi, extreme_phi), max_latents=12, max_factors=200))
def test_cbn_in_unit_interval(net: tuple) -> None:
    phis, assignment, params = net
    p = cbn_posterior(phis, assignment, params)
    assert _in_unit(p)
    l1, l2 = cbn_log_likelihoods(phis, assignment, params)
    assert math.isfinite(l1) and math.isfinite(l2)
    assert l1 <= 1e-9 and l2 <= 1e-9  # they are log-probabilities


@settings(max_examples=50)
@given(networks(phi=extreme_phi, max_latents=6, min_factors=200, max_factors=200))
def test_cbn_in_unit_interval_200_near_certain(net: tuple) -> None:
    assert _in_unit(cbn_posterior(*net))


@given(networks(phi=st.just(0.5), max_factors=120))
def test_cbn_all_half_is_exactly_half(net: tuple) -> None:
    assert cbn_posterior(*net) == 0.5


@given(networks(phi=swappable_phi, latent=swappable_latent_p))
def test_cbn_swapping_latent_pairs_complements(net: tuple) -> None:
    # Exchanging P(L|O1) and P(L|O2) for every latent exchanges P(E|O1) and P(E|O2).
    phis, assignment, params = net
    p = cbn_posterior(phis, assignment, params)
    q = cbn_posterior(phis, assignment, [(a2, a1) for a1, a2 in params])
    assert q == pytest.approx(1.0 - p, abs=1e-9)


@given(networks(phi=swappable_phi, latent=swappable_latent_p))
def test_cbn_full_outcome_swap_complements(net: tuple) -> None:
    # Relabelling O1 <-> O2 flips every phi; to keep "L=1 favours phi>0.5 factors" the latent
    # states flip too, so P'(L=1|O1) = P(L=0|O2) and P'(L=1|O2) = P(L=0|O1).
    phis, assignment, params = net
    p = cbn_posterior(phis, assignment, params)
    q = cbn_posterior([1.0 - x for x in phis], assignment, [(1.0 - a2, 1.0 - a1) for a1, a2 in params])
    assert q == pytest.approx(1.0 - p, abs=1e-9)


@given(networks(phi=swappable_phi, latent=swappable_latent_p))
def test_cbn_relabelling_latent_states_changes_nothing(net: tuple) -> None:
    phis, assignment, params = net
    p = cbn_posterior(phis, assignment, params)
    q = cbn_posterior([1.0 - x for x in phis], assignment, [(1.0 - a1, 1.0 - a2) for a1, a2 in params])
    assert q == pytest.approx(p, abs=1e-9)


@given(networks(), st.lists(st.tuples(latent_p, latent_p), min_size=1, max_size=5))
def test_cbn_unused_latents_change_nothing(net: tuple, unused: list[tuple[float, float]]) -> None:
    phis, assignment, params = net
    assert cbn_posterior(phis, assignment, params + unused) == cbn_posterior(phis, assignment, params)


@given(st.lists(open_phi, max_size=60), st.booleans())
def test_cbn_with_outcome_copying_latents_is_naive_bayes(phis: list[float], one_group: bool) -> None:
    # With P(L=1|O1)=1 and P(L=1|O2)=0 each latent equals the outcome, so the CBN is NB.
    n = len(phis)
    assignment = [0] * n if one_group else list(range(n))
    params = [(1.0, 0.0)] * (1 if one_group else max(n, 1))
    assert cbn_posterior(phis, assignment, params) == pytest.approx(naive_bayes_posterior(phis), abs=1e-9)


@settings(max_examples=150)
@given(networks(phi=moderate_phi, max_latents=10, max_factors=60))
def test_cbn_closed_form_matches_enumeration(net: tuple) -> None:
    assert cbn_posterior(*net) == pytest.approx(cbn_posterior_enumeration(*net), abs=1e-9)


@settings(max_examples=60)
@given(networks(phi=st.one_of(extreme_phi, open_phi), max_latents=8, max_factors=200))
def test_cbn_closed_form_matches_enumeration_in_log_space(net: tuple) -> None:
    closed = cbn_log_likelihoods(*net)
    brute = _cbn_log_likelihoods_enumeration(*check_cbn(*net))
    for c, b in zip(closed, brute, strict=True):
        assert c == pytest.approx(b, rel=1e-11, abs=1e-11)
    assert cbn_posterior(*net) == pytest.approx(cbn_posterior_enumeration(*net), abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(networks(phi=moderate_phi, max_latents=12, max_factors=60))
def test_cbn_closed_form_matches_pgmpy_variable_elimination(net: tuple) -> None:
    pytest.importorskip("pgmpy")
    closed = cbn_posterior(*net)
    assert closed == pytest.approx(cbn_posterior_pgmpy(*net), abs=1e-9)
    assert closed == pytest.approx(cbn_posterior_enumeration(*net), abs=1e-9)


def test_pgmpy_hand_computed() -> None:
    pytest.importorskip("pgmpy")
    assert cbn_posterior_pgmpy([0.8, 0.6], [0, 0], [(0.7, 0.2)]) == pytest.approx(0.36 / 0.52, abs=1e-12)
    assert cbn_posterior_pgmpy([], [], [(0.7, 0.2)]) == pytest.approx(0.5, abs=1e-12)


@pytest.mark.parametrize(
    ("phis", "assignment", "params"),
    [
        ([0.5, 0.5], [0], [(0.5, 0.5)]),  # length mismatch
        ([0.5], [1], [(0.5, 0.5)]),  # index out of range
        ([0.5], [-1], [(0.5, 0.5)]),
        ([0.5], [0.0], [(0.5, 0.5)]),  # float index
        ([0.5], [True], [(0.5, 0.5)]),
        ([0.5], [0], []),  # no latents at all
        ([0.5], [0], [(1.1, 0.5)]),
        ([0.5], [0], [(0.5, -0.1)]),
        ([0.5], [0], [(float("nan"), 0.5)]),
        ([0.5], [0], [(0.5, 0.5, 0.5)]),
        ([1.0], [0], [(0.5, 0.5)]),  # phi must be strictly inside (0, 1)
        ([0.0], [0], [(0.5, 0.5)]),
        ([float("nan")], [0], [(0.5, 0.5)]),
    ],
)
def test_cbn_rejects_invalid_inputs(phis: list, assignment: list, params: list) -> None:
    for fn in (cbn_posterior, cbn_log_likelihoods, cbn_posterior_enumeration):
        with pytest.raises(ValueError):
            fn(phis, assignment, params)


def test_enumeration_refuses_too_many_latents() -> None:
    with pytest.raises(ValueError):
        cbn_posterior_enumeration([0.6], [0], [(0.5, 0.5)] * 21)


# --------------------------------------------------------------------------- aggregation


def test_lop_hand_computed() -> None:
    posteriors = {"nb": 0.9, "cbn": 0.6}
    assert linear_opinion_pool(posteriors, {"nb": 0.8, "cbn": 0.2}) == pytest.approx(0.84, abs=1e-12)
    assert linear_opinion_pool(posteriors, {"nb": 4.0, "cbn": 1.0}) == pytest.approx(0.84, abs=1e-12)
    assert linear_opinion_pool(posteriors, {"nb": 1.0, "cbn": 0.0}) == pytest.approx(0.9, abs=1e-12)
    assert linear_opinion_pool(posteriors, {"nb": 0.5, "cbn": 0.5}) == pytest.approx(0.75, abs=1e-12)


@given(
    st.dictionaries(
        st.sampled_from(["nb", "cbn", "x", "y"]), st.tuples(latent_p, st.floats(0, 100)), min_size=1
    )
)
def test_lop_stays_between_inputs(models: dict[str, tuple[float, float]]) -> None:
    posteriors = {name: p for name, (p, _) in models.items()}
    weights = {name: w for name, (_, w) in models.items()}
    if sum(weights.values()) == 0:
        with pytest.raises(ValueError):
            linear_opinion_pool(posteriors, weights)
        return
    pooled = linear_opinion_pool(posteriors, weights)
    assert min(posteriors.values()) - 1e-12 <= pooled <= max(posteriors.values()) + 1e-12
    assert _in_unit(pooled)


def test_bma_hand_computed() -> None:
    # Evidence stand-ins: 0.9*0.1 = 0.09 and 0.6*0.4 = 0.24, so weights 3/11 and 8/11.
    pooled, weights = bayesian_model_average({"nb": 0.9, "cbn": 0.6})
    assert weights["nb"] == pytest.approx(3 / 11, abs=1e-12)
    assert weights["cbn"] == pytest.approx(8 / 11, abs=1e-12)
    exact = Fraction(3, 11) * Fraction(9, 10) + Fraction(8, 11) * Fraction(3, 5)  # = 15/22
    assert pooled == pytest.approx(float(exact), abs=1e-12)
    # A 3:1 prior: 0.75*0.09 = 0.0675 and 0.25*0.24 = 0.06, so weights 9/17 and 8/17.
    pooled, weights = bayesian_model_average({"nb": 0.9, "cbn": 0.6}, {"nb": 3.0, "cbn": 1.0})
    assert weights["nb"] == pytest.approx(9 / 17, abs=1e-12)
    assert pooled == pytest.approx((9 * 0.9 + 8 * 0.6) / 17, abs=1e-12)


def test_bma_falls_back_to_prior_when_every_model_is_certain() -> None:
    pooled, weights = bayesian_model_average({"nb": 1.0, "cbn": 0.0})
    assert weights == {"nb": 0.5, "cbn": 0.5}
    assert pooled == 0.5
    pooled, weights = bayesian_model_average({"nb": 1.0, "cbn": 0.0}, {"nb": 3.0, "cbn": 1.0})
    assert weights == pytest.approx({"nb": 0.75, "cbn": 0.25})
    assert pooled == pytest.approx(0.75)


def test_bma_near_certain_models_do_not_underflow() -> None:
    # p*(1-p) is about 1e-320 for both; a linear-space normalisation would divide 0 by 0.
    pooled, weights = bayesian_model_average({"nb": 1e-320, "cbn": 2e-320})
    assert weights["cbn"] == pytest.approx(2 / 3, rel=1e-3)
    assert _in_unit(pooled)


@given(st.dictionaries(st.sampled_from(["nb", "cbn", "x"]), latent_p, min_size=1))
def test_bma_weights_are_a_distribution(posteriors: dict[str, float]) -> None:
    pooled, weights = bayesian_model_average(posteriors)
    assert set(weights) == set(posteriors)
    assert all(w >= 0 for w in weights.values())
    assert math.fsum(weights.values()) == pytest.approx(1.0, abs=1e-12)
    assert min(posteriors.values()) - 1e-12 <= pooled <= max(posteriors.values()) + 1e-12


@pytest.mark.parametrize(
    ("posteriors", "weights"),
    [
        ({"nb": 0.5, "cbn": 0.5}, {"nb": 1.0}),  # a model without a weight
        ({"nb": 0.5}, {"nb": 1.0, "cbn": 1.0}),  # a weight without a model
        ({"nb": 0.5, "cbn": 0.5}, {"nb": 0.0, "cbn": 0.0}),
        ({"nb": 0.5, "cbn": 0.5}, {"nb": -1.0, "cbn": 2.0}),
        ({"nb": 0.5, "cbn": 0.5}, {"nb": float("nan"), "cbn": 1.0}),
        ({"nb": 1.5, "cbn": 0.5}, {"nb": 1.0, "cbn": 1.0}),
        ({}, {}),
    ],
)
def test_aggregation_rejects_invalid_inputs(posteriors: dict, weights: dict) -> None:
    with pytest.raises(ValueError):
        linear_opinion_pool(posteriors, weights)
    with pytest.raises(ValueError):
        bayesian_model_average(posteriors, weights)


# --------------------------------------------------------------------------- parameter preparation


def test_clip_probability() -> None:
    assert clip_probability(0.0) == 0.01
    assert clip_probability(1.0) == 0.99
    assert clip_probability(0.3) == 0.3
    assert clip_probability(1.0 + 1e-12) == 0.99
    assert clip_probability(-1e-12) == 0.01
    assert clip_probability(0.02, eps=0.05) == 0.05
    for bad in (float("nan"), 1.1, -0.1, float("inf")):
        with pytest.raises(ValueError):
            clip_probability(bad)
    for bad_eps in (-0.1, 0.5, float("nan")):
        with pytest.raises(ValueError):
            clip_probability(0.3, eps=bad_eps)


@given(latent_p, st.floats(min_value=0.0, max_value=0.49))
def test_clip_probability_lands_in_band(p: float, eps: float) -> None:
    c = clip_probability(p, eps)
    assert eps <= c <= 1.0 - eps
    if eps <= p <= 1.0 - eps:
        assert c == p


def test_label_prior_phi() -> None:
    assert label_prior_phi("outcome1") == 0.75
    assert label_prior_phi("neutral") == 0.5
    assert label_prior_phi("outcome2") == 0.25
    assert label_prior_phi(FactorLabel.OUTCOME1) == 0.75
    assert label_prior_phi(FactorLabel.NEUTRAL) == 0.5
    assert label_prior_phi(FactorLabel.OUTCOME2) == 0.25
    for bad in ("outcome3", "", 1):
        with pytest.raises(ValueError):
            label_prior_phi(bad)  # type: ignore[arg-type]


def test_latent_params_from_counts_hand_computed() -> None:
    # 3 + 2/2 + 0.5 = 4.5 against 1 + 2/2 + 0.5 = 2.5: strength 4.5 / 7, whichever side leads.
    assert latent_params_from_counts(3, 1, 2) == pytest.approx((4.5 / 7, 2.5 / 7), abs=1e-12)
    assert latent_params_from_counts(1, 3, 2) == pytest.approx((4.5 / 7, 2.5 / 7), abs=1e-12)
    assert latent_params_from_counts(0, 3, 0) == pytest.approx((0.875, 0.125), abs=1e-12)
    assert latent_params_from_counts(0, 0, 0) == (0.5, 0.5)
    assert latent_params_from_counts(0, 0, 7) == (0.5, 0.5)
    assert latent_params_from_counts(2, 0, 0, smoothing=0.0) == (1.0, 0.0)
    assert latent_params_from_counts(0, 2, 0, smoothing=0.0) == (1.0, 0.0)
    assert latent_params_from_counts(2, 0, 0, smoothing=1.0) == pytest.approx((0.75, 0.25), abs=1e-12)


@given(st.integers(0, 1000), st.integers(0, 1000), st.integers(0, 1000), st.floats(0.01, 10))
def test_latent_params_from_counts_properties(c1: int, c2: int, cn: int, eps: float) -> None:
    a1, a2 = latent_params_from_counts(c1, c2, cn, eps)
    assert 0.0 < a2 <= 0.5 <= a1 < 1.0
    assert a1 + a2 == pytest.approx(1.0, abs=1e-12)
    # Swapping the outcomes swaps the counts; the strength of the concept does not change.
    assert latent_params_from_counts(c2, c1, cn, eps) == pytest.approx((a1, a2), abs=1e-12)
    assert (a1 > a2) == (c1 != c2)


def test_frequency_network_hand_computed_for_outcome2_factors() -> None:
    """Three factors labelled outcome 2 in one latent ('w/o pe-llm'): both models favour O2.

    phi = 0.25 each; the latent's strength is (3 + 0.5) / 4 = 0.875, so
    P(E|O1) = 0.875 * 0.25^3 + 0.125 * 0.75^3 = 0.06640625 and
    P(E|O2) = 0.125 * 0.25^3 + 0.875 * 0.75^3 = 0.37109375, giving P(O1|E) = 0.06640625 / 0.4375.
    """
    phis = [label_prior_phi("outcome2")] * 3
    params = [latent_params_from_counts(0, 3, 0)]
    assert naive_bayes_posterior(phis) == pytest.approx(0.015625 / 0.4375, abs=1e-12)
    assert cbn_posterior(phis, [0, 0, 0], params) == pytest.approx(0.06640625 / 0.4375, abs=1e-12)
    assert cbn_posterior(phis, [0, 0, 0], params) == pytest.approx(
        cbn_posterior_enumeration(phis, [0, 0, 0], params), abs=1e-12)


_LABELS = ("outcome1", "outcome2", "neutral")
_SWAP = {"outcome1": "outcome2", "outcome2": "outcome1", "neutral": "neutral"}


def _frequency_network(labels: list[str], assignment: list[int], k: int) -> float:
    """The 'w/o pe-llm' network: phi from each factor's label, latent parameters from label counts."""
    phis = [label_prior_phi(lab) for lab in labels]
    params = []
    for i in range(k):
        group = [lab for lab, a in zip(labels, assignment, strict=True) if a == i]
        params.append(latent_params_from_counts(group.count("outcome1"), group.count("outcome2"),
                                                group.count("neutral")))
    return cbn_posterior(phis, assignment, params)


@given(st.data())
def test_frequency_network_mirrors_when_the_outcomes_are_swapped(data) -> None:  # noqa: ANN001
    k = data.draw(st.integers(1, 4))
    labels = data.draw(st.lists(st.sampled_from(_LABELS), min_size=1, max_size=12))
    assignment = data.draw(st.lists(st.integers(0, k - 1), min_size=len(labels), max_size=len(labels)))
    p = _frequency_network(labels, assignment, k)
    swapped = _frequency_network([_SWAP[lab] for lab in labels], assignment, k)
    assert swapped == pytest.approx(1.0 - p, abs=1e-12)


@given(st.lists(st.integers(0, 3), min_size=1, max_size=4))
def test_frequency_network_follows_the_labels(o2_per_latent) -> None:  # noqa: ANN001
    """Each latent holding only O2-labelled factors pushes below 0.5, only O1-labelled above."""
    labels: list[str] = []
    assignment: list[int] = []
    for i, n in enumerate(o2_per_latent):
        labels += ["outcome2"] * n
        assignment += [i] * n
    if not labels:
        return
    assert _frequency_network(labels, assignment, len(o2_per_latent)) < 0.5
    labels = [_SWAP[lab] for lab in labels]
    assert _frequency_network(labels, assignment, len(o2_per_latent)) > 0.5


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((-1, 0, 0), {}), ((0, 0, 0), {"smoothing": 0.0}), ((1.5, 0, 0), {}), ((0, 0, 0), {"smoothing": -1.0})],
)
def test_latent_params_from_counts_rejects_invalid(args: tuple, kwargs: dict) -> None:
    with pytest.raises(ValueError):
        latent_params_from_counts(*args, **kwargs)
