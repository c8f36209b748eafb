"""Under SimErrors.zero() every answer of the simulated LLM is the truth of the world: each stage's
prompt, sent by the stage's own code through LLMClient, checked against numbers worked out by hand
from the hand-made worlds' tables (tests/truth/sim_worlds.py)."""

from __future__ import annotations

import asyncio

import pytest

from anchor import prompts
from anchor.evaluation.datasets.instances import DecisionInstance
from anchor.evaluation.datasets.negation import negate_with_llm
from anchor.inference.elicit import discover_latents, elicit_latent_params, elicit_phis
from anchor.methods import baselines
from anchor.space.themes import name_and_prune
from anchor.space.voting import vote_labels
from anchor.truth.simulate.errors import OPEN_EDGE
from anchor.types import Factor
from tests.truth.sim_worlds import LATENT_FACTORS, NB_FACTORS, latent_world, nb_world, scenario_of, sim_client

NB = nb_world()
LAT = latent_world()
NB_TEXT = {fid: spec[0] for fid, spec in NB_FACTORS.items()}
LAT_TEXT = {fid: spec[0] for fid, spec in LATENT_FACTORS.items()}
#: P(O1 | f) = a / (a + b) in the naive-Bayes world, by hand.
NB_PHI = {"f1": 2 / 3, "f2": 1 / 3, "f3": 10 / 19, "f4": 0.7, "f5": 2 / 7, "f6": 0.6875, "f7": 6 / 17, "f8": 1 / 3}


def run(coro):  # noqa: ANN001, ANN201
    return asyncio.run(coro)


def factors(texts: list[str]) -> list[Factor]:
    return [Factor(id=f"f{i + 1}", text=t) for i, t in enumerate(texts)]


def condition(world, cid: str) -> str:  # noqa: ANN001
    return next(c.text for c in world.conditions if c.id == cid)


def test_generation_names_every_factor_and_extraction_finds_them() -> None:
    client = sim_client(NB)
    scen = scenario_of(NB)
    answer = run(client.ask(prompts.GENERATE_SENTENCES, schema=prompts.text_list_schema("Sentences", "sentences", 8, 240),
                            scenario=scen.text, outcome1=scen.outcome1, outcome2=scen.outcome2, known="none yet", n=8))
    assert len(answer.sentences) == 8
    # each sentence carries one factor's text verbatim, and says which outcome it favours (by phi)
    for sentence in answer.sentences:
        named = [fid for fid, text in NB_TEXT.items() if text in sentence.casefold()]
        assert len(named) == 1
        assert f"outcome {1 if NB_PHI[named[0]] >= 0.5 else 2}" in sentence
    extract = prompts.text_list_schema("Factors", "factors", 24, 80, min_items=0)
    unrelated = "The colour of the mayor's car says nothing here."
    extracted = run(client.ask(prompts.EXTRACT_FACTORS, schema=extract, scenario=scen.text, outcome1=scen.outcome1,
                               outcome2=scen.outcome2, sentences=prompts.numbered([*answer.sentences, unrelated])))
    assert sorted(extracted.factors) == sorted(NB_TEXT.values())
    # what bears on nothing in the scenario's world is left out, and a list of it is an empty answer
    nothing = run(client.ask(prompts.EXTRACT_FACTORS, schema=extract, scenario=scen.text, outcome1=scen.outcome1,
                             outcome2=scen.outcome2, sentences=prompts.numbered([unrelated])))
    assert nothing.factors == []


def test_validation_keeps_known_factors_and_judges_the_rest() -> None:
    client = sim_client(NB)
    scen = scenario_of(NB)
    lines = [NB_TEXT["f1"], "the colour of the mayor's car", f"{NB_TEXT['f2']}  (similar existing factor: {NB_TEXT['f2']})",
             f"{NB_TEXT['f3']}  (similar existing factor: {NB_TEXT['f4']})"]
    answer = run(client.ask(prompts.VALIDATE_FACTORS, schema=prompts.keyed_schema("Validation", 4, "verdict"),
                            scenario=scen.text, outcome1=scen.outcome1, outcome2=scen.outcome2,
                            candidates=prompts.numbered(lines, keys=True)))
    assert answer.model_dump() == {"F1": "keep", "F2": "irrelevant", "F3": "duplicate", "F4": "keep"}


def test_votes_follow_the_true_phi() -> None:
    votes = run(vote_labels(sim_client(NB), scenario_of(NB), list(NB_TEXT.values()), samples=3, batch_size=5))
    expected = {"f1": "outcome1", "f2": "outcome2", "f3": "neutral", "f4": "outcome1", "f5": "outcome2",
                "f6": "outcome1", "f7": "outcome2", "f8": "outcome2"}
    got = {fid: max(("outcome1", "outcome2", "neutral"), key=lambda k: getattr(v, k)) for fid, v in zip(NB_TEXT, votes, strict=True)}
    assert got == expected
    assert all(getattr(v, expected[fid]) == 3 for fid, v in zip(NB_TEXT, votes, strict=True))  # unanimous: no flips


