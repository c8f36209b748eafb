"""The HTML audit views (anchor.audit): factor-space page, explanation page, run index.

The space has real MiniLM vectors; the results come from the real pipeline (retrieval, voting,
reflection, elicitation, NB/CBN) over a scripted backend whose answers are planned below, so the
numbers the pages must show are known in advance. The last part renders pages in headless
Chromium.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import select
import shutil
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from sklearn.decomposition import PCA

from anchor.audit import PageWriteError, explain_html, space_html, space_page
from anchor.audit.figures import MAP_LABEL_LIMIT, project_2d
from anchor.config import AnchorConfig
from anchor.evaluation.datasets import bundled_file, load_dataset, scenario_key
from anchor.evaluation.report import RunIndexError, index_rows, read_traces, run_index_html, write_run_index
from anchor.evaluation.report.run_index import page_name
from anchor.evaluation.results import Prediction, RunConfig, SideRecord, TraceRecord
from anchor.inference.bayes import cbn_posterior, naive_bayes_posterior
from anchor.llm.client import LLMClient
from anchor.llm.ledger import CostLedger
from anchor.llm.scripted import ScriptedBackend
from anchor.llm.settings import LLMSettings
from anchor.mapping.mapper import MappingConfig
from anchor.pipeline import Anchor
from anchor.space.io import save_space
from anchor.types import (
    AbductionRound,
    ClusteringStats,
    FactorSpace,
    InferenceResult,
    LabelVotes,
    PrunedFactor,
    RejectedCandidate,
    StageCost,
    StopReason,
)
from tests.conftest import build_space
from tests.fakeserver import FakeOpenAIServer
from tests.helpers import ScriptedLLM

# --------------------------------------------------------------------------- the planned case

WT, BP, HT = "water temperature", "boiling point", "heat transfer rate"
KB, FP = "killing bacteria", "foodborne pathogens"
EB, GP = "electricity bill", "gas price"
NT = "noodle texture"
EVIL_FACTOR = "<script>alert('factor')</script> starch <b>release</b> https://example.org/x"
LABELS = {WT: "outcome1", BP: "outcome1", HT: "outcome1", KB: "outcome1", FP: "outcome1", EB: "outcome2",
          GP: "outcome2", NT: "neutral", EVIL_FACTOR: "neutral"}
VOTES = {WT: (3, 0, 0), BP: (2, 0, 1), KB: (3, 0, 0), GP: (0, 3, 0), EB: (1, 2, 0), NT: (1, 0, 2)}

HOT = "The water is brought to a rolling boil."
COLD = "The pot only holds lukewarm tap water and the gas is expensive."
EVIL = "<script>alert('condition')</script> a cat sleeps nearby"

# Selections per round (three rounds, threshold 2): for HOT the votes are WT 3, BP 2, KB 2, NT 1,
# so WT, BP and KB pass; reflection then drops BP.
SELECT = {HOT: [[WT, BP, KB], [WT, BP], [WT, KB, NT]], COLD: [[GP, EB]] * 3, EVIL: [[]] * 3}
REFLECT = {HOT: [WT, KB], COLD: [GP, EB]}
PHI = {WT: 0.85, KB: 0.7, GP: 0.3, EB: 0.25}
LATENT_OF = {WT: "Heat", KB: "Safety", GP: "Money", EB: "Money"}
LATENT_PARAMS = {"Heat": (0.9, 0.2), "Safety": (0.7, 0.4), "Money": (0.35, 0.6)}


def partition(texts: list[str]) -> list[dict]:
    groups: dict[str, list[str]] = {}
    for t in texts:
        groups.setdefault(LATENT_OF[t], []).append(t)
    return [{"name": name, "factors": members} for name, members in groups.items()]


def make_script() -> ScriptedLLM:
    pending = {cond: [list(a) for a in answers] for cond, answers in SELECT.items()}
    return ScriptedLLM(
        select=lambda cond, cands: pending[cond].pop(0),
        reflect=lambda cond, selected: list(REFLECT[cond]),
        phi=PHI.__getitem__,
        partition=partition,
        latent_params=lambda line: LATENT_PARAMS[line.split(" (")[0]],
    )


def expected_posteriors(texts: list[str]) -> tuple[float, float, float]:
    phis = [PHI[t] for t in texts]
    names = list(dict.fromkeys(LATENT_OF[t] for t in texts))
    nb = naive_bayes_posterior(phis)
    cbn = cbn_posterior(phis, [names.index(LATENT_OF[t]) for t in texts], [LATENT_PARAMS[n] for n in names])
    return nb, cbn, 0.5 * nb + 0.5 * cbn


def audit_space(embedder) -> FactorSpace:
    space = build_space(embedder, [("Water Temperature", [WT, BP, HT]), ("Food Safety", [KB, FP]),
                                   ("Energy Cost", [EB, GP])], [NT, EVIL_FACTOR], labels=LABELS)
    for f in space.factors:
        if f.text in VOTES:
            o1, o2, n = VOTES[f.text]
            f.votes = LabelVotes(outcome1=o1, outcome2=o2, neutral=n)
    ht = next(f for f in space.factors if f.text == HT)
    wt = next(f for f in space.factors if f.text == WT)
    cluster = space.clusters[0]
    cluster.factor_ids = [fid for fid in cluster.factor_ids if fid != ht.id]
    cluster.pruned = [PrunedFactor(factor_id=ht.id, text=HT, reason="redundant within its cluster",
                                   duplicate_of=wt.id)]
    ht.cluster_id = None
    space.rounds = [
        AbductionRound(round=1, sentences=["s"] * 10, extracted=["e"] * 8, added=["a"] * 6,
                       rejected=[RejectedCandidate(text="x", reason="duplicate"),
                                 RejectedCandidate(text="y", reason="irrelevant")]),
        AbductionRound(round=2, sentences=["s"] * 10, extracted=["e"] * 4, added=["a"] * 3,
                       rejected=[RejectedCandidate(text="z", reason="near_duplicate")]),
    ]
    space.stop_reason = StopReason.SATURATED
    space.clustering = ClusteringStats(method="umap+hdbscan", n_factors=9, n_clusters=3, n_unclustered=2,
                                       silhouette=0.4321, umap_n_components=5, umap_n_neighbors=7,
                                       hdbscan_min_cluster_size=2, seed=11, note="small space")
    space.cost = [StageCost(stage="abduction.generate", llm_calls=2, prompt_tokens=900, completion_tokens=410,
                            llm_seconds=3.25),
                  StageCost(stage="voting", llm_calls=4, failed_attempts=1, cache_hits=2, prompt_tokens=300,
                            completion_tokens=60, llm_seconds=1.5)]
    return space


@pytest.fixture(scope="module")
def case(embedder):
    """(space, [HOT, COLD, EVIL results], the scripted client)."""
    space = audit_space(embedder)
    script = make_script()
    client = LLMClient(ScriptedBackend(script), cache=None, ledger=CostLedger())
    results = Anchor(client=client, embedder=embedder).infer(space, [HOT, COLD, EVIL])
    return space, results, client


@pytest.fixture(scope="module")
def page(case) -> str:
    space, results, _ = case
    return explain_html(space, results)


# --------------------------------------------------------------------------- reading pages back


class _Finder(HTMLParser):
    """Collects the visible text of every element whose attribute ``attr`` equals ``value`` (a
    space is put at each tag, so table cells read 'a b c'; SVG hover titles are left out)."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self, attr: str, value: str | None) -> None:
        super().__init__(convert_charrefs=True)
        self.attr, self.value = attr, value
        self.depth = 0
        self.parts: list[str] = []
        self.found: list[str] = []
        self.in_title = False

    def handle_starttag(self, tag, attrs):  # noqa: ANN001
        if tag in self.VOID:
            return
        if self.depth:
            self.depth += 1
            self.parts.append(" ")
            self.in_title = tag == "title"
        elif self.attr in dict(attrs) and (self.value is None or dict(attrs)[self.attr] == self.value):
            self.depth, self.parts = 1, []

    def handle_endtag(self, tag):  # noqa: ANN001
        if tag in self.VOID or not self.depth:
            return
        self.depth -= 1
        self.in_title = False
        self.parts.append(" ")
        if self.depth == 0:
            self.found.append(" ".join("".join(self.parts).split()))

    def handle_data(self, data):  # noqa: ANN001
        if self.depth and not self.in_title:
            self.parts.append(data)


