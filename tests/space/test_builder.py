"""Stage 1 end to end: FactorSpaceBuilder with a scripted LLM, the real MiniLM embedder and real
UMAP + HDBSCAN (one build of 25 factors, shared by the module), plus saving and loading."""

from __future__ import annotations

import asyncio
import json
import math
import re

import numpy as np
import pytest

from anchor.config import AnchorConfig
from anchor.llm.client import LLMClient
from anchor.llm.ledger import CostLedger
from anchor.llm.scripted import ScriptedBackend
from anchor.pipeline import Anchor
from anchor.settings.space import BuildParams
from anchor.space.builder import FLAT_THEME, FactorSpaceBuilder
from anchor.space.io import SpaceFileError, load_space, save_space
from anchor.types import FACTOR_SPACE_SCHEMA_VERSION, FactorLabel, StopReason
from tests.conftest import NOODLES
from tests.helpers import ScriptedLLM, requests_of

# Five well separated topics, five factors each (pairwise MiniLM similarity stays below 0.75).
TOPICS = {
    "temperature": ["water temperature", "boiling point", "heat transfer rate", "thermal energy input",
                    "stove flame intensity"],
    "time": ["cooking duration", "waiting time before serving", "preparation speed", "minutes on the timer",
             "total elapsed time"],
    "texture": ["noodle texture", "starch gelatinization", "chewiness of pasta", "mushy consistency",
                "firm al dente bite"],
    "safety": ["killing bacteria", "foodborne pathogens", "food hygiene", "microbial contamination",
               "kitchen sanitation"],
    "cost": ["electricity bill", "gas price", "household budget", "energy expenses", "utility costs"],
}
TOPIC_LABEL = {"temperature": "outcome1", "time": "outcome1", "texture": "neutral", "safety": "outcome1",
               "cost": "outcome2"}
TOPIC_OF = {text: topic for topic, texts in TOPICS.items() for text in texts}
# Round t extracts the t-th factor of every topic, so rounds mix topics.
ROUNDS = [[texts[t] for texts in TOPICS.values()] for t in range(5)]
ALL_TEXTS = [text for rnd in ROUNDS for text in rnd]
M = 3


def label_of(text: str) -> str:
    return TOPIC_LABEL[TOPIC_OF[text]]


def theme_with_pruning(members: list[str]) -> dict:
    """Theme from the first member's topic; in groups of 3+, the last member repeats the first."""
    redundant = [{"factor": members[-1], "same_as": members[0]}] if len(members) >= 3 else []
    return {"theme": f"{TOPIC_OF[members[0]].title()} Aspects of Cooking", "redundant": redundant}


def script(rounds=ROUNDS) -> ScriptedLLM:
    return ScriptedLLM(rounds=rounds, label=label_of, theme=theme_with_pruning)


def client_for(responder) -> LLMClient:
    return LLMClient(ScriptedBackend(responder), ledger=CostLedger(), parse_retries=2)


def build(embedder, responder, **params):
    p = BuildParams(**{"n_target": 25, "batch_size": 5, "max_rounds": 8, "vote_samples": M, "vote_batch_size": 8,
                       "abduction_window": 8, **params})
    client = client_for(responder)
    space = asyncio.run(FactorSpaceBuilder(client, embedder, p).build(NOODLES))
    return space, client


@pytest.fixture(scope="module")
def built(embedder):
    """The one build in this module that runs UMAP + HDBSCAN."""
    return build(embedder, script())


# --------------------------------------------------------------------------- the full build


def test_every_factor_is_labelled_by_m_votes(built):
    space, _ = built
    assert [f.text for f in space.factors] == ALL_TEXTS
    assert [f.id for f in space.factors] == [f"f{i:03d}" for i in range(1, 26)]
    assert len({f.id for f in space.factors}) == 25
    for f in space.factors:
        assert f.votes.total == M
        assert f.label == f.votes.majority() == FactorLabel(label_of(f.text))
        assert getattr(f.votes, label_of(f.text)) == M
    assert [f.round for f in space.factors] == [t for t in range(1, 6) for _ in range(5)]


