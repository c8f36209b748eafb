"""Stage 3 under each rule (anchor.inference.engine): where the consistent rule's base rate comes from
(asked of the estimator once, given by the user, or stored with the space), what it does to the
posteriors, and that the paper's rule asks nothing more than before."""

from __future__ import annotations

import asyncio

import pytest

from anchor.inference.bayes import cbn_posterior, naive_bayes_posterior
from anchor.inference.consistent import consistent_cbn_posterior, consistent_naive_bayes
from anchor.inference.engine import InferenceEngine
from anchor.llm.cache import ResponseCache
from anchor.llm.client import LLMClient
from anchor.llm.ledger import CostLedger
from anchor.settings.inference import InferenceConfig
from anchor.types import BaseRate, InferenceResult, MappingTrace
from tests.conftest import DelayedScriptedBackend
from tests.helpers import ScriptedLLM, kind

TEXTS = ["water temperature", "gas price"]
PHI = {"water temperature": 0.6, "gas price": 0.25}


@pytest.fixture
def space(make_space):
    return make_space([("Heat", ["water temperature", "boiling point"]), ("Cost", ["gas price"])])


def trace(space, texts=TEXTS) -> MappingTrace:
    ids = [next(f.id for f in space.factors if f.text == t) for t in texts]
    return MappingTrace(condition="c", retrieval="hierarchical", mapped=ids)


def blank() -> InferenceResult:
    return InferenceResult(condition="c", p_outcome1=None, p_outcome2=None, unknown=False)


def script(base_rate: float = 0.2) -> ScriptedLLM:
    return ScriptedLLM(phi=PHI.get, latent_params=lambda line: (1.0, 0.0) if "Outcome" in line else (0.8, 0.3),
                       partition=lambda texts: [{"name": "All", "factors": list(texts)}], base_rate=lambda: base_rate)


def asked(client, family: str) -> int:
    return sum(1 for r in client.backend.requests if kind(r) == family)


async def test_the_consistent_rule_asks_the_estimator_for_the_base_rate_and_counts_it_once(scripted_client, space):
    main, estimator = scripted_client(script(0.9)), scripted_client(script(0.2))
    engine = InferenceEngine(main, space, InferenceConfig(rule="consistent"), estimator=estimator)
    result = await engine.infer(trace(space), blank())
    # five samples (this backend answers one a request), pooled; phi is then asked against that base rate
    assert asked(estimator, "BaseRateAnswer") == 5 and asked(main, "BaseRateAnswer") == 0
    assert result.rule == "consistent"
    assert result.base_rate is not None and result.base_rate.p_raw == pytest.approx(0.2)
    assert result.base_rate == BaseRate(p_outcome1=0.2, p_raw=result.base_rate.p_raw, source="elicited",
                                        model=estimator.backend.model, samples=[0.2] * 5)
    (phi_request,) = [r for r in estimator.backend.requests if kind(r) == "FactorProbabilities"]
    assert "Base rate of outcome 1: 0.2\n" in phi_request.user and "rough" not in phi_request.user
    phis = [PHI[t] for t in TEXTS]
    assert result.nb == pytest.approx(consistent_naive_bayes(phis, 0.2))
    assert result.cbn == pytest.approx(consistent_cbn_posterior(phis, [0, 0], [(0.8, 0.3)], 0.2))
    assert result.weights == {"nb": 0.0, "cbn": 1.0} and result.p_outcome1 == pytest.approx(result.cbn)


async def test_conditions_of_one_scenario_share_one_base_rate_request(space, tmp_path):
    # The base rate is one prompt a scenario: the response cache (or, at the same moment, the request in
    # flight) answers every condition after the first, as it does any repeated prompt.
    backend = DelayedScriptedBackend(script(), delay=0.01)
    client = LLMClient(backend, cache=ResponseCache(tmp_path / "r.sqlite"), ledger=CostLedger())
    engine = InferenceEngine(client, space, InferenceConfig(rule="consistent"))
    await asyncio.gather(*(engine.infer(trace(space, texts), blank()) for texts in (TEXTS, TEXTS[:1], TEXTS[1:])))
    await engine.infer(trace(space), blank())
    assert asked(client, "BaseRateAnswer") == 5  # the five samples, once
    hits = [r for r in client.ledger.records if r.stage == "inference.base_rate"]
    assert [r.outcome for r in hits].count("ok") == 5 and len(hits) == 4 * 5