def texts(html_text: str, attr: str, value: str | None = None) -> list[str]:
    finder = _Finder(attr, value)
    finder.feed(html_text)
    return finder.found


def one(html_text: str, attr: str, value: str) -> str:
    found = texts(html_text, attr, value)
    assert len(found) == 1, (attr, value, found)
    return found[0]


def section(html_text: str, ident: str) -> str:
    """The raw HTML of <section id=ident> (for markup checks)."""
    m = re.search(rf'<section[^>]*id="{re.escape(ident)}".*?</section>', html_text, re.S)
    assert m, ident
    return m.group(0)


# --------------------------------------------------------------------------- the explanation page


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


# --------------------------------------------------------------------------- the space page


def test_space_page_shows_themes_votes_pruned_unclustered_and_stats(case):
    space, _, _ = case
    html_text = space_html(space)
    ids = {f.text: f.id for f in space.factors}
    theme = one(html_text, "data-cluster", "0")
    assert theme.startswith("Water Temperature cluster 0, 2 factor(s)")
    assert f"O1 {WT} O1 3 · O2 0 · n 0" in theme and f"O1 {BP} O1 2 · O2 0 · n 1" in theme
    assert HT not in theme and "1 pruned as redundant" in theme
    assert f"O2 {EB} O1 1 · O2 2 · n 0" in one(html_text, "data-cluster", "2")
    assert html_text.count('class="factor o2"') == 2 and html_text.count('class="factor o1"') == 4
    unclustered = one(html_text, "id", "space-unclustered")
    assert f"neutral {NT} O1 1 · O2 0 · n 2" in unclustered and f"neutral {EVIL_FACTOR} O1 0" in unclustered

    pruned = one(html_text, "class", "pruned-table")
    assert f"{HT} ({ids[HT]}) Water Temperature redundant within its cluster {WT} ({ids[WT]})" in pruned

    stats = one(html_text, "class", "clustering")
    for expected in ("method umap+hdbscan", "silhouette 0.432", "UMAP components 5", "UMAP neighbours 7",
                     "HDBSCAN min cluster size 2", "seed 11", "note small space"):
        assert expected in stats
    rounds = one(html_text, "class", "rounds")
    assert "1 10 8 6 2 duplicate 1, irrelevant 1" in rounds and "2 10 4 3 1 near duplicate 1" in rounds
    assert "Stopped after 2 round(s): <b>saturated</b> (several rounds in a row added nothing new)" in html_text
    cost = one(html_text, "data-cost", "space")
    # A cost recorded without logical requests (as before they were counted): a dash, not a made-up 0.
    assert "abduction.generate – 2 0 0 900 410 3.25" in cost and "total – 6 1 2 1200 470 4.75" in cost


