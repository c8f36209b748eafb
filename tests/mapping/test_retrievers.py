"""Retrieval backends (exact KNN, FAISS flat/HNSW, BM25) behind one interface, on a real-MiniLM space,
and their use in the mapper and the Anchor pipeline (scripted LLM); the probability-estimator client."""

from __future__ import annotations

import numpy as np
import pytest

from anchor.config import AnchorConfig
from anchor.inference.bayes import cbn_posterior, naive_bayes_posterior
from anchor.inference.engine import InferenceEngine
from anchor.mapping.mapper import ConditionMapper, MappingConfig, space_vectors
from anchor.mapping.retrieval import FlatIndex, HierarchicalIndex
from anchor.mapping.retrievers import (
    RETRIEVER_NAMES,
    BM25Retriever,
    FaissRetriever,
    Items,
    KNNRetriever,
    Queries,
    Retriever,
    make_retriever,
    simple_tokens,
)
from anchor.pipeline import Anchor
from anchor.types import InferenceResult, MappingTrace
from tests.helpers import ScriptedLLM, kind, requests_of, section

CLUSTERS = [
    ("Water Temperature", ["water temperature", "boiling point of water", "heat transfer rate",
                           "starch gelatinization speed"]),
    ("Food Safety", ["killing bacteria in the pot", "foodborne pathogens", "hygiene of the kitchen"]),
    ("Energy Cost", ["electricity bill", "gas price", "stove efficiency", "fuel consumption"]),
    ("Noodle Texture", ["noodle texture", "mushy overcooked pasta", "chewiness of the strands"]),
]
LOOSE = ["altitude of the kitchen", "cooking time"]
ALL_TEXTS = [t for _, members in CLUSTERS for t in members] + LOOSE
CONDITIONS = [
    "The water is brought to a rolling boil.",
    "The gas price doubled this winter.",
    "Bacteria thrive when the water temperature is low.",
    "The noodles turned soft and sticky.",
    "You are cooking on a mountain top.",
    "A cat sleeps on the sofa.",
]


@pytest.fixture(scope="module")
def kitchen(embedder):
    from tests.conftest import build_space

    space = build_space(embedder, CLUSTERS, LOOSE)
    factor_vecs, theme_vecs = space_vectors(space, embedder)
    return space, factor_vecs, theme_vecs, embedder.encode(CONDITIONS)


def id_of(space, text: str) -> str:
    return next(f.id for f in space.factors if f.text == text)


def summary(hits) -> tuple[list[int], list[str]]:
    clusters, candidates = hits
    return [h.cluster_id for h in clusters], [c.factor_id for c in candidates]


# --------------------------------------------------------------------------- exact KNN vs scikit-learn


def _unit(m: np.ndarray) -> np.ndarray:
    return m / np.linalg.norm(m, axis=1, keepdims=True)  # as MiniLM's vectors are


#: scikit-learn's expansion |x|^2 - 2 x.q + |q|^2 leaves a zero distance at sqrt(1e-16) = 1e-8.
_ATOL = 1e-7


