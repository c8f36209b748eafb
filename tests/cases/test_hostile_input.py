"""Cases files made to break the reader (issue 46): rows nested a thousand levels deep, and rows far
over the row limit, which are read past without being held. Each is a bad row named by its line, and
the rows around it are still read."""

from __future__ import annotations

import io
import json
import tracemalloc

import pytest
from typer.testing import CliRunner

from anchor.cases import MAX_ROW_BYTES, CaseLimits, CaseRow, CasesError, RejectedRow, check_cases, read_cases
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


# --------------------------------------------------------------------------- rows over the row limit

LIMIT = CaseLimits(max_row_bytes=1000)


def too_long(size: int, limit: int = 1000) -> str:
    return f"longer than the row limit of {limit:,} bytes ({size:,} bytes)"


def csv_row(condition: str, delimiter: str = ",") -> str:
    return delimiter.join(["Yes", "No", condition]) + "\n"


def read(data: bytes, name: str, limits: CaseLimits | None = LIMIT) -> list:
    return list(read_cases(io.BytesIO(data), name=name, limits=limits))


def test_a_json_line_over_the_row_limit_is_a_bad_row_and_the_next_one_is_read():
    long_line = row_with(json.dumps("w" * 2_000_000)) + "\n"
    text = json.dumps(ROW) + "\n" + long_line + json.dumps(ROW) + "\n"
    items = read(text.encode(), "big.jsonl", limits=None)  # the default limit, 1 MiB
    assert kinds(items) == [("CaseRow", 1), ("RejectedRow", 2), ("CaseRow", 3)]
    assert items[1].reason == too_long(len(long_line), MAX_ROW_BYTES)
    assert MAX_ROW_BYTES == 1_048_576


@pytest.mark.parametrize("delimiter, name", [(",", "big.csv"), ("\t", "big.tsv")])
def test_a_csv_line_over_the_row_limit_is_a_bad_row_and_the_next_one_is_read(delimiter, name):
    header = delimiter.join(["outcome1", "outcome2", "condition"]) + "\n"
    long_line = csv_row("w" * 2_000_000, delimiter)
    data = (header + csv_row("fine", delimiter) + long_line + csv_row("after", delimiter)).encode()
    items = read(data, name, limits=None)
    assert kinds(items) == [("CaseRow", 2), ("RejectedRow", 3), ("CaseRow", 4)]
    assert items[1].reason == too_long(len(long_line), MAX_ROW_BYTES)


def test_a_quoted_csv_field_spanning_lines_past_the_limit_is_one_bad_row_and_the_lines_are_counted():
    spanning = 'Yes,No,"' + "a line of a long quoted field\n" * 50 + 'its end"\n'
    data = ("outcome1,outcome2,condition\n" + csv_row("fine") + spanning + csv_row("after")).encode()
    items = read(data, "a.csv")
    assert kinds(items) == [("CaseRow", 2), ("RejectedRow", 3), ("CaseRow", 54)]
    assert items[1].reason == too_long(len(spanning))
    assert items[2].condition == "after"


def test_quotes_that_open_no_field_do_not_carry_a_long_csv_row_into_the_next_ones():
    # Quotes inside an unquoted field are text (csv reads them so), and a doubled quote inside a quoted
    # field is one quote: neither opens a field that runs on past the line end.
    long_lines = ['Yes,No,a 12" pizza ' + "w" * 2000 + "\n", 'Yes,No,"say ""hi"" ' + "w" * 2000 + '"\n']
    data = ("outcome1,outcome2,condition\n" + long_lines[0] + csv_row("next") + long_lines[1]
            + csv_row("last")).encode()
    items = read(data, "a.csv")
    assert kinds(items) == [("RejectedRow", 2), ("CaseRow", 3), ("RejectedRow", 4), ("CaseRow", 5)]
    assert [i.reason for i in items[::2]] == [too_long(len(line)) for line in long_lines]


def test_a_quote_left_open_past_the_limit_is_one_bad_row_to_the_end_of_the_file():
    rest = 'Yes,No,"open\n' + csv_row("swallowed by the open quote") * 100
    data = ("outcome1,outcome2,condition\n" + csv_row("fine") + rest).encode()
    items = read(data, "a.csv")
    assert kinds(items) == [("CaseRow", 2), ("RejectedRow", 3)]
    assert items[1].reason == too_long(len(rest)) + "; a quoted field is not closed before the end of the file"


def test_a_csv_header_over_the_row_limit_stops_the_file_in_one_line():
    header = ",".join(f"column {n}" for n in range(200)) + "\n"
    with pytest.raises(CasesError) as exc:
        read(header.encode() + csv_row("c").encode(), "wide.csv")
    assert str(exc.value) == f"wide.csv: line 1: the header is {too_long(len(header))}"


