"""A user's own cases file (the input of ``anchor predict``): the five formats, the column mapping, and
every kind of bad row with the line it is on."""

from __future__ import annotations

import csv
import io
import json
import sys

import pytest

from anchor.cases import (
    PARQUET_EXTRA_HINT,
    BadCaseRow,
    CaseLimits,
    CaseRow,
    CasesError,
    RejectedRow,
    detect_format,
    parse_column_options,
    read_cases,
)
from anchor.errors import AnchorError
from anchor.types import Scenario, scenario_key

COLUMNS = ["id", "scenario", "outcome1", "outcome2", "condition", "label"]
SHOP = ("Ana is choosing where to buy a new kettle this weekend.", "She buys it online.", "She buys it in a shop.")
FACT = ("", "The ferry leaves at noon.", "It is not true that the ferry leaves at noon.")
CASES = [  # scenario, outcome1, outcome2, condition, label, id
    (*SHOP, "The shop in town closed down last month.", "1", "k1"),
    (*SHOP, 'Her neighbour says "the shop has a sale", with a 30% discount\non kettles.', "2", "k2"),
    (*SHOP, "Delivery takes two weeks and she needs a kettle tomorrow.", "", "k3"),
    (*FACT, "The timetable lists a 12:00 departure, daily.", "The ferry leaves at noon.", "f1"),
]


def records(cases=CASES) -> list[dict[str, str]]:
    return [{"id": i, "scenario": s, "outcome1": o1, "outcome2": o2, "condition": c, "label": lab}
            for s, o1, o2, c, lab, i in cases]


def as_csv(rows: list[dict], delimiter: str = ",", header: list[str] | None = None) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, header or list(rows[0]), delimiter=delimiter, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def as_jsonl(rows: list[dict]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def as_json(rows: list[dict], indent: int | None = 2) -> bytes:
    return json.dumps(rows, indent=indent).encode()


def read(data: bytes, name: str, **kw) -> list[CaseRow | RejectedRow]:
    return list(read_cases(io.BytesIO(data), name=name, **kw))


def good(items) -> list[CaseRow]:
    return [r for r in items if isinstance(r, CaseRow)]


def bad(items) -> list[RejectedRow]:
    return [r for r in items if isinstance(r, RejectedRow)]


def without_line(rows: list[CaseRow]) -> list[dict]:
    return [r.model_dump(exclude={"line"}) for r in rows]


# --------------------------------------------------------------------------- formats


def parquet_bytes(rows: list[dict]) -> bytes:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    return sink.getvalue()


@pytest.mark.parametrize("name", ["cases.tsv", "cases.jsonl", "cases.ndjson", "cases.json", "cases.parquet"])
def test_every_format_reads_the_same_cases_as_csv(name):
    rows = records()
    expected = good(read(as_csv(rows), "cases.csv"))
    data = {"cases.tsv": lambda: as_csv(rows, "\t"), "cases.jsonl": lambda: as_jsonl(rows),
            "cases.ndjson": lambda: as_jsonl(rows), "cases.json": lambda: as_json(rows),
            "cases.parquet": lambda: parquet_bytes(rows)}[name]()
    got = read(data, name)
    assert not bad(got)
    assert without_line(good(got)) == without_line(expected)
    assert len(expected) == 4
    first, second, third, fact = expected
    assert (first.id, first.label, first.row, first.line) == ("k1", 1, 1, 2)
    # A quoted field with a line break: the row starts on line 3 and the next one on line 5.
    assert (second.line, third.line, fact.line) == (3, 5, 6)
    assert second.condition.endswith("discount on kettles.") and second.label == 2
    assert third.label is None and fact.label == 1 and fact.scenario == ""
    assert first.group == second.group == scenario_key(Scenario(text=SHOP[0], outcome1=SHOP[1], outcome2=SHOP[2]))
    assert fact.group != first.group and fact.to_scenario().text == ""


def test_format_comes_from_the_suffix_or_is_given():
    assert [detect_format(n) for n in ("a.CSV", "b.tsv", "c.jsonl", "d.ndjson", "e.json", "f.parquet")] == [
        "csv", "tsv", "jsonl", "jsonl", "json", "parquet"]
    assert detect_format("export.txt", "tsv") == "tsv"
    with pytest.raises(CasesError, match=r"cannot tell the format of 'export.txt'.*--input-format"):
        detect_format("export.txt")
    with pytest.raises(CasesError, match="--input-format: unknown format 'xlsx'"):
        detect_format("a.csv", "xlsx")
    rows = read(as_csv(records()), "export.txt", format="csv")
    assert len(good(rows)) == 4


def test_a_json_file_of_one_object_per_line_is_pointed_to_jsonl():
    with pytest.raises(CasesError, match=r"line 1: expected a JSON array.*use \.jsonl or --input-format jsonl"):
        read(as_jsonl(records()), "cases.json")
    assert len(good(read(as_jsonl(records()), "cases.json", format="jsonl"))) == 4


def test_standard_input_with_a_named_format(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(as_jsonl(records()))))
    assert [r.id for r in read_cases("-", format="jsonl")] == ["k1", "k2", "k3", "f1"]
    with pytest.raises(CasesError, match="standard input"):
        read_cases("-")
    with pytest.raises(CasesError, match="Parquet cannot be read from standard input"):
        list(read_cases("-", format="parquet"))


