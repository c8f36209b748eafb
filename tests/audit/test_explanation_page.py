"""The explanation page of conditions answered on a space: the retrieval funnel, the posteriors and
weights, the latent network, unknown answers and each condition's cost, checked against the planned case."""

from __future__ import annotations

import re

import pytest

from anchor.audit import explain_html
from anchor.config import AnchorConfig
from anchor.llm.client import LLMClient
from anchor.llm.ledger import CostLedger
from anchor.llm.scripted import ScriptedBackend
from anchor.pipeline import Anchor
from tests.audit.planned_case import (
    BP,
    EB,
    GP,
    HOT,
    KB,
    NT,
    WT,
    audit_space,
    expected_posteriors,
    make_script,
    one,
    section,
    texts,
)


def test_the_pipeline_ran_as_planned(case):
    space, (hot, cold, evil), _ = case
    by_text = {f.text: f.id for f in space.factors}
    assert hot.mapping.vote_threshold == 2
    assert hot.mapping.votes[by_text[WT]] == 3 and hot.mapping.votes[by_text[BP]] == 2
    assert hot.mapping.reflection_removed == [by_text[BP]]
    assert sorted(hot.mapping.mapped) == sorted([by_text[WT], by_text[KB]])
    assert evil.unknown and cold.latents[0].name == "Money"


def test_funnel_shows_every_stage_with_the_trace_numbers(case, page):
    space, (hot, _, _), _ = case
    trace = hot.mapping
    html_text = section(page, "cond-1")
    strip = " | ".join(texts(html_text, "data-stage"))
    assert f"{len(trace.clusters)} cluster(s)" in strip
    assert f"{len(trace.candidates)} candidates" in strip
    assert "3 with ≥ 2 of 3 votes" in strip and "1 removed by reflection" in strip and "2 mapped" in strip

    clusters = one(html_text, "id", "cond-1-clusters")
    assert [h.theme for h in trace.clusters][:1] == ["Water Temperature"]
    for hit in trace.clusters:
        assert f"{hit.theme} {hit.cluster_id} {hit.distance:.3f}" in clusters

    candidates = one(html_text, "id", "cond-1-candidates")
    for cand in trace.candidates:
        assert f"{cand.text} ({cand.factor_id})" in candidates
        assert f"{cand.distance:.3f}" in candidates
    assert candidates.count("unclustered") == sum(c.source == "unclustered" for c in trace.candidates) == 2

    votes = one(html_text, "id", "cond-1-votes")
    assert "a candidate passes with at least 2 vote(s)" in votes
    for text, n, verdict in [(WT, 3, "passes"), (BP, 2, "passes"), (KB, 2, "passes"), (NT, 1, "below threshold")]:
        assert re.search(rf"{text}( [✓·]){{3}} {n}/3 {verdict}", votes), (text, votes)
    assert f"{len(trace.candidates) - 4} candidate(s) got no vote" in votes

    reflection = one(html_text, "id", "cond-1-reflection")
    assert "Reflection dropped 1 of the 3 voted factor(s)" in reflection and BP in reflection

    mapped = one(html_text, "id", "cond-1-mapped")
    assert f"{WT} (" in mapped and "0.850" in mapped and f"{KB} (" in mapped and "0.700" in mapped
    assert BP not in mapped


def test_posteriors_and_weights_match_the_scripted_answers(case, page):
    _, (hot, cold, _), _ = case
    for ident, result, mapped in (("cond-1", hot, [WT, KB]), ("cond-2", cold, [GP, EB])):
        nb, cbn, pooled = expected_posteriors(mapped)
        assert result.nb == pytest.approx(nb) and result.cbn == pytest.approx(cbn)
        html_text = section(page, ident)
        assert one(html_text, "data-model", "nb").startswith(f"Naive Bayes P(O1) = {nb:.3f} P(O2) = {1 - nb:.3f}")
        assert "weight 0.50" in one(html_text, "data-model", "nb")
        assert f"{cbn:.3f}" in one(html_text, "data-model", "cbn")
        card = one(html_text, "data-model", "pooled")
        assert card.startswith(f"Pooled (linear opinion pool) P(O1) = {pooled:.3f}") and "= 0.50·NB + 0.50·CBN" in card
        assert f"P(O1) = {pooled:.3f} · P(O2) = {1 - pooled:.3f}" in " ".join(texts(html_text, "class", "verdict"))


