"""End to end with known answers: ``Anchor`` (real MiniLM, UMAP, HDBSCAN) builds a factor space from the
simulated LLM of a hand-made world and infers the world's conditions. With no error at all:

* naive-Bayes world: ANCHOR's Naive Bayes posterior equals the truth on every condition whose mapped
  factors are exactly its present factors (the NB likelihood ratio phi / (1 - phi) with
  phi = P(O1 | f) = a / (a + b) is the world's a / b);
* latent world, phi_reading="latent-link": the network's posterior equals the truth (its symmetric
  links and latent parameters are exactly the world's);
* latent world, phi_reading="posterior" (what the prompt asks): the network's posterior is the
  closed form with phi = P(O1 | f) read as P(f | L), worked out here by hand. It is not the truth:
  ANCHOR reads one elicited number both as P(O1 | f) (Naive Bayes) and as P(f | L) (the network).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from anchor.config import AnchorConfig
from anchor.llm.client import LLMClient
from anchor.pipeline import Anchor
from anchor.truth import exact
from anchor.truth.simulate import SimErrors, SimulatedBackend, SimulatedLLM
from tests.truth.sim_worlds import LATENT_FACTORS, LATENTS, latent_world, nb_world, scenario_of, world_file

NB, LAT = nb_world(), latent_world()


def make_anchor(embedder: Any, errors: SimErrors) -> Anchor:
    config = AnchorConfig()
    config.build.max_rounds = 3  # the first round already names every factor (b = 10 > 9)
    client = LLMClient(SimulatedBackend(SimulatedLLM(world_file(), errors, seed=0)), seed=0)
    return Anchor(client, embedder=embedder, config=config)


def exactly_mapped(world: Any, space: Any, results: list[Any]) -> list[tuple[Any, Any]]:
    """(condition, result) for every condition whose mapped factors are exactly its present ones."""
    text_of = {f.id: f.text for f in space.factors}
    out = []
    for cond, result in zip(world.conditions, results, strict=True):
        mapped = sorted(text_of[fid] for fid in result.mapping.mapped)
        if cond.present and mapped == sorted(world.factor(f).text for f in cond.present):
            out.append((cond, result))
    return out


@pytest.fixture(scope="module")
def nb_run(embedder: Any) -> tuple[Any, list[Any]]:
    anchor = make_anchor(embedder, SimErrors.zero())
    space = anchor.build(scenario_of(NB))
    return space, anchor.infer(space, [c.text for c in NB.conditions])


@pytest.fixture(scope="module")
def latent_space(embedder: Any) -> Any:
    return make_anchor(embedder, SimErrors.zero()).build(scenario_of(LAT))


def test_naive_bayes_equals_the_truth_in_a_naive_bayes_world(nb_run: tuple[Any, list[Any]]) -> None:
    space, results = nb_run
    assert sorted(f.text for f in space.factors) == sorted(f.text for f in NB.factors)
    checked = exactly_mapped(NB, space, results)
    assert len(checked) == sum(1 for c in NB.conditions if c.present)  # every stated condition maps exactly
    for cond, result in checked:
        assert abs(result.nb - cond.p_true) <= 1e-9, cond.id
        assert abs(result.nb - exact.p_outcome1(NB, cond.present)) <= 1e-9
    nothing = [r for c, r in zip(NB.conditions, results, strict=True) if not c.present]
    assert nothing and all(r.unknown and not r.mapping.mapped for r in nothing)


def test_the_network_equals_the_truth_with_the_latent_link_reading(embedder: Any, latent_space: Any) -> None:
    link = SimErrors.zero().model_copy(update={"phi_reading": "latent-link"})
    results = make_anchor(embedder, link).infer(latent_space, [c.text for c in LAT.conditions])
    checked = exactly_mapped(LAT, latent_space, results)
    assert len(checked) == sum(1 for c in LAT.conditions if c.present)
    for cond, result in checked:
        assert abs(result.cbn - cond.p_true) <= 1e-9, cond.id
    # where two factors share a latent they are not independent given the outcome: NB misses the truth
    c4 = next(r for c, r in checked if c.id == "c4")
    assert abs(c4.nb - LAT.conditions[3].p_true) > 0.05


def by_hand_posterior_reading(present: list[str]) -> float:
    """ANCHOR's network with phi_j = P(O1 | f_j) and the world's literal latent parameters, by hand:
    P(E | O) = prod over latents of [a_O prod phi + (1 - a_O) prod (1 - phi)], uniform prior."""
    likelihood = {1: 1.0, 2: 1.0}
    for lid, (_, alpha, beta) in LATENTS.items():
        members = [f for f in present if LATENT_FACTORS[f][1] == lid]
        if not members:
            continue
        # the O1-leaning state s and (P(L=s | O1), P(L=s | O2))
        a1, a2 = (alpha, beta) if alpha >= beta else (1 - alpha, 1 - beta)
        phis = []
        for f in members:
            c = LATENT_FACTORS[f][3]
            on1 = alpha * c + (1 - alpha) * (1 - c)  # P(f | O1)
            on2 = beta * c + (1 - beta) * (1 - c)  # P(f | O2)
            phis.append(on1 / (on1 + on2))
        yes, no = math.prod(phis), math.prod(1 - p for p in phis)
        likelihood[1] *= a1 * yes + (1 - a1) * no
        likelihood[2] *= a2 * yes + (1 - a2) * no
    return likelihood[1] / (likelihood[1] + likelihood[2])


def test_the_network_with_the_posterior_reading_is_the_closed_form(embedder: Any, latent_space: Any) -> None:
    results = make_anchor(embedder, SimErrors.zero()).infer(latent_space, [c.text for c in LAT.conditions])
    checked = exactly_mapped(LAT, latent_space, results)
    assert len(checked) == sum(1 for c in LAT.conditions if c.present)
    for cond, result in checked:
        assert abs(result.cbn - by_hand_posterior_reading(cond.present)) <= 1e-9, cond.id
        if len(cond.present) == 1:  # one factor: Naive Bayes says phi = P(O1 | f), the truth
            assert abs(result.nb - cond.p_true) <= 1e-9, cond.id
    # and it is not the truth: c4's three factors of one latent, read as P(O1 | f), overstate the evidence
    c4 = next(r for c, r in checked if c.id == "c4")
    assert abs(c4.cbn - LAT.conditions[3].p_true) > 0.05


def test_bird_on_anchor_maps_onto_the_space_and_trains_on_it(nb_run: tuple[Any, list[Any]]) -> None:
    """BIRD's mapping over ANCHOR's factors (one-value slots) and its CPT trained on them, under zero
    error: every stated condition maps to exactly its present factors, and the transplanted CPT leans
    the truth's way wherever the truth leans clearly."""
    import asyncio

    from anchor.bird.transplant import map_condition_on_space, train_on_space, transplant_probability

    space, _ = nb_run
    client = LLMClient(SimulatedBackend(SimulatedLLM(world_file(), SimErrors.zero(), seed=0)), seed=0)
    id_of = {f.text: f.id for f in space.factors}

    async def run() -> tuple[list[list[str]], Any]:
        mapped = [(await map_condition_on_space(client, space, c.text))[0] for c in NB.conditions if c.present]
        return mapped, await train_on_space(client, space, mapped)

    mapped, model = asyncio.run(run())
    stated = [c for c in NB.conditions if c.present]
    for cond, ids in zip(stated, mapped, strict=True):
        assert sorted(ids) == sorted(id_of[NB.factor(f).text] for f in cond.present), cond.id
        p = transplant_probability(model, ids).p_outcome1
        if abs(cond.p_true - 0.5) >= 0.1:
            assert p is not None and (p > 0.5) == (cond.p_true > 0.5), cond.id
