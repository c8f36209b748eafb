"""``RunDirectory.order_predictions``: a predict run's predictions.jsonl put back in input order, one line per
(run, id), the last written winning, holding a few numbers a line and never the records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anchor.runs.records import Prediction
from anchor.runs.rundir import RunDirectory, RunDirError
from anchor.runs.rundir.directory import _prediction_head


def line(iid: str, at: int, status: str = "ok", p: float | None = 0.7) -> str:
    return Prediction(run=0, id=iid, seed=0, kind="cases", line=at, status=status, p_outcome1=p).model_dump_json()


def test_lines_are_sorted_by_their_place_and_a_retried_row_keeps_its_last_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    written = [line("c", 4), line("a", 2, "failed", None), line("b", 3), line("a", 2, "ok", 0.9), line("d", 5)]
    (run / "predictions.jsonl").write_text("".join(f"{x}\n" for x in written), encoding="utf-8")
    n = RunDirectory(run).order_predictions(by="line")
    records = [json.loads(x) for x in (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert n == 4
    assert [(r["id"], r["line"]) for r in records] == [("a", 2), ("b", 3), ("c", 4), ("d", 5)]
    assert (records[0]["status"], records[0]["p_outcome1"]) == ("ok", 0.9)  # the retry, written last


def test_two_rows_at_the_same_place_are_both_kept_in_the_order_they_were_written(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    written = [line("y", 1), line("x", 1), line("y", 1, "ok", 0.2)]
    (run / "predictions.jsonl").write_text("".join(f"{x}\n" for x in written), encoding="utf-8")
    RunDirectory(run).order_predictions(by="line")
    records = [json.loads(x) for x in (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], r["p_outcome1"]) for r in records] == [("x", 0.7), ("y", 0.2)]


def test_every_line_anchor_writes_is_placed_from_its_start_alone() -> None:
    """The quick reading of a line's start must fit what anchor writes: a field added or moved before
    ``line`` in ``Prediction`` would quietly send every line to the full parse (right, but slow)."""
    head = _prediction_head("line")
    for record in (Prediction(run=3, id="row-7", seed=5, kind="cases", line=12, p_outcome1=0.25),
                   Prediction(run=0, id="é ü", seed=0, kind="cases", line=None, status="failed", error="x")):
        match = head.match(record.model_dump_json())
        assert match is not None
        assert (int(match[1]), match[2], match[3]) == (record.run, record.id, str(record.line or "null"))


def test_lines_that_do_not_start_as_anchor_writes_them_are_parsed_in_full_and_placed_the_same(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    moved = json.dumps({"line": 3, "kind": "cases", "seed": 0, "id": "b", "run": 0, "p_outcome1": 0.1})
    escaped = line('q"uote\\d', 1)  # an id with escapes: the full parse reads it
    nested = json.dumps({"run": 0, "id": "n", "sides": [{"line": 99}], "line": 2})  # a nested value before line
    absent = json.dumps({"run": 0, "id": "z"})  # no line: counts as 0
    written = [line("c", 4), moved, escaped, nested, absent, line('q"uote\\d', 1, "ok", 0.3)]
    (run / "predictions.jsonl").write_text("".join(f"{x}\n" for x in written), encoding="utf-8")
    assert RunDirectory(run).order_predictions(by="line") == 5
    records = [json.loads(x) for x in (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in records] == ["z", 'q"uote\\d', "n", "b", "c"]
    assert records[1]["p_outcome1"] == 0.3  # the same (run, id) however its line was read: the last kept


def test_a_line_whose_place_is_not_a_whole_number_is_refused_naming_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "predictions.jsonl").write_text(f"{line('a', 2)}\n" + '{"run":0,"id":"b","line":2.5}\n', encoding="utf-8")
    before = (run / "predictions.jsonl").read_bytes()
    with pytest.raises(RunDirError, match=r"predictions.jsonl, line 2: .*line is not a whole number"):
        RunDirectory(run).order_predictions(by="line")
    assert (run / "predictions.jsonl").read_bytes() == before