def test_space_map_has_a_titled_point_per_vector_and_a_legend(case):
    space, _, _ = case
    html_text = space_html(space)
    svg = re.search(r'<svg class="map".*?</svg>', html_text, re.S).group(0)
    titles = re.findall(r"<title>(.*?)</title>", svg)
    assert len(titles) == len(space.embeddings.factor_ids) == 9
    ht = next(f for f in space.factors if f.text == HT)
    assert f"{ht.id}: {HT} [Water Temperature, pruned; vote O1]" in titles
    assert "factors clustered 9" in one(html_text, "class", "clustering")
    assert any(t.endswith("[unclustered; vote neutral]") and t.startswith(f"f008: {NT}") for t in titles)
    legend = texts(html_text, "class", "legend")[0]
    assert legend == ("Water Temperature (2) Food Safety (2) Energy Cost (2) unclustered (2) "
                      "pruned (colour of its former theme)")
    # Every point is labelled in a space this small.
    assert svg.count("<text") == 9 <= MAP_LABEL_LIMIT


def test_space_without_vectors_says_so(case):
    space, _, _ = case
    bare = space.model_copy(update={"embeddings": None})
    assert "No stored factor vectors in this space, so there is no map." in space_html(bare)


def test_projection_matches_principal_components():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, 12)) * np.linspace(3, 0.1, 12)
    coords, (r1, r2) = project_2d(x)
    pca = PCA(n_components=2).fit(x)
    reference = pca.transform(x)
    for j in range(2):
        assert np.allclose(np.abs(coords[:, j]), np.abs(reference[:, j]), atol=1e-8)
        far = np.argmax(np.abs(coords[:, j]))
        assert coords[far, j] > 0  # sign convention: the farthest point is on the positive side
    assert (r1, r2) == pytest.approx(tuple(pca.explained_variance_ratio_))
    line = np.outer(np.arange(5.0), np.ones(4))
    coords, (r1, r2) = project_2d(line)
    assert r1 == pytest.approx(1.0) and r2 == pytest.approx(0.0, abs=1e-12)
    assert project_2d(np.zeros((0, 4)))[0].shape == (0, 2)


# --------------------------------------------------------------------------- self-contained, escaped


EXTERNAL = re.compile(r"https?://|\bsrc=|<link\b|@import|url\(|<img\b|<iframe\b|<object\b|<embed\b", re.I)
LOCAL_HREF = re.compile(r"(#[\w-]+|(\.\./|explain/)?[\w.-]+\.html(#[\w-]+)?)")


def assert_self_contained(html_text: str) -> None:
    """Nothing the browser would fetch: no URL scheme, no src, stylesheet link, import, url(),
    embedded object; and every link an in-page anchor or a sibling page."""
    assert not EXTERNAL.search(html_text), EXTERNAL.search(html_text)
    for href in re.findall(r'href="([^"]*)"', html_text):
        assert LOCAL_HREF.fullmatch(href), href


def test_pages_reference_nothing_external(case, page):
    space, _, _ = case
    for html_text in (page, space_html(space)):
        assert_self_contained(html_text)
    # The factor that quotes a URL still reads as one.
    assert "https&#58;//example.org/x" in page


def test_texts_are_escaped_and_nothing_executes(case, page):
    assert "<script" not in page.lower()  # the explanation page has no script of its own
    assert "&lt;script&gt;alert(&#x27;condition&#x27;)&lt;/script&gt; a cat sleeps nearby" in page
    assert "&lt;script&gt;alert(&#x27;factor&#x27;)&lt;/script&gt; starch &lt;b&gt;release&lt;/b&gt;" in page
    heading = one(page, "id", "cond-3").split(" Unknown")[0]
    assert heading == f"Condition 3: {EVIL}"


def test_python_api_writes_the_pages(case, embedder, tmp_path):
    space, _, _ = case
    path = tmp_path / "out" / "space.html"
    assert space_page(space, path) == path.read_text(encoding="utf-8") == space_html(space)
    client = LLMClient(ScriptedBackend(make_script()), cache=None, ledger=CostLedger())
    target = tmp_path / "explain.html"
    html_text = Anchor(client=client, embedder=embedder).explain(space, HOT, path=target)
    assert target.read_text(encoding="utf-8") == html_text
    nb, cbn, pooled = expected_posteriors([WT, KB])
    assert one(html_text, "data-model", "pooled").startswith(f"Pooled (linear opinion pool) P(O1) = {pooled:.3f}")
    assert f"Condition 1: {HOT}" in html_text and 'id="space"' in html_text


