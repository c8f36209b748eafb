"""The consistent estimator (anchor.inference.consistent) against the truth of the networks it assumes,
computed here by brute force from the networks' own tables (and by pgmpy), never by the estimator's
formulas: each factor's phi is the true P(O1 | that factor), the prior the true P(O1)."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from anchor.inference.bayes import naive_bayes_posterior
from anchor.inference.consistent import (
    LINK_CAP,
    consistent_cbn_posterior,
    consistent_naive_bayes,
    link_log_ratio,
    link_log_ratios,
)

prob = st.floats(min_value=0.02, max_value=0.98)
prior_p = st.floats(min_value=0.03, max_value=0.97)


# --------------------------------------------------------------------------- brute-force truth


def nb_truth(prior: float, likelihoods: list[tuple[float, float]], present: list[int]) -> float:
    """P(O1 | the listed factors present) in O -> f_j with P(f_j | O1), P(f_j | O2) = likelihoods[j]."""
    w1, w2 = prior, 1.0 - prior
    for j in present:
        w1 *= likelihoods[j][0]
        w2 *= likelihoods[j][1]
    return w1 / (w1 + w2)


def latent_truth(prior: float, latents: list[tuple[float, float]], links: list[tuple[int, float, float]],
                 present: list[int]) -> float:
    """P(O1 | present) in O -> L_k -> f_j by summing every latent state; links[j] = (k, P(f|L=1), P(f|L=0))."""
    totals = []
    for o in (1, 0):
        total = 0.0
        for states in itertools.product((0, 1), repeat=len(latents)):
            w = prior if o else 1.0 - prior
            for (a, b), s in zip(latents, states, strict=True):
                p1 = a if o else b
                w *= p1 if s else 1.0 - p1
            for j in present:
                k, on, off = links[j]
                w *= on if states[k] else off
            total += w
        totals.append(total)
    return totals[0] / (totals[0] + totals[1])


@st.composite
def nb_worlds(draw):
    n = draw(st.integers(min_value=1, max_value=6))
    likelihoods = [(draw(prob), draw(prob)) for _ in range(n)]
    present = sorted(draw(st.sets(st.integers(min_value=0, max_value=n - 1), min_size=1)))
    return draw(prior_p), likelihoods, present


@st.composite
def latent_worlds(draw):
    k = draw(st.integers(min_value=1, max_value=3))
    latents = [(draw(prob), draw(prob)) for _ in range(k)]
    n = draw(st.integers(min_value=1, max_value=6))
    links = [(draw(st.integers(min_value=0, max_value=k - 1)), draw(prob), draw(prob)) for _ in range(n)]
    present = sorted(draw(st.sets(st.integers(min_value=0, max_value=n - 1), min_size=1)))
    return draw(prior_p), latents, links, present


# --------------------------------------------------------------------------- Naive Bayes


@given(nb_worlds())
def test_naive_bayes_is_exact_in_a_naive_bayes_world_at_any_prior(world):
    prior, likelihoods, present = world
    phis = [nb_truth(prior, likelihoods, [j]) for j in present]
    assert consistent_naive_bayes(phis, prior) == pytest.approx(nb_truth(prior, likelihoods, present), abs=1e-9)


def test_the_papers_naive_bayes_is_wrong_there_and_the_prior_term_is_what_fixes_it():
    # Two factors, each raising P(O1) from 0.15 to 0.4: together they make it far likelier than either.
    likelihoods = [(0.6, 0.17), (0.6, 0.17)]
    prior = 0.15
    phis = [nb_truth(prior, likelihoods, [0]), nb_truth(prior, likelihoods, [1])]
    truth = nb_truth(prior, likelihoods, [0, 1])
    assert consistent_naive_bayes(phis, prior) == pytest.approx(truth, abs=1e-12)
    assert abs(naive_bayes_posterior(phis) - truth) > 0.2


@given(st.lists(st.floats(min_value=1e-6, max_value=1 - 1e-6), min_size=0, max_size=8))
def test_even_odds_give_the_papers_naive_bayes_bit_for_bit(phis):
    assert consistent_naive_bayes(phis, 0.5) == naive_bayes_posterior(phis)


@given(prior_p)
def test_no_evidence_gives_the_prior(prior):
    assert consistent_naive_bayes([], prior) == pytest.approx(prior, abs=1e-15)
    assert consistent_cbn_posterior([], [], [(0.7, 0.2)], prior) == pytest.approx(prior, abs=1e-15)


# --------------------------------------------------------------------------- the network


@given(latent_worlds())
def test_the_network_is_exact_in_a_latent_world_at_any_prior(world):
    prior, latents, links, present = world
    phis = [latent_truth(prior, latents, links, [j]) for j in present]
    assignment = [links[j][0] for j in present]
    got = consistent_cbn_posterior(phis, assignment, latents, prior)
    assert got == pytest.approx(latent_truth(prior, latents, links, present), abs=1e-9)


@given(latent_worlds())
def test_each_factor_alone_reproduces_its_phi(world):
    prior, latents, links, present = world
    for j in present:
        phi = latent_truth(prior, latents, links, [j])
        assert consistent_cbn_posterior([phi], [links[j][0]], latents, prior) == pytest.approx(phi, abs=1e-9)


@given(latent_worlds())
def test_the_solved_link_is_the_worlds_own(world):
    prior, latents, links, present = world
    for j in present:
        k, on, off = links[j]
        a, b = latents[k]
        if abs(a - b) < 0.05:
            continue  # a nearly uninformative latent pins the ratio down only loosely in floating point
        phi = latent_truth(prior, latents, links, [j])
        assert link_log_ratio(phi, prior, a, b) == pytest.approx(math.log(on / off), abs=1e-6)


@given(nb_worlds())
def test_a_latent_that_is_the_outcome_itself_gives_naive_bayes(world):
    prior, likelihoods, present = world
    phis = [nb_truth(prior, likelihoods, [j]) for j in present]
    got = consistent_cbn_posterior(phis, [0] * len(phis), [(1.0, 0.0)], prior)
    assert got == pytest.approx(consistent_naive_bayes(phis, prior), abs=1e-12)


def test_the_papers_network_understates_one_factor_in_a_latent_world():
    # One factor through a latent: the paper's network applies the latent's channel to a phi that
    # already went through it, pulling the answer towards even odds; the solved link does not.
    from anchor.inference.bayes import cbn_posterior

    latents, links = [(0.8, 0.15)], [(0, 0.9, 0.2)]
    phi = latent_truth(0.5, latents, links, [0])
    paper = cbn_posterior([phi], [0], latents)
    assert abs(paper - 0.5) < abs(phi - 0.5) - 0.05
    assert consistent_cbn_posterior([phi], [0], latents, 0.5) == pytest.approx(phi, abs=1e-12)


def test_a_factor_stronger_than_its_latent_reads_as_revealing_the_latent():
    a, b, prior = 0.8, 0.3, 0.4
    # Knowing L = 1 gives the likelihood ratio a / b; a phi beyond it is read as that limit.
    assert link_log_ratio(0.99, prior, a, b) == LINK_CAP
    assert link_log_ratio(0.01, prior, a, b) == -LINK_CAP
    top = consistent_cbn_posterior([0.99], [0], [(a, b)], prior)
    odds = prior / (1 - prior) * a / b
    assert top == pytest.approx(odds / (1 + odds), abs=1e-12)
    # With the latent's states swapped (a < b) the factor's strongest reading is L = 0: ratio (1 - b) / (1 - a).
    odds = prior / (1 - prior) * (1 - b) / (1 - a)
    assert consistent_cbn_posterior([0.99], [0], [(b, a)], prior) == pytest.approx(odds / (1 + odds), abs=1e-12)


def test_a_latent_that_carries_nothing_passes_nothing_on():
    assert link_log_ratio(0.9, 0.5, 0.6, 0.6) == 0.0
    assert consistent_cbn_posterior([0.9, 0.8], [0, 0], [(0.6, 0.6)], 0.3) == pytest.approx(0.3, abs=1e-15)


def test_link_ratios_follow_the_assignment():
    phis, assignment, params = [0.7, 0.3], [1, 0], [(0.9, 0.1), (0.6, 0.4)]
    assert link_log_ratios(phis, assignment, params, 0.5) == [link_log_ratio(0.7, 0.5, 0.6, 0.4),
                                                              link_log_ratio(0.3, 0.5, 0.9, 0.1)]


@pytest.mark.parametrize("bad", [0.0, 1.0, float("nan"), -0.1])
def test_a_prior_outside_the_open_unit_interval_is_refused(bad):
    with pytest.raises(ValueError, match="prior"):
        consistent_naive_bayes([0.6], bad)
    with pytest.raises(ValueError, match="prior"):
        consistent_cbn_posterior([0.6], [0], [(0.7, 0.2)], bad)


def test_against_pgmpy_variable_elimination():
    """A latent network with a skewed prior, built in pgmpy from its tables and queried by its own
    variable elimination: the estimator, fed the single-factor posteriors pgmpy gives, agrees."""
    models = pytest.importorskip("pgmpy.models")
    from pgmpy.factors.discrete import TabularCPD
    from pgmpy.inference import VariableElimination

    prior = 0.15
    latents = [(0.9, 0.2), (0.1, 0.7)]
    links = [(0, 0.85, 0.3), (0, 0.7, 0.1), (1, 0.9, 0.25), (1, 0.6, 0.35), (0, 0.2, 0.6)]
    model = models.DiscreteBayesianNetwork([("O", "L0"), ("O", "L1")] + [(f"L{k}", f"F{j}")
                                                                          for j, (k, _, _) in enumerate(links)])
    cpds = [TabularCPD("O", 2, [[1 - prior], [prior]])]
    for k, (a, b) in enumerate(latents):  # columns: O = 0 (outcome 2), O = 1 (outcome 1)
        cpds.append(TabularCPD(f"L{k}", 2, [[1 - b, 1 - a], [b, a]], evidence=["O"], evidence_card=[2]))
    for j, (k, on, off) in enumerate(links):
        cpds.append(TabularCPD(f"F{j}", 2, [[1 - off, 1 - on], [off, on]], evidence=[f"L{k}"], evidence_card=[2]))
    model.add_cpds(*cpds)
    infer = VariableElimination(model)

    def p(present: list[int]) -> float:
        return float(infer.query(["O"], evidence={f"F{j}": 1 for j in present}, show_progress=False).values[1])

    for present in ([0, 1], [0, 2], [1, 3, 4], [0, 1, 2, 3, 4]):
        phis = [p([j]) for j in present]
        got = consistent_cbn_posterior(phis, [links[j][0] for j in present], latents, prior)
        assert got == pytest.approx(p(present), abs=1e-9)


def test_the_clip_bounds_a_factors_evidence_not_its_probability():
    from anchor.inference.consistent import clip_evidence

    # at even odds it is the paper's clip
    assert clip_evidence(0.999, 0.5) == pytest.approx(0.99) and clip_evidence(0.3, 0.5) == pytest.approx(0.3)
    # at a prior of 0.01 a factor may still count against outcome 1, down to a likelihood ratio of 1/99
    low = clip_evidence(0.0001, 0.01)
    assert low < 0.01 and (low / (1 - low)) / (0.01 / 0.99) == pytest.approx(1 / 99)
    assert clip_evidence(0.02, 0.01) == pytest.approx(0.02)
    assert 0 < clip_evidence(0.0, 0.3) < 0.3 and 0.3 < clip_evidence(1.0, 0.3) < 1


def test_a_phi_inside_the_bound_is_kept_as_stated():
    from anchor.inference.consistent import clip_evidence

    assert [clip_evidence(p, 0.37) for p in (0.9, 0.2, 0.37)] == [0.9, 0.2, 0.37]