def _sklearn_ranking(items: np.ndarray, queries: np.ndarray, metric: str, k: int) -> list[list[tuple[int, float]]]:
    """What KNNRetriever returned when it used scikit-learn: kneighbors, re-sorted stably by distance."""
    from sklearn.neighbors import NearestNeighbors

    index = NearestNeighbors(metric=metric, algorithm="brute").fit(items)
    dist, idx = index.kneighbors(queries, n_neighbors=min(k, len(items)))
    out = []
    for d, i in zip(dist, idx, strict=True):
        order = np.argsort(d, kind="stable")
        out.append([(int(i[o]), float(d[o])) for o in order])
    return out


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_exact_knn_gives_scikit_learns_neighbours_in_its_order(metric):
    rng = np.random.default_rng(7)
    for _ in range(30):
        n = int(rng.integers(1, 80))
        items = _unit(rng.normal(size=(n, 384)))
        queries = np.vstack([_unit(rng.normal(size=(3, 384))), items[rng.integers(0, n, size=2)]])
        k = int(rng.integers(1, n + 3))
        ours = KNNRetriever().build([Items([""] * n, items)], metric).search(0, Queries(vectors=queries), k)
        theirs = _sklearn_ranking(items, queries, metric, k)
        for mine, ref in zip(ours, theirs, strict=True):
            assert [i for i, _ in mine] == [i for i, _ in ref]
            assert np.allclose([d for _, d in mine], [d for _, d in ref], atol=_ATOL)


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_exact_knn_orders_tied_items_by_position(metric):
    """Equal vectors are tied: ours at exactly the same distance, in item order. scikit-learn finds the
    same distances (up to 1e-7: its product expansion leaves copies 1e-8 apart) and the same items,
    but orders a tie as its heap leaves it."""
    rng = np.random.default_rng(3)
    for _ in range(30):
        base = _unit(rng.normal(size=(int(rng.integers(1, 6)), 384)))
        n = int(rng.integers(2, 40))
        items = base[rng.integers(0, len(base), size=n)]  # many exact copies
        queries = np.vstack([rng.normal(size=(2, 384)), base[:1]])
        ours = KNNRetriever().build([Items([""] * n, items)], metric).search(0, Queries(vectors=queries), n)
        theirs = _sklearn_ranking(items, queries, metric, n)
        for mine, ref in zip(ours, theirs, strict=True):
            assert np.allclose([d for _, d in mine], [d for _, d in ref], atol=_ATOL)
            runs: dict[float, list[int]] = {}
            for i, d in mine:
                runs.setdefault(d, []).append(i)
            assert all(idx == sorted(idx) for idx in runs.values())  # a tie in position order
            assert sum(len(r) for r in runs.values()) == n and len(runs) <= len(base)  # copies: same distance
            assert sorted(i for i, _ in mine) == sorted(i for i, _ in ref) == list(range(n))
    # A tie at the cut: the first items by position are kept.
    items = np.vstack([np.ones(384), np.ones(384), np.zeros(384), np.ones(384)])
    (ranked,) = KNNRetriever().build([Items([""] * 4, items)], metric).search(0, Queries(vectors=np.ones((1, 384))), 2)
    assert [i for i, _ in ranked] == [0, 1] and ranked[0][1] == ranked[1][1] == 0.0


# --------------------------------------------------------------------------- exact vs FAISS


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
@pytest.mark.parametrize("k1k2", [(2, 3), (3, 5), (4, 8)])
def test_faiss_flat_agrees_with_exact_knn(kitchen, metric, k1k2):
    space, fvec, tvec, queries = kitchen
    k1, k2 = k1k2
    knn = HierarchicalIndex(space, fvec, tvec, k1=k1, k2=k2, metric=metric)
    faiss = HierarchicalIndex(space, fvec, tvec, k1=k1, k2=k2, metric=metric, retriever=FaissRetriever("flat"))
    flat_knn = FlatIndex(space, fvec, k1=k1, k2=k2, metric=metric)
    flat_faiss = FlatIndex(space, fvec, k1=k1, k2=k2, metric=metric, retriever=FaissRetriever("flat"))
    for expected_index, got_index in ((knn, faiss), (flat_knn, flat_faiss)):
        for expected, got in zip(expected_index.query_many(queries), got_index.query_many(queries), strict=True):
            assert summary(got) == summary(expected)
            assert [c.source for c in got[1]] == [c.source for c in expected[1]]
            assert [c.distance for c in got[1]] == pytest.approx([c.distance for c in expected[1]], abs=1e-5)
            assert [h.distance for h in got[0]] == pytest.approx([h.distance for h in expected[0]], abs=1e-5)


