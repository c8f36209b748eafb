"""`anchor cost` on damaged or untidy inputs: a calls.jsonl with an invalid byte is named in one error
line, a data file's skipped rows are one note each (not a Python warning with its source line), and
a data row that is simply not JSON is not called truncated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.evaluation.datasets import load_factcheck_data
from tests.fakeserver import FakeOpenAIServer
from tests.run_helpers import eval_args

runner = CliRunner()


def claim(k: int) -> str:
    return json.dumps({"claim": f"The bridge has {k + 2} towers.", "label": "SUPPORTED" if k % 2 else "REFUTED",
                       "evidence": ["A note about the bridge."]})


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> tuple[Path, Path, Path]:
    """Two vanilla runs of a fact-checking file whose second line is not JSON: (data, run a, run b)."""
    tmp = tmp_path_factory.mktemp("cost")
    data = tmp / "bridge.jsonl"
    data.write_text("\n".join([claim(0), "nope", claim(1), claim(2)]) + "\n", encoding="utf-8")
    with FakeOpenAIServer(deterministic=True) as server:
        for name in ("a", "b"):
            result = runner.invoke(app, eval_args(server, tmp / "cache", tmp / name, "--data", str(data),
                                                  "--method", "vanilla"))
            assert result.exit_code == 0, result.output
    return data, tmp / "a", tmp / "b"


def test_a_row_that_is_not_json_is_not_called_truncated(two_runs):
    data, _, _ = two_runs
    (skipped,) = load_factcheck_data(data).skipped
    assert (skipped.line, skipped.problem) == (2, "not valid JSON (Expecting value, column 1)")
    cut = data.parent / "cut.jsonl"
    cut.write_text(claim(0) + "\n" + claim(1)[:30] + "\n", encoding="utf-8")
    (skipped,) = load_factcheck_data(cut).skipped
    assert skipped.problem.startswith("not valid JSON: the line ends too early (truncated?)")


def test_skipped_rows_are_one_note_each_not_a_python_warning(two_runs):
    data, a, b = two_runs
    result = runner.invoke(app, ["cost", str(a), str(b)])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if line.strip()]
    assert notes == [f"note: {data}: 1 of 4 rows skipped (first: line 2: not valid JSON (Expecting value, column 1))"]
    assert "| **total** |" in result.stdout


def test_an_invalid_byte_in_calls_jsonl_names_the_file_and_line(two_runs, tmp_path):
    _, a, b = two_runs
    broken = tmp_path / "b"
    broken.mkdir()
    for name in ("config.json", "predictions.jsonl"):
        (broken / name).write_bytes((b / name).read_bytes())
    lines = (b / "calls.jsonl").read_bytes().splitlines(keepends=True)
    lines[1] = lines[1][:12] + b"\xff" + lines[1][12:]
    (broken / "calls.jsonl").write_bytes(b"".join(lines))
    result = runner.invoke(app, ["cost", str(a), str(broken)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"error: {broken / 'calls.jsonl'}, line 2: not UTF-8 text"]