def test_a_byte_order_mark_and_crlf_line_ends_are_read(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes(b"\xef\xbb\xbf" + as_csv(records()).replace(b"\n", b"\r\n"))
    rows = list(read_cases(path))
    assert [r.id for r in rows] == ["k1", "k2", "k3", "f1"] and [r.line for r in rows] == [2, 3, 5, 6]
    assert good(rows)[1].condition.endswith("discount on kettles.")


def test_missing_file_and_empty_files_are_one_line_errors(tmp_path):
    with pytest.raises(CasesError, match=r"nope.csv: cannot read the file") as exc:
        list(read_cases(tmp_path / "nope.csv"))
    assert isinstance(exc.value, AnchorError) and isinstance(exc.value, ValueError)
    assert "\n" not in str(exc.value)
    (tmp_path / "e.csv").write_bytes(b"\n\n")
    with pytest.raises(CasesError, match="the file is empty"):
        list(read_cases(tmp_path / "e.csv"))
    (tmp_path / "e.json").write_bytes(b"  ")
    with pytest.raises(CasesError, match="the file is empty"):
        list(read_cases(tmp_path / "e.json"))
    assert read(b"outcome1,outcome2,condition\n", "h.csv") == []
    assert read(b"[]", "h.json") == [] and read(b"\n", "h.jsonl") == []


def test_closing_a_stream_closes_its_file(tmp_path, monkeypatch):
    path = tmp_path / "c.csv"
    path.write_bytes(as_csv(records()))
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda *a, **k: opened.append(real_open(*a, **k)) or opened[-1])
    with read_cases(path) as stream:
        assert next(iter(stream)).id == "k1"
        assert len(opened) == 1 and not opened[0].closed
    assert opened[0].closed


def test_a_stream_is_read_once():
    stream = read_cases(io.BytesIO(as_csv(records())), name="x.csv")
    assert len(list(stream)) == 4
    with pytest.raises(CasesError, match="read once"):
        list(stream)


# --------------------------------------------------------------------------- columns


