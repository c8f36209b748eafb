"""Stage 1 "structure": parameter formulas, edge cases, and one real UMAP + HDBSCAN run.

Only the module-scoped ``real_runs`` fixture calls UMAP; its first fit pays numba's compilation
(10-15 s per process), so every real-UMAP assertion reads from that one fixture.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from anchor.space.structure import (
    Clusterer,
    ClusteringResult,
    HDBSCANClusterer,
    Reducer,
    UMAPParams,
    UMAPReducer,
    cluster_embeddings,
    hdbscan_min_cluster_size,
    umap_params,
)

DIM = 384


def unit_rows(X: np.ndarray) -> np.ndarray:
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def blobs(n_per: int, n_blobs: int, seed: int, spread: float = 0.02) -> tuple[np.ndarray, np.ndarray]:
    """Well separated unit vectors: random unit centres, small isotropic noise, renormalised."""
    rng = np.random.default_rng(seed)
    centres = unit_rows(rng.normal(size=(n_blobs, DIM)))
    truth = np.repeat(np.arange(n_blobs), n_per)
    X = centres[truth] + spread * rng.normal(size=(truth.size, DIM))
    return unit_rows(X), truth


# --------------------------------------------------------------------------- formulas


@pytest.mark.parametrize(
    ("n", "components", "neighbors", "min_size"),
    [
        # n=3: max(10, 0) = 10 components; min(15, 2) = 2 neighbours; max(2, 0) = 2.
        (3, 10, 2, 2),
        # n=20: max(10, 4) = 10; min(15, 19) = 15; max(2, 1) = 2.
        (20, 10, 15, 2),
        # n=80: max(10, 16) = 16; 15; max(2, 4) = 4.
        (80, 16, 15, 4),
        # n=400: min(50, 80) = 50; 15; max(2, 20) = 20.
        (400, 50, 15, 20),
    ],
)
def test_paper_formulas(n: int, components: int, neighbors: int, min_size: int) -> None:
    assert umap_params(n) == UMAPParams(n_components=components, n_neighbors=neighbors)
    assert hdbscan_min_cluster_size(n) == min_size


def test_formulas_reject_negative_sizes() -> None:
    with pytest.raises(ValueError):
        umap_params(-1)
    with pytest.raises(ValueError):
        hdbscan_min_cluster_size(-1)


@pytest.mark.parametrize(
    ("n", "components", "neighbors", "clamped"),
    [
        (5, 3, 4, True),
        (8, 6, 7, True),
        (11, 9, 10, True),  # formula says 10, spectral init allows at most n - 2 = 9
        (12, 10, 11, False),  # first size where the paper's floor of 10 fits
        (20, 10, 15, False),
        (80, 16, 15, False),
    ],
)
def test_umap_reducer_clamps_components_for_small_n(
    n: int, components: int, neighbors: int, clamped: bool
) -> None:
    params, was_clamped = UMAPReducer().resolve(n)
    assert params == UMAPParams(n_components=components, n_neighbors=neighbors)
    assert was_clamped is clamped


def test_umap_reducer_clamps_explicit_settings_too() -> None:
    params, clamped = UMAPReducer(n_components=30, n_neighbors=50).resolve(10)
    assert params == UMAPParams(n_components=8, n_neighbors=9)
    assert clamped
    with pytest.raises(ValueError):
        UMAPReducer().resolve(4)


def test_hdbscan_clusterer_uses_formula_unless_given() -> None:
    assert HDBSCANClusterer().resolve(80) == 4
    assert HDBSCANClusterer(min_cluster_size=7).resolve(80) == 7
    with pytest.raises(ValueError):
        HDBSCANClusterer(min_cluster_size=1)


def test_default_parts_satisfy_protocols() -> None:
    assert isinstance(UMAPReducer(), Reducer)
    assert isinstance(HDBSCANClusterer(), Clusterer)


# --------------------------------------------------------------------------- edge cases (no UMAP)


@pytest.mark.parametrize("n", [1, 2, 4])
def test_tiny_sets_fall_back_to_one_cluster(n: int) -> None:
    X = unit_rows(np.random.default_rng(n).normal(size=(n, DIM)))
    result = cluster_embeddings(X, seed=3)
    assert isinstance(result, ClusteringResult)
    assert result.labels.tolist() == [0] * n
    s = result.stats
    assert (s.method, s.n_factors, s.n_clusters, s.n_unclustered) == ("tiny-fallback", n, 1, 0)
    assert s.umap_n_components is None and s.silhouette is None
    assert s.seed == 3
    assert "one cluster" in s.note


@pytest.mark.parametrize("empty", [np.zeros((0, DIM)), np.zeros(0)])
def test_empty_input(empty: np.ndarray) -> None:
    result = cluster_embeddings(empty)
    assert result.labels.shape == (0,)
    assert (result.stats.n_factors, result.stats.n_clusters, result.stats.n_unclustered) == (0, 0, 0)


def test_disabled_clustering_gives_one_flat_cluster() -> None:
    X, _ = blobs(10, 3, seed=1)
    result = cluster_embeddings(X, enabled=False)
    assert result.labels.tolist() == [0] * 30
    s = result.stats
    assert (s.method, s.n_factors, s.n_clusters, s.n_unclustered) == ("flat", 30, 1, 0)
    assert cluster_embeddings(np.zeros((0, DIM)), enabled=False).stats.n_clusters == 0


def test_identical_vectors_collapse_to_tiny_fallback() -> None:
    v = unit_rows(np.random.default_rng(0).normal(size=(1, DIM)))
    result = cluster_embeddings(np.repeat(v, 20, axis=0))
    assert result.labels.tolist() == [0] * 20
    assert result.stats.method == "tiny-fallback"
    assert "19 duplicate" in result.stats.note


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_input_is_rejected(bad: float) -> None:
    X = unit_rows(np.random.default_rng(0).normal(size=(10, DIM)))
    X[3, 7] = bad
    with pytest.raises(ValueError, match="NaN or infinite"):
        cluster_embeddings(X)


def test_wrong_rank_is_rejected() -> None:
    with pytest.raises(ValueError, match="2-D"):
        cluster_embeddings(np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="2-D"):
        cluster_embeddings(np.ones(5))


class _FirstTwoCoordinates:
    """A stand-in reducer (PCA-like): keeps two coordinates."""

    def fit_transform(self, X: np.ndarray) -> np.ndarray:
        return X[:, :2].copy()


class _FixedLabels:
    """A stand-in clusterer returning preset, deliberately non-contiguous labels."""

    def __init__(self, labels: list[int]) -> None:
        self.labels = np.array(labels)

    def fit_predict(self, X: np.ndarray) -> np.ndarray:
        assert X.shape[0] == self.labels.size
        return self.labels


def test_custom_parts_are_used_and_labels_made_contiguous() -> None:
    X = np.random.default_rng(0).normal(size=(8, 5))
    labels = _FixedLabels([7, 7, -1, 3, 3, 9, -5, 9])
    result = cluster_embeddings(X, reducer=_FirstTwoCoordinates(), clusterer=labels)
    # Original labels 3, 7, 9 become 0, 1, 2 (order preserved); every negative label means noise.
    assert result.labels.tolist() == [1, 1, -1, 0, 0, 2, -1, 2]
    s = result.stats
    assert (s.method, s.n_clusters, s.n_unclustered) == ("umap+hdbscan", 3, 2)
    assert s.umap_n_components is None and s.hdbscan_min_cluster_size is None
    assert "_FirstTwoCoordinates" in s.note and "_FixedLabels" in s.note
    assert s.silhouette is not None
    assert result.reduced is not None and result.reduced.shape == (8, 2)


def test_all_noise_is_kept_unclustered() -> None:
    X = np.random.default_rng(0).normal(size=(6, 5))
    result = cluster_embeddings(X, reducer=_FirstTwoCoordinates(), clusterer=_FixedLabels([-1] * 6))
    assert result.labels.tolist() == [-1] * 6
    s = result.stats
    assert (s.n_clusters, s.n_unclustered, s.silhouette) == (0, 6, None)
    assert "unclustered" in s.note


def test_duplicates_follow_their_original() -> None:
    rng = np.random.default_rng(0)
    distinct = rng.normal(size=(6, 5))
    X = np.vstack([distinct, distinct[[0, 5, 5]]])  # rows 6, 7, 8 copy rows 0, 5, 5
    seen: list[int] = []

    class Recorder(_FirstTwoCoordinates):
        def fit_transform(self, X: np.ndarray) -> np.ndarray:
            seen.append(X.shape[0])
            return super().fit_transform(X)

    result = cluster_embeddings(X, reducer=Recorder(), clusterer=_FixedLabels([0, 0, 1, 1, 2, 2]))
    assert seen == [6]  # the reducer saw distinct points only, in input order
    assert result.labels.tolist() == [0, 0, 1, 1, 2, 2, 0, 2, 2]
    assert result.stats.n_factors == 9


def test_mapping_side_never_imports_umap() -> None:
    code = (
        "import sys, numpy as np\n"
        "from anchor.space.structure import cluster_embeddings\n"
        "import anchor.mapping.retrieval\n"
        "cluster_embeddings(np.eye(3)); cluster_embeddings(np.eye(8), enabled=False)\n"
        "assert 'umap' not in sys.modules, 'umap was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# --------------------------------------------------------------------------- real UMAP + HDBSCAN


@pytest.fixture(scope="module")
def real_runs() -> dict[str, object]:
    """All real UMAP fits of this module, done once (the first pays numba compilation)."""
    X, truth = blobs(20, 3, seed=7)
    small, _ = blobs(3, 3, seed=8)  # 9 points: n_components must drop to 7
    five, _ = blobs(5, 1, seed=9)
    dup_base, _ = blobs(2, 3, seed=10)  # 6 distinct points, each repeated 4 times
    return {
        "truth": truth,
        "first": cluster_embeddings(X, seed=0),
        "second": cluster_embeddings(X, seed=0),
        "small": cluster_embeddings(small, seed=0),
        "five": cluster_embeddings(five, seed=0),
        "dups": cluster_embeddings(np.repeat(dup_base, 4, axis=0), seed=0),
    }


def test_real_run_finds_the_blobs(real_runs: dict) -> None:
    result: ClusteringResult = real_runs["first"]
    s = result.stats
    assert s.method == "umap+hdbscan"
    assert s.n_factors == 60
    assert s.n_clusters >= 2
    assert s.n_clusters + (1 if s.n_unclustered else 0) == len(set(result.labels.tolist()))
    # Paper formulas at n = 60: 12 components, 15 neighbours, min cluster size 3.
    assert (s.umap_n_components, s.umap_n_neighbors, s.hdbscan_min_cluster_size) == (12, 15, 3)
    # Clusters numbered contiguously from 0.
    assert sorted(set(result.labels[result.labels >= 0].tolist())) == list(range(s.n_clusters))
    # Clustered points of one blob never share a cluster with another blob's points.
    truth = real_runs["truth"]
    for c in range(s.n_clusters):
        assert len(set(truth[result.labels == c].tolist())) == 1
    assert s.silhouette is not None and s.silhouette > 0.5
    assert result.reduced is not None and result.reduced.shape == (60, 12)


def test_real_run_is_deterministic_for_a_seed(real_runs: dict) -> None:
    first, second = real_runs["first"], real_runs["second"]
    assert np.array_equal(first.labels, second.labels)
    assert np.array_equal(first.reduced, second.reduced)
    assert first.stats == second.stats


def test_real_run_on_small_sets_clamps_and_records_it(real_runs: dict) -> None:
    for key, n, components in [("small", 9, 7), ("five", 5, 3)]:
        s = real_runs[key].stats
        assert s.method == "umap+hdbscan"
        assert s.n_factors == n
        assert (s.umap_n_components, s.umap_n_neighbors, s.hdbscan_min_cluster_size) == (components, n - 1, 2)
        assert "clamped from 10" in s.note
        assert real_runs[key].labels.shape == (n,)


def test_real_run_with_duplicates(real_runs: dict) -> None:
    result: ClusteringResult = real_runs["dups"]
    assert result.labels.shape == (24,)
    assert result.stats.n_factors == 24
    assert result.stats.umap_n_components == 4  # six distinct points -> clamp to 6 - 2
    assert "18 duplicate" in result.stats.note
    # Copies of one vector carry one label (np.repeat puts each row's four copies together).
    assert all(len(set(result.labels[i:i + 4].tolist())) == 1 for i in range(0, 24, 4))