def test_network_carries_latent_parameters_and_phi(case, page):
    space, (hot, cold, _), _ = case
    html_text = section(page, "cond-2")
    assert texts(html_text, "data-latent") == ["Money P(L|O1) 0.35 · P(L|O2) 0.60"]
    factor_nodes = texts(html_text, "data-factor")
    assert "φ 0.30 gas price" in factor_nodes and "φ 0.25 electricity bill" in factor_nodes
    money = "; ".join(next(f.text for f in cold.factors if f.factor_id == fid) for fid in cold.latents[0].factor_ids)
    assert sorted(money.split("; ")) == [EB, GP]
    assert one(html_text, "class", "latents").endswith(f"Money 0.350 0.600 {money}")

    hot_html = section(page, "cond-1")
    assert sorted(texts(hot_html, "data-latent")) == ["Heat P(L|O1) 0.90 · P(L|O2) 0.20",
                                                       "Safety P(L|O1) 0.70 · P(L|O2) 0.40"]
    # Outcome -> one edge per latent; latent -> one edge per factor.
    svg = re.search(r'<svg class="network".*?</svg>', hot_html, re.S).group(0)
    assert svg.count('class="edge-ol"') == 2 and svg.count("<path") == 4
    assert svg.count('class="factor"') == 2 and svg.count('class="outcome"') == 1


def test_unknown_condition_shows_the_reason_and_no_posteriors(case, page):
    _, (_, _, evil), _ = case
    html_text = section(page, "cond-3")
    assert evil.unknown_reason and evil.unknown_reason in one(html_text, "class", "verdict")
    assert one(html_text, "data-model", "pooled").startswith("Pooled (linear opinion pool) unknown")
    assert "no mapped factors" in one(html_text, "data-model", "nb")
    assert "No factor was mapped." in one(html_text, "id", "cond-3-mapped")
    assert "No mapped factors, so there is no network." in html_text


def test_each_condition_shows_its_llm_cost(case, page):
    _, (hot, _, evil), _ = case
    cost = one(page, "data-cost", "cond-1")
    for stage, calls in [("mapping.select", 3), ("mapping.reflect", 1), ("inference.phi", 1),
                         ("inference.latents", 1), ("inference.latent_params", 1)]:
        assert f" {stage} {calls} {calls} 0 0 " in f" {cost} "  # requests, attempts, failed, cache hits
    total_tokens = sum(c.prompt_tokens for c in hot.cost)
    assert re.search(rf" total 7 7 0 0 {total_tokens} ", cost)
    assert re.search(r"mapping\.select 3 3 0 0 \d+ \d+ [\d.]+ total 3 3 0 0", one(page, "data-cost", "cond-3"))
    assert [c.stage for c in evil.cost] == ["mapping.select"]


def test_space_section_of_the_explanation_circles_the_mapped_factors(case, page):
    space, results, _ = case
    mapped = {fid for r in results for fid in r.mapping.mapped}
    assert page.count('r="9" fill="none" stroke="#111"') == len(mapped) == 4


def test_nb_only_variant_draws_factors_straight_off_the_outcome(embedder):
    space = audit_space(embedder)
    client = LLMClient(ScriptedBackend(make_script()), cache=None, ledger=CostLedger())
    engine = Anchor(client=client, embedder=embedder, config=AnchorConfig().with_ablations(["no-cbn"]))
    (hot,) = engine.infer(space, [HOT])
    html_text = explain_html(space, [hot])
    assert hot.cbn is None and hot.latents == []
    assert "switched off for this run" in one(html_text, "data-model", "cbn")
    assert "weight 1.00" in one(html_text, "data-model", "nb")
    assert texts(html_text, "data-latent") == []
    svg = re.search(r'<svg class="network".*?</svg>', html_text, re.S).group(0)
    assert svg.count("<path") == 2 and "Naive Bayes structure" in svg
    assert "Ablations active: no-cbn" in html_text




def test_the_page_says_how_the_numbers_were_read():
    from anchor.audit.pages import posteriors
    from anchor.types import BaseRate, InferenceResult

    base = BaseRate(p_outcome1=0.2, p_raw=0.2, source="elicited", model="model-a")
    consistent = InferenceResult(condition="c", p_outcome1=0.3, p_outcome2=0.7, unknown=False, nb=0.25, cbn=0.3,
                                 weights={"nb": 0.0, "cbn": 1.0}, rule="consistent", base_rate=base)
    line = one(posteriors(consistent), "data-model", "rule")
    assert "consistent rule" in line and "P(O1 | scenario) = 0.200, elicited" in line and "model-a" in line
    # the value as counted, to six digits, is the value stated: no "(stated ...)" beside it
    pooled = consistent.model_copy(update={"base_rate": base.model_copy(update={"p_raw": 0.2000004})})
    assert "stated" not in one(posteriors(pooled), "data-model", "rule").split("=")[1].split(",")[0]
    given = consistent.model_copy(update={"base_rate": BaseRate(p_outcome1=0.01, p_raw=0.0, source="given")})
    line = one(posteriors(given), "data-model", "rule")
    assert "= 0.010 (stated 0.000), given by the user" in line
    paper = consistent.model_copy(update={"rule": "paper", "base_rate": None})
    line = one(posteriors(paper), "data-model", "rule")
    assert "paper's rule" in line and "base rate" not in line
