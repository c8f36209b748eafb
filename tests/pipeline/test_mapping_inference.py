"""Stages 2 and 3: ConditionMapper (real MiniLM retrieval, scripted selection/reflection),
InferenceEngine (scripted elicitation, exact NB/CBN), and the Anchor pipeline around them."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from anchor.config import ABLATIONS, AnchorConfig
from anchor.inference.bayes import (
    bayesian_model_average,
    cbn_posterior,
    clip_probability,
    latent_params_from_counts,
    naive_bayes_posterior,
)
from anchor.inference.elicit import UNASSIGNED_LATENT
from anchor.inference.engine import InferenceEngine
from anchor.llm.ledger import CallRecord, CostLedger
from anchor.mapping.mapper import ConditionMapper, MappingConfig
from anchor.pipeline import Anchor
from anchor.settings.inference import InferenceConfig
from anchor.types import AggregationMethod, FactorLabel, InferenceResult, MappingTrace
from tests.helpers import ScriptedLLM, field_line, requests_of, section

TEMPERATURE = ["water temperature", "boiling point", "heat transfer rate"]
SAFETY = ["killing bacteria", "foodborne pathogens"]
COST = ["electricity bill", "gas price"]
LOOSE = ["noodle texture"]
LABELS = {**{t: "outcome1" for t in TEMPERATURE + SAFETY}, **{t: "outcome2" for t in COST}, "noodle texture": "neutral"}
HOT = "The water is brought to a rolling boil at a very high temperature."


@pytest.fixture
def space(make_space):
    return make_space([("Water Temperature", TEMPERATURE), ("Food Safety", SAFETY), ("Energy Cost", COST)], LOOSE,
                      labels=LABELS)


def queue(answers: list[list[str]]):
    """A select/reflect responder that gives the planned answers one call at a time."""
    pending = [list(a) for a in answers]

    def answer(condition: str, shown: list[str]) -> list[str]:
        assert pending, "more calls than planned"
        return pending.pop(0)

    return answer


def ids(space, texts: list[str]) -> list[str]:
    by_text = {f.text: f.id for f in space.factors}
    return [by_text[t] for t in texts]


# --------------------------------------------------------------------------- mapping: voting


@pytest.mark.parametrize(("rounds", "ratio", "expected"),
                         [(3, 0.5, 2), (4, 0.5, 2), (3, 1.0, 3), (5, 0.3, 2), (1, 0.5, 1), (3, 0.01, 1),
                          (10, 0.7, 7)])
def test_vote_threshold_is_ceil_ratio_times_r(rounds, ratio, expected):
    assert MappingConfig(rounds=rounds, vote_ratio=ratio).vote_threshold == expected == max(1, math.ceil(ratio * rounds))


async def test_selection_votes_and_threshold(scripted_client, embedder, space):
    a, b, c = "water temperature", "gas price", "noodle texture"
    script = ScriptedLLM(select=queue([[a, b], [a], [b, c]]))
    client = scripted_client(script)
    trace = await ConditionMapper(client, embedder, space, MappingConfig(rounds=3, vote_ratio=0.5)).map(HOT)

    assert trace.vote_threshold == 2
    cand_ids = [cand.factor_id for cand in trace.candidates]
    assert sorted(cand_ids) == sorted(f.id for f in space.factors)  # small space: everything is a candidate
    a_id, b_id, c_id = ids(space, [a, b, c])
    assert trace.votes == {fid: 0 for fid in cand_ids} | {a_id: 2, b_id: 2, c_id: 1}
    assert sorted(map(sorted, trace.selection_rounds)) == sorted(map(sorted, [[a_id, b_id], [a_id], [b_id, c_id]]))
    # Voted factors keep the candidates' order (nearest first).
    assert trace.voted == [fid for fid in cand_ids if fid in (a_id, b_id)]
    assert trace.mapped == trace.voted and trace.reflection_removed == []
    assert trace.invalid_selections == 0
    # Each of the R selections was shown every candidate, and the condition.
    sel = requests_of(client.backend, "Selection")
    assert len(sel) == 3
    for req in sel:
        assert field_line(req.user, "Condition") == HOT
        assert section(req.user, "Candidate factors:") == [cand.text for cand in trace.candidates]


async def test_selections_naming_non_candidates_are_discarded_and_counted(scripted_client, embedder, space):
    # k1 = 1, k2 = 1: one factor from the nearest cluster plus the nearest unclustered one.
    config = MappingConfig(rounds=3, vote_ratio=0.5, k1=1, k2=1)
    mapper = ConditionMapper(scripted_client(ScriptedLLM()), embedder, space, config)
    top = mapper.index.query(embedder.encode([HOT])[0])[1][0].text  # the retrieved cluster member
    assert top in TEMPERATURE
    outsider = next(t for t in TEMPERATURE if t != top)  # in the space, but not retrieved
    # (The answer schema caps a selection at the number of candidates: two here.)
    script = ScriptedLLM(select=queue([
        [top, outsider],                            # outsider: in the space, not a candidate
        [f"  {top}  ", top],                        # a padded copy and a repeat count once
        ["NOODLE TEXTURE", "an invented factor"],   # wrong case; invented
    ]))
    client = scripted_client(script)
    trace = await ConditionMapper(client, embedder, space, config).map(HOT)

    assert [c.text for c in trace.candidates] == [top, "noodle texture"]
    assert trace.invalid_selections == 3
    top_id, loose_id = ids(space, [top, "noodle texture"])
    assert trace.votes == {top_id: 2, loose_id: 0}
    assert sorted(trace.selection_rounds) == [[], [top_id], [top_id]]
    assert trace.voted == [top_id] == trace.mapped
    assert ids(space, [outsider])[0] not in trace.votes


@pytest.mark.parametrize("stray", ["an invented factor", "gas price"])  # gas price: a candidate, not voted
async def test_reflection_removes_and_records(scripted_client, embedder, space, stray):
    a, b = "water temperature", "boiling point"
    script = ScriptedLLM(select=lambda cond, cands: [a, b], reflect=queue([[a, stray]]))
    client = scripted_client(script)
    trace = await ConditionMapper(client, embedder, space).map(HOT)
    a_id, b_id = ids(space, [a, b])
    assert set(trace.voted) == {a_id, b_id}
    assert trace.reflection_removed == [b_id]
    assert trace.mapped == [a_id]
    assert trace.reflection_invalid == 1
    (req,) = requests_of(client.backend, "Reflection")
    assert sorted(section(req.user, "Selected factors:")) == sorted([a, b])


async def test_reflection_can_be_switched_off(scripted_client, embedder, space):
    script = ScriptedLLM(select=lambda cond, cands: ["gas price", "boiling point"], reflect=lambda c, s: [])
    client = scripted_client(script)
    trace = await ConditionMapper(client, embedder, space, MappingConfig(reflection=False)).map(HOT)
    assert requests_of(client.backend, "Reflection") == []
    assert sorted(trace.mapped) == sorted(ids(space, ["gas price", "boiling point"]))


async def test_nothing_selected_skips_reflection(scripted_client, embedder, space):
    client = scripted_client(ScriptedLLM(select=lambda cond, cands: []))
    trace = await ConditionMapper(client, embedder, space).map(HOT)
    assert trace.voted == [] and trace.mapped == []
    assert requests_of(client.backend, "Reflection") == []


async def test_no_candidates_gives_an_empty_mapping_without_llm_calls(scripted_client, embedder, make_space):
    empty = make_space([], [])
    client = scripted_client(ScriptedLLM())
    trace = await ConditionMapper(client, embedder, empty).map(HOT)
    assert trace.candidates == [] and trace.clusters == []
    assert trace.mapped == [] and trace.voted == [] and trace.votes == {}
    assert client.backend.requests == []


# --------------------------------------------------------------------------- mapping: retrieval


async def test_hierarchical_retrieval_uses_cluster_prototypes(scripted_client, embedder, space):
    config = MappingConfig(k1=1, k2=2)
    trace = await ConditionMapper(scripted_client(ScriptedLLM()), embedder, space, config).map(HOT)
    assert trace.retrieval == "hierarchical"
    (hit,) = trace.clusters
    # The nearest prototype, recomputed here from the real MiniLM vectors.
    q = embedder.encode([HOT])[0].astype(np.float64)
    protos = {c.id: 0.5 * embedder.encode([c.theme])[0] + 0.5 * embedder.encode(
        [space.factor(fid).text for fid in c.factor_ids]).mean(axis=0) for c in space.clusters}
    dists = {cid: float(np.linalg.norm(q - p)) for cid, p in protos.items()}
    assert hit.cluster_id == min(dists, key=dists.get)
    assert hit.theme == "Water Temperature"
    assert hit.distance == pytest.approx(dists[hit.cluster_id], abs=1e-4)
    sources = [c.source for c in trace.candidates]
    assert sources == [f"cluster:{hit.cluster_id}"] * 2 + ["unclustered"]
    assert {c.text for c in trace.candidates[:2]} <= set(TEMPERATURE)


async def test_flat_retrieval_searches_every_factor(scripted_client, embedder, space):
    config = MappingConfig(k1=1, k2=2, hierarchical=False)
    trace = await ConditionMapper(scripted_client(ScriptedLLM()), embedder, space, config).map(HOT)
    assert trace.retrieval == "flat"
    assert trace.clusters == []
    assert all(c.source == "flat" for c in trace.candidates)
    # Budget k1 * k2 + k2 = 4 nearest factors over the whole space, by exact distance.
    q = embedder.encode([HOT])[0]
    vecs = embedder.encode([f.text for f in space.factors])
    order = np.argsort(np.linalg.norm(vecs - q, axis=1), kind="stable")[:4]
    assert [c.factor_id for c in trace.candidates] == [space.factors[i].id for i in order]
    assert [c.distance for c in trace.candidates] == sorted(c.distance for c in trace.candidates)


async def test_vectors_are_recomputed_when_the_space_has_none(scripted_client, embedder, space):
    bare = space.model_copy(update={"embeddings": None})
    with_stored = await ConditionMapper(scripted_client(ScriptedLLM()), embedder, space).map(HOT)
    recomputed = await ConditionMapper(scripted_client(ScriptedLLM()), embedder, bare).map(HOT)
    assert [c.factor_id for c in recomputed.candidates] == [c.factor_id for c in with_stored.candidates]
    assert [h.cluster_id for h in recomputed.clusters] == [h.cluster_id for h in with_stored.clusters]


# --------------------------------------------------------------------------- inference


def trace_for(space, texts: list[str]) -> MappingTrace:
    return MappingTrace(condition="cond", retrieval="hierarchical", mapped=ids(space, texts))


def fresh(trace: MappingTrace) -> InferenceResult:
    return InferenceResult(condition=trace.condition, p_outcome1=None, p_outcome2=None, unknown=False, mapping=trace)


async def infer(client, space, texts, **config):
    trace = trace_for(space, texts)
    engine = InferenceEngine(client, space, InferenceConfig(**config))
    return await engine.infer(trace, fresh(trace))


def assert_known(result: InferenceResult) -> None:
    assert not result.unknown and result.unknown_reason is None
    assert 0.0 <= result.p_outcome1 <= 1.0
    assert result.p_outcome1 + result.p_outcome2 == pytest.approx(1.0, abs=1e-12)


async def test_unknown_when_nothing_is_mapped(scripted_client, space):
    client = scripted_client(ScriptedLLM())
    result = await infer(client, space, [])
    assert result.unknown and result.unknown_reason
    assert result.p_outcome1 is None and result.p_outcome2 is None
    assert result.factors == [] and result.nb is None and result.cbn is None
    assert client.backend.requests == []


async def test_tau_turns_a_low_confidence_posterior_into_unknown(scripted_client, space):
    texts = ["water temperature", "gas price"]
    low = await infer(scripted_client(ScriptedLLM(phi=lambda t: 0.55)), space, texts, tau=0.9)
    assert low.unknown and "tau" in low.unknown_reason
    assert low.p_outcome1 is None and low.p_outcome2 is None
    assert low.nb is not None and low.cbn is not None  # the audit trail is still there
    assert max(low.nb, 1 - low.nb) < 0.9

    known = await infer(scripted_client(ScriptedLLM(phi=lambda t: 0.55)), space, texts, tau=0.0)
    assert_known(known)
    sure = await infer(scripted_client(ScriptedLLM(phi=lambda t: 0.95)), space, texts, tau=0.8)
    assert_known(sure)
    assert sure.p_outcome1 >= 0.8


@pytest.mark.parametrize("eps", [0.01, 0.05])
async def test_phis_are_clipped_and_raw_values_kept(scripted_client, space, eps):
    raw = {"water temperature": 1.0, "gas price": 0.0, "noodle texture": 0.3}
    client = scripted_client(ScriptedLLM(phi=raw.get))
    result = await infer(client, space, list(raw), eps=eps)
    assert_known(result)
    assert [f.text for f in result.factors] == list(raw)
    assert [f.phi_raw for f in result.factors] == list(raw.values())
    assert [f.phi for f in result.factors] == [1 - eps, eps, 0.3]
    assert [f.theme for f in result.factors] == ["Water Temperature", "Energy Cost", None]
    assert [f.label for f in result.factors] == [FactorLabel.OUTCOME1, FactorLabel.OUTCOME2, FactorLabel.NEUTRAL]
    assert result.nb == pytest.approx(naive_bayes_posterior([1 - eps, eps, 0.3]))
    # The elicitation prompt offered each factor with its label prior as a rough hint.
    (req,) = requests_of(client.backend, "FactorProbabilities")
    assert "water temperature (rough: 0.75)" in req.user and "gas price (rough: 0.25)" in req.user


async def test_latent_partition_is_repaired(scripted_client, space):
    texts = ["water temperature", "boiling point", "gas price", "noodle texture"]
    script = ScriptedLLM(
        phi={"water temperature": 0.8, "boiling point": 0.7, "gas price": 0.2, "noodle texture": 0.5}.get,
        partition=lambda shown: [
            {"name": "Heat", "factors": ["water temperature", "an invented factor", "boiling point"]},
            {"name": "Money", "factors": ["boiling point", "gas price"]},   # boiling point again
        ],
        latent_params=lambda line: {"Heat": (0.9, 0.2), "Money": (0.3, 0.6)}.get(line.split(" (")[0], (0.5, 0.5)),
    )
    client = scripted_client(script)
    result = await infer(client, space, texts)
    assert_known(result)

    wt, bp, gp, nt = ids(space, texts)
    assert [(lat.name, lat.factor_ids) for lat in result.latents] == [
        ("Heat", [wt, bp]), ("Money", [gp]), (UNASSIGNED_LATENT, [nt])]
    # Every mapped factor sits in exactly one latent.
    placed = [fid for lat in result.latents for fid in lat.factor_ids]
    assert sorted(placed) == sorted([wt, bp, gp, nt])
    repairs = " | ".join(result.latent_repairs)
    assert len(result.latent_repairs) == 3
    assert "an invented factor" in repairs and "boiling point" in repairs and UNASSIGNED_LATENT in repairs
    # The repaired grouping is what the parameters were asked for and what the CBN used.
    (req,) = requests_of(client.backend, "LatentParams")
    assert req.schema_name == "LatentParams3"
    assert [(lat.p_given_o1, lat.p_given_o2) for lat in result.latents] == [(0.9, 0.2), (0.3, 0.6), (0.5, 0.5)]
    phis = [f.phi for f in result.factors]
    assert result.cbn == pytest.approx(cbn_posterior(phis, [0, 0, 1, 2], [(0.9, 0.2), (0.3, 0.6), (0.5, 0.5)]))


async def test_latent_params_are_clipped(scripted_client, space):
    script = ScriptedLLM(latent_params=lambda line: (1.0, 0.0))
    result = await infer(scripted_client(script), space, ["water temperature", "gas price"], eps=0.02)
    (lat,) = result.latents
    assert (lat.p_given_o1, lat.p_given_o2) == (0.98, 0.02)


async def test_without_pe_llm_parameters_come_from_labels(scripted_client, space):
    texts = ["water temperature", "killing bacteria", "gas price", "noodle texture"]
    script = ScriptedLLM(partition=lambda shown: [
        {"name": "Heat and safety", "factors": ["water temperature", "killing bacteria", "noodle texture"]},
        {"name": "Money", "factors": ["gas price"]}])
    client = scripted_client(script)
    result = await infer(client, space, texts, llm_parameters=False, smoothing=0.5)
    assert_known(result)
    assert requests_of(client.backend, "FactorProbabilities") == []
    assert requests_of(client.backend, "LatentParams") == []
    assert len(requests_of(client.backend, "LatentPartition")) == 1
    assert [f.phi for f in result.factors] == [0.75, 0.75, 0.25, 0.5]
    expected = [latent_params_from_counts(2, 0, 1, smoothing=0.5), latent_params_from_counts(0, 1, 0, smoothing=0.5)]
    got = [(lat.p_given_o1, lat.p_given_o2) for lat in result.latents]
    assert got == [tuple(clip_probability(p, 0.01) for p in pair) for pair in expected]
    assert result.nb == pytest.approx(naive_bayes_posterior([0.75, 0.75, 0.25, 0.5]))
    assert result.cbn == pytest.approx(cbn_posterior([0.75, 0.75, 0.25, 0.5], [0, 0, 1, 0], got))


async def test_without_pe_llm_the_network_favours_outcome2_and_mirrors_on_swap(scripted_client, make_space):
    """'w/o pe-llm' with every mapped factor labelled outcome 2: the network must favour O2, and the
    same space with its outcomes swapped (labels swapped with them) must give the mirror image."""
    cost = ["electricity bill", "gas price", "fuel cost"]
    partition = lambda shown: [{"name": "Money", "factors": list(shown)}]  # noqa: E731

    async def run(labels: dict[str, str], swap: bool) -> InferenceResult:
        sp = make_space([("Energy Cost", cost)], labels=labels)
        if swap:
            sp = sp.model_copy(update={"scenario": sp.scenario.swapped()})
        client = scripted_client(ScriptedLLM(partition=partition))
        return await infer(client, sp, cost, llm_parameters=False)

    base = await run({t: "outcome2" for t in cost}, swap=False)
    mirror = await run({t: "outcome1" for t in cost}, swap=True)
    assert base.nb == pytest.approx(0.015625 / 0.4375, abs=1e-12)
    assert base.cbn == pytest.approx(0.06640625 / 0.4375, abs=1e-12)
    assert base.cbn < 0.5 and base.p_outcome1 < 0.5
    assert [(lat.p_given_o1, lat.p_given_o2) for lat in base.latents] == [(0.875, 0.125)]
    assert mirror.nb == pytest.approx(1.0 - base.nb, abs=1e-12)
    assert mirror.cbn == pytest.approx(1.0 - base.cbn, abs=1e-12)
    assert mirror.p_outcome1 == pytest.approx(base.p_outcome2, abs=1e-12)


async def test_no_cbn_makes_no_latent_calls(scripted_client, space):
    client = scripted_client(ScriptedLLM(phi=lambda t: 0.8))
    result = await infer(client, space, ["water temperature", "gas price", "boiling point"], use_cbn=False)
    assert_known(result)
    assert requests_of(client.backend, "LatentPartition") == []
    assert requests_of(client.backend, "LatentParams") == []
    assert result.cbn is None and result.latents == [] and result.latent_repairs == []
    assert result.weights == {"nb": 1.0}
    assert result.p_outcome1 == result.nb == pytest.approx(naive_bayes_posterior([0.8] * 3))


async def test_no_nb_uses_the_cbn_alone(scripted_client, space):
    client = scripted_client(ScriptedLLM(phi=lambda t: 0.8))
    result = await infer(client, space, ["water temperature", "gas price"], use_nb=False)
    assert_known(result)
    assert result.nb is None and result.cbn is not None
    assert result.weights == {"cbn": 1.0}
    assert result.p_outcome1 == result.cbn


async def test_lop_and_bma_aggregation(scripted_client, space):
    texts = ["water temperature", "gas price", "noodle texture"]
    phi = {"water temperature": 0.9, "gas price": 0.3, "noodle texture": 0.6}.get

    lop = await infer(scripted_client(ScriptedLLM(phi=phi)), space, texts)
    assert_known(lop)
    assert lop.aggregation == AggregationMethod.LOP
    assert lop.weights == {"nb": 0.5, "cbn": 0.5}
    assert lop.p_outcome1 == pytest.approx(0.5 * lop.nb + 0.5 * lop.cbn)
    assert lop.nb != pytest.approx(lop.cbn)  # otherwise the weights would not matter

    weighted = await infer(scripted_client(ScriptedLLM(phi=phi)), space, texts, w_nb=3.0, w_cbn=1.0)
    assert weighted.weights == {"nb": 0.75, "cbn": 0.25}
    assert weighted.p_outcome1 == pytest.approx(0.75 * weighted.nb + 0.25 * weighted.cbn)

    bma = await infer(scripted_client(ScriptedLLM(phi=phi)), space, texts, aggregation=AggregationMethod.BMA)
    assert_known(bma)
    assert bma.aggregation == AggregationMethod.BMA
    p, weights = bayesian_model_average({"nb": bma.nb, "cbn": bma.cbn})
    assert bma.p_outcome1 == pytest.approx(p)
    assert bma.weights == pytest.approx(weights)
    assert sum(bma.weights.values()) == pytest.approx(1.0)


async def test_single_factor_needs_no_partition_call(scripted_client, space):
    client = scripted_client(ScriptedLLM(phi=lambda t: 0.7, latent_params=lambda line: (0.8, 0.3)))
    result = await infer(client, space, ["boiling point"])
    assert_known(result)
    assert requests_of(client.backend, "LatentPartition") == []
    (lat,) = result.latents
    assert lat.factor_ids == ids(space, ["boiling point"])
    assert result.cbn == pytest.approx(cbn_posterior([0.7], [0], [(0.8, 0.3)]))


def test_inference_config_needs_a_model():
    with pytest.raises(ValueError):
        InferenceConfig(use_nb=False, use_cbn=False)
    with pytest.raises(ValueError):
        InferenceConfig(w_nb=0.0, w_cbn=0.0)


# --------------------------------------------------------------------------- pipeline


async def test_per_condition_cost_under_concurrency(scripted_client, embedder, space, stopped_stopwatch):
    everything, nothing, one = ("The water is boiling hard.", "A cat sleeps on the sofa.",
                                "The gas bill went up this winter.")

    def select(condition: str, candidates: list[str]) -> list[str]:
        return {everything: candidates, nothing: [], one: ["gas price"]}[condition]

    # A virtual second a request: which branch of a condition's requests is the longer is then a
    # matter of counts, not of how the machine happened to schedule them.
    client = scripted_client(ScriptedLLM(select=select), delay=0.002, virtual_seconds=1.0)
    anchor = Anchor(client=client, embedder=embedder, config=AnchorConfig())  # the paper's rule: no base rate
    results = await anchor.ainfer(space, [everything, nothing, one])

    assert [r.condition for r in results] == [everything, nothing, one]
    calls = [{c.stage: c.llm_calls for c in r.cost} for r in results]
    assert calls[0] == {"mapping.select": 3, "mapping.reflect": 1, "inference.phi": 1, "inference.latents": 1,
                        "inference.latent_params": 1}
    assert calls[1] == {"mapping.select": 3}
    assert calls[2] == {"mapping.select": 3, "mapping.reflect": 1, "inference.phi": 1,
                        "inference.latent_params": 1}  # one factor: no partition call
    assert sum(sum(c.values()) for c in calls) == len(client.backend.requests) == client.ledger.total().llm_calls
    # The chain of requests that waited for one another, per condition: the three selection rounds go
    # out together, then the reflection, then phi beside the latent layer (partition, then parameters).
    assert [(r.critical_path.requests, r.critical_path.seconds) for r in results] == [(4, 4.0), (1, 1.0), (3, 3.0)]
    # The conditions really ran concurrently: their selection/reflection calls interleave.
    order = [field_line(r.user, "Condition") for r in client.backend.requests if "Condition: " in r.user]
    runs = sum(1 for i, c in enumerate(order) if i == 0 or c != order[i - 1])
    assert runs > 3, order
    assert results[1].unknown and not results[0].unknown and not results[2].unknown
    for r in results:
        assert r.variant == []
        assert r.mapping is not None and r.mapping.condition == r.condition
        assert "total_wall" in r.compute_seconds


def test_anchor_infer_sync_accepts_a_single_string(scripted_client, embedder, space):
    client = scripted_client(ScriptedLLM(phi=lambda t: 0.9))
    config = AnchorConfig().with_ablations(["no-cbn", "bma"])
    (result,) = Anchor(client=client, embedder=embedder, config=config).infer(space, HOT)
    assert_known(result)
    assert result.variant == ["no-cbn", "bma"]
    assert result.cbn is None
    assert requests_of(client.backend, "LatentPartition") == []


@pytest.mark.parametrize("name", list(ABLATIONS))
def test_with_ablations_switches_exactly_one_setting(name):
    base = AnchorConfig()
    cfg = base.with_ablations([name])
    assert cfg.active_ablations() == [name]
    assert base.active_ablations() == []  # the original is untouched
    expected = {
        "no-cbn": lambda c: c.inference.use_cbn is False,
        "no-nb": lambda c: c.inference.use_nb is False,
        "no-cluster": lambda c: c.build.cluster is False,
        "no-hierarchy": lambda c: c.mapping.hierarchical is False,
        "no-pe-llm": lambda c: c.inference.llm_parameters is False,
        "bma": lambda c: c.inference.aggregation == AggregationMethod.BMA,
    }
    assert set(expected) == set(ABLATIONS)
    assert expected[name](cfg)
    assert not expected[name](base)


def test_with_ablations_rejects_unknown_and_impossible_combinations():
    with pytest.raises(ValueError, match="unknown ablation 'no-magic'"):
        AnchorConfig().with_ablations(["no-magic"])
    with pytest.raises(ValueError):
        AnchorConfig().with_ablations(["no-nb", "no-cbn"])
    every = [n for n in ABLATIONS if n != "no-nb"]
    assert sorted(AnchorConfig().with_ablations(every).active_ablations()) == sorted(every)


def test_ledger_scopes_are_per_task():
    # The ledger's scopes are what the per-condition cost rests on: concurrent scopes stay apart.
    ledger = CostLedger()

    async def one(n: int) -> list[str]:
        with ledger.scope() as records:
            for _ in range(n):
                await asyncio.sleep(0.001)
                ledger.record(CallRecord(stage=f"s{n}", outcome="ok"))
        return [r.stage for r in records]

    async def main():
        return await asyncio.gather(one(1), one(2), one(3))

    assert asyncio.run(main()) == [["s1"], ["s2"] * 2, ["s3"] * 3]
    assert len(ledger.records) == 6