def test_columns_are_mapped_and_unknown_ones_listed():
    rows = [{"Case": r["id"], "Context": r["scenario"], "Yes": r["outcome1"], "No": r["outcome2"],
             "Evidence": r["condition"], "Truth": r["label"], "condtion": "x", "notes": "y"} for r in records()]
    mapping = parse_column_options(["id=Case", "scenario=Context", "outcome1=Yes", "outcome2=No",
                                    "condition=Evidence", "label = Truth"])
    assert mapping["label"] == "Truth"
    expected = without_line(good(read(as_csv(records()), "a.csv")))
    for data, name in ((as_csv(rows), "a.csv"), (as_jsonl(rows), "a.jsonl"), (as_json(rows), "a.json")):
        stream = read_cases(io.BytesIO(data), name=name, columns=mapping)
        assert without_line(good(stream)) == expected
        # (JSON: an optional field the mapping leaves unnamed, p_true here, may still come in a later row.)
        assert {k: v for k, v in stream.used_columns.items() if k != "p_true"} == mapping
        assert stream.ignored_columns == ["condtion", "notes"]


def test_column_option_errors_name_the_flag():
    cases = [
        (["condition"], "--column expects NAME=COLUMN"),
        (["condition=A", "condition=B"], "--column condition is given twice"),
        (["conditon=Evidence"], "--column conditon=Evidence: unknown name 'conditon'.*did you mean 'condition'"),
        (["outcome1=Claim", "outcome2=Claim"], "--column: outcome1 and outcome2 both map to the column 'Claim'"),
    ]
    for options, message in cases:
        with pytest.raises(CasesError, match=message):
            parse_column_options(options)


def test_a_mapped_column_missing_from_the_header_names_the_flag():
    with pytest.raises(CasesError, match=r"a.csv: --column condition=Evidense: the file has no column 'Evidense' "
                                         r"\(columns: .*\); did you mean 'Evidence'\?"):
        read(b"outcome1,outcome2,Evidence\na,b,c\n", "a.csv", columns={"condition": "Evidense"})
    with pytest.raises(CasesError, match="--column label=Truth: the file has no column 'Truth'"):
        read(b"outcome1,outcome2,condition\na,b,c\n", "a.csv", columns={"label": "Truth"})


def test_a_missing_required_column_suggests_the_close_one():
    with pytest.raises(CasesError) as exc:
        read(b"id,outcome1,outcome2,condtion\n1,a,b,c\n", "a.csv")
    assert str(exc.value) == ("a.csv: no column 'condition' (columns: 'id', 'outcome1', 'outcome2', 'condtion'): "
                              "did you mean 'condtion'? Otherwise name the column that holds it with --column "
                              "condition=COLUMN")
    with pytest.raises(CasesError, match=r"a.json: no column 'outcome2' \(columns: 'outcome1', 'condition', "
                                         r"'other'\): name the column that holds it with --column outcome2=COLUMN"):
        read(b'[{"outcome1": "a", "condition": "c", "other": 1}]', "a.json")


def test_two_names_reading_one_column_and_duplicate_headers_are_refused():
    with pytest.raises(CasesError, match="scenario and condition would both read the column 'condition'"):
        read(b"outcome1,outcome2,condition\na,b,c\n", "a.csv", columns={"scenario": "condition"})
    with pytest.raises(CasesError, match="the column 'condition' appears twice in the header"):
        read(b"outcome1,outcome2,condition,condition\na,b,c,d\n", "a.csv")
    assert len(good(read(b"outcome1,outcome2,condition,x,x\na,b,c,d,e\n", "a.csv"))) == 1


def test_the_scenario_id_and_label_columns_are_optional():
    rows = read(b"outcome1,outcome2,condition\nYes,No,first\nYes,No,second\n", "a.csv")
    assert [(r.id, r.scenario, r.label, r.row) for r in rows] == [("row-1", "", None, 1), ("row-2", "", None, 2)]


# --------------------------------------------------------------------------- labels


@pytest.mark.parametrize("label, expected", [
    ("1", 1), (" 2 ", 2), (1, 1), (2, 2), (2.0, 2), ("2.0", 2), ("", None), (None, None), (float("nan"), None),
    ("She  buys it\nonline. ", 1), ("She buys it in a shop.", 2),
])
def test_label_forms(label, expected):
    row = {"outcome1": SHOP[1], "outcome2": SHOP[2], "condition": "c", "label": label}
    [item] = read(json.dumps([row]).encode(), "a.json")
    assert isinstance(item, CaseRow) and item.label == expected


