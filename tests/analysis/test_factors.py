"""Factor-count analysis: truncating a stored space by abduction order, the grid, and the outputs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from anchor.analysis.common import task_scores
from anchor.analysis.factors import (
    FactorCountAnalysis,
    factor_count_analysis,
    factor_grid,
    write_factor_count,
)
from anchor.mapping.retrieval import HierarchicalIndex
from anchor.settings.space import BuildParams
from anchor.space.io import load_space, save_space
from anchor.space.truncate import abduction_order, truncate_space
from anchor.types import (
    AbductionRound,
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
from tests.analysis.support import metrics, pair

ROUND = {1: 1, 2: 1, 3: 1, 4: 2, 5: 2, 6: 2, 7: 3, 8: 3, 9: 3, 10: 3}


def fid(i: int) -> str:
    return f"f{i:03d}"


@pytest.fixture
def grown() -> FactorSpace:
    """Ten factors found over three rounds (f001-f003, f004-f006, f007-f010).

    Cluster 0 holds f001, f004, f007 and pruned f008 as a repeat of f001; cluster 1 holds f005 and
    f009 and pruned f006 as a repeat of f009; cluster 2 holds f010 only; f002 and f003 are
    unclustered. Factor i's vector is the unit vector e_i (12 dimensions), theme j's is e_{10+j}.
    """
    members = {0: [1, 4, 7], 1: [5, 9], 2: [10]}
    pruned = {0: [(8, 1)], 1: [(6, 9)]}
    where = {i: c for c, ids in members.items() for i in ids}
    factors = [Factor(id=fid(i), text=f"factor number {i}", round=ROUND[i], cluster_id=where.get(i))
               for i in range(1, 11)]
    clusters = [Cluster(id=c, theme=f"theme {c}", factor_ids=[fid(i) for i in ids],
                        pruned=[PrunedFactor(factor_id=fid(v), text=f"factor number {v}", reason="redundant",
                                             duplicate_of=fid(k)) for v, k in pruned.get(c, [])])
                for c, ids in members.items()]
    eye = np.eye(13, dtype=np.float32)
    return FactorSpace(
        scenario=Scenario(text="s", outcome1="a", outcome2="b"), factors=factors, clusters=clusters,
        unclustered=[fid(2), fid(3)], stop_reason=StopReason.SATURATED,
        rounds=[AbductionRound(round=r, sentences=[], extracted=[],
                               added=[f"factor number {i}" for i in range(1, 11) if ROUND[i] == r]) for r in (1, 2, 3)],
        params=BuildParams(n_target=40), clustering=ClusteringStats(method="umap+hdbscan", n_factors=10, n_clusters=3,
                                                                    n_unclustered=2, silhouette=0.4),
        llm=LLMIdentity(backend="test", model="m"), embedding_model="test",
        embeddings=SpaceEmbeddings(factor_ids=[fid(i) for i in range(1, 11)],
                                   factors=EmbeddingMatrix.from_array("test", eye[0:10]),
                                   cluster_ids=[0, 1, 2], themes=EmbeddingMatrix.from_array("test", eye[10:13])))


def test_abduction_order_is_round_then_id_number(grown):
    assert abduction_order(grown) == [fid(i) for i in range(1, 11)]
    reordered = grown.model_copy(deep=True)
    reordered.factors[2].round = 2  # f003 now found in round 2, after f001, f002
    reordered.factors[9].round = 1  # f010 found in round 1
    assert abduction_order(reordered)[:4] == [fid(1), fid(2), fid(10), fid(3)]


def test_truncation_keeps_clusters_themes_and_vectors_consistent(grown):
    small = truncate_space(grown, 6)
    assert [f.id for f in small.factors] == [fid(i) for i in range(1, 7)]
    # Cluster 2 (only f010) is emptied and dropped; f006 was a repeat of f009, which is cut away,
    # so it is a member of cluster 1 again.
    assert [(c.id, c.theme, c.factor_ids, c.pruned) for c in small.clusters] == [
        (0, "theme 0", [fid(1), fid(4)], []),
        (1, "theme 1", [fid(5), fid(6)], []),
    ]
    assert small.unclustered == [fid(2), fid(3)]
    assert {f.id: f.cluster_id for f in small.factors} == {
        fid(1): 0, fid(2): None, fid(3): None, fid(4): 0, fid(5): 1, fid(6): 1}
    emb = small.embeddings
    assert emb is not None and emb.factor_ids == [fid(i) for i in range(1, 7)]
    assert np.array_equal(emb.factors.to_array(), np.eye(13, dtype=np.float32)[0:6])
    assert emb.cluster_ids == [0, 1]
    assert emb.themes is not None and np.array_equal(emb.themes.to_array(), np.eye(13, dtype=np.float32)[10:12])
    # Bookkeeping says what happened.
    assert (small.clustering.n_factors, small.clustering.n_clusters, small.clustering.n_unclustered) == (6, 2, 2)
    assert small.clustering.silhouette is None
    assert "truncated to the first 6 of 10 factors" in small.clustering.note
    assert small.params.n_target == 6 and small.stop_reason == StopReason.TARGET_REACHED
    assert [r.round for r in small.rounds] == [1, 2]
    assert small.rounds[1].added == ["factor number 4", "factor number 5", "factor number 6"]
    # The original is untouched.
    assert len(grown.factors) == 10 and grown.clusters[1].factor_ids == [fid(5), fid(9)]


def test_a_pruned_factor_whose_original_is_kept_stays_pruned(grown):
    eight = truncate_space(grown, 8)
    c0 = eight.clusters[0]
    assert c0.factor_ids == [fid(1), fid(4), fid(7)]
    assert [(p.factor_id, p.duplicate_of) for p in c0.pruned] == [(fid(8), fid(1))]
    assert fid(8) not in eight.active_factor_ids()
    assert sorted(eight.active_factor_ids()) == sorted([fid(i) for i in (1, 2, 3, 4, 5, 6, 7)])


def test_truncated_space_is_searchable_and_round_trips(grown, tmp_path):
    small = truncate_space(grown, 6)
    index = HierarchicalIndex.from_space(small, k1=5, k2=5)
    hits, candidates = index.query(np.eye(13)[5])  # aimed at f006, revived into cluster 1
    assert candidates[0].factor_id == fid(6) and candidates[0].distance == pytest.approx(0.0)
    assert {c.factor_id for c in candidates} == set(small.active_factor_ids())
    assert [h.cluster_id for h in hits] == [1, 0]
    assert load_space(save_space(small, tmp_path / "small.json")) == small


def test_full_size_or_more_returns_the_space_unchanged(grown):
    assert truncate_space(grown, 10) == grown
    assert truncate_space(grown, 99) == grown
    assert truncate_space(grown, 10) is not grown


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_truncation_rejects_bad_counts(grown, bad):
    with pytest.raises(ValueError, match="n must be a positive integer"):
        truncate_space(grown, bad)


def test_factor_grid():
    assert factor_grid(80) == [10, 20, 30, 40, 50, 60, 70, 80]
    assert factor_grid(16) == [2, 4, 6, 8, 10, 12, 14, 16]
    assert factor_grid(7, step=3) == [3, 6, 7]
    assert factor_grid(43, points=4) == [11, 22, 33, 43]
    assert factor_grid(1) == [1]
    with pytest.raises(ValueError, match="size"):
        factor_grid(0)
    with pytest.raises(ValueError, match="step"):
        factor_grid(10, step=0)


def test_task_scores_read_off_the_runner_metrics(tmp_path):
    # Human labels 1, 2, 3, 1. Predictions: 1 (right), 2 (right), unknown (counts as 3 = right in
    # the all-pairs scores), 2 (wrong).
    report = metrics(tmp_path, [pair(0, 1, 0.8, 0.3), pair(1, 2, 0.2, 0.6), pair(2, 3, None, 0.5),
                                pair(3, 1, 0.4, 0.7)])
    scores = task_scores(report)
    assert (scores.n_predictions, scores.n_unknown, scores.unknown_rate) == (4, 1, 0.25)
    assert scores.metric == "f1_micro" and scores.score == pytest.approx(0.75)
    # Context1: P 1/1, R 1/2; Context2: P 1/2, R 1/1; Same: P = R = 1.
    assert scores.per_class_f1 == pytest.approx({"Context1": 2 / 3, "Context2": 2 / 3, "Same": 1.0})
    assert not scores.small_model


def test_factor_count_analysis_and_outputs(tmp_path, grown):
    # Human labels 1, 2, 1; an unknown side counts as 0.5 in the all-pairs score. N=4: pair 0 reads
    # (0.5, 0.7) -> 2 (wrong), pair 1 (0.5, 0.5) -> 3 (wrong), pair 2 right. N=8: pair 1 reads
    # (0.5, 0.4) -> 1 (wrong). N=12: all three right.
    reports = {
        4: metrics(tmp_path / "a", [pair(0, 1, None, 0.7), pair(1, 2, None, None), pair(2, 1, 0.9, 0.1)]),
        8: metrics(tmp_path / "b", [pair(0, 1, 0.8, 0.3), pair(1, 2, None, 0.4), pair(2, 1, 0.9, 0.1)]),
        12: metrics(tmp_path / "c", [pair(0, 1, 0.8, 0.3), pair(1, 2, 0.1, 0.4), pair(2, 1, 0.9, 0.1)]),
    }
    result = factor_count_analysis("common2sense-pairwise", reports, spaces=[grown], model="m")
    assert [p.n_factors for p in result.points] == [4, 8, 12]
    assert [p.scores.unknown_rate for p in result.points] == pytest.approx([2 / 3, 1 / 3, 0.0])
    assert [p.scores.score for p in result.points] == pytest.approx([1 / 3, 2 / 3, 1.0])
    # Searchable factors at N: 4 -> f001-f004 all active; 8 -> f008 stays pruned; 12 -> the whole
    # space (f006 and f008 pruned), which is smaller than 12.
    assert [p.mean_searchable for p in result.points] == [4.0, 7.0, 8.0]
    assert [p.spaces_smaller for p in result.points] == [0, 0, 1]
    assert result.built_sizes == [10]

    files = write_factor_count(result, tmp_path / "out")
    assert [p.name for p in (files.json_path, files.markdown_path, files.png_path)] == [
        "factors.json", "factors.md", "factors.png"]
    assert FactorCountAnalysis.model_validate(json.loads(files.json_path.read_text())) == result
    md = files.markdown_path.read_text()
    assert "| 8 | 7.0 | 33.3% | 0.667 |" in md
    assert "![" in md and "(factors.png)" in md
    assert files.png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_factor_count_analysis_rejects_bad_input(tmp_path):
    with pytest.raises(ValueError, match="no evaluations"):
        factor_count_analysis("x", {})
    with pytest.raises(ValueError, match="positive integers"):
        factor_count_analysis("x", {0: metrics(tmp_path, [pair(0, 1, 0.8, 0.3)])})