def test_faiss_distances_are_true_distances(kitchen):
    space, fvec, tvec, queries = kitchen
    q = queries[0]
    for metric, distance in (("euclidean", lambda v: float(np.linalg.norm(v - q))),
                             ("cosine", lambda v: 1.0 - float(v @ q / np.linalg.norm(v) / np.linalg.norm(q)))):
        for index_kind in ("flat", "hnsw"):
            retriever = FaissRetriever(index_kind)  # type: ignore[arg-type]
            _, candidates = FlatIndex(space, fvec, k=100, metric=metric, retriever=retriever).query(q)
            assert len(candidates) == len(ALL_TEXTS)
            for cand in candidates:
                assert cand.distance == pytest.approx(distance(fvec[cand.factor_id].astype(np.float64)), abs=1e-5)


def test_hnsw_is_exact_on_small_groups(kitchen):
    space, fvec, tvec, queries = kitchen
    knn = HierarchicalIndex(space, fvec, tvec)
    hnsw = HierarchicalIndex(space, fvec, tvec, retriever=FaissRetriever("hnsw"))
    for expected, got in zip(knn.query_many(queries), hnsw.query_many(queries), strict=True):
        assert summary(got) == summary(expected)


def test_hnsw_recall_on_a_larger_collection():
    rng = np.random.default_rng(7)
    centres = rng.normal(size=(40, 64))
    data = centres[rng.integers(0, 40, size=3000)] + 0.3 * rng.normal(size=(3000, 64))
    queries = centres[rng.integers(0, 40, size=50)] + 0.3 * rng.normal(size=(50, 64))
    items = [Items([f"item {i}" for i in range(len(data))], data)]
    exact = KNNRetriever().build(items, "euclidean").search(0, Queries(vectors=queries), 10)
    approx = FaissRetriever("hnsw").build(items, "euclidean").search(0, Queries(vectors=queries), 10)
    recall = np.mean([len({i for i, _ in a} & {i for i, _ in e}) / 10 for a, e in zip(approx, exact, strict=True)])
    assert recall >= 0.9
    # An exact FAISS index finds exactly the same neighbours.
    flat = FaissRetriever("flat").build(items, "euclidean").search(0, Queries(vectors=queries), 10)
    assert [[i for i, _ in r] for r in flat] == [[i for i, _ in r] for r in exact]


# --------------------------------------------------------------------------- BM25


def test_tokens_drop_stop_words_and_fold_plurals():
    stop = BM25Retriever().stop_words
    assert simple_tokens("The noodles' temperatures, at the Gas-price!", stop) == [
        "noodle", "temperature", "gas", "price"]
    assert simple_tokens("glass bus analysis boss", stop) == ["glass", "bus", "analysis", "boss"]


def test_bm25_returns_lexical_matches_only_best_first(kitchen):
    space, fvec, tvec, _ = kitchen
    flat = FlatIndex(space, fvec, retriever=BM25Retriever())
    condition = "Bacteria thrive when the water temperature is low."
    _, candidates = flat.query(text=condition)
    # Matching words: bacteria, water, temperature. "water temperature" matches two of them; of the
    # two three-word documents matching one word, the one with the rarer word (bacteria: one
    # document, water: two) scores higher.
    assert [c.text for c in candidates] == ["water temperature", "killing bacteria in the pot",
                                            "boiling point of water"]
    scores = [-c.distance for c in candidates]
    assert scores[0] > scores[1] > scores[2] > 0

    _, candidates = flat.query(text="The gas price doubled this winter.")
    assert [c.text for c in candidates] == ["gas price"]


def test_bm25_coarse_level_ranks_clusters_by_theme_and_members(kitchen):
    space, fvec, tvec, _ = kitchen
    index = HierarchicalIndex(space, fvec, tvec, retriever=BM25Retriever())
    hits, candidates = index.query(text="Bacteria thrive when the water temperature is low.")
    # Only two clusters share a word with the condition; the water-temperature one shares the most.
    assert [h.theme for h in hits] == ["Water Temperature", "Food Safety"]
    assert [c.text for c in candidates] == ["water temperature", "boiling point of water",
                                            "killing bacteria in the pot"]
    assert [c.source for c in candidates] == ["cluster:0", "cluster:0", "cluster:1"]  # grouped by cluster
    # Unclustered factors are searched lexically too.
    hits, candidates = index.query(text="How long is the cooking time at this altitude?")
    # "cooking time" matches two words, "altitude of the kitchen" one; no cluster matches at all.
    assert [c.text for c in candidates] == ["cooking time", "altitude of the kitchen"]
    assert {c.source for c in candidates} == {"unclustered"}
    assert [h.theme for h in hits] == []