@pytest.mark.parametrize("label, reason", [
    ("3", "label '3' is neither 1, 2 nor the text of outcome1 or outcome2"),
    ("she buys it online.", "is neither 1, 2"),  # the text must match exactly, case included
    (0, "label must be 1, 2 or the text of one outcome, got 0"),
    (True, "got a boolean"),
    ([1], "label must be text, got an array"),
])
def test_bad_labels(label, reason):
    row = {"outcome1": SHOP[1], "outcome2": SHOP[2], "condition": "c", "label": label}
    [item] = read(json.dumps([row]).encode(), "a.json")
    assert isinstance(item, RejectedRow) and item.field == "label" and reason in item.reason


def test_a_label_that_is_an_outcome_number_and_the_other_outcomes_text_is_ambiguous():
    [item] = read(b"outcome1,outcome2,condition,label\n2,1,c,1\n", "a.csv")
    assert isinstance(item, RejectedRow) and "ambiguous" in item.reason
    [item] = read(b"outcome1,outcome2,condition,label\n1,yes,c,1\n", "a.csv")
    assert isinstance(item, CaseRow) and item.label == 1


# --------------------------------------------------------------------------- bad rows


BAD_CSV_LINES = [  # (line content, field at fault or None, part of the reason)
    ('g1,S,Yes,No,"fine, labelled",1', None, None),
    ("g2,S,Yes,No,fine and unlabelled,", None, None),
    ("b1,S,,No,c,", "outcome1", "outcome1 is empty"),
    ("b2,S,Yes,  yes ,c,", "outcome2", "outcome1 and outcome2 are the same text"),
    ("b3,S,Yes,No,   ,1", "condition", "condition is empty"),
    ("b4,S,Yes,No,caf\xff,1", "condition", "condition is not valid UTF-8 text"),
    ("b5,S,Yes,No," + "w " * 10_000 + ",1", "condition", "condition has 19,999 characters, over the limit of 16,000"),
    ("b6,S,Yes,No,c,maybe", "label", "label 'maybe' is neither 1, 2 nor the text of outcome1 or outcome2"),
    ("g1,S,Yes,No,c,2", "id", "duplicate id 'g1' (first on line 2)"),
    ("b7,S,Yes,No,c", None, "has 5 fields, the header has 6"),
    ("b8,S,Yes,No,c,1,extra", None, "has 7 fields, the header has 6"),
    ('b9,S,Yes,No,c "quoted" wrongly,1', None, None),  # a quote inside an unquoted field is kept as text
    ('b10,S,Yes,No,"c" then text,1', None, "not a valid CSV row"),
    ("b11," + "s" * 4_001 + ",Yes,No,c,1", "scenario", "scenario has 4,001 characters, over the limit of 4,000"),
    ("x" * 201 + ",S,Yes,No,c,1", "id", "id has 201 characters, over the limit of 200"),
    ("g3,,Yes,No,the last row still reads,2", None, None),
]


def test_every_bad_csv_row_is_listed_with_its_line_and_the_rest_is_read():
    data = ",".join(COLUMNS).encode() + b"\n" + b"\n".join(
        line.encode("latin-1") if "\xff" in line else line.encode() for line, _, _ in BAD_CSV_LINES) + b"\n"
    items = read(data, "bad.csv")
    assert len(items) == len(BAD_CSV_LINES)
    for number, (item, (_, field, reason)) in enumerate(zip(items, BAD_CSV_LINES, strict=True), start=2):
        assert item.line == number
        if reason is None:
            assert isinstance(item, CaseRow), item
        else:
            assert isinstance(item, RejectedRow) and reason in item.reason and item.field == field, item
            assert "\n" not in item.reason and item.message().startswith(f"line {number}: ")
    by_reason = {r.reason.split(" (")[0]: r for r in bad(items)}
    assert by_reason["duplicate id 'g1'"].id == "g1" and by_reason["outcome1 is empty"].id == "b1"
    assert [r.id for r in good(items)] == ["g1", "g2", "b9", "g3"]
    assert [r.label for r in good(items)] == [1, None, 1, 2]  # labels given on some rows only