def test_clusters_and_unclustered_partition_the_surviving_factors(built):
    space, _ = built
    all_ids = {f.id for f in space.factors}
    in_clusters = [fid for c in space.clusters for fid in c.factor_ids]
    pruned = [p.factor_id for c in space.clusters for p in c.pruned]
    active = in_clusters + list(space.unclustered)
    assert len(active) == len(set(active))
    assert not set(active) & set(pruned)
    assert set(active) | set(pruned) == all_ids
    assert sorted(space.active_factor_ids()) == sorted(active)
    assert [c.id for c in space.clusters] == list(range(len(space.clusters)))
    for c in space.clusters:
        assert c.factor_ids, "every cluster keeps at least one member"
        assert all(space.factor(fid).cluster_id == c.id for fid in c.factor_ids)
        for p in c.pruned:
            assert p.duplicate_of in c.factor_ids
            assert space.factor(p.factor_id).cluster_id is None
            assert p.text == space.factor(p.factor_id).text
    assert all(space.factor(fid).cluster_id is None for fid in space.unclustered)
    # The scripted namer marks one repeat in every group of three or more.
    assert len(pruned) == sum(1 for c in space.clusters if len(c.factor_ids) + len(c.pruned) >= 3)


def test_clusters_are_themed_and_grouped_by_meaning(built):
    space, backend_client = built
    assert space.clusters, "HDBSCAN should find groups among five well separated topics"
    themes = [c.theme for c in space.clusters]
    # At most three words, plus a " (2)" suffix where two clusters got the same name.
    assert all(1 <= len(re.sub(r" \(\d+\)$", "", t).split()) <= 3 for t in themes)
    assert all(t.startswith(f"{TOPIC_OF[space.factor(c.factor_ids[0]).text].title()} Aspects of")
               for t, c in zip(themes, space.clusters, strict=True))
    assert len({t.casefold() for t in themes}) == len(themes)
    # The topics were chosen far apart: clusters should be (nearly) pure.
    agree = total = 0
    for c in space.clusters:
        topics = [TOPIC_OF[space.factor(fid).text] for fid in c.factor_ids + [p.factor_id for p in c.pruned]]
        agree += max(topics.count(t) for t in set(topics))
        total += len(topics)
    assert agree / total >= 0.8, [(c.theme, c.factor_ids) for c in space.clusters]
    theme_calls = requests_of(backend_client.backend, "ThemeAndPruning")
    assert len(theme_calls) == len(space.clusters)


def test_stop_reason_and_rounds(built):
    space, _ = built
    assert space.stop_reason == StopReason.TARGET_REACHED
    assert [r.round for r in space.rounds] == [1, 2, 3, 4, 5]
    assert [r.added for r in space.rounds] == ROUNDS
    assert space.params.n_target == 25


def test_costs_per_stage(built):
    space, client = built
    by_stage = {c.stage: c for c in space.cost}
    expected = {"abduction.generate", "abduction.extract", "voting", "themes"}
    # Extraction judged relevance, and no candidate had a borderline neighbour: no validation request.
    assert set(by_stage) == expected
    for name in expected:
        assert by_stage[name].llm_calls > 0
        assert by_stage[name].prompt_tokens > 0
    # All eight rounds started at once (window 8); rounds 6-8 had run when round 5 reached the
    # target: paid for and listed apart, not merged.
    assert [r.round for r in space.rounds_beyond_stop] == [6, 7, 8]
    assert all(r.added == [] and r.sentences for r in space.rounds_beyond_stop)
    assert by_stage["abduction.generate"].llm_calls == 8
    assert by_stage["voting"].llm_calls == math.ceil(25 / 8) * M
    assert by_stage["themes"].llm_calls == len(space.clusters)
    assert sum(c.llm_calls for c in space.cost) == len(client.backend.requests)
    assert space.llm.backend == "scripted" and space.llm.model == "scripted-model"
    assert {"embedding", "clustering", "total_wall"} <= set(space.compute_seconds)
    # The build's critical path is the longest chain stamped on its requests: voting batches and
    # themes go out side by side, so it is much shorter than the number of requests. Longest by
    # seconds, then requests, as chain.longer decides: a chain with more requests can take less time
    # (its seconds are the wall clock's), so ordering by requests would depend on the machine's load.
    longest = max((r.chain_seconds, r.chain_requests) for r in client.ledger.records if r.outcome != "cache_hit")
    assert (space.critical_path.seconds, space.critical_path.requests) == longest
    assert space.critical_path.requests < sum(c.llm_calls for c in space.cost)


