"""Cases files, continued: the check summary, streaming (what is read and what is kept), groups, the
shipped JSON Schema and the two example files."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import tracemalloc
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from anchor.cases import (
    CASE_EXAMPLES,
    MAX_CONDITION_CHARS,
    MAX_ID_CHARS,
    MAX_SCENARIO_CHARS,
    REQUIRED_COLUMNS,
    CaseRow,
    CasesError,
    RejectedRow,
    case_row_schema,
    check_cases,
    example_file,
    read_cases,
    schema_file,
)
from anchor.cases.formats import _CHUNK_BYTES
from anchor.evaluation.datasets.text import negate_claim
from anchor.types import Scenario, scenario_key

# --------------------------------------------------------------------------- check summary

MIXED = (
    "id,scenario,outcome1,outcome2,condition,label,note\n"
    "a,Picnic today?,Picnic,No picnic,Sunny and warm,1,x\n"
    "b,Picnic  today?,Picnic,No picnic,Thunder at noon,No picnic,\n"  # same group: whitespace differs
    "c,Picnic today?,Picnic,No picnic,,1,\n"
    "d,,The shop opens at 9.,It is not true that the shop opens at 9.,The sign says 10:00,,\n"
    "e,Picnic today?,Picnic,Picnic,Cloudy,,\n"
    "a,Picnic today?,Picnic,No picnic,Windy,2,\n"
    "f,Picnic today?,No picnic,Picnic,Cold,,\n"  # outcomes swapped: another group
)


def test_check_counts_rows_groups_labels_and_lists_bad_rows():
    summary = check_cases(io.BytesIO(MIXED.encode()), name="mixed.csv", max_listed=2)
    assert (summary.rows, summary.good, summary.bad, summary.labelled) == (7, 4, 3, 2)
    assert (summary.groups, summary.largest_group, summary.format) == (3, 2, "csv")
    assert summary.condition_chars == len("Sunny and warm") + len("Thunder at noon") + len("The sign says 10:00") + 4
    assert summary.scenario_chars == 2 * len("Picnic today?PicnicNo picnic") + len(
        "The shop opens at 9.It is not true that the shop opens at 9.")
    assert summary.columns_found == ["id", "scenario", "outcome1", "outcome2", "condition", "label", "note"]
    assert summary.columns_used == {c: c for c in ("id", "scenario", "outcome1", "outcome2", "condition", "label")}
    assert summary.columns_ignored == ["note"]
    assert [(r.line, r.reason) for r in summary.rejected] == [
        (4, "condition is empty"), (6, "outcome1 and outcome2 are the same text")]
    lines = summary.lines()
    assert lines[0] == "mixed.csv (csv): 7 rows, 4 good, 3 bad; 3 groups (largest 2 rows); 2 labelled"
    assert "ignored columns: note" in lines and lines[-1] == "... and 1 more bad rows"
    assert json.loads(summary.model_dump_json())["rejected"][0]["field"] == "condition"


def test_check_notes_a_mapped_json_column_that_no_row_has():
    data = b'{"outcome1": "a", "outcome2": "b", "condition": "c", "Verdict": 1}\n'
    summary = check_cases(io.BytesIO(data), name="x.jsonl", columns={"label": "Verdcit"})
    assert summary.labelled == 0 and summary.columns_ignored == ["Verdict"]
    assert summary.notes == ["--column label=Verdcit: no good row has a value in 'Verdcit'"]
    assert check_cases(io.BytesIO(data), name="x.jsonl", columns={"label": "Verdict"}).labelled == 1

    # The true probability too: a mapped column without a value is noted, one with values is not.
    truth = b'{"outcome1": "a", "outcome2": "b", "condition": "c", "Truth": 0.3}\n'
    assert check_cases(io.BytesIO(truth), name="x.jsonl", columns={"p_true": "Truth"}).notes == []
    assert check_cases(io.BytesIO(truth), name="x.jsonl", columns={"p_true": "Truht"}).notes == [
        "--column p_true=Truht: no good row has a value in 'Truht'"]


def test_check_only_raises_for_a_file_it_cannot_read():
    summary = check_cases(io.BytesIO(b"outcome1,outcome2,condition\n,,\n"), name="x.csv")
    assert (summary.rows, summary.good, summary.notes) == (1, 0, ["no row is usable"])
    with pytest.raises(CasesError, match="no column 'condition'"):
        check_cases(io.BytesIO(b"outcome1,outcome2\na,b\n"), name="x.csv")


def test_a_groups_key_is_the_key_of_its_scenario():
    rows = [r for r in read_cases(io.BytesIO(MIXED.encode()), name="m.csv") if isinstance(r, CaseRow)]
    picnic = Scenario(text="Picnic today?", outcome1="Picnic", outcome2="No picnic")
    assert rows[0].group == rows[1].group == scenario_key(picnic) == scenario_key(rows[0].to_scenario())
    assert rows[3].group == scenario_key(picnic.swapped()) != rows[0].group
    assert rows[1].gold_outcome == "No picnic" and rows[3].gold_outcome is None


# --------------------------------------------------------------------------- streaming


class CountingSource(io.RawIOBase):
    """A file whose bytes are made on demand from a generator of lines, counting what was read."""

    def __init__(self, lines: Iterator[bytes]) -> None:
        self._lines = lines
        self._pending = b""
        self.served = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while len(self._pending) < len(buffer):
            chunk = next(self._lines, None)
            if chunk is None:
                break
            self._pending += chunk
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        self.served += n
        return n


def generated(fmt: str, rows: int, condition_chars: int = 100) -> Iterator[bytes]:
    filler = ("drizzle-and-wind" * (condition_chars // 16 + 1))[:condition_chars]  # few words: quick to split
    if fmt == "csv":
        yield b"id,scenario,outcome1,outcome2,condition,label\n"
    if fmt == "json":
        yield b"[\n"
    for i in range(rows):
        record = {"id": f"r{i}", "scenario": f"Scenario {i // 100}", "outcome1": "Go out", "outcome2": "Stay in",
                  "condition": f"{i} {filler}", "label": 1 + i % 2}
        if fmt == "csv":
            yield ",".join(str(v) for v in record.values()).encode() + b"\n"
        else:
            yield json.dumps(record).encode() + (b",\n" if fmt == "json" and i < rows - 1 else b"\n")
    if fmt == "json":
        yield b"]\n"


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "json"])
def test_rows_come_before_the_file_is_read(fmt):
    source = CountingSource(generated(fmt, rows=50_000))  # about 11 MB if it were read whole
    stream = read_cases(io.BufferedReader(source), name=f"big.{fmt}")
    first = next(iter(stream))
    assert isinstance(first, CaseRow) and first.id == "r0"
    assert source.served <= _CHUNK_BYTES + io.DEFAULT_BUFFER_SIZE


def peak_while_reading(fmt: str, rows: int) -> int:
    source = io.BufferedReader(CountingSource(generated(fmt, rows=rows, condition_chars=2_000)))
    tracemalloc.start()
    try:
        count = sum(1 for item in read_cases(source, name=f"x.{fmt}") if isinstance(item, CaseRow))
        assert count == rows
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "json"])
def test_memory_does_not_grow_with_the_rows_beyond_the_ids(fmt):
    small, large = peak_while_reading(fmt, 500), peak_while_reading(fmt, 5_000)
    # Keeping the 4,500 extra rows would take over 9 MB (2,000-character conditions); what may grow is
    # the set of ids seen (for the duplicate check), under 400 bytes an id.
    assert large - small < 4_500 * 400, (small, large)


def test_json_array_elements_across_chunk_boundaries():
    records, lines, parts, line = [], [], [b"[\n"], 2
    for i in range(40):
        # Sizes around the chunk size, and a multi-byte character placed at varied offsets.
        condition = "é" * (i * 997 % 5_000) + f" case {i} ✓" + "x" * (i * 7_919 % 9_000)
        record = {"id": i, "outcome1": "Yes", "outcome2": "No", "condition": condition,
                  "padding": "p" * (i * 13_337 % 70_000)}
        text = json.dumps(record, ensure_ascii=False, indent=1 if i % 3 == 0 else None).encode()
        records.append(record)
        lines.append(line)
        line += text.count(b"\n") + 1
        parts.append(text + (b",\n" if i < 39 else b"\n"))
    data = b"".join(parts + [b"]\n"])
    assert len(data) > 10 * _CHUNK_BYTES
    rows = list(read_cases(io.BytesIO(data), name="big.json"))
    assert all(isinstance(r, CaseRow) for r in rows)
    assert [r.id for r in rows] == [str(r["id"]) for r in records]
    assert [r.condition for r in rows] == [" ".join(r["condition"].split()) for r in records]
    assert [r.line for r in rows] == lines


def test_a_number_element_cut_by_a_chunk_boundary_is_read_whole():
    data = b"[" + b" " * (_CHUNK_BYTES - 3) + b"123456, " + json.dumps(
        {"outcome1": "Yes", "outcome2": "No", "condition": "c"}).encode() + b"]"
    items = list(read_cases(io.BytesIO(data), name="n.json"))
    assert isinstance(items[0], RejectedRow) and items[0].reason == "not a JSON object (got a number)"
    assert isinstance(items[1], CaseRow) and len(items) == 2


def test_an_invalid_element_across_a_chunk_boundary_is_one_bad_row():
    bad = b'{"outcome1": "Yes", "outcome2": "No", "condition": "' + b"z" * _CHUNK_BYTES + b'", oops}'
    good = json.dumps({"outcome1": "Yes", "outcome2": "No", "condition": "after"}).encode()
    items = list(read_cases(io.BytesIO(b"[" + bad + b",\n" + good + b"]"), name="b.json"))
    assert [type(i).__name__ for i in items] == ["RejectedRow", "CaseRow"]
    assert items[0].reason.startswith("not valid JSON") and items[1].line == 2


# --------------------------------------------------------------------------- schema


_KNOWN_KEYWORDS = {"$schema", "title", "description", "type", "required", "properties", "additionalProperties",
                   "minLength", "maxLength", "pattern", "enum", "anyOf", "minimum", "maximum"}
_TYPES = {"string": str, "integer": int, "number": (int, float), "null": type(None), "object": dict}


def schema_errors(value: Any, schema: dict) -> list[str]:
    """A small validator for the keywords the case schema uses; an unknown keyword fails the test, so
    the schema cannot grow past what this checks."""
    unknown = set(schema) - _KNOWN_KEYWORDS
    assert not unknown, f"the test validator does not know {unknown}"
    errors: list[str] = []
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(isinstance(value, _TYPES[t]) and not isinstance(value, bool) for t in types):
            return [f"{value!r} is not of type {types}"]
    if "enum" in schema and not any(type(value) is type(e) and value == e for e in schema["enum"]):
        errors.append(f"{value!r} not in {schema['enum']}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{value!r} below {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{value!r} above {schema['maximum']}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            errors.append("too short")
        if len(value) > schema.get("maxLength", len(value)):
            errors.append("too long")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"does not match {schema['pattern']}")
    if "anyOf" in schema and all(schema_errors(value, s) for s in schema["anyOf"]):
        errors.append("matches no alternative")
    if isinstance(value, dict):
        errors += [f"missing {name}" for name in schema.get("required", []) if name not in value]
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                errors += [f"{name}: {e}" for e in schema_errors(value[name], sub)]
        if schema.get("additionalProperties") is False:
            errors += [f"unexpected {k}" for k in value if k not in schema.get("properties", {})]
    return errors


def test_the_shipped_schema_is_the_one_the_code_describes():
    shipped = json.loads(schema_file().read_text(encoding="utf-8"))
    assert shipped == case_row_schema()
    assert shipped["required"] == list(REQUIRED_COLUMNS)
    props = shipped["properties"]
    assert props["condition"]["maxLength"] == MAX_CONDITION_CHARS
    assert props["outcome1"]["maxLength"] == props["scenario"]["maxLength"] == MAX_SCENARIO_CHARS
    assert props["id"]["maxLength"] == MAX_ID_CHARS and shipped["additionalProperties"] is True


@pytest.mark.parametrize("name", sorted(CASE_EXAMPLES))
def test_the_example_rows_validate_against_the_schema(name):
    with example_file(name).open("r", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows
    for row in rows:
        assert schema_errors(row, case_row_schema()) == [], row
    jsonschema = pytest.importorskip("jsonschema")
    for row in rows:
        jsonschema.validate(row, case_row_schema())


SAMPLES = [  # (row, accepted by both)
    ({"outcome1": "Yes", "outcome2": "No", "condition": "c"}, True),
    ({"outcome1": "Yes", "outcome2": "No", "condition": "c", "extra": [1]}, True),
    ({"id": 3, "scenario": None, "outcome1": "Yes", "outcome2": "No", "condition": "c", "label": None}, True),
    ({"outcome1": "Yes", "outcome2": "No", "condition": "c", "label": 1}, True),
    ({"outcome1": "Yes", "outcome2": "No", "condition": "c", "label": "2"}, True),
    ({"outcome1": "Yes", "outcome2": "No", "condition": "c", "label": "No"}, True),
    ({"outcome1": "Yes", "outcome2": "No", "condition": "c", "label": ""}, True),
    ({"outcome1": "Yes", "outcome2": "No"}, False),
    ({"outcome1": "Yes", "outcome2": " ", "condition": "c"}, False),
    ({"outcome1": "Yes", "outcome2": "No", "condition": ""}, False),
    ({"outcome1": "Yes", "outcome2": "No", "condition": 5}, False),
    ({"outcome1": "Yes", "outcome2": "No", "condition": "w" * (MAX_CONDITION_CHARS + 1)}, False),
    ({"scenario": "s" * (MAX_SCENARIO_CHARS + 1), "outcome1": "Yes", "outcome2": "No", "condition": "c"}, False),
    ({"id": "i" * (MAX_ID_CHARS + 1), "outcome1": "Yes", "outcome2": "No", "condition": "c"}, False),
    ({"id": [1], "outcome1": "Yes", "outcome2": "No", "condition": "c"}, False),
    ({"outcome1": "Yes", "outcome2": "No", "condition": "c", "label": 3}, False),
    ({"outcome1": "Yes", "outcome2": "No", "condition": "c", "label": True}, False),
    ({"outcome1": "Yes", "outcome2": "No", "condition": "c", "p_true": 0.25}, True),
    ({"outcome1": "Yes", "outcome2": "No", "condition": "c", "p_true": 1}, True),
    ({"outcome1": "Yes", "outcome2": "No", "condition": "c", "p_true": "0.7"}, True),
    ({"outcome1": "Yes", "outcome2": "No", "condition": "c", "p_true": None}, True),
    ({"outcome1": "Yes", "outcome2": "No", "condition": "c", "p_true": 1.5}, False),
    ({"outcome1": "Yes", "outcome2": "No", "condition": "c", "p_true": -0.01}, False),
    ({"outcome1": "Yes", "outcome2": "No", "condition": "c", "p_true": True}, False),
    ({"outcome1": "Yes", "outcome2": "No", "condition": "c", "p_true": [0.5]}, False),
]


@pytest.mark.parametrize("row, accepted", SAMPLES)
def test_the_schema_and_the_reader_agree(row, accepted):
    # After a good first row: a JSON file's first object names its columns.
    first = {"outcome1": "Yes", "outcome2": "No", "condition": "first"}
    _, item = read_cases(io.BytesIO(json.dumps([first, row]).encode()), name="two.json")
    assert isinstance(item, CaseRow) is accepted, item
    assert (schema_errors(row, case_row_schema()) == []) is accepted


def test_what_the_schema_cannot_say_is_left_to_the_reader():
    # Cross-field rules: the schema accepts these rows, the reader rejects them (and the schema says so).
    for row in ({"outcome1": "Yes", "outcome2": "yes", "condition": "c"},
                {"outcome1": "Yes", "outcome2": "No", "condition": "c", "label": "Maybe"},
                {"outcome1": "Yes", "outcome2": "No", "condition": "c", "p_true": "likely"},
                {"outcome1": "Yes", "outcome2": "No", "condition": "c", "p_true": "1.5"}):
        assert schema_errors(row, case_row_schema()) == []
        [item] = read_cases(io.BytesIO(json.dumps([row]).encode()), name="one.json")
        assert isinstance(item, RejectedRow)
    assert "a label given as text that is not one outcome's text" in case_row_schema()["description"]
    assert "a p_true given as text that is not a number in [0, 1]" in case_row_schema()["description"]


# --------------------------------------------------------------------------- examples


def test_the_decision_example_is_three_scenarios_of_four_labelled_conditions():
    with example_file("decisions").open("rb") as f:
        summary = check_cases(f)
    assert (summary.rows, summary.good, summary.groups, summary.largest_group, summary.labelled) == (12, 12, 3, 4, 12)
    with example_file("decisions").open("rb") as f:
        rows = list(read_cases(f))
    assert {r.label for r in rows} == {1, 2} and all(r.scenario for r in rows)


def test_the_factcheck_example_has_claims_their_negations_and_evidence():
    with example_file("factcheck").open("rb") as f:
        rows = list(read_cases(f))
    assert len(rows) == 6 and all(isinstance(r, CaseRow) for r in rows)
    assert all(r.scenario == "" and r.outcome2 == negate_claim(r.outcome1) for r in rows)
    assert sorted(r.label for r in rows) == [1, 1, 1, 2, 2, 2]
    with pytest.raises(CasesError, match="unknown example 'nope'"):
        example_file("nope")


def test_the_examples_are_recorded_in_provenance():
    data = Path(str(resources.files("anchor"))) / "data"
    provenance = (data / "PROVENANCE.md").read_text(encoding="utf-8")
    for filename in CASE_EXAMPLES.values():
        digest = hashlib.sha256((data / "examples" / filename).read_bytes()).hexdigest()
        assert f"`examples/{filename}`" in provenance and digest in provenance, filename