def test_theme_is_the_majority_world_theme_and_nothing_is_redundant() -> None:
    groups = {0: factors([NB_TEXT["f1"], NB_TEXT["f2"], NB_TEXT["f7"]]), 1: factors([NB_TEXT["f4"], NB_TEXT["f5"]])}
    clusters = run(name_and_prune(sim_client(NB), scenario_of(NB), groups))
    assert [c.theme for c in clusters] == ["Commuting", "Retail Mix"]
    assert all(not c.pruned for c in clusters)


def test_selection_and_reflection_map_exactly_the_present_factors() -> None:
    client = sim_client(NB)
    candidates = tuple(NB_TEXT[f] for f in ("f5", "f6", "f1", "f7", "f3"))
    text = condition(NB, "c3")  # f5, f6, f7
    answers = run(client.ask_samples(prompts.SELECT_FACTORS, schema=prompts.choice_list_schema("Selection", "selected", candidates),
                                     samples=3, scenario=NB.scenario, condition=text,
                                     candidates="\n".join(f"- {t}" for t in candidates)))
    for answer in answers:
        assert answer.selected == [NB_TEXT["f5"], NB_TEXT["f6"], NB_TEXT["f7"]]
    shown = (NB_TEXT["f5"], NB_TEXT["f1"], NB_TEXT["f7"])
    reflected = run(client.ask(prompts.REFLECT_FACTORS, schema=prompts.choice_list_schema("Reflection", "keep", shown),
                               condition=text, factors="\n".join(f"- {t}" for t in shown)))
    assert reflected.keep == [NB_TEXT["f5"], NB_TEXT["f7"]]


def test_a_users_own_condition_is_read_by_its_mentions() -> None:
    client = sim_client(NB)
    candidates = (NB_TEXT["f2"], NB_TEXT["f8"], NB_TEXT["f4"])
    own = "Since last year drivers can no longer park in front of the shops, and nobody likes it."
    answer = run(client.ask(prompts.SELECT_FACTORS, schema=prompts.choice_list_schema("Selection", "selected", candidates),
                            scenario=NB.scenario, condition=own, candidates="\n".join(f"- {t}" for t in candidates)))
    assert answer.selected == [NB_TEXT["f2"]]


def test_phi_is_the_posterior_of_each_factor() -> None:
    texts = list(NB_TEXT.values())
    phis = run(elicit_phis(sim_client(NB), scenario_of(NB), factors(texts)))
    assert phis == pytest.approx([NB_PHI[f] for f in NB_TEXT], abs=1e-12)


def test_latent_phi_reads_as_posterior_or_as_the_link() -> None:
    picked = [LAT_TEXT["f1"], LAT_TEXT["f7"]]
    posterior = run(elicit_phis(sim_client(LAT), scenario_of(LAT), factors(picked)))
    # P(O1 | f1) = (0.8*0.85 + 0.2*0.15) / (that + 0.3*0.85 + 0.7*0.15); f7 under L3 (0.25, 0.7), c = 0.85
    f7 = (0.25 * 0.85 + 0.75 * 0.15) / (0.25 * 0.85 + 0.75 * 0.15 + 0.7 * 0.85 + 0.3 * 0.15)
    assert posterior == pytest.approx([0.71 / 1.07, f7], abs=1e-12)
    from anchor.truth.simulate import SimErrors

    link = SimErrors.zero().model_copy(update={"phi_reading": "latent-link"})
    linked = run(elicit_phis(sim_client(LAT, errors=link), scenario_of(LAT), factors(picked)))
    # f1: P(f1 | L1 = 1) = 0.85; L3 leans to O2, so its O1-leaning state is 0: P(f7 | L3 = 0) = 0.15
    assert linked == pytest.approx([0.85, 0.15], abs=1e-12)


def test_latents_are_discovered_and_their_parameters_are_the_truth() -> None:
    client = sim_client(LAT)
    texts = [LAT_TEXT[f] for f in ("f1", "f7", "f4", "f2", "f9")]
    mapped = factors(texts)
    grouping = run(discover_latents(client, scenario_of(LAT), mapped))
    assert grouping.names == ["Staff Readiness", "Workload Pressure", "Technical Reliability"]
    assert grouping.groups == [[0, 3], [1, 4], [2]]
    assert not grouping.repairs
    params = run(elicit_latent_params(client, scenario_of(LAT), grouping, mapped))
    # L1 (0.8, 0.3) and L2 (0.7, 0.4) lean to O1 in state 1; L3 (0.25, 0.7) in state 0: (0.75, 0.3)
    assert [x for pair in params for x in pair] == pytest.approx([0.8, 0.3, 0.75, 0.3, 0.7, 0.4], abs=1e-12)


