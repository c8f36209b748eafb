"""The estimators against the truth with no error at all, at priors other than 0.5: ``Anchor`` (real MiniLM,
UMAP and HDBSCAN) builds each world's factor space from the simulated LLM and answers its conditions under
every rule and pool. On every condition whose mapped factors are exactly its present ones:

* the consistent rule's network (its default answer) equals the truth in naive-Bayes and latent worlds;
* its Naive Bayes equals the truth in naive-Bayes worlds, and misses it in latent worlds where two factors
  of one latent are stated together (they are not independent given the outcome);
* its pools (LOP at any weights, BMA) equal the truth wherever both parts do: the naive-Bayes worlds;
* the paper's Naive Bayes, with no prior term, misses the truth at a skewed prior;
* no rule is exact in the interaction worlds, which neither model can represent.

Each pooled answer is also checked to be the pool of its two parts, so a pool that returned one part
alone fails here."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from anchor.config import AnchorConfig
from anchor.llm.client import LLMClient
from anchor.pipeline import Anchor
from anchor.settings.inference import InferenceConfig
from anchor.truth.generate import generate_groups
from anchor.truth.settings import STRUCTURES, GenerationSettings
from anchor.truth.simulate import SimErrors, SimulatedBackend, SimulatedLLM
from anchor.truth.world import WorldFile
from anchor.types import AggregationMethod, Scenario

PRIORS = (0.15, 0.7)
EXACT = 1e-6

RULES: dict[str, InferenceConfig] = {
    "consistent": InferenceConfig(rule="consistent"),
    "consistent-nb": InferenceConfig(rule="consistent", use_cbn=False),
    "consistent-lop": InferenceConfig(rule="consistent", w_nb=0.3, w_cbn=0.7),
    "consistent-bma": InferenceConfig(rule="consistent", aggregation=AggregationMethod.BMA),
    "paper": InferenceConfig(),
}


def worlds() -> WorldFile:
    groups = [(s, prior) for prior in PRIORS for s in STRUCTURES]
    return generate_groups(groups, GenerationSettings(n_worlds=1, seed=5, n_conditions=10))


@pytest.fixture(scope="module")
def answered(embedder: Any) -> dict[str, list[tuple[Any, Any, dict[str, Any]]]]:
    """World id -> [(condition, exactly mapped?, {rule: result})] for every condition of every world."""
    file = worlds()
    client = LLMClient(SimulatedBackend(SimulatedLLM(file, SimErrors.zero(), seed=0)), seed=0)
    build = AnchorConfig()
    build.build.max_rounds = 3
    engines = {name: Anchor(client, embedder=embedder, config=build.model_copy(update={"inference": cfg}))
               for name, cfg in RULES.items()}

    async def run() -> dict[str, list[tuple[Any, Any, dict[str, Any]]]]:
        out = {}
        for world in file.worlds:
            scenario = Scenario(text=world.scenario, outcome1=world.outcome1, outcome2=world.outcome2)
            space = await engines["paper"].abuild(scenario)
            text_of = {f.id: f.text for f in space.factors}
            texts = [c.text for c in world.conditions]
            by_rule = {name: await engine.ainfer(space, texts) for name, engine in engines.items()}
            rows = []
            for i, cond in enumerate(world.conditions):
                mapped = sorted(text_of[f] for f in by_rule["paper"][i].mapping.mapped)
                exact = bool(cond.present) and mapped == sorted(world.factor(f).text for f in cond.present)
                rows.append((cond, exact, {name: results[i] for name, results in by_rule.items()}))
            out[world.id] = rows
        return out

    return asyncio.run(run())


def checked(answered: dict[str, Any], structure: str) -> list[tuple[Any, dict[str, Any]]]:
    rows = [(cond, results) for wid, conds in answered.items() if wid.startswith(structure)
            for cond, exact, results in conds if exact]
    stated = sum(1 for wid, conds in answered.items() if wid.startswith(structure) for cond, _, _ in conds
                 if cond.present)
    assert len(rows) >= 0.9 * stated > 0  # at zero error nearly every stated condition maps exactly
    return rows


@pytest.mark.parametrize("structure", ["naive-bayes", "latent"])
def test_the_consistent_network_equals_the_truth(answered: dict[str, Any], structure: str) -> None:
    for cond, results in checked(answered, structure):
        r = results["consistent"]
        assert r.rule == "consistent" and r.weights == {"nb": 0.0, "cbn": 1.0}
        assert r.base_rate is not None and r.base_rate.source == "elicited"
        assert abs(r.cbn - cond.p_true) <= EXACT, cond.id
        assert abs(r.p_outcome1 - cond.p_true) <= EXACT, cond.id


def test_every_consistent_pool_equals_the_truth_in_naive_bayes_worlds(answered: dict[str, Any]) -> None:
    for cond, results in checked(answered, "naive-bayes"):
        for name in ("consistent-nb", "consistent-lop", "consistent-bma"):
            assert abs(results[name].p_outcome1 - cond.p_true) <= EXACT, (name, cond.id)
        assert abs(results["consistent"].nb - cond.p_true) <= EXACT, cond.id


def test_consistent_naive_bayes_misses_where_factors_share_a_latent(answered: dict[str, Any]) -> None:
    misses = [abs(results["consistent-nb"].p_outcome1 - cond.p_true) for cond, results in checked(answered, "latent")]
    assert max(misses) > 0.01
    for cond, results in checked(answered, "latent"):
        if len(cond.present) == 1:  # one factor: P(O1 | f) is phi itself, whatever the structure
            assert abs(results["consistent-nb"].p_outcome1 - cond.p_true) <= EXACT, cond.id


@pytest.mark.parametrize("structure", ["naive-bayes", "latent", "interaction"])
def test_each_pool_is_the_pool_of_its_parts(answered: dict[str, Any], structure: str) -> None:
    for _, exact, results in (row for wid, rows in answered.items() if wid.startswith(structure) for row in rows):
        if not exact:
            continue
        lop = results["consistent-lop"]
        assert lop.p_outcome1 == pytest.approx(0.3 * lop.nb + 0.7 * lop.cbn, abs=1e-12)
        paper = results["paper"]
        assert paper.p_outcome1 == pytest.approx(0.5 * paper.nb + 0.5 * paper.cbn, abs=1e-12)
        bma = results["consistent-bma"]
        w = bma.weights
        assert w["nb"] + w["cbn"] == pytest.approx(1.0)
        assert bma.p_outcome1 == pytest.approx(w["nb"] * bma.nb + w["cbn"] * bma.cbn, abs=1e-12)
        assert results["consistent-nb"].cbn is None and results["consistent-nb"].p_outcome1 == results["consistent-nb"].nb


def test_the_papers_naive_bayes_misses_at_a_skewed_prior(answered: dict[str, Any]) -> None:
    misses = [abs(results["paper"].nb - cond.p_true) for cond, results in checked(answered, "naive-bayes")
              if len(cond.present) > 1]
    assert max(misses) > 0.1


def test_nothing_is_exact_in_the_interaction_worlds(answered: dict[str, Any]) -> None:
    rows = checked(answered, "interaction")
    assert max(abs(results["consistent"].p_outcome1 - cond.p_true) for cond, results in rows) > 0.01