def test_clustering_stats(built):
    space, _ = built
    stats = space.clustering
    assert stats.method == "umap+hdbscan"
    assert stats.n_factors == 25
    assert stats.n_clusters == len(space.clusters)
    assert stats.n_unclustered == len(space.unclustered)
    assert stats.umap_n_components == 10 and stats.umap_n_neighbors == 15
    assert stats.hdbscan_min_cluster_size == 2
    assert stats.silhouette is None or -1.0 <= stats.silhouette <= 1.0


def test_embeddings_are_stored(built, embedder):
    space, _ = built
    emb = space.embeddings
    assert emb is not None
    assert emb.factor_ids == [f.id for f in space.factors]
    assert emb.factors.model == space.embedding_model == embedder.model_id
    np.testing.assert_allclose(emb.factors.to_array(), embedder.encode(ALL_TEXTS), atol=1e-5)
    assert emb.cluster_ids == [c.id for c in space.clusters]
    assert emb.themes is not None
    np.testing.assert_allclose(emb.themes.to_array(), embedder.encode([c.theme for c in space.clusters]), atol=1e-5)


def test_save_load_round_trip(built, tmp_path):
    space, _ = built
    path = save_space(space, tmp_path / "nested" / "space.json")
    assert path.exists()
    assert json.loads(path.read_text())["schema_version"] == FACTOR_SPACE_SCHEMA_VERSION
    loaded = load_space(path)
    assert loaded == space
    np.testing.assert_array_equal(loaded.embeddings.factors.to_array(), space.embeddings.factors.to_array())
    assert not list(path.parent.glob(".*tmp")), "no temp file left behind"


# --------------------------------------------------------------------------- load errors


def _saved(built, tmp_path) -> dict:
    space, _ = built
    return json.loads(save_space(space, tmp_path / "good.json").read_text())


def test_load_missing_file(tmp_path):
    path = tmp_path / "nope.json"
    with pytest.raises(SpaceFileError, match="no such file") as info:
        load_space(path)
    assert str(path) in str(info.value)