@pytest.mark.parametrize("padding", [0, 1])
def test_a_json_array_element_over_the_row_limit_is_a_bad_row_and_the_next_one_is_read(padding):
    # Escaped quotes and brackets in its strings, over many 64 KiB chunks (the padding moves where the
    # chunks cut the escapes), and objects inside it: none of them ends the element early.
    big = {**ROW, "meta": {"notes": ["[" * padding + '\\"}],' * 40_000, {"a": "]"}]}}
    element = json.dumps(big)
    text = "[\n" + json.dumps(ROW) + ",\n" + element + ",\n\n" + json.dumps(ROW) + "\n]\n"
    items = read(text.encode(), "big.json")
    assert kinds(items) == [("CaseRow", 2), ("RejectedRow", 3), ("CaseRow", 5)]
    assert items[1].reason == too_long(len(element.encode()))


def test_the_row_limit_counts_bytes_not_characters():
    condition = "\u00e9" * 600  # 600 characters, 1,200 bytes
    for name, data in [("a.jsonl", (row_with("1")[:-1] + f', "condition": "{condition}"}}\n').replace(
                           '"condition": "It rains.", ', "")),
                       ("a.json", "[" + json.dumps({**ROW, "condition": condition}, ensure_ascii=False) + "]"),
                       ("a.csv", "outcome1,outcome2,condition\n" + csv_row(condition))]:
        items = read(data.encode(), name)
        assert [type(i) for i in items] == [RejectedRow], name
        assert items[0].reason.startswith("longer than the row limit of 1,000 bytes"), name


@pytest.mark.parametrize("name", ["a.jsonl", "a.json", "a.csv", "a.tsv"])
def test_a_row_of_exactly_the_limit_is_read_and_one_byte_more_is_not(name):
    if name.endswith("jsonl"):
        row = json.dumps(ROW) + "\n"  # its line end counts
        data = row.encode()
    elif name.endswith(".json"):
        row = json.dumps(ROW)  # the element itself
        data = f"[{row}]".encode()
    else:  # a row longer than the header, which the limit holds to as well
        delimiter = "," if name.endswith("csv") else "\t"
        row = csv_row("It rains all morning over the whole city.", delimiter)
        data = (delimiter.join(["outcome1", "outcome2", "condition"]) + "\n" + row).encode()
    size = len(row.encode())
    assert [type(i) for i in read(data, name, CaseLimits(max_row_bytes=size))] == [CaseRow]
    [bad] = read(data, name, CaseLimits(max_row_bytes=size - 1))
    assert bad.reason == too_long(size, size - 1)


@pytest.mark.parametrize("name", ["big.jsonl", "big.json", "big.csv"])
def test_reading_a_row_far_over_the_limit_holds_about_one_rows_worth_of_memory(tmp_path, name):
    """A 32 MiB row: the reader holds at most a few times the 1 MiB limit, never the row."""
    condition = "w" * (32 << 20)
    if name.endswith("jsonl"):
        text = json.dumps(ROW) + "\n" + json.dumps({**ROW, "condition": condition}) + "\n"
    elif name.endswith(".json"):
        text = "[" + json.dumps(ROW) + ",\n" + json.dumps({**ROW, "condition": condition}) + "]"
    else:
        text = "outcome1,outcome2,condition\n" + csv_row("fine") + csv_row(condition)
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    del text, condition
    tracemalloc.start()
    try:
        items = list(read_cases(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [type(i) for i in items] == [CaseRow, RejectedRow]
    assert peak < 4 * MAX_ROW_BYTES, f"{peak:,} bytes at peak"


def test_a_raised_condition_limit_raises_the_row_limit_with_it(tmp_path):
    cases = tmp_path / "long.jsonl"
    cases.write_text(json.dumps({**ROW, "condition": "\u00e9" * 1_200_000}, ensure_ascii=False) + "\n",
                     encoding="utf-8")  # 2.4 MB
    result = runner.invoke(app, ["predict", str(cases), "--check", "--method", "vanilla", "--json",
                                 "--max-condition-chars", "1200000"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["check"]["good"] == 1
    assert CaseLimits.for_condition_chars(1_200_000).max_row_bytes == MAX_ROW_BYTES + 4 * (1_200_000 - 16_000)
    assert CaseLimits.for_condition_chars(100) == CaseLimits(max_condition_chars=100)


# --------------------------------------------------------------------------- ids


@pytest.mark.parametrize("name", ["a.csv", "a.jsonl"])
def test_an_id_holding_a_control_character_is_a_bad_row_naming_it(name):
    ids = ["a\x00b", "tab\there", "line\nbreak", "del\x7f", "c1\x85in", "caf\u00e9 \u00a0ok", "  trimmed\t"]
    if name.endswith("csv"):
        lines = "".join(f'"{i}",Yes,No,It rains.\n' for i in ids)
        data = ("id,outcome1,outcome2,condition\n" + lines).encode()
    else:
        data = "".join(json.dumps({"id": i, **ROW}) + "\n" for i in ids).encode()
    items = read(data, name, limits=None)
    assert [(i.field, i.reason) for i in items if isinstance(i, RejectedRow)] == [
        ("id", f"id holds a control character (U+{code:04X})") for code in (0, 9, 10, 0x7F, 0x85)]
    assert [i.id for i in items if isinstance(i, CaseRow)] == ["caf\u00e9 \u00a0ok", "trimmed"]