def test_a_group_mixing_latents_or_in_a_world_without_latents_is_the_outcome_itself() -> None:
    from anchor.inference.elicit import LatentGrouping

    mixed = factors([LAT_TEXT["f1"], LAT_TEXT["f7"]])
    params = run(elicit_latent_params(sim_client(LAT), scenario_of(LAT), LatentGrouping(["Mixed"], [[0, 1]]), mixed))
    assert params == [(1 - OPEN_EDGE, OPEN_EDGE)]
    nb = factors([NB_TEXT["f1"]])
    params = run(elicit_latent_params(sim_client(NB), scenario_of(NB), LatentGrouping(["Commuting"], [[0]]), nb))
    assert params == [(1 - OPEN_EDGE, OPEN_EDGE)]


# --------------------------------------------------------------------------- the baselines

#: c1: odds 2 -> 2/3; c3: 0.4 * 2.2 * 6/11 = 0.48 -> 12/37; c7: 2.2 * 2 -> 22/27; c6: nothing -> the prior
HAND = {"c1": 2 / 3, "c3": 12 / 37, "c7": 22 / 27, "c6": 0.5}


@pytest.mark.parametrize("cid", sorted(HAND))
def test_direct_estimates_are_the_truth(cid: str) -> None:
    client, scen, text = sim_client(NB), scenario_of(NB), condition(NB, cid)
    assert run(baselines.vanilla(client, scen, text)).p_outcome1 == pytest.approx(HAND[cid], abs=1e-12)
    assert run(baselines.cot(client, scen, text)).p_outcome1 == pytest.approx(HAND[cid], abs=1e-12)
    assert run(baselines.logits(client, scen, text)).p_outcome1 == pytest.approx(HAND[cid], abs=1e-12)
    choice = 1.0 if HAND[cid] >= 0.5 else 0.0
    assert run(baselines.vanilla_direct(client, scen, text)).p_outcome1 == choice
    assert run(baselines.cot_direct(client, scen, text)).p_outcome1 == choice


def test_cot_reasoning_names_the_factors_it_saw() -> None:
    client = sim_client(NB)
    answer = run(client.ask(prompts.COT, scenario=NB.scenario, condition=condition(NB, "c7"), outcome1=NB.outcome1,
                            outcome2=NB.outcome2))
    assert NB_TEXT["f6"] in answer.reasoning and NB_TEXT["f1"] in answer.reasoning


def test_compare_picks_the_condition_that_supports_the_outcome_more() -> None:
    client, scen = sim_client(NB), scenario_of(NB)
    c1, c3 = condition(NB, "c1"), condition(NB, "c3")
    assert run(baselines.compare(client, scen, NB.outcome1, c1, c3)) == 1
    assert run(baselines.compare(client, scen, NB.outcome2, c1, c3)) == 2
    # c1 (f1 alone) and c5's f4 give 2/3 and 0.7: 0.033 apart, more than 0.025; c1 against itself is the same
    assert run(baselines.compare(client, scen, NB.outcome1, c1, c1)) == 3


def test_factor_based_oracle_averages_the_truth_with_each_supporting_factor() -> None:
    client, scen = sim_client(NB), scenario_of(NB)
    # gold outcome 1: the factors favouring it are f1 (odds 2), f4 (7/3) and f6 (2.2); with c4's f8 (odds 0.5)
    estimate = run(baselines.factor_based(client, scen, condition(NB, "c4"), gold=1))
    odds = [0.5 * 2, 0.5 * 7 / 3, 0.5 * 2.2]
    assert estimate.p_outcome1 == pytest.approx(sum(o / (1 + o) for o in odds) / 3, abs=1e-12)
    # gold outcome 2: f2, f5, f7, f8 favour it; ORACLE_FACTORS (5) takes all four; f8 is already present
    estimate = run(baselines.factor_based(client, scen, condition(NB, "c4"), gold=2))
    odds = [0.5 * 0.5, 0.5 * 0.4, 0.5 * 6 / 11, 0.5]
    assert estimate.p_outcome1 == pytest.approx(sum(o / (1 + o) for o in odds) / 4, abs=1e-12)


def test_claim_negation_states_the_opposite() -> None:
    from anchor.types import Scenario

    inst = DecisionInstance(id="x1", dataset="demo", scenario=Scenario(text="A claim about rivers.",
                                                                       outcome1="The river floods every spring.",
                                                                       outcome2="placeholder"),
                             condition="The evidence is a news report.", label=None)
    [done] = run(negate_with_llm(sim_client(NB), [inst]))
    assert done.scenario.outcome2 == "It is not the case that the river floods every spring."
