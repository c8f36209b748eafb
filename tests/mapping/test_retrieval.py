"""Stage 2 candidate retrieval on hand-built geometry where the right answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from anchor.mapping.retrieval import CandidateIndex, FlatIndex, HierarchicalIndex, cluster_prototypes
from anchor.settings.space import BuildParams
from anchor.types import (
    Cluster,
    ClusteringStats,
    EmbeddingMatrix,
    Factor,
    FactorSpace,
    LLMIdentity,
    PrunedFactor,
    Scenario,
    SpaceEmbeddings,
    StopReason,
)

DIM = 4


def make_space(
    clusters: dict[int, list[str]], unclustered: list[str], pruned: dict[int, list[str]] | None = None
) -> FactorSpace:
    pruned = pruned or {}
    ids = [fid for members in clusters.values() for fid in members] + list(unclustered)
    ids += [fid for gone in pruned.values() for fid in gone]
    return FactorSpace(
        scenario=Scenario(text="A test scenario.", outcome1="It happens.", outcome2="It does not happen."),
        factors=[Factor(id=fid, text=f"text of {fid}") for fid in ids],
        clusters=[
            Cluster(id=cid, theme=f"theme {cid}", factor_ids=members,
                    pruned=[PrunedFactor(factor_id=f, text=f"text of {f}", reason="redundant")
                            for f in pruned.get(cid, [])])
            for cid, members in clusters.items()
        ],
        unclustered=unclustered,
        stop_reason=StopReason.TARGET_REACHED,
        params=BuildParams(),
        clustering=ClusteringStats(method="umap+hdbscan", n_factors=len(ids), n_clusters=len(clusters),
                                   n_unclustered=len(unclustered)),
        llm=LLMIdentity(backend="test", model="none"),
        embedding_model="test",
    )


@pytest.fixture
def line_space() -> tuple[FactorSpace, dict[str, np.ndarray], dict[int, np.ndarray]]:
    """Five clusters of six factors strung along the first axis at x = 0, 10, 20, 30, 40.

    Member m of cluster c sits at (10c, m, 0, 0), m = 0..5; the theme of cluster c at (10c, 0, 0, 0).
    Two unclustered factors sit far away at x = 100. One pruned factor per cluster sits exactly
    at (10c, 0, 0, 0), i.e. on top of any query aimed at that cluster.
    """
    clusters = {c: [f"f{10 * c + m + 1}" for m in range(6)] for c in range(5)}
    unclustered = ["f901", "f902"]
    pruned = {c: [f"f{500 + c}"] for c in range(5)}
    space = make_space(clusters, unclustered, pruned)
    vectors: dict[str, np.ndarray] = {}
    for c, members in clusters.items():
        for m, fid in enumerate(members):
            vectors[fid] = np.array([10.0 * c, float(m), 0.0, 0.0])
        vectors[pruned[c][0]] = np.array([10.0 * c, 0.0, 0.0, 0.0])
    vectors["f901"] = np.array([100.0, 0.0, 0.0, 0.0])
    vectors["f902"] = np.array([100.0, 5.0, 0.0, 0.0])
    themes = {c: np.array([10.0 * c, 0.0, 0.0, 0.0]) for c in clusters}
    return space, vectors, themes


# --------------------------------------------------------------------------- prototypes


def test_prototype_formula_by_hand() -> None:
    themes = np.array([[1.0, 0.0], [0.0, 0.0]])
    members = [np.array([[0.0, 1.0], [0.0, 3.0]]), np.array([4.0, 2.0])]  # a single vector is one member
    # Cluster 0: 0.5 * (1, 0) + 0.5 * mean((0, 1), (0, 3)) = (0.5, 1.0); cluster 1: 0.5 * (4, 2).
    assert np.allclose(cluster_prototypes(themes, members), [[0.5, 1.0], [2.0, 1.0]])
    # alpha = 0.25: 0.25 * (1, 0) + 0.75 * (0, 2) = (0.25, 1.5).
    assert np.allclose(cluster_prototypes(themes, members, alpha=0.25)[0], [0.25, 1.5])
    assert np.allclose(cluster_prototypes(themes, members, alpha=1.0), themes)
    assert np.allclose(cluster_prototypes(themes, members, alpha=0.0), [[0.0, 2.0], [4.0, 2.0]])


@pytest.mark.parametrize("alpha", [-0.1, 1.01, float("nan")])
def test_prototype_rejects_alpha_outside_unit_interval(alpha: float) -> None:
    with pytest.raises(ValueError, match="alpha"):
        cluster_prototypes(np.zeros((1, 2)), [np.ones((1, 2))], alpha=alpha)


def test_prototype_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError):
        cluster_prototypes(np.zeros((2, 2)), [np.ones((1, 2))])  # one member group for two themes
    with pytest.raises(ValueError):
        cluster_prototypes(np.zeros((1, 2)), [np.ones((0, 2))])  # empty cluster
    with pytest.raises(ValueError):
        cluster_prototypes(np.zeros((1, 2)), [np.ones((1, 3))])  # dimension mismatch


def test_index_prototypes_follow_the_formula(line_space) -> None:
    space, vectors, themes = line_space
    index = HierarchicalIndex(space, vectors, themes, alpha=0.5)
    # Members of cluster c have mean (10c, 2.5, 0, 0); the theme is (10c, 0, 0, 0).
    expected = np.array([[10.0 * c, 1.25, 0.0, 0.0] for c in range(5)])
    assert np.allclose(index.prototypes, expected)


# --------------------------------------------------------------------------- hierarchical search


def test_coarse_to_fine_picks_nearest_clusters_then_nearest_members(line_space) -> None:
    space, vectors, themes = line_space
    index = HierarchicalIndex(space, vectors, themes)  # K1 = 3, K2 = 5
    assert isinstance(index, CandidateIndex) and index.kind == "hierarchical"
    query = np.array([1.0, 0.0, 0.0, 0.0])
    hits, candidates = index.query(query)

    # Prototypes at x = 0, 10, 20 are nearest, in that order.
    assert [h.cluster_id for h in hits] == [0, 1, 2]
    assert [h.theme for h in hits] == ["theme 0", "theme 1", "theme 2"]
    assert hits[0].distance == pytest.approx(np.hypot(1.0, 1.25))
    assert [h.distance for h in hits] == sorted(h.distance for h in hits)

    by_source: dict[str, list] = {}
    for cand in candidates:
        by_source.setdefault(cand.source, []).append(cand)
    assert list(by_source) == ["cluster:0", "cluster:1", "cluster:2", "unclustered"]
    # In each selected cluster the five members with m = 0..4 win; m = 5 is the farthest.
    for c in range(3):
        got = by_source[f"cluster:{c}"]
        assert [r.factor_id for r in got] == [f"f{10 * c + m + 1}" for m in range(5)]
        for r, m in zip(got, range(5), strict=True):
            assert r.distance == pytest.approx(np.hypot(10.0 * c - 1.0, m))
            assert r.text == f"text of {r.factor_id}"
    # Unclustered factors come along even though they are far away (only two exist: K2 clamps).
    assert [r.factor_id for r in by_source["unclustered"]] == ["f901", "f902"]
    assert by_source["unclustered"][0].distance == pytest.approx(99.0)
    assert len(candidates) == 3 * 5 + 2
    assert len({c.factor_id for c in candidates}) == len(candidates)


def test_query_from_the_other_end(line_space) -> None:
    space, vectors, themes = line_space
    hits, candidates = HierarchicalIndex(space, vectors, themes).query(np.array([41.0, 0.0, 0.0, 0.0]))
    assert [h.cluster_id for h in hits] == [4, 3, 2]
    sources = {c.source for c in candidates}
    assert sources == {"cluster:4", "cluster:3", "cluster:2", "unclustered"}
    assert not any(c.factor_id in {f"f{m + 1}" for m in range(6)} for c in candidates)  # cluster 0 untouched


def test_distances_ascend_within_each_group(line_space) -> None:
    space, vectors, themes = line_space
    index = HierarchicalIndex(space, vectors, themes)
    rng = np.random.default_rng(0)
    for query in rng.normal(scale=30.0, size=(20, DIM)):
        _, candidates = index.query(query)
        groups: dict[str, list[float]] = {}
        for cand in candidates:
            groups.setdefault(cand.source, []).append(cand.distance)
            assert cand.distance == pytest.approx(float(np.linalg.norm(vectors[cand.factor_id] - query)))
        for dists in groups.values():
            assert dists == sorted(dists)


def test_pruned_factors_are_never_returned(line_space) -> None:
    space, vectors, themes = line_space
    pruned_ids = {f"f{500 + c}" for c in range(5)}
    hier = HierarchicalIndex(space, vectors, themes, k1=10, k2=100)
    flat = FlatIndex(space, vectors, k=1000)
    for c in range(5):
        query = vectors[f"f{500 + c}"]  # aimed exactly at a pruned factor
        for index in (hier, flat):
            _, candidates = index.query(query)
            assert not pruned_ids & {cand.factor_id for cand in candidates}
    assert hier.n_searchable == flat.n_searchable == 32


def test_k_is_clamped_to_what_exists(line_space) -> None:
    space, vectors, themes = line_space
    hits, candidates = HierarchicalIndex(space, vectors, themes, k1=10, k2=100).query(np.zeros(DIM))
    assert len(hits) == 5
    assert len(candidates) == 32  # every searchable factor, each once
    hits, candidates = HierarchicalIndex(space, vectors, themes, k1=1, k2=2).query(np.zeros(DIM))
    assert [h.cluster_id for h in hits] == [0]
    assert [c.factor_id for c in candidates] == ["f1", "f2", "f901", "f902"]


@pytest.mark.parametrize("bad", [{"k1": 0}, {"k2": 0}, {"metric": "manhattan"}, {"alpha": 2.0}])
def test_invalid_settings_are_rejected(line_space, bad: dict) -> None:
    space, vectors, themes = line_space
    with pytest.raises(ValueError):
        HierarchicalIndex(space, vectors, themes, **bad)


def test_missing_vectors_are_reported(line_space) -> None:
    space, vectors, themes = line_space
    with pytest.raises(ValueError, match="f3"):
        HierarchicalIndex(space, {k: v for k, v in vectors.items() if k != "f3"}, themes)
    with pytest.raises(ValueError, match="theme"):
        HierarchicalIndex(space, vectors, {k: v for k, v in themes.items() if k != 2})
    # Pruned factors need no vector at all.
    kept = {k: v for k, v in vectors.items() if not k.startswith("f50")}
    HierarchicalIndex(space, kept, themes)


def test_bad_queries_are_rejected(line_space) -> None:
    space, vectors, themes = line_space
    index = HierarchicalIndex(space, vectors, themes)
    with pytest.raises(ValueError, match="dimension"):
        index.query(np.zeros(DIM + 1))
    with pytest.raises(ValueError, match="NaN"):
        index.query(np.array([np.nan, 0.0, 0.0, 0.0]))


def test_empty_and_unclustered_only_spaces() -> None:
    empty = make_space({}, [])
    assert HierarchicalIndex(empty, {}, {}).query(np.zeros(DIM)) == ([], [])
    assert FlatIndex(empty, {}).query(np.zeros(DIM)) == ([], [])

    loose = make_space({}, ["f1", "f2", "f3"])
    vectors = {"f1": np.array([3.0, 0, 0, 0]), "f2": np.array([1.0, 0, 0, 0]), "f3": np.array([2.0, 0, 0, 0])}
    hits, candidates = HierarchicalIndex(loose, vectors, {}).query(np.zeros(DIM))
    assert hits == []
    assert [(c.factor_id, c.source, c.distance) for c in candidates] == [
        ("f2", "unclustered", 1.0), ("f3", "unclustered", 2.0), ("f1", "unclustered", 3.0)]


def test_cluster_with_every_member_pruned_is_skipped() -> None:
    space = make_space({0: ["f1", "f2"], 1: []}, [], pruned={1: ["f3"]})
    vectors = {"f1": np.array([0.0, 0, 0, 0]), "f2": np.array([1.0, 0, 0, 0])}
    index = HierarchicalIndex(space, vectors, {0: np.zeros(DIM)})  # cluster 1 needs no theme vector
    assert index.skipped_clusters == [1]
    hits, candidates = index.query(np.zeros(DIM))
    assert [h.cluster_id for h in hits] == [0]
    assert [c.factor_id for c in candidates] == ["f1", "f2"]


def test_cosine_metric(line_space) -> None:
    space, vectors, themes = line_space
    index = HierarchicalIndex(space, vectors, themes, metric="cosine", k1=5, k2=6)
    query = np.array([0.0, 1.0, 0.0, 0.0])
    _, candidates = index.query(query)
    got = {c.factor_id: c.distance for c in candidates}
    # f3 = (0, 2, 0, 0) points the same way as the query: cosine distance 0.
    assert got["f3"] == pytest.approx(0.0, abs=1e-12)
    # f12 = (10, 1, 0, 0): 1 - 1 / sqrt(101).
    assert got["f12"] == pytest.approx(1.0 - 1.0 / np.sqrt(101.0))
    assert all(0.0 <= d <= 2.0 for d in got.values())


def test_query_many_matches_single_queries(line_space) -> None:
    space, vectors, themes = line_space
    rng = np.random.default_rng(1)
    queries = rng.normal(scale=25.0, size=(12, DIM))
    for index in (HierarchicalIndex(space, vectors, themes), FlatIndex(space, vectors)):
        assert index.query_many(queries) == [index.query(q) for q in queries]
        assert index.query_many(np.zeros((0, DIM))) == []


def test_from_space_uses_stored_embeddings(line_space) -> None:
    space, vectors, themes = line_space
    ids = sorted(vectors)
    cids = sorted(themes)
    space.embeddings = SpaceEmbeddings(
        factor_ids=ids,
        factors=EmbeddingMatrix.from_array("test", np.array([vectors[i] for i in ids])),
        cluster_ids=cids,
        themes=EmbeddingMatrix.from_array("test", np.array([themes[c] for c in cids])),
    )
    query = np.array([12.0, 3.0, 0.0, 0.0])
    expected = HierarchicalIndex(space, vectors, themes).query(query)
    assert HierarchicalIndex.from_space(space).query(query) == expected
    assert FlatIndex.from_space(space).query(query) == FlatIndex(space, vectors).query(query)


# --------------------------------------------------------------------------- flat ablation


def test_flat_index_budget_and_order(line_space) -> None:
    space, vectors, themes = line_space
    flat = FlatIndex(space, vectors)
    assert flat.kind == "flat" and flat.k == 3 * 5 + 5
    query = np.array([14.0, 2.0, 0.0, 0.0])
    hits, candidates = flat.query(query)
    assert hits == []
    assert len(candidates) == 20
    assert {c.source for c in candidates} == {"flat"}
    dists = [c.distance for c in candidates]
    assert dists == sorted(dists)
    # The 20 nearest searchable factors by brute force.
    searchable = space.active_factor_ids()
    brute = sorted(searchable, key=lambda f: float(np.linalg.norm(vectors[f] - query)))
    assert dists == pytest.approx(sorted(float(np.linalg.norm(vectors[f] - query)) for f in brute[:20]))
    assert set(c.factor_id for c in candidates) <= set(searchable)

    assert len(FlatIndex(space, vectors, k1=2, k2=3).query(query)[1]) == 2 * 3 + 3
    assert len(FlatIndex(space, vectors, k=7).query(query)[1]) == 7
    assert len(FlatIndex(space, vectors, k=500).query(query)[1]) == 32  # clamped


def test_hierarchical_budget_never_exceeds_flat_default(line_space) -> None:
    space, vectors, themes = line_space
    hier, flat = HierarchicalIndex(space, vectors, themes), FlatIndex(space, vectors)
    for query in np.random.default_rng(2).normal(scale=30.0, size=(10, DIM)):
        assert len(hier.query(query)[1]) <= flat.k
