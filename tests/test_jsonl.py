"""The one lenient JSON-lines reader (anchor.jsonl): a cases file and a fact-checking file read the same
way. The two readers used to disagree on a UTF-8 byte-order mark at the start of the file (the cases
reader skipped it, the fact-checking reader dropped the first row); both now skip it, and both call a
mark at the start of a later line (files joined with ``cat``) a bad row."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from anchor.cases import CaseRow, CasesError, RejectedRow, read_cases
from anchor.evaluation.datasets.factcheck import load_factcheck_data
from anchor.evaluation.datasets.reading import DatasetError
from anchor.jsonl import LATER_BOM, read_json_lines

BOM = b"\xef\xbb\xbf"


def case(n: int) -> bytes:
    return json.dumps({"scenario": "", "outcome1": f"Claim {n} holds.", "outcome2": f"Claim {n} fails.",
                       "condition": f"Evidence {n}.", "label": 1}).encode()


def claim(n: int) -> bytes:
    return json.dumps({"claim": f"Claim {n} holds.", "label": "SUPPORTED", "evidence": [f"Evidence {n}."]}).encode()


def write(tmp_path: Path, name: str, lines: list[bytes]) -> Path:
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_a_bom_starting_the_file_is_skipped_by_both_readers_and_one_starting_a_later_line_is_a_bad_row(tmp_path):
    cases = write(tmp_path, "cases.jsonl", [BOM + case(0), case(1), BOM + case(2), case(3)])
    rows = list(read_cases(cases))
    assert [(r.line, r.outcome1) for r in rows if isinstance(r, CaseRow)] == [
        (1, "Claim 0 holds."), (2, "Claim 1 holds."), (4, "Claim 3 holds.")]
    assert [(r.line, r.reason) for r in rows if isinstance(r, RejectedRow)] == [(3, LATER_BOM)]

    facts = load_factcheck_data(write(tmp_path, "facts.jsonl", [BOM + claim(0), claim(1), BOM + claim(2), claim(3)]))
    assert [i.outcome1 for i in (inst.scenario for inst in facts.instances)] == [
        "Claim 0 holds.", "Claim 1 holds.", "Claim 3 holds."]
    assert [(s.line, s.problem) for s in facts.skipped] == [(3, LATER_BOM)]


def test_both_readers_refuse_a_utf16_file_in_one_line_and_flag_a_key_given_twice(tmp_path):
    for name, text in (("cases.jsonl", case(0)), ("facts.jsonl", claim(0))):
        (tmp_path / name).write_bytes(text.decode().encode("utf-16"))
    with pytest.raises(CasesError, match="UTF-16 text, and anchor reads UTF-8"):
        list(read_cases(tmp_path / "cases.jsonl"))
    with pytest.raises(DatasetError, match="UTF-16 text, and anchor reads UTF-8"):
        load_factcheck_data(tmp_path / "facts.jsonl")

    twice = b'{"claim": "A.", "claim": "B.", "label": "SUPPORTED", "evidence": ["E."]}'
    facts = load_factcheck_data(write(tmp_path, "twice.jsonl", [claim(0), twice]))
    assert [(s.line, s.problem) for s in facts.skipped] == [
        (2, "the key 'claim' appears twice in the object (which value is meant cannot be told)")]


def test_the_reader_gives_each_line_its_value_or_its_reason():
    lines = [BOM + b'{"a": 1}', b"", b'{"a": ', b"\xff", b"[1, 2]"]
    read = list(read_json_lines(io.BytesIO(b"\n".join(lines)), "f.jsonl", ValueError, max_line_bytes=100))
    assert [(r.line, r.value, r.problem and r.problem.split(" (")[0]) for r in read] == [
        (1, {"a": 1}, None), (3, None, "not valid JSON: the line ends too early"), (4, None, "not valid UTF-8"),
        (5, [1, 2], None)]