def test_bm25_no_overlap_means_no_candidates(kitchen):
    space, fvec, tvec, _ = kitchen
    for index in (HierarchicalIndex(space, fvec, tvec, retriever=BM25Retriever()),
                  FlatIndex(space, fvec, retriever=BM25Retriever())):
        assert index.query(text="A cat sleeps on the sofa.") == ([], [])


def test_bm25_needs_the_text_and_vector_backends_need_the_vector(kitchen):
    space, fvec, tvec, queries = kitchen
    with pytest.raises(ValueError, match="text"):
        HierarchicalIndex(space, fvec, tvec, retriever=BM25Retriever()).query(queries[0])
    with pytest.raises(ValueError, match="vector"):
        HierarchicalIndex(space, fvec, tvec).query(text="water")
    with pytest.raises(ValueError, match="one per query"):
        FlatIndex(space, fvec, retriever=BM25Retriever()).query_many(texts="water")
    with pytest.raises(ValueError, match="2 query vectors but 1 query texts"):
        FlatIndex(space, fvec).query_many(queries[:2], ["water"])


@pytest.mark.parametrize("variant", ["okapi", "l", "plus"])
def test_bm25_variants_rank_the_two_word_match_first(kitchen, variant):
    space, fvec, tvec, _ = kitchen
    _, candidates = FlatIndex(space, fvec, retriever=BM25Retriever(variant=variant)).query(
        text="Bacteria thrive when the water temperature is low.")
    assert candidates[0].text == "water temperature"
    assert {c.text for c in candidates} == {"water temperature", "boiling point of water",
                                            "killing bacteria in the pot"}


# --------------------------------------------------------------------------- K1 / K2, every backend


@pytest.mark.parametrize("name", RETRIEVER_NAMES)
@pytest.mark.parametrize(("k1", "k2"), [(1, 1), (2, 3), (3, 2), (4, 8)])
def test_k1_and_k2_are_respected_by_every_backend(kitchen, embedder, name, k1, k2):
    space, fvec, tvec, _ = kitchen
    # Every factor shares a word with this condition, so the lexical backend can fill the budget too.
    condition = " ".join(ALL_TEXTS)
    vector = embedder.encode([condition])[0]
    sizes = {cid: len(members) for cid, (_, members) in enumerate(CLUSTERS)}
    hits, candidates = HierarchicalIndex(space, fvec, tvec, k1=k1, k2=k2, retriever=make_retriever(name)).query(
        vector, text=condition)
    assert len(hits) == min(k1, len(CLUSTERS))
    by_source: dict[str, int] = {}
    for cand in candidates:
        by_source[cand.source] = by_source.get(cand.source, 0) + 1
    assert by_source == {**{f"cluster:{h.cluster_id}": min(k2, sizes[h.cluster_id]) for h in hits},
                         "unclustered": min(k2, len(LOOSE))}
    _, flat = FlatIndex(space, fvec, k1=k1, k2=k2, retriever=make_retriever(name)).query(vector, text=condition)
    assert len(flat) == min(k1 * k2 + k2, len(ALL_TEXTS))


def test_make_retriever_and_bad_settings():
    assert [make_retriever(n).name for n in RETRIEVER_NAMES] == list(RETRIEVER_NAMES)
    assert all(isinstance(make_retriever(n), Retriever) for n in RETRIEVER_NAMES)
    with pytest.raises(ValueError, match="unknown retriever 'annoy'; choose from knn, faiss-flat"):
        make_retriever("annoy")
    with pytest.raises(ValueError, match="kind"):
        FaissRetriever("ivf")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="hnsw_m"):
        FaissRetriever("hnsw", hnsw_m=0)
    with pytest.raises(ValueError, match="variant"):
        BM25Retriever(variant="bm11")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="b must"):
        BM25Retriever(b=1.5)


