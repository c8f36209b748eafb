"""``RunDirectory.order_predictions``: a predict run's predictions.jsonl put back in input order, one line per
(run, id), the last written winning, holding a few numbers a line and never the records."""

from __future__ import annotations

import json
from pathlib import Path

from anchor.runs.records import Prediction
from anchor.runs.rundir import RunDirectory


def line(iid: str, at: int, status: str = "ok", p: float | None = 0.7) -> str:
    return Prediction(run=0, id=iid, seed=0, kind="cases", line=at, status=status, p_outcome1=p).model_dump_json()


def test_lines_are_sorted_by_their_place_and_a_retried_row_keeps_its_last_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    written = [line("c", 4), line("a", 2, "failed", None), line("b", 3), line("a", 2, "ok", 0.9), line("d", 5)]
    (run / "predictions.jsonl").write_text("".join(f"{x}\n" for x in written), encoding="utf-8")
    n = RunDirectory(run).order_predictions(key=lambda record: int(record["line"]))
    records = [json.loads(x) for x in (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert n == 4
    assert [(r["id"], r["line"]) for r in records] == [("a", 2), ("b", 3), ("c", 4), ("d", 5)]
    assert (records[0]["status"], records[0]["p_outcome1"]) == ("ok", 0.9)  # the retry, written last


def test_two_rows_at_the_same_place_are_both_kept_in_the_order_they_were_written(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    written = [line("y", 1), line("x", 1), line("y", 1, "ok", 0.2)]
    (run / "predictions.jsonl").write_text("".join(f"{x}\n" for x in written), encoding="utf-8")
    RunDirectory(run).order_predictions(key=lambda record: int(record["line"]))
    records = [json.loads(x) for x in (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], r["p_outcome1"]) for r in records] == [("x", 0.7), ("y", 0.2)]
