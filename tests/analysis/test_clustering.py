"""Clustering comparison on stored factor embeddings: known blob structure, the documented k and eps
rules, finding spaces on disk, the outputs, and that no LLM is involved."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from anchor.analysis.clustering import (
    ClusteringAnalysis,
    ClusteringSettings,
    NamedSpace,
    collect_spaces,
    compare_clustering,
    compare_space,
    dbscan_eps,
    silhouette,
    sqrt_rule_k,
    write_clustering,
)
from anchor.settings.space import BuildParams
from anchor.space.io import SpaceFileError, save_space
from anchor.types import (
    ClusteringStats,
    EmbeddingMatrix,
    Factor,
    FactorSpace,
    LLMIdentity,
    Scenario,
    SpaceEmbeddings,
    StopReason,
)


def space_from_vectors(vectors: np.ndarray, seed: int = 0, text: str = "s") -> FactorSpace:
    n = vectors.shape[0]
    factors = [Factor(id=f"f{i + 1:03d}", text=f"factor {i}", round=1) for i in range(n)]
    return FactorSpace(
        scenario=Scenario(text=text, outcome1="a", outcome2="b"), factors=factors, unclustered=[f.id for f in factors],
        stop_reason=StopReason.TARGET_REACHED, params=BuildParams(seed=seed),
        clustering=ClusteringStats(method="umap+hdbscan", n_factors=n, n_clusters=0, n_unclustered=n),
        llm=LLMIdentity(backend="test", model="m"), embedding_model="test",
        embeddings=SpaceEmbeddings(factor_ids=[f.id for f in factors],
                                   factors=EmbeddingMatrix.from_array("test", vectors), cluster_ids=[]),
    )


def blobs(n_blobs: int, per_blob: int, seed: int = 0, spread: float = 0.05) -> np.ndarray:
    """Unit vectors in 384 dimensions around ``n_blobs`` random, far-apart directions."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_blobs, 384))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    points = np.repeat(centres, per_blob, axis=0) + spread * rng.normal(size=(n_blobs * per_blob, 384)) / np.sqrt(384)
    return points / np.linalg.norm(points, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def four_blobs() -> NamedSpace:
    return NamedSpace("synthetic", "four", space_from_vectors(blobs(4, 15)))


def by_algorithm(result) -> dict:
    return {s.algorithm: s for s in result.scores}


# --------------------------------------------------------------------------- rules, by hand


def test_sqrt_rule():
    assert [sqrt_rule_k(m) for m in (3, 8, 16, 60, 80, 200)] == [2, 2, 3, 5, 6, 10]


def test_dbscan_eps_is_a_quantile_of_the_k_distance():
    points = np.array([[0.0], [1.0], [2.0], [3.0], [10.0]])
    # min_samples = 2: the nearest point is the point itself, so the 2nd is its nearest neighbour:
    # distances 1, 1, 1, 1, 7.
    assert dbscan_eps(points, 2, quantile=0.5) == pytest.approx(1.0)
    assert dbscan_eps(points, 2) == pytest.approx(1.0 + 0.6 * 6.0)  # default quantile 0.9
    # min_samples = 3: second-nearest other point: 2, 1, 1, 2, 8.
    assert dbscan_eps(points, 3, quantile=0.5) == pytest.approx(2.0)


def test_silhouette_leaves_noise_out_and_needs_two_clusters():
    points = np.array([[0.0], [0.1], [5.0], [5.1], [100.0]])
    with_noise = silhouette(points, np.array([0, 0, 1, 1, -1]))
    without = silhouette(points[:4], np.array([0, 0, 1, 1]))
    assert with_noise == pytest.approx(without)
    assert with_noise == pytest.approx(np.mean([1 - 0.1 / 4.95, 1 - 0.1 / 5.05, 1 - 0.1 / 4.95, 1 - 0.1 / 5.05]),
                                       rel=1e-3)
    assert silhouette(points, np.array([0, 0, 0, 0, -1])) is None


# --------------------------------------------------------------------------- on known structure


def test_four_blobs(four_blobs):
    result = compare_space(four_blobs)
    assert result.skipped is None and (result.n_factors, result.n_distinct) == (60, 60)
    s = by_algorithm(result)
    assert list(s) == ["hdbscan", "dbscan", "kmeans", "agglomerative"]
    # HDBSCAN finds the four blobs; the sqrt rule gives k = round(sqrt(30)) = 5.
    assert s["hdbscan"].n_clusters == 4 and s["hdbscan"].n_noise == 0
    # DBSCAN never merges two far-apart blobs, and its eps rule keeps nine points in ten as core points,
    # so at most 6 of the 60 are noise. Whether it also splits a blob depends on UMAP's layout, which
    # differs between platforms and library versions (4, 5 or 6 clusters over UMAP seeds 0-39): not asserted.
    assert s["dbscan"].n_clusters >= 4 and s["dbscan"].n_noise <= 6
    assert s["kmeans"].n_clusters == 5 and s["kmeans"].params["k"] == 5
    assert s["agglomerative"].n_clusters == 5 and s["agglomerative"].params["linkage"] == "ward"
    assert s["hdbscan"].params["min_cluster_size"] == 3 == s["dbscan"].params["min_samples"]
    assert s["hdbscan"].params["seed"] == 0
    # Well-separated blobs score high in both spaces; splitting one blob (k = 5) scores lower.
    assert s["hdbscan"].silhouette > 0.7 and s["hdbscan"].silhouette_embedding > 0.7
    assert s["kmeans"].silhouette_embedding < s["hdbscan"].silhouette_embedding


def test_fixed_k_from_hdbscan_or_an_integer(four_blobs):
    matched = by_algorithm(compare_space(four_blobs, ClusteringSettings(fixed_k="hdbscan")))
    assert matched["kmeans"].n_clusters == matched["agglomerative"].n_clusters == 4
    assert matched["kmeans"].params["k_rule"] == "HDBSCAN's count"
    # At equal k, KMeans recovers the same blobs, so the silhouettes agree.
    assert matched["kmeans"].silhouette_embedding == pytest.approx(matched["hdbscan"].silhouette_embedding)
    fixed = by_algorithm(compare_space(four_blobs, ClusteringSettings(fixed_k=3, dbscan_eps=1e-6)))
    assert fixed["kmeans"].n_clusters == 3 and fixed["kmeans"].params["k_rule"] == "fixed"
    # An eps far below every distance: DBSCAN calls everything noise.
    assert fixed["dbscan"].n_clusters == 0 and fixed["dbscan"].n_noise == 60 and fixed["dbscan"].silhouette is None
    with pytest.raises(ValueError, match="at least 2"):
        ClusteringSettings(fixed_k=1)


def test_tiny_and_vectorless_spaces_are_skipped():
    tiny = compare_space(NamedSpace("d", "tiny", space_from_vectors(blobs(2, 2))))
    assert tiny.skipped is not None and "too few distinct factors" in tiny.skipped and tiny.scores == []
    bare = space_from_vectors(blobs(2, 5)).model_copy(update={"embeddings": None})
    assert compare_space(NamedSpace("d", "bare", bare)).skipped == "the space stores no factor embeddings"


def test_comparison_over_datasets_summary_outputs_and_no_llm(four_blobs, tmp_path, monkeypatch):
    from anchor.llm.client import LLMClient

    async def forbidden(*args, **kwargs):
        raise AssertionError("the clustering comparison must not call an LLM")

    monkeypatch.setattr(LLMClient, "ask", forbidden)
    monkeypatch.setattr(LLMClient, "complete", forbidden)
    spaces = [four_blobs,
              NamedSpace("synthetic", "three", space_from_vectors(blobs(3, 12, seed=1))),
              NamedSpace("other", "tiny", space_from_vectors(blobs(1, 3, seed=2)))]
    events = []
    result = compare_clustering(spaces, report=events.append)
    assert [e.done for e in events] == [0, 1, 2, 3]
    assert result.datasets == ["synthetic", "other"]
    hdb = result.summary_for("synthetic", "hdbscan")
    assert hdb is not None and hdb.n_spaces == 2
    assert (hdb.clusters_min, hdb.clusters_max, hdb.clusters_mean) == (3, 4, 3.5)
    per_space = [by_algorithm(r)["hdbscan"].silhouette for r in result.spaces[:2]]
    assert hdb.silhouette_mean == pytest.approx(np.mean(per_space))
    assert hdb.silhouette_std == pytest.approx(np.std(per_space, ddof=1))
    assert result.summary_for("other", "hdbscan") is None  # its only space was skipped
    assert any("1 space(s) skipped: other/tiny" in n for n in result.notes)

    files = write_clustering(result, tmp_path / "out")
    assert ClusteringAnalysis.model_validate(json.loads(files.json_path.read_text())) == result
    md = files.markdown_path.read_text()
    assert "| synthetic | HDBSCAN | 2 |" in md and "| 3–4 |" in md
    assert "round(sqrt(m / 2))" in md
    assert files.png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------- finding spaces


def write_run_dir(root: Path, name: str, dataset: str, spaces: dict[str, FactorSpace]) -> Path:
    run = root / name
    (run / "spaces").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"dataset": dataset, "method": "anchor"}), encoding="utf-8")
    for key, space in spaces.items():
        save_space(space, run / "spaces" / f"{key}.json")
    return run


