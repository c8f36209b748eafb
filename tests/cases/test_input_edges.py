"""Edges of reading a cases file (issue 34, item 11): outcomes that only look different, a JSON key given
twice, a file in UTF-16, and what ``--check`` lists as read from a JSON-lines file."""

from __future__ import annotations

import io
import json

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from anchor.cases import CaseRow, CasesError, RejectedRow, check_cases, read_cases
from anchor.cli import app
from anchor.types import Scenario

runner = CliRunner()

#: Outcome pairs that read the same: Unicode compatibility forms (NFKC), composed and decomposed accents
#: (NFC), invisible format characters (zero-width space, joiner, word joiner, soft hyphen, byte-order mark).
SAME = [
    ("\uff21lice wins.", "Alice wins."),  # a full-width A
    ("The \ufb01nal is on.", "The final is on."),  # the "fi" ligature
    ("Cafe\u0301 opens.", "Caf\u00e9 opens."),
    ("Alice\u200b wins.", "Alice wins."),
    ("Alice\u200dwins.", "Alicewins."),
    ("Ali\u2060ce wins.", "Alice wins."),
    ("Ali\u00adce wins.", "Alice wins."),
    ("\ufeffAlice wins.", "ALICE WINS."),
]


def jsonl(rows: list[dict]) -> bytes:
    return b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in rows)


@pytest.mark.parametrize(("o1", "o2"), SAME)
def test_outcomes_that_only_look_different_are_the_same_text_everywhere(o1, o2):
    rows = list(read_cases(io.BytesIO(jsonl([{"outcome1": o1, "outcome2": o2, "condition": "It rains."}])),
                           name="c.jsonl"))
    assert isinstance(rows[0], RejectedRow) and rows[0].field == "outcome2"
    assert rows[0].reason == "outcome1 and outcome2 are the same text"
    with pytest.raises(ValidationError, match="outcome1 and outcome2 must differ"):
        Scenario(text="", outcome1=o1, outcome2=o2)
    result = runner.invoke(app, ["build", "--scenario", "Who wins?", "--outcome1", o1, "--outcome2", o2])
    assert result.exit_code == 2
    assert "--outcome1" in result.stderr and "must differ from --outcome2" in result.stderr


def test_outcomes_that_differ_in_what_they_say_are_still_two():
    pairs = [("Alice wins.", "Bob wins."), ("Caf\u00e9 opens.", "Cafe opens."), ("It is 1.", "It is 2.")]
    rows = list(read_cases(io.BytesIO(jsonl([{"outcome1": a, "outcome2": b, "condition": "c"} for a, b in pairs])),
                           name="c.jsonl"))
    assert all(isinstance(r, CaseRow) for r in rows)
    assert [Scenario(outcome1=a, outcome2=b).outcome2 for a, b in pairs] == [b for _, b in pairs]


def test_a_json_line_with_a_key_given_twice_is_a_bad_row_naming_the_key():
    text = ('{"outcome1": "A", "outcome2": "B", "condition": "first"}\n'
            '{"outcome1": "A", "outcome2": "B", "condition": "one", "condition": "two"}\n'
            '{"outcome1": "A", "outcome2": "B", "condition": "fine", "meta": {"k": 1, "k": 2}}\n')
    rows = list(read_cases(io.BytesIO(text.encode()), name="c.jsonl"))
    assert isinstance(rows[0], CaseRow) and isinstance(rows[2], CaseRow)  # a nested object is not the row's
    assert isinstance(rows[1], RejectedRow) and rows[1].line == 2
    assert rows[1].reason == "the key 'condition' appears twice in the object (which value is meant cannot be told)"


def test_a_json_array_element_with_a_key_given_twice_is_a_bad_row():
    text = ('[\n {"outcome1": "A", "outcome2": "B", "condition": "c"},\n'
            ' {"outcome1": "A", "outcome1": "Z", "outcome2": "B", "condition": "c"}\n]\n')
    rows = list(read_cases(io.BytesIO(text.encode()), name="c.json"))
    assert isinstance(rows[0], CaseRow)
    assert isinstance(rows[1], RejectedRow) and rows[1].line == 3 and "'outcome1' appears twice" in rows[1].reason


CSV = "id,outcome1,outcome2,condition\nk1,Yes,No,It rains.\n"
JSONL = '{"id": "k1", "outcome1": "Yes", "outcome2": "No", "condition": "It rains."}\n'
JSON = '[{"id": "k1", "outcome1": "Yes", "outcome2": "No", "condition": "It rains."}]\n'


@pytest.mark.parametrize(("name", "text"), [("c.csv", CSV), ("c.tsv", CSV.replace(",", "\t")), ("c.jsonl", JSONL),
                                            ("c.json", JSON)])
@pytest.mark.parametrize(("encoding", "found"), [("utf-16", "UTF-16"), ("utf-32", "UTF-32"),
                                                 ("utf-16-le", "UTF-16 or UTF-32 (NUL bytes in its first line)")])
def test_a_utf16_or_utf32_file_is_refused_with_an_encoding_hint(tmp_path, name, text, encoding, found):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    with pytest.raises(CasesError) as exc:
        check_cases(path)
    message = str(exc.value)
    assert message.startswith(f"{path}: the file is {found} text, and anchor reads UTF-8: save it as UTF-8")
    assert "\n" not in message


def test_a_utf8_file_with_a_byte_order_mark_is_still_read(tmp_path):
    for name, text in (("c.csv", CSV), ("c.jsonl", JSONL), ("c.json", JSON)):
        (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + text.encode())
        assert check_cases(tmp_path / name).good == 1


def test_check_lists_only_the_columns_a_json_lines_file_has(tmp_path):
    path = tmp_path / "claims.jsonl"
    path.write_text(JSONL + JSONL.replace("k1", "k2"), encoding="utf-8")
    summary = check_cases(path)
    assert summary.columns_used == {"id": "id", "outcome1": "outcome1", "outcome2": "outcome2",
                                    "condition": "condition"}
    assert summary.lines()[1] == "columns: id, outcome1, outcome2, condition"
    # A key that only a later row has is listed once a row has it.
    path.write_text(JSONL + JSONL.replace("k1", "k2").replace('"id"', '"label": "Yes", "id"'), encoding="utf-8")
    assert list(check_cases(path).columns_used) == ["id", "outcome1", "outcome2", "condition", "label"]
