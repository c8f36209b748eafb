"""What a reader of a run that may still be writing gets from ``RunDirectory``: the predictions as whole
lines (the service streams a job's results from them) and the last ANCHOR trace of one row (its
explanation page), without the line a writer is in the middle of."""

from __future__ import annotations

from pathlib import Path

from anchor.rundir import RunDirectory
from anchor.rundir.records import Prediction, TraceRecord
from anchor.types import InferenceResult


def prediction(iid: str, p: float) -> str:
    return Prediction(run=0, id=iid, seed=0, kind="cases", line=2, status="ok", p_outcome1=p).model_dump_json()


def anchor_trace(iid: str, p: float, space: str | None = "space-1") -> str:
    result = InferenceResult(condition=f"condition of {iid}", p_outcome1=p, p_outcome2=1 - p, unknown=False)
    return TraceRecord(run=0, id=iid, condition=result.condition, space=space,
                       result=result.model_dump(mode="json")).model_dump_json()


def test_prediction_lines_are_whole_lines_as_written_and_leave_out_the_one_being_written(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    whole = [prediction("a", 0.25), prediction("b", 0.75)]
    half = prediction("c", 0.5)[:20]  # a writer stopped in the middle of its line
    (run / "predictions.jsonl").write_text(f"{whole[0]}\n\n{whole[1]}\n{half}", encoding="utf-8")
    assert list(RunDirectory(run).prediction_lines()) == [f"{w}\n".encode() for w in whole]
    assert list(RunDirectory(tmp_path / "none").prediction_lines()) == []  # no run yet: nothing, no error


def test_row_trace_is_the_rows_last_anchor_trace_and_none_for_another_methods_trail(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    vanilla = TraceRecord(run=0, id="v", condition="c", result={"probability": 0.4}).model_dump_json()
    lines = [anchor_trace("a", 0.2), anchor_trace("a/b", 0.9), anchor_trace("a", 0.3, "space-2"), vanilla,
             anchor_trace("a", 0.99)[:30]]  # the last one unfinished: the retry before it counts
    (run / "traces.jsonl").write_text("\n".join(lines), encoding="utf-8")
    directory = RunDirectory(run)
    found = directory.row_trace("a")
    assert found is not None and found.result.p_outcome1 == 0.3 and found.space == "space-2"
    other = directory.row_trace("a/b")  # an id that holds another's text is a row of its own
    assert other is not None and other.result.p_outcome1 == 0.9
    assert directory.row_trace("v") is None  # vanilla's trail is not an ANCHOR result
    assert directory.row_trace("missing") is None
