"""The HTML index of an evaluation run (anchor.evaluation.report.run_index): rows, statuses and links,
the traces reader on damaged files, spaces found in another run, the order of the rows and their scores,
checked on a run directory written by hand around the planned case of tests/audit/planned_case.py."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from anchor.evaluation.datasets import bundled_file, load_dataset, scenario_key
from anchor.evaluation.report import RunIndexError, index_rows, read_traces, run_index_html, write_run_index
from anchor.evaluation.report.run_index import page_name
from anchor.rundir.records import Prediction, SideRecord, TraceRecord
from tests.audit.planned_case import (
    COLD,
    EVIL,
    HOT,
    KB,
    WT,
    assert_self_contained,
    build_case,
    expected_posteriors,
    one,
    rows_of,
    run_config,
    section,
    texts,
    trace_line,
    write_run_dir,
)


@pytest.fixture(scope="module")
def case(embedder):
    return build_case(embedder)


@pytest.fixture
def run_dir(case, tmp_path) -> Path:
    return write_run_dir(case, tmp_path)


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