def test_unwritable_page_path_is_a_clear_error(case, tmp_path):
    space, _, _ = case
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    with pytest.raises(PageWriteError, match=r"a-file/space\.html: cannot write the page \("):
        space_page(space, tmp_path / "a-file" / "space.html")
    with pytest.raises(PageWriteError, match=r"cannot write the page \(Is a directory\)"):
        space_page(space, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # no temporary file left behind


def test_explain_against_an_openai_compatible_server(case, embedder, tmp_path):
    # The server answers with random JSON in the requested schemas; a vote threshold of 1 of 3
    # lets some of its selections through, so the page has real traces to show.
    space, _, _ = case
    out = tmp_path / "e.html"
    with FakeOpenAIServer(seed=3) as server:
        settings = LLMSettings(base_url=server.base_url, model="served-model", use_cache=False, parse_retries=3)
        engine = Anchor(settings=settings, embedder=embedder,
                        config=AnchorConfig(mapping=MappingConfig(vote_ratio=0.3)))
        html_text = engine.explain(space, [HOT, COLD], path=out)
        completions = server.completions
    assert [p.name for p in tmp_path.iterdir()] == ["e.html"] and out.read_text(encoding="utf-8") == html_text
    assert_self_contained(html_text)
    assert "127.0.0.1" not in html_text
    assert [one(html_text, "id", f"cond-{i}").split(" P(O1)")[0].split(" Unknown")[0] for i in (1, 2)] == [
        f"Condition 1: {HOT}", f"Condition 2: {COLD}"]
    # Every request the server answered is in one condition's cost table.
    totals = [int(re.search(r" total (\d+) ", one(html_text, "data-cost", f"cond-{i}")).group(1)) for i in (1, 2)]
    assert sum(totals) == completions > 0


# --------------------------------------------------------------------------- the run index


def run_config(kind: str = "pairwise", **kw) -> RunConfig:
    dataset = {"pairwise": "common2sense-pairwise", "decision": "plasma", "factcheck": "factcheck"}[kind]
    fields = dict(anchor_version="0.1.0", dataset=dataset, data_sha256="0" * 64, kind=kind, method="anchor",
                  runs=1, seed=0, llm={"backend": "openai-compatible", "base_url": "http://127.0.0.1:9/v1",
                                       "model": "served-model"})
    fields.update(kw)
    return RunConfig(**fields)


def p_gold(result: InferenceResult) -> float | None:
    return result.p_outcome1  # gold outcome 1 throughout


def trace_line(run: int, iid: str, side: int, result: InferenceResult, key: str | None) -> str:
    return json.dumps({"run": run, "id": iid, "side": side, "condition": result.condition, "space": key,
                       "result": result.model_dump(mode="json")})


@pytest.fixture
def run_dir(case, tmp_path) -> Path:
    """A pairwise run directory written by hand: p1 correct, p2 wrong, p3 unknown (one side has no
    factors), p4 an LLM failure without traces; traces.jsonl also holds a superseded line for p1 and
    a torn last line."""
    space, (hot, cold, evil), _ = case
    key = scenario_key(space.scenario)
    d = tmp_path / "run"
    save_space(space, d / "spaces" / f"{key}.json")
    (d / "config.json").write_text(run_config().model_dump_json(indent=2), encoding="utf-8")
    preds = [
        Prediction(run=0, id="p1", seed=0, kind="pairwise", human=1, gold=1, p_gold_1=p_gold(hot),
                   p_gold_2=p_gold(cold), prediction=1),
        Prediction(run=0, id="p2", seed=0, kind="pairwise", human=2, gold=1, p_gold_1=p_gold(hot),
                   p_gold_2=p_gold(cold), prediction=1),
        Prediction(run=0, id="p3", seed=0, kind="pairwise", human=3, gold=1, p_gold_1=None, p_gold_2=p_gold(cold),
                   unknown=True, status="abstained", error=evil.unknown_reason),
        Prediction(run=0, id="p4 <odd>/id", seed=0, kind="pairwise", human=1, gold=1, unknown=True,
                   status="failed", error="the model answered out of schema: <b>oops</b>"),
    ]
    (d / "predictions.jsonl").write_text("".join(p.model_dump_json() + "\n" for p in preds), encoding="utf-8")
    lines = [trace_line(0, "p1", 0, evil, key),  # superseded by the next p1/side-0 line
             trace_line(0, "p1", 0, hot, key), trace_line(0, "p1", 1, cold, key),
             trace_line(0, "p2", 0, hot, key), trace_line(0, "p2", 1, cold, key),
             trace_line(0, "p3", 0, evil, key), trace_line(0, "p3", 1, cold, key)]
    (d / "traces.jsonl").write_text("\n".join(lines) + "\n" + '{"run": 0, "id": "p9", "si', encoding="utf-8")
    return d


def rows_of(html_text: str) -> list[tuple[str, str]]:
    """(data-status, row text) of every row of the index table."""
    body = re.search(r'<table class="runs" id="rows">.*?</table>', html_text, re.S).group(0)
    statuses = re.findall(r'<tr class="\w+" data-status="(\w+)" data-state="\w+">', body)
    return list(zip(statuses, texts(body, "data-status"), strict=True))


def test_run_index_rows_statuses_and_links(case, run_dir):
    space, (hot, cold, evil), _ = case
    result = write_run_index(run_dir)
    html_text = (run_dir / "index.html").read_text(encoding="utf-8")
    rows = rows_of(html_text)
    assert [s for s, _ in rows] == ["correct", "wrong", "unknown", "unknown"]
    p1, p2, p3, p4 = (text for _, text in rows)
    assert p1 == (f"p1 u1: {HOT} u2: {COLD} context 1 (gold outcome O1) context 1 "
                  f"P(gold | u1) {hot.p_outcome1:.3f} P(gold | u2) {cold.p_outcome1:.3f} correct explain")
    assert p2.startswith("p2 ") and "context 2 (gold outcome O1) context 1" in p2 and p2.endswith("wrong explain")
    assert p3.endswith(f"P(gold | u1) – P(gold | u2) {cold.p_outcome1:.3f} abstained {evil.unknown_reason} "
                       "unknown explain")
    assert p4.endswith("failed the model answered out of schema: <b>oops</b> unknown –")
    assert re.findall(r'data-state="(\w+)"', html_text) == ["ok", "ok", "abstained", "failed"]
    assert [r.state for r in result.rows] == ["ok", "ok", "abstained", "failed"]
    p3_page = (run_dir / "explain" / page_name(0, "p3")).read_text(encoding="utf-8")
    assert '<span class="status unknown">unknown</span> <span class="state abstained">abstained</span>' in p3_page
    assert one(html_text, "class", "counts") == ("4 row(s): 1 correct 1 wrong 2 unknown (of the unknown: 1 failed, "
                                                 "1 abstained)")
    # Links: relative, one per instance with traces, each to a page that exists.
    links = re.findall(r'<a href="([^"]+)">explain</a>', html_text)
    assert links == [f"explain/{page_name(0, i)}" for i in ("p1", "p2", "p3")]
    assert [p.relative_to(run_dir).as_posix() for p in result.pages] == links
    key = scenario_key(space.scenario)
    assert [p.name for p in result.space_pages] == [f"space-{key}.html"]
    # The page of p1 explains both sides (the later trace line for side 0 won) and links back.
    p1_page = (run_dir / links[0]).read_text(encoding="utf-8")
    assert f"Condition u1: {HOT}" in p1_page and f"Condition u2: {COLD}" in p1_page and EVIL not in p1_page
    assert '<a href="../index.html">' in p1_page and f'<a href="space-{key}.html">' in p1_page
    nb, cbn, pooled = expected_posteriors([WT, KB])
    assert one(section(p1_page, "cond-1"), "data-model", "pooled").startswith(
        f"Pooled (linear opinion pool) P(O1) = {pooled:.3f}")
    assert "Money P(L|O1) 0.35 · P(L|O2) 0.60" in texts(section(p1_page, "cond-2"), "data-latent")
    space_page = (run_dir / "explain" / f"space-{key}.html").read_text(encoding="utf-8")
    assert space_page.count("data-cluster=") == 3
    for written in [result.index, *result.pages, *result.space_pages]:
        assert_self_contained(written.read_text(encoding="utf-8"))
    assert "127.0.0.1" not in html_text  # the server address stays out of the page


def test_run_index_filter_markup_and_script(run_dir):
    write_run_index(run_dir)
    html_text = (run_dir / "index.html").read_text(encoding="utf-8")
    filters = re.search(r'<div class="filters" id="filters" hidden>.*?</div>', html_text, re.S).group(0)
    assert re.findall(r'<input type="checkbox" value="(\w+)" checked>', filters) == ["correct", "wrong", "unknown"]
    assert texts(filters, "id", "filters")[0].startswith("Show: correct (1) wrong (1) unknown (2)")
    # One inline script (the filter), and every row visible in the markup itself.
    assert html_text.count("<script") == 1 and "src=" not in html_text
    assert ' hidden' not in re.search(r'<table class="runs".*?</table>', html_text, re.S).group(0)
    # Escaped: the odd id and the error's markup cannot inject anything.
    assert "p4 &lt;odd&gt;/id" in html_text and "&lt;b&gt;oops&lt;/b&gt;" in html_text


def test_missing_traces_gives_rows_without_links(run_dir):
    (run_dir / "traces.jsonl").unlink()
    result = write_run_index(run_dir)
    html_text = result.index.read_text(encoding="utf-8")
    assert len(rows_of(html_text)) == 4 and result.pages == [] and result.space_pages == []
    assert "explain</a>" not in html_text and not (run_dir / "explain").exists()
    assert "This run has no traces.jsonl, so its rows have no explanation pages." in html_text
    assert [r.page for r in result.rows] == [None] * 4


def test_traces_reader_tolerates_a_torn_last_line_and_keeps_the_later_duplicate(case, run_dir):
    _, (hot, _, _), _ = case
    traces = read_traces(run_dir)
    assert sorted(traces) == [(0, "p1"), (0, "p2"), (0, "p3")]
    assert traces[(0, "p1")][0].condition == HOT
    assert traces[(0, "p1")][0].result.p_outcome1 == hot.p_outcome1
    assert read_traces(run_dir / "absent") == {}


def test_a_complete_last_line_without_newline_is_kept(case, tmp_path):
    _, (hot, _, _), _ = case
    path = tmp_path / "traces.jsonl"
    path.write_text(trace_line(0, "a", 0, hot, None), encoding="utf-8")
    assert list(read_traces(tmp_path)) == [(0, "a")]


def test_a_bad_line_in_the_middle_is_a_clear_error(case, run_dir):
    path = run_dir / "traces.jsonl"
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[2] = json.dumps({"run": 0, "id": "p1", "side": 4, "condition": "x", "result": {}})
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(RunIndexError, match=r"traces\.jsonl, line 3: not a trace record \(side: "):
        read_traces(run_dir)
    preds = run_dir / "predictions.jsonl"
    preds.write_text("{}\n" + preds.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(RunIndexError, match=r"predictions\.jsonl, line 1: not a prediction record \(run: "):
        write_run_index(run_dir)


def test_not_a_run_directory(tmp_path):
    with pytest.raises(RunIndexError, match="no such run directory"):
        write_run_index(tmp_path / "nowhere")
    with pytest.raises(RunIndexError, match=r"not an evaluation run directory \(no config.json\)"):
        write_run_index(tmp_path)
    (tmp_path / "config.json").write_text('{"dataset": "plasma"}', encoding="utf-8")
    with pytest.raises(RunIndexError, match="config.json: not a run configuration"):
        write_run_index(tmp_path)


def test_a_missing_space_file_costs_only_the_space_section(case, run_dir):
    space, _, _ = case
    (run_dir / "spaces" / f"{scenario_key(space.scenario)}.json").unlink()
    result = write_run_index(run_dir)
    assert len(result.pages) == 3 and result.space_pages == []
    assert any("is not available" in n and "no such file" in n for n in result.notes)
    p1_page = result.pages[0].read_text(encoding="utf-8")
    assert "The factor space is not available." in p1_page and f"Condition u1: {HOT}" in p1_page


def test_spaces_reused_from_another_run_directory_are_found_there(case, run_dir, tmp_path):
    # A run made with --spaces-from OTHER keeps the spaces it reused in OTHER/spaces/.
    space, _, _ = case
    key = scenario_key(space.scenario)
    other = tmp_path / "earlier"
    (other / "spaces").mkdir(parents=True)
    (run_dir / "spaces" / f"{key}.json").rename(other / "spaces" / f"{key}.json")
    (run_dir / "config.json").write_text(run_config(spaces_from=str(other)).model_dump_json(), encoding="utf-8")
    result = write_run_index(run_dir)
    assert [p.name for p in result.space_pages] == [f"space-{key}.html"]
    assert not any("not available" in n for n in result.notes)
    assert f'<a href="space-{key}.html">' in result.pages[0].read_text(encoding="utf-8")


def test_trace_lines_of_another_method_cost_only_their_pages(case, run_dir):
    # A trace line in the runner's shape whose result is some other method's trail (BIRD's, say).
    path = run_dir / "traces.jsonl"
    lines = path.read_text(encoding="utf-8").split("\n")[:-1]  # drop the torn line
    foreign = {"run": 0, "id": "p4 <odd>/id", "side": 0, "condition": "c", "space": None,
               "result": {"method": "bird", "factors": {"a": 1}}}
    path.write_text("\n".join([*lines, json.dumps(foreign)]) + "\n", encoding="utf-8")
    assert sorted(read_traces(run_dir)) == [(0, "p1"), (0, "p2"), (0, "p3")]
    result = write_run_index(run_dir)
    assert [r.page is not None for r in result.rows] == [True, True, True, False]
    assert "1 trace line(s) hold another method's audit trail, not an ANCHOR result; their rows have no " \
           "explanation page." in result.notes
    # A line that breaks the shape itself (not only the result) is still an error.
    path.write_text(json.dumps({**foreign, "side": -1}) + "\n", encoding="utf-8")
    with pytest.raises(RunIndexError, match=r"line 1: not a trace record \(side: "):
        write_run_index(run_dir)


def test_rows_follow_run_then_instance_order_whatever_order_they_finished_in(run_dir):
    ids = ["x:10", "x:2", "x:1"]
    preds = [Prediction(run=r, id=i, seed=r, kind="pairwise", human=1, gold=1, unknown=True, status="failed",
                        error="e") for r in (1, 0) for i in ids]
    (run_dir / "predictions.jsonl").write_text("".join(p.model_dump_json() + "\n" for p in preds), encoding="utf-8")
    result = write_run_index(run_dir)
    assert [(r.run, r.id) for r in result.rows] == [(r, i) for r in (0, 1) for i in ("x:1", "x:2", "x:10")]


@pytest.mark.parametrize(("kind", "pred", "status", "gold", "predicted"), [
    ("decision", dict(label=1, p_outcome1=0.8, prediction=1), "correct", "O1", "O1"),
    ("decision", dict(label=2, p_outcome1=0.8, prediction=1), "wrong", "O2", "O1"),
    ("decision", dict(label=1, p_outcome1=0.5, prediction=None), "wrong", "O1", "tie (0.5)"),
    # The runner marks a tie unknown (no decision); the metrics count it covered and not correct.
    ("decision", dict(label=1, p_outcome1=0.5, prediction=None, unknown=True), "wrong", "O1", "tie (0.5)"),
    ("decision", dict(label=1, unknown=True, error="tau"), "unknown", "O1", "unknown"),
    ("factcheck", dict(label=1, p_outcome1=0.95, prediction=1), "correct", "supported", "supported (P > 0.9)"),
    ("factcheck", dict(label=1, p_outcome1=0.8, prediction=1), "wrong", "supported", "not supported"),
    ("factcheck", dict(label=2, p_outcome1=0.8, prediction=1), "correct", "not supported", "not supported"),
    ("pairwise", dict(human=3, gold=2, p_gold_1=0.4, p_gold_2=0.4, prediction=3), "correct",
     "same (gold outcome O2)", "same"),
])
def test_rows_are_scored_like_the_metrics(kind, pred, status, gold, predicted):
    (row,) = index_rows([Prediction(run=0, id="x", seed=0, kind=kind, **pred)], run_config(kind))
    assert (row.status, row.gold, row.prediction) == (status, gold, predicted)


def test_a_fallback_answer_is_marked_in_its_row():
    """BIRD said unknown and CoT answered: the row is scored on CoT's answer and says so."""
    side = SideRecord(condition=1, p_outcome1=0.7, status="ok", fallback="cot",
                      reason="nothing mapped; answered by the fallback cot")
    pred = Prediction(run=0, id="x", seed=0, kind="decision", label=1, p_outcome1=0.7, prediction=1, sides=[side])
    (row,) = index_rows([pred], run_config("decision"))
    assert (row.status, row.fallback) == ("correct", "cot")
    (cells,) = [text for _, text in rows_of(run_index_html([row], title="t"))]
    assert "abstained answered by cot" in cells
    (plain,) = index_rows([pred.model_copy(update={"sides": []})], run_config("decision"))
    assert plain.fallback is None and "answered by" not in run_index_html([plain], title="t")


def test_index_html_from_rows_and_the_empty_case():
    probs = [0.2, 0.6, 0.9]
    preds = [Prediction(run=r, id=f"i{i}", seed=r, kind="decision", label=1, p_outcome1=p,
                        prediction=1 if p > 0.5 else 2) for r in range(2) for i, p in enumerate(probs)]
    html_text = run_index_html(index_rows(preds, run_config("decision", runs=2)), title="Two runs")
    rows = rows_of(html_text)
    assert [s for s, _ in rows] == ["wrong", "correct", "correct"] * 2
    assert rows[3][1].startswith("1 i0 – O1 O2 P(O1) 0.200")  # a run column appears with several runs
    empty = run_index_html([], title="Nothing yet")
    assert "No predictions yet." in empty and "<script" not in empty


def test_condition_texts_come_from_the_dataset_when_there_are_no_traces(tmp_path):
    instances = load_dataset("plasma")[:2]
    sha = hashlib.sha256(bundled_file("plasma").read_bytes()).hexdigest()
    d = tmp_path / "baseline"
    d.mkdir()
    config = run_config("decision", method="vanilla", data_sha256=sha)
    (d / "config.json").write_text(config.model_dump_json(), encoding="utf-8")
    preds = [Prediction(run=0, id=inst.id, seed=0, kind="decision", label=inst.label, p_outcome1=0.7, prediction=1)
             for inst in instances]
    (d / "predictions.jsonl").write_text("".join(p.model_dump_json() + "\n" for p in preds), encoding="utf-8")
    result = write_run_index(d)
    assert [r.conditions for r in result.rows] == [[inst.condition] for inst in instances]

    (d / "config.json").write_text(config.model_copy(update={"data_sha256": "1" * 64}).model_dump_json(),
                                   encoding="utf-8")
    result = write_run_index(d)
    assert [r.conditions for r in result.rows] == [[], []]
    assert "Condition texts not shown: the dataset file has changed since the run" in result.notes


def test_trace_record_validates_the_side():
    with pytest.raises(ValueError):
        TraceRecord.model_validate({"run": 0, "id": "a", "side": 2, "condition": "c",
                                    "result": {"condition": "c", "p_outcome1": None, "p_outcome2": None,
                                               "unknown": True}})


# --------------------------------------------------------------------------- in a real browser

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--enable-logging=stderr", "--v=0"]


class Rendered:
    def __init__(self, dom: str, console: list[str], page_requests: list[str]) -> None:
        self.dom, self.console, self.page_requests = dom, console, page_requests


def render(url: str, tmp_path: Path, *, screenshot: Path | None = None) -> Rendered:
    """Load ``url`` in headless Chromium: the DOM after scripts ran, the page's console messages,
    and every network request the page itself started (Chromium's own background traffic has no
    page origin and is left out)."""
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    netlog = profile.with_suffix(".netlog.json")
    base = [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--log-net-log={netlog}"]
    proc = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    log = json.loads(netlog.read_text(encoding="utf-8"))
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    requests = [e["params"]["url"] for e in log["events"]
                if e["type"] == start_job and e.get("params", {}).get("initiator", "not an origin") != "not an origin"]
    if screenshot is not None:
        shot = subprocess.run([*base, "--window-size=1280,2400", f"--screenshot={screenshot}", url],
                              capture_output=True, text=True, timeout=120, check=False)
        assert shot.returncode == 0 and screenshot.exists(), shot.stderr[-2000:]
    return Rendered(proc.stdout, console, requests)


def dom_via_devtools(url: str, tmp_path: Path, *, javascript: bool) -> str:
    """The DOM of ``url`` after loading, with JavaScript on or off. ``--dump-dom`` cannot be used
    with scripts off (it returns nothing then), so this talks the DevTools protocol over a pipe:
    Emulation.setScriptExecutionDisabled, Page.navigate, DOM.getOuterHTML."""
    profile = tmp_path / f"devtools-{len(list(tmp_path.glob('devtools-*')))}"
    to_read, to_write = os.pipe()
    from_read, from_write = os.pipe()
    args = [CHROMIUM, *CHROMIUM_FLAGS[:-2], f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"]
    # Chromium reads commands on fd 3 and answers on fd 4 (bash: dash cannot redirect fds >= 10).
    proc = subprocess.Popen(["bash", "-c", f'exec "$0" "$@" 3<&{to_read} 4>&{from_write}', *args],
                            pass_fds=(to_read, from_write), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(to_read)
    os.close(from_write)
    pending = b""
    counter = 0
    deadline = time.monotonic() + 90

    def send(method: str, params: dict | None = None, session: str | None = None) -> int:
        nonlocal counter
        counter += 1
        message = {"id": counter, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(to_write, json.dumps(message).encode() + b"\0")
        return counter

    def wait_for(wanted) -> dict:  # noqa: ANN001
        nonlocal pending
        while True:
            while b"\0" in pending:
                raw, pending = pending.split(b"\0", 1)
                message = json.loads(raw)
                if wanted(message):
                    return message
            left = deadline - time.monotonic()
            assert left > 0 and select.select([from_read], [], [], left)[0], "Chromium did not answer in time"
            chunk = os.read(from_read, 1 << 16)
            assert chunk, "Chromium closed the DevTools pipe"
            pending += chunk

    def call(method: str, params: dict | None = None, session: str | None = None) -> dict:
        ident = send(method, params, session)
        answer = wait_for(lambda m: m.get("id") == ident)
        assert "error" not in answer, answer
        return answer["result"]

    try:
        target = call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        call("Emulation.setScriptExecutionDisabled", {"value": not javascript}, session)
        call("Page.enable", {}, session)
        call("Page.navigate", {"url": url}, session)
        wait_for(lambda m: m.get("method") == "Page.loadEventFired" and m.get("sessionId") == session)
        root = call("DOM.getDocument", {"depth": -1}, session)["root"]["nodeId"]
        return call("DOM.getOuterHTML", {"nodeId": root}, session)["outerHTML"]
    finally:
        try:
            send("Browser.close")
        except OSError:
            pass
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.close(to_write)
        os.close(from_read)


def assert_drawn(png: Path) -> None:
    """The screenshot is a real picture: not blank, with more than a handful of colours."""
    from PIL import Image

    with Image.open(png) as im:
        pixels = np.asarray(im.convert("RGB"))
    assert pixels.shape[0] >= 1000 and pixels.std() > 10
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50


@needs_chromium
def test_browser_detects_console_errors_and_network_requests(tmp_path):
    # The checks below must be able to fail: a page with a script error and a remote stylesheet.
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><head><link rel="stylesheet" href="https://cdn.invalid/x.css"></head>'
                   "<body><p>x</p><script>console.error('broken'); notAFunction();</script></body></html>",
                   encoding="utf-8")
    seen = render(bad.as_uri(), tmp_path)
    assert any("broken" in line for line in seen.console)
    assert any("Uncaught ReferenceError" in line for line in seen.console)
    assert seen.page_requests == ["https://cdn.invalid/x.css"]


@needs_chromium
def test_explanation_page_renders_in_chromium(case, page, tmp_path):
    _, (hot, cold, _), _ = case
    path = tmp_path / "explain.html"
    path.write_text(page, encoding="utf-8")
    shot = Path(os.environ.get("ANCHOR_SCREENSHOT_DIR", tmp_path)) / "explain.png"
    seen = render(path.as_uri(), tmp_path, screenshot=shot)
    assert seen.console == [] and seen.page_requests == []
    dom = seen.dom
    assert "<script" not in dom.lower()  # the escaped condition stayed text
    for ident, result in (("cond-1", hot), ("cond-2", cold)):
        html_text = section(dom, ident)
        assert len(texts(html_text, "data-stage")) == 10  # 5 in the strip, 5 funnel steps
        assert re.search(r'<svg class="network"', html_text)
        assert len(texts(html_text, "data-latent")) == len(result.latents)
        assert one(html_text, "data-model", "nb").startswith(f"Naive Bayes P(O1) = {result.nb:.3f}")
        assert f"{result.cbn:.3f}" in one(html_text, "data-model", "cbn")
        assert f"{result.p_outcome1:.3f}" in one(html_text, "data-model", "pooled")
    assert_drawn(shot)


@needs_chromium
def test_run_index_filters_in_chromium_and_shows_everything_without_javascript(run_dir, tmp_path):
    result = write_run_index(run_dir)
    url = result.index.as_uri()

    def visible(dom: str) -> list[str]:
        return re.findall(r'<tr class="\w+" data-status="(\w+)" data-state="\w+">', dom)  # rows without `hidden`

    with_js = render(url, tmp_path, screenshot=Path(os.environ.get("ANCHOR_SCREENSHOT_DIR", tmp_path)) / "index.png")
    assert with_js.console == [] and with_js.page_requests == []
    assert '<div class="filters" id="filters">' in with_js.dom  # the script revealed the boxes
    assert visible(with_js.dom) == ["correct", "wrong", "unknown", "unknown"]
    assert "4 of 4 rows shown" in with_js.dom

    only_wrong = render(url + "#wrong", tmp_path)
    assert only_wrong.console == []
    assert visible(only_wrong.dom) == ["wrong"]
    assert only_wrong.dom.count('hidden="">') == 3 and "1 of 4 rows shown" in only_wrong.dom

    # With JavaScript off every row shows (even when the address asks for a filter) and the
    # filter boxes, which could not work, stay hidden. The same load with JavaScript on is the
    # control: it filters.
    no_js = dom_via_devtools(url + "#wrong", tmp_path, javascript=False)
    assert visible(no_js) == ["correct", "wrong", "unknown", "unknown"]
    assert '<div class="filters" id="filters" hidden="">' in no_js
    assert visible(dom_via_devtools(url + "#wrong", tmp_path, javascript=True)) == ["wrong"]

    page_dom = render((run_dir / result.pages[0].relative_to(run_dir)).as_uri(), tmp_path)
    assert page_dom.console == [] and page_dom.page_requests == []
    assert len(texts(page_dom.dom, "data-latent")) == 3  # Heat, Safety (u1) and Money (u2)
