"""Cases files made to break the reader (issue 46): rows nested a thousand levels deep. Each is a bad
row named by its line, and the rows around it are still read."""

from __future__ import annotations

import io
import json

import pytest
from typer.testing import CliRunner

from anchor.cases import CaseRow, RejectedRow, check_cases, read_cases
from anchor.cli import app
from anchor.jsonl import MAX_JSON_DEPTH

runner = CliRunner()

ROW = {"outcome1": "Yes", "outcome2": "No", "condition": "It rains."}
#: Nested deeper than Python's decoder can recurse (about 1,100 levels in 2 KB, as in the report).
DEEP = "[" * 1100 + "]" * 1100


def row_with(extra: str) -> str:
    """A good row's JSON with one more key whose value is the JSON text ``extra``."""
    return json.dumps(ROW)[:-1] + f', "meta": {extra}}}'


def kinds(items) -> list[tuple[str, int]]:
    return [(type(i).__name__, i.line) for i in items]


@pytest.mark.parametrize("deep", [DEEP, "[" * 100_000 + "]" * 100_000, '{"a": ' * 2000 + "1" + "}" * 2000])
def test_a_deeply_nested_json_line_is_a_bad_row_and_the_others_are_read(deep):
    text = "\n".join([json.dumps(ROW), row_with(deep), deep, json.dumps(ROW)]) + "\n"
    items = list(read_cases(io.BytesIO(text.encode()), name="n.jsonl"))
    assert kinds(items) == [("CaseRow", 1), ("RejectedRow", 2), ("RejectedRow", 3), ("CaseRow", 4)]
    assert items[1].reason == items[2].reason == (
        f"nested deeper than {MAX_JSON_DEPTH} levels of arrays and objects (a row is a flat object)")


def test_a_deeply_nested_json_array_element_is_a_bad_row_and_the_others_are_read():
    text = "[\n" + ",\n".join([json.dumps(ROW), row_with(DEEP), DEEP, json.dumps(ROW)]) + "\n]\n"
    items = list(read_cases(io.BytesIO(text.encode()), name="n.json"))
    assert kinds(items) == [("CaseRow", 2), ("RejectedRow", 3), ("RejectedRow", 4), ("CaseRow", 5)]
    assert {i.reason for i in items[1:3]} == {
        f"nested deeper than {MAX_JSON_DEPTH} levels of arrays and objects (a row is a flat object)"}


@pytest.mark.parametrize("name", ["a.jsonl", "a.json"])
def test_nesting_up_to_the_limit_is_read_and_one_more_level_is_not(name):
    # The row's own object is level 1, so its "meta" may nest MAX_JSON_DEPTH - 1 levels. Brackets inside
    # strings are text, not nesting.
    fits = row_with("[" * (MAX_JSON_DEPTH - 1) + '"[[[[{{{{"' + "]" * (MAX_JSON_DEPTH - 1))
    over = row_with("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)
    rows = [fits, over]
    text = "\n".join(rows) + "\n" if name.endswith("jsonl") else "[" + ",\n".join(rows) + "]"
    items = list(read_cases(io.BytesIO(text.encode()), name=name))
    assert [type(i) for i in items] == [CaseRow, RejectedRow]


def test_predict_check_of_a_deeply_nested_file_names_the_row_without_a_traceback(tmp_path):
    cases = tmp_path / "n.jsonl"
    cases.write_text(json.dumps(ROW) + "\n" + DEEP + "\n", encoding="utf-8")
    result = runner.invoke(app, ["predict", str(cases), "--check", "--method", "vanilla"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert "line 2: nested deeper than" in result.output
    assert check_cases(cases).bad == 1