def test_index_rejects_a_non_retriever(kitchen):
    space, fvec, tvec, _ = kitchen
    with pytest.raises(ValueError, match="retriever must be a Retriever"):
        HierarchicalIndex(space, fvec, tvec, retriever="knn")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- in the mapper and the pipeline

GAS = "The gas price doubled this winter."


@pytest.mark.parametrize("name", RETRIEVER_NAMES)
async def test_retrievers_are_interchangeable_in_the_mapper(scripted_client, embedder, kitchen, name):
    space = kitchen[0]
    script = ScriptedLLM(select=lambda condition, shown: [t for t in shown if t == "gas price"])
    client = scripted_client(script)
    mapper = ConditionMapper(client, embedder, space, MappingConfig(k1=2, k2=3), retriever=make_retriever(name))
    trace = await mapper.map(GAS)
    assert trace.retriever == name
    assert trace.mapped == [id_of(space, "gas price")]
    # The LLM was shown exactly the backend's candidates.
    shown = [section(r.user, "Candidate factors:") for r in requests_of(client.backend, "Selection")]
    assert shown == [[c.text for c in trace.candidates]] * 3
    if name == "bm25":
        assert [c.text for c in trace.candidates] == ["gas price"]
    else:
        assert "Energy Cost" in [h.theme for h in trace.clusters]


@pytest.mark.parametrize("name", RETRIEVER_NAMES)
async def test_anchor_takes_the_retriever_as_a_constructor_choice(scripted_client, embedder, kitchen, name):
    space = kitchen[0]
    script = ScriptedLLM(select=lambda condition, shown: [t for t in shown if t == "gas price"],
                         phi=lambda text: 0.3, latent_params=lambda line: (0.4, 0.7))
    anchor = Anchor(client=scripted_client(script), embedder=embedder, retriever=make_retriever(name),
                    config=AnchorConfig())  # the paper's rule, whose arithmetic is checked below
    result = await anchor.ainfer_one(space, GAS)
    assert result.mapping is not None and result.mapping.retriever == name
    assert [f.text for f in result.factors] == ["gas price"]
    nb = naive_bayes_posterior([0.3])
    cbn = cbn_posterior([0.3], [0], [(0.4, 0.7)])
    assert result.nb == pytest.approx(nb) and result.cbn == pytest.approx(cbn)
    assert result.p_outcome1 == pytest.approx(0.5 * nb + 0.5 * cbn)


async def test_estimator_client_elicits_phi_and_latent_parameters_only(scripted_client, kitchen):
    space = kitchen[0]
    texts = ["water temperature", "gas price"]
    main = scripted_client(ScriptedLLM(phi=lambda t: 0.9, latent_params=lambda line: (0.9, 0.1)))
    estimator = scripted_client(ScriptedLLM(phi={"water temperature": 0.6, "gas price": 0.25}.get,
                                            latent_params=lambda line: (0.3, 0.6)))
    trace = MappingTrace(condition="c", retrieval="hierarchical", mapped=[id_of(space, t) for t in texts])
    engine = InferenceEngine(main, space, estimator=estimator)
    result = await engine.infer(trace, InferenceResult(condition="c", p_outcome1=None, p_outcome2=None, unknown=False))

    assert [f.phi for f in result.factors] == [0.6, 0.25]
    assert [(lat.p_given_o1, lat.p_given_o2) for lat in result.latents] == [(0.3, 0.6)]
    assert result.nb == pytest.approx(naive_bayes_posterior([0.6, 0.25]))
    assert result.cbn == pytest.approx(cbn_posterior([0.6, 0.25], [0, 0], [(0.3, 0.6)]))
    assert [kind(r) for r in main.backend.requests] == ["LatentPartition"]
    assert sorted(kind(r) for r in estimator.backend.requests) == ["FactorProbabilities", "LatentParams"]