def test_the_condition_limit_is_a_setting():
    data = b"outcome1,outcome2,condition\nYes,No," + b"w" * 20_000 + b"\n"
    [item] = read(data, "a.csv")
    assert isinstance(item, RejectedRow) and "over the limit of 16,000" in item.reason
    [item] = read(data, "a.csv", limits=CaseLimits(max_condition_chars=20_000))
    assert isinstance(item, CaseRow) and len(item.condition) == 20_000


def test_an_unclosed_quote_is_a_bad_row_not_a_field_that_swallows_the_file():
    items = read(b'outcome1,outcome2,condition\nYes,No,fine\nYes,No,"open\nYes,No,later\n', "a.csv")
    assert isinstance(items[0], CaseRow) and len(items) == 2
    assert items[1].line == 3 and "quoted field is not closed" in items[1].reason


def test_a_field_over_the_csv_readers_own_limit_is_one_bad_row():
    data = b'outcome1,outcome2,condition\nYes,No,"' + b"x" * 140_000 + b'"\nYes,No,after\n'
    items = read(data, "a.csv", limits=CaseLimits(max_condition_chars=200_000))
    assert [(type(i).__name__, i.line) for i in items] == [("RejectedRow", 2), ("CaseRow", 3)]
    assert "field larger than field limit (131072)" in items[0].reason


def test_a_header_that_is_not_a_csv_row_is_said_not_to_be_one():
    data = b'outcome1,outcome2,"' + b"x" * 140_000 + b'"\nYes,No,c\n'
    with pytest.raises(CasesError) as exc:
        read(data, "a.csv")
    assert str(exc.value) == ("a.csv: line 1: the header is not a valid CSV row (field larger than field limit "
                              "(131072))")


BAD_JSONL = [  # line, field, reason
    ('{"id": 7, "outcome1": "Yes", "outcome2": "No", "condition": "a whole-number id is text"}', None, None),
    ('{"outcome1": "Yes", "outcome2": "No"}', "condition", "missing condition (no 'condition' in this row)"),
    ('{"outcome1": "Yes", "outcome2": "No", "condition": null}', "condition", "condition is empty (null)"),
    ('{"outcome1": "Yes", "outcome2": 2, "condition": "c"}', "outcome2", "outcome2 must be text, got a number"),
    ('{"outcome1": ["Yes"], "outcome2": "No", "condition": "c"}', "outcome1", "outcome1 must be text, got an array"),
    ('{"id": true, "outcome1": "Yes", "outcome2": "No", "condition": "c"}', "id", "id must be text or a whole number"),
    ('{"id": "7", "outcome1": "Yes", "outcome2": "No", "condition": "c"}', "id", "duplicate id '7' (first on line 1)"),
    ('{"outcome1": "Yes", "outcome2": "No", "condition": "c"', None, "not valid JSON: the line ends too early"),
    ("not json at all", None, "not valid JSON (Expecting value, column 1)"),
    ('["Yes", "No", "c"]', None, "not a JSON object (got an array)"),
    ('{"outcome1": "Yes", "outcome2": "No", "condition": "\\ud800 lone"}', "condition", "not valid UTF-8 text"),
    ('{"outcome1": "Yes", "outcome2": "No", "condition": "caf\xff"}', None, "not valid UTF-8 (byte 56 of the line)"),
    ('{"outcome1": "Yes", "outcome2": "No", "condition": "still read", "label": "No"}', None, None),
]