async def test_a_given_base_rate_is_used_as_given_and_nothing_is_asked(scripted_client, space):
    client = scripted_client(script())
    engine = InferenceEngine(client, space, InferenceConfig(rule="consistent", base_rate=0.35))
    result = await engine.infer(trace(space), blank())
    assert asked(client, "BaseRateAnswer") == 0
    assert result.base_rate == BaseRate(p_outcome1=0.35, p_raw=0.35, source="given")
    assert result.nb == pytest.approx(consistent_naive_bayes([PHI[t] for t in TEXTS], 0.35))


async def test_a_base_rate_stored_with_the_space_is_used_when_the_same_model_stated_it(scripted_client, space):
    client = scripted_client(script())
    kept = BaseRate(p_outcome1=0.3, p_raw=0.3, source="elicited", model=client.backend.model, samples=[0.3] * 5)
    result = await InferenceEngine(client, space.model_copy(update={"base_rate": kept}),
                                   InferenceConfig(rule="consistent")).infer(trace(space), blank())
    assert asked(client, "BaseRateAnswer") == 0 and result.base_rate == kept
    # stated by another model, or from another number of samples: asked again
    for other in (kept.model_copy(update={"model": "another-model"}), kept.model_copy(update={"samples": [0.3]})):
        before = asked(client, "BaseRateAnswer")
        result = await InferenceEngine(client, space.model_copy(update={"base_rate": other}),
                                       InferenceConfig(rule="consistent")).infer(trace(space), blank())
        assert asked(client, "BaseRateAnswer") == before + 5
        assert result.base_rate is not None and result.base_rate.p_raw == pytest.approx(0.2)


async def test_without_elicited_parameters_the_labels_leans_are_read_against_the_base_rate(scripted_client, space):
    client = scripted_client(script(0.2))
    result = await InferenceEngine(client, space, InferenceConfig(rule="consistent", llm_parameters=False)
                                   ).infer(trace(space), blank())
    # neutral labels (the space's factors are unlabelled): a lean of 0.5 says nothing, so phi is the base rate
    assert [f.phi for f in result.factors] == [pytest.approx(0.2), pytest.approx(0.2)]
    assert result.nb == pytest.approx(0.2)


async def test_the_consistent_rule_keeps_latent_parameters_of_zero_and_one(scripted_client, space):
    client = scripted_client(ScriptedLLM(phi=PHI.get, latent_params=lambda line: (1.0, 0.0), base_rate=lambda: 0.4))
    consistent = await InferenceEngine(client, space, InferenceConfig(rule="consistent")).infer(trace(space), blank())
    assert [(lat.p_given_o1, lat.p_given_o2) for lat in consistent.latents] == [(1.0, 0.0)]
    # a latent that is the outcome itself: the network is Naive Bayes
    assert consistent.cbn == pytest.approx(consistent.nb, abs=1e-12)
    paper = await InferenceEngine(client, space, InferenceConfig()).infer(trace(space), blank())
    assert [(lat.p_given_o1, lat.p_given_o2) for lat in paper.latents] == [(0.99, 0.01)]  # the paper clips them


async def test_the_papers_rule_asks_no_base_rate_and_keeps_its_arithmetic(scripted_client, space):
    client = scripted_client(script())
    result = await InferenceEngine(client, space, InferenceConfig()).infer(trace(space), blank())
    assert asked(client, "BaseRateAnswer") == 0
    assert result.rule == "paper" and result.base_rate is None
    phis = [PHI[t] for t in TEXTS]
    assert result.nb == pytest.approx(naive_bayes_posterior(phis))
    assert result.cbn == pytest.approx(cbn_posterior(phis, [0, 0], [(0.8, 0.3)]))
    assert result.p_outcome1 == pytest.approx(0.5 * result.nb + 0.5 * result.cbn)


def test_the_consistent_rules_default_weights_give_way_to_given_ones():
    assert (InferenceConfig(rule="consistent").w_nb, InferenceConfig(rule="consistent").w_cbn) == (0.0, 1.0)
    assert (InferenceConfig(rule="consistent", w_nb=0.4).w_nb, InferenceConfig(rule="consistent", w_nb=0.4).w_cbn) \
        == (0.4, 0.5)
    assert (InferenceConfig().w_nb, InferenceConfig().w_cbn) == (0.5, 0.5)
    again = InferenceConfig.model_validate(InferenceConfig(rule="consistent", w_nb=0.5, w_cbn=0.5).model_dump())
    assert (again.w_nb, again.w_cbn) == (0.5, 0.5)