def test_load_invalid_json(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"schema_version": 1, "factors": [')
    with pytest.raises(SpaceFileError, match=r"not valid JSON \(line 1"):
        load_space(path)


def test_load_non_object(tmp_path):
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    with pytest.raises(SpaceFileError, match="expected a JSON object"):
        load_space(path)


@pytest.mark.parametrize("version", [0, 2, None, "1"])
def test_load_wrong_schema_version(built, tmp_path, version):
    data = _saved(built, tmp_path)
    if version is None:
        del data["schema_version"]
    else:
        data["schema_version"] = version
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SpaceFileError, match="schema version") as info:
        load_space(path)
    assert repr(version) in str(info.value)


def test_load_dangling_factor_id(built, tmp_path):
    data = _saved(built, tmp_path)
    data["clusters"][0]["factor_ids"].append("f999")
    path = tmp_path / "dangling.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SpaceFileError, match="unknown factors") as info:
        load_space(path)
    assert "f999" in str(info.value)
    assert "Traceback" not in str(info.value)


def test_load_a_directory(tmp_path):
    with pytest.raises(SpaceFileError, match="cannot read"):
        load_space(tmp_path)


def _truncate(data: dict) -> None:
    data["embeddings"]["factors"]["data"] = data["embeddings"]["factors"]["data"][:100]


@pytest.mark.parametrize(("corrupt", "message"), [
    (lambda d: d["embeddings"]["factor_ids"].__setitem__(0, "f999"), r"embeddings reference unknown factors.*f999"),
    (lambda d: d["embeddings"]["factor_ids"].pop(), r"25 factor vector\(s\) for 24 factor id"),
    (lambda d: d["embeddings"]["cluster_ids"].append(99), r"theme vector\(s\) for \d+ cluster id"),
    (_truncate, "factor embeddings cannot be decoded"),
    (lambda d: d["embeddings"]["themes"].__setitem__("data", "!!!"), "theme embeddings cannot be decoded"),
])
def test_load_inconsistent_embeddings(built, tmp_path, corrupt, message):
    data = _saved(built, tmp_path)
    corrupt(data)
    path = tmp_path / "emb.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SpaceFileError, match=message):
        load_space(path)


def test_load_factor_in_two_places(built, tmp_path):
    data = _saved(built, tmp_path)
    data["unclustered"].append(data["clusters"][0]["factor_ids"][0])
    path = tmp_path / "twice.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SpaceFileError, match="more than one cluster"):
        load_space(path)


def test_load_field_error_names_the_field(built, tmp_path):
    data = _saved(built, tmp_path)
    data["factors"][0]["label"] = "maybe"
    path = tmp_path / "label.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SpaceFileError, match=r"factors\.0\.label"):
        load_space(path)


# --------------------------------------------------------------------------- variants


def test_no_cluster_gives_one_flat_group(embedder):
    space, client = build(embedder, script(), cluster=False)
    assert space.clustering.method == "flat"
    assert space.clustering.n_clusters == 1 and space.clustering.n_unclustered == 0
    (cluster,) = space.clusters
    assert cluster.theme == FLAT_THEME
    assert cluster.factor_ids == [f.id for f in space.factors] and cluster.pruned == []
    assert space.unclustered == []
    assert all(f.cluster_id == cluster.id for f in space.factors)
    # No clustering means no theme naming or pruning call.
    assert requests_of(client.backend, "ThemeAndPruning") == []
    assert "themes" not in {c.stage for c in space.cost}
    assert space.embeddings.themes.rows == 1


def test_tiny_space_skips_umap_and_makes_one_themed_cluster(embedder, tmp_path):
    responder = ScriptedLLM(rounds=[["water temperature", "gas price", "food hygiene"]], label=label_of,
                            theme=lambda members: {"theme": "Cooking Trade-offs", "redundant": []})
    client = client_for(responder)
    config = AnchorConfig(build=BuildParams(n_target=3, batch_size=3, max_rounds=2, vote_samples=M))
    space = Anchor(client=client, embedder=embedder, config=config).build(NOODLES)
    assert space.clustering.method == "tiny-fallback"
    assert space.clustering.n_clusters == 1
    (cluster,) = space.clusters
    assert cluster.theme == "Cooking Trade-offs"
    assert cluster.factor_ids == ["f001", "f002", "f003"]
    assert space.unclustered == []
    assert load_space(save_space(space, tmp_path / "tiny.json")) == space


@pytest.mark.parametrize("cluster", [True, False])
def test_empty_space_builds(embedder, tmp_path, cluster):
    responder = ScriptedLLM(rounds=[["123"], ["- 4."], ["guests with dogs"]])  # nothing usable, ever
    space, client = build(embedder, responder, n_target=10, max_rounds=6, patience=3, cluster=cluster)
    assert space.factors == [] and space.clusters == [] and space.unclustered == []
    assert space.stop_reason == StopReason.SATURATED
    assert len(space.rounds) == 3
    assert space.embeddings is None
    assert space.clustering.n_factors == 0 and space.clustering.n_clusters == 0
    assert requests_of(client.backend, "Votes") == []
    assert requests_of(client.backend, "ThemeAndPruning") == []
    assert load_space(save_space(space, tmp_path / "empty.json")) == space
