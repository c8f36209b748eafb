"""``RunDirectory.order_predictions``: a predict run's predictions.jsonl put back in input order, one line per
(run, id), the last written winning, holding a few numbers a line and never the records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anchor.rundir import RunDirectory, RunDirError
from anchor.rundir.directory import _PREDICTION_HEAD
from anchor.rundir.records import Prediction


def line(iid: str, at: int, status: str = "ok", p: float | None = 0.7) -> str:
    return Prediction(run=0, id=iid, seed=0, kind="cases", line=at, status=status, p_outcome1=p).model_dump_json()


def test_lines_are_sorted_by_their_place_and_a_retried_row_keeps_its_last_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    written = [line("c", 4), line("a", 2, "failed", None), line("b", 3), line("a", 2, "ok", 0.9), line("d", 5)]
    (run / "predictions.jsonl").write_text("".join(f"{x}\n" for x in written), encoding="utf-8")
    n = RunDirectory(run).order_predictions({"a": 0, "b": 1, "c": 2, "d": 3})
    records = [json.loads(x) for x in (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert n == 4
    assert [(r["id"], r["line"]) for r in records] == [("a", 2), ("b", 3), ("c", 4), ("d", 5)]
    assert (records[0]["status"], records[0]["p_outcome1"]) == ("ok", 0.9)  # the retry, written last


def test_rows_on_the_same_line_are_put_in_their_own_order_and_an_unknown_id_comes_last(tmp_path: Path) -> None:
    """A JSON array on one line: every row's line is 1, and only the rows' places order them."""
    run = tmp_path / "run"
    run.mkdir()
    written = [line("y", 1), line("stray", 1), line("x", 1), line("y", 1, "ok", 0.2), line("w", 1)]
    (run / "predictions.jsonl").write_text("".join(f"{x}\n" for x in written), encoding="utf-8")
    RunDirectory(run).order_predictions({"w": 0, "x": 1, "y": 2})
    records = [json.loads(x) for x in (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], r["p_outcome1"]) for r in records] == [("w", 0.7), ("x", 0.7), ("y", 0.2), ("stray", 0.7)]


def test_every_line_anchor_writes_is_placed_from_its_start_alone() -> None:
    """The quick reading of a line's start must fit what anchor writes: a field added before ``id`` in
    ``Prediction`` would quietly send every line to the full parse (right, but slow)."""
    for record in (Prediction(run=3, id="row-7", seed=5, kind="cases", line=12, p_outcome1=0.25),
                   Prediction(run=0, id="é ü", seed=0, kind="cases", line=None, status="failed", error="x")):
        match = _PREDICTION_HEAD.match(record.model_dump_json())
        assert match is not None
        assert (int(match[1]), match[2]) == (record.run, record.id)


def test_lines_that_do_not_start_as_anchor_writes_them_are_parsed_in_full_and_placed_the_same(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    moved = json.dumps({"line": 3, "kind": "cases", "seed": 0, "id": "b", "run": 0, "p_outcome1": 0.1})
    escaped = line('q"uote\\d', 1)  # an id with escapes: the full parse reads it
    no_run = json.dumps({"id": "z"})  # run 0 when absent
    written = [line("c", 4), moved, escaped, no_run, line('q"uote\\d', 1, "ok", 0.3)]
    (run / "predictions.jsonl").write_text("".join(f"{x}\n" for x in written), encoding="utf-8")
    assert RunDirectory(run).order_predictions({"z": 0, 'q"uote\\d': 1, "b": 2, "c": 3}) == 4
    records = [json.loads(x) for x in (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in records] == ["z", 'q"uote\\d', "b", "c"]
    assert records[1]["p_outcome1"] == 0.3  # the same (run, id) however its line was read: the last kept


def test_a_line_that_is_not_a_prediction_is_refused_naming_it_and_the_file_left_as_it_was(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "predictions.jsonl").write_text(f"{line('a', 2)}\n" + '{"run":"0","id":7}\n', encoding="utf-8")
    before = (run / "predictions.jsonl").read_bytes()
    with pytest.raises(RunDirError, match=r"predictions.jsonl, line 2: not a prediction record"):
        RunDirectory(run).order_predictions({"a": 0})
    assert (run / "predictions.jsonl").read_bytes() == before