def test_every_bad_json_line_is_listed_with_its_line():
    data = b"\n".join(line.encode("latin-1") if "\xff" in line else line.encode() for line, _, _ in BAD_JSONL)
    items = read(data.replace(b"\n", b"\n\n", 1), "bad.jsonl")  # a blank line 2 is skipped, lines still count
    assert len(items) == len(BAD_JSONL)
    for item, number, (_, field, reason) in zip(items, [1, *range(3, len(BAD_JSONL) + 2)], BAD_JSONL, strict=True):
        assert item.line == number
        if reason is None:
            assert isinstance(item, CaseRow), item
        else:
            assert isinstance(item, RejectedRow) and reason in item.reason and item.field == field, item
    assert [(r.id, r.label) for r in good(items)] == [("7", None), ("row-13", 2)]


def test_bad_elements_of_a_json_array_are_listed_with_their_physical_lines():
    text = (b'[\n  {"outcome1": "Yes", "outcome2": "No", "condition": "first"},\n'
            b'  {"outcome1": "Yes", "outcome2": "No", "condition": tru},\n'
            b'  5, {"outcome1": "Yes", "outcome2": "No", "condition": "caf\xff"},\n'
            b'  {\n    "outcome1": "Yes",\n    "outcome2": "No",\n    "condition": "last"\n  }\n]\n')
    items = read(text, "a.json")
    assert [(type(i).__name__, i.line) for i in items] == [
        ("CaseRow", 2), ("RejectedRow", 3), ("RejectedRow", 4), ("RejectedRow", 4), ("CaseRow", 5)]
    assert [r.reason for r in bad(items)] == [
        "not valid JSON (Expecting value)", "not a JSON object (got a number)",
        "not valid UTF-8 (bytes that are not text)"]
    assert good(items)[1].row == 5 and good(items)[1].condition == "last"


@pytest.mark.parametrize("text, message", [
    (b'[{"outcome1": "a", "outcome2": "b", "condition": "c"},\n{"outcome1": "a"', "line 2: the file ends inside"),
    (b'[{"outcome1": "a", "outcome2": "b", "condition": "c"}\n{"x": 1}]', "line 2: expected ',' or ']'"),
    (b'[{"outcome1": "a", "outcome2": "b", "condition": "c"},,]', "an empty element"),
    (b'[{"outcome1": "a", "outcome2": "b", "condition": "c"}] x', "text after the end of the JSON array"),
    (b'{"outcome1": "a"}', "expected a JSON array"),
])
def test_a_broken_json_array_stops_with_its_line(text, message):
    with pytest.raises(CasesError, match=message):
        read(text, "a.json")


def test_strict_mode_raises_at_the_first_bad_row():
    data = b"id,outcome1,outcome2,condition\na,Yes,No,c\nb,,No,c\nc,Yes,No,\n"
    stream = read_cases(io.BytesIO(data), name="s.csv", strict=True)
    seen = []
    with pytest.raises(BadCaseRow) as exc:
        for item in stream:
            seen.append(item)
    assert [r.id for r in seen] == ["a"]
    assert (exc.value.line, exc.value.reason, exc.value.rejected.id) == (3, "outcome1 is empty", "b")
    assert str(exc.value) == "s.csv: line 3: outcome1 is empty" and isinstance(exc.value, CasesError)


# --------------------------------------------------------------------------- parquet


def test_parquet_values_of_other_types(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"id": [10, 11, 12], "outcome1": ["Yes", "Yes", "Yes"], "outcome2": ["No", "No", "No"],
                      "condition": ["a", "b", "c"], "label": [1.0, float("nan"), 2.0], "extra": [1, 2, 3]})
    pq.write_table(table, tmp_path / "t.parquet")
    stream = read_cases(tmp_path / "t.parquet")
    rows = list(stream)
    assert [(r.id, r.label, r.line) for r in rows] == [("10", 1, 1), ("11", None, 2), ("12", 2, 3)]
    assert stream.ignored_columns == ["extra"]