def test_collect_spaces_from_run_dirs_folders_and_files(tmp_path):
    a, b, c = (space_from_vectors(blobs(2, 3, seed=i), text=f"s{i}") for i in range(3))
    run = write_run_dir(tmp_path / "runs", "c2s", "common2sense", {"k1": a, "k2": b})
    loose = tmp_path / "plasma"
    loose.mkdir()
    save_space(c, loose / "k3.json")

    found = collect_spaces([run])
    assert [(n.dataset, n.name) for n in found] == [("common2sense", "k1"), ("common2sense", "k2")]
    assert found[0].space == a
    found = collect_spaces([tmp_path / "runs", loose, run / "spaces" / "k2.json"])  # k2 reached twice
    assert [(n.dataset, n.name) for n in found] == [("common2sense", "k1"), ("common2sense", "k2"),
                                                   ("plasma", "k3")]
    assert [(n.dataset, n.name) for n in collect_spaces([loose / "k3.json"])] == [("plasma", "k3")]


def test_collect_spaces_errors(tmp_path):
    with pytest.raises(ValueError, match="no such file or directory"):
        collect_spaces([tmp_path / "missing"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no factor spaces found"):
        collect_spaces([tmp_path / "empty"])
    with pytest.raises(ValueError, match="no paths given"):
        collect_spaces([])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.json").write_text("{}", encoding="utf-8")
    with pytest.raises(SpaceFileError, match="schema version"):
        collect_spaces([bad])
