"""Retrieval analysis: collecting (retriever, K1, K2) evaluations into the table and figure."""

from __future__ import annotations

import json

import pytest

from anchor.analysis.retrieval import (
    K_SETTINGS,
    RetrievalAnalysis,
    retrieval_analysis,
    retrieval_markdown,
    write_retrieval,
)
from tests.analysis.support import decision, metrics, pair


def test_retrieval_grid_table_and_figure(tmp_path):
    # Human labels 1, 2, 3. knn gets all three right; bm25 leaves pair 0 without factors (0.5
    # stands in: 0.5 vs 0.2 -> 1, still right) and pair 1 fully unknown (3: wrong); faiss-flat
    # answers like knn.
    outcomes = {
        "knn": [pair(0, 1, 0.8, 0.2), pair(1, 2, 0.3, 0.6), pair(2, 3, 0.5, 0.5)],
        "faiss-flat": [pair(0, 1, 0.8, 0.2), pair(1, 2, 0.3, 0.6), pair(2, 3, 0.5, 0.5)],
        "bm25": [pair(0, 1, None, 0.2), pair(1, 2, None, None), pair(2, 3, 0.5, 0.5)],
    }
    reports = {(name, k1, k2): metrics(tmp_path / f"{name}-{k1}-{k2}", preds)
               for k1, k2 in K_SETTINGS for name, preds in outcomes.items()}
    result = retrieval_analysis("common2sense-pairwise", reports, model="m")
    assert result.retrievers == ["knn", "faiss-flat", "bm25"]
    assert result.k_settings == [(2, 3), (3, 5), (4, 8)]
    knn, bm25 = result.cell("knn", 3, 5), result.cell("bm25", 4, 8)
    assert knn is not None and bm25 is not None
    assert (knn.scores.unknown_rate, knn.scores.score) == (0.0, 1.0)
    assert bm25.scores.unknown_rate == pytest.approx(2 / 3)
    assert bm25.scores.score == pytest.approx(2 / 3)
    # bm25: Context1 P = R = 1; Context2 never predicted (F1 0); Same P = 1/2, R = 1.
    assert bm25.scores.per_class_f1 == pytest.approx({"Context1": 1.0, "Context2": 0.0, "Same": 2 / 3})
    assert result.cell("hnsw", 3, 5) is None

    md = "\n".join(retrieval_markdown(result))
    assert "| retriever | K1 | K2 | unknown rate | F1 Context1 | F1 Context2 | F1 Same | F1 Avg |" in md
    assert "| bm25 | 4 | 8 | 66.7% | 1.000 | 0.000 | 0.667 | 0.667 |" in md
    assert md.index("| knn | 2 | 3 |") < md.index("| knn | 3 | 5 |") < md.index("| knn | 4 | 8 |")

    files = write_retrieval(result, tmp_path / "out")
    assert RetrievalAnalysis.model_validate(json.loads(files.json_path.read_text())) == result
    assert files.png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "(retrieval.png)" in files.markdown_path.read_text()


def test_decision_data_show_the_headline_metric(tmp_path):
    reports = {("knn", 3, 5): metrics(tmp_path / "a", [decision(0, 1, 0.8), decision(1, 2, 0.7)], dataset="plasma")}
    result = retrieval_analysis("plasma", reports)
    md = "\n".join(retrieval_markdown(result))
    assert "| retriever | K1 | K2 | unknown rate | accuracy |" in md
    assert "| knn | 3 | 5 | 0.0% | 0.500 |" in md


def test_bad_input(tmp_path):
    report = metrics(tmp_path / "a", [pair(0, 1, 0.8, 0.2)])
    with pytest.raises(ValueError, match="unknown retriever 'annoy'"):
        retrieval_analysis("x", {("annoy", 3, 5): report})
    with pytest.raises(ValueError, match="k2 must be a positive integer"):
        retrieval_analysis("x", {("knn", 3, 0): report})
    with pytest.raises(ValueError, match="no evaluations"):
        retrieval_analysis("x", {})
    other = metrics(tmp_path / "b", [decision(0, 1, 0.8)], dataset="today")
    with pytest.raises(ValueError, match="mix task kinds"):
        retrieval_analysis("x", {("knn", 3, 5): report, ("bm25", 3, 5): other})


def test_saved_result_reads_back_and_bad_files_say_why(tmp_path):
    from anchor.analysis.common import load_result

    report = metrics(tmp_path / "a", [pair(0, 1, 0.8, 0.2)])
    result = retrieval_analysis("common2sense-pairwise", {("knn", 3, 5): report})
    files = write_retrieval(result, tmp_path / "out")
    assert load_result(files.json_path, RetrievalAnalysis) == result
    with pytest.raises(ValueError, match="no such file"):
        load_result(tmp_path / "missing.json", RetrievalAnalysis)
    (tmp_path / "other.json").write_text('{"analysis": "factors"}', encoding="utf-8")
    with pytest.raises(ValueError, match="not a RetrievalAnalysis result"):
        load_result(tmp_path / "other.json", RetrievalAnalysis)