def test_parquet_without_pyarrow_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    (tmp_path / "t.parquet").write_bytes(b"PAR1")
    with pytest.raises(CasesError) as exc:
        list(read_cases(tmp_path / "t.parquet"))
    assert str(exc.value) == PARQUET_EXTRA_HINT == "reading Parquet needs pyarrow: pip install 'anchor-infer[parquet]'"


def test_a_file_that_is_not_parquet_is_one_line(tmp_path):
    pytest.importorskip("pyarrow")
    (tmp_path / "t.parquet").write_bytes(b"outcome1,outcome2,condition\n")
    with pytest.raises(CasesError, match=r"t.parquet: not a readable Parquet file") as exc:
        list(read_cases(tmp_path / "t.parquet"))
    assert "\n" not in str(exc.value)


# --------------------------------------------------------------------------- the true probability (p_true)


@pytest.mark.parametrize("value, expected", [
    ("0.25", 0.25), (" 1.0 ", 1.0), ("0", 0.0), (0, 0.0), (1, 1.0), (0.8660399529964747, 0.8660399529964747),
    ("0.8660399529964747", 0.8660399529964747), ("1e-3", 0.001), ("", None), (None, None), (float("nan"), None),
])
def test_p_true_forms(value, expected):
    row = {"outcome1": SHOP[1], "outcome2": SHOP[2], "condition": "c", "p_true": value}
    [item] = read(json.dumps([row]).encode(), "a.json")
    assert isinstance(item, CaseRow) and item.p_true == expected


@pytest.mark.parametrize("value, reason", [
    ("high", "p_true must be a probability in [0, 1], got 'high'"),
    ("1.5", "p_true must be a probability in [0, 1], got '1.5'"),
    (-0.1, "p_true must be a probability in [0, 1], got -0.1"),
    ("nan", "p_true must be a probability in [0, 1], got 'nan'"),
    ("inf", "p_true must be a probability in [0, 1], got 'inf'"),
    (True, "p_true must be a probability in [0, 1], got a boolean"),
    ([0.5], "p_true must be a probability in [0, 1], got an array"),
])
def test_bad_p_true_values_reject_the_row_naming_the_field(value, reason):
    row = {"id": "r1", "outcome1": SHOP[1], "outcome2": SHOP[2], "condition": "c", "p_true": value}
    [item] = read(json.dumps([row]).encode(), "a.json")
    assert isinstance(item, RejectedRow) and item.field == "p_true" and item.reason == reason and item.id == "r1"


def test_p_true_is_mapped_with_column_like_the_other_fields():
    rows = [{"Key": "a", "A": "Yes", "B": "No", "Text": "c1", "Truth": "0.7"},
            {"Key": "b", "A": "Yes", "B": "No", "Text": "c2", "Truth": ""},
            {"Key": "c", "A": "Yes", "B": "No", "Text": "c3", "Truth": "2"}]
    mapping = parse_column_options(["id=Key", "outcome1=A", "outcome2=B", "condition=Text", "p_true=Truth"])
    items = read(as_csv(rows), "t.csv", columns=mapping)
    assert [(i.id, i.p_true) for i in items[:2]] == [("a", 0.7), ("b", None)]
    assert isinstance(items[2], RejectedRow) and items[2].field == "p_true" and items[2].line == 4
    # Without a mapping the column is not read: an unknown name stays an ignored column.
    plain = read(as_csv(rows), "t.csv", columns={"id": "Key", "outcome1": "A", "outcome2": "B", "condition": "Text"})
    assert all(isinstance(i, CaseRow) and i.p_true is None for i in plain)
    with pytest.raises(CasesError, match="--column p_true=Nope: the file has no column 'Nope'"):
        read(as_csv(rows), "t.csv", columns={**mapping, "p_true": "Nope"})
