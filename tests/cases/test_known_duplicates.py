"""A second pass over a cases file told which rows the first pass found with a repeated id rejects the same
rows for the same reason without remembering every id (a helper process reading its share of a large file)."""

from __future__ import annotations

from pathlib import Path

from anchor.cases import CaseRow, RejectedRow, check_cases, read_cases


def _rows(path: Path, **kw) -> list[tuple[int, str, str | None]]:
    with read_cases(path, **kw) as stream:
        out = [(item.row, "good" if isinstance(item, CaseRow) else "bad",
                None if isinstance(item, CaseRow) else item.reason) for item in stream]
        kept = dict(stream.duplicates)
    return out + [(0, "duplicates", str(sorted(kept.items())))]


def test_the_duplicates_a_whole_pass_found_are_rejected_again_without_remembering_the_ids(tmp_path):
    path = tmp_path / "cases.csv"
    path.write_text("id,outcome1,outcome2,condition\n"
                    "a,Yes,No,one\nb,Yes,No,two\na,Yes,No,three\n\"c\",Yes,No,\"multi\nline\"\nb,Yes,No,four\n"
                    "d,Yes,No,five\n", encoding="utf-8")
    check = check_cases(path)
    assert check.duplicate_rows == {3: 2, 5: 3}  # row -> the line of the id's first row
    assert "duplicate_rows" not in check.model_dump_json()  # not part of the check's report
    with read_cases(path, duplicates=check.duplicate_rows) as told:
        items = list(told)
    assert _rows(path) == _rows(path, duplicates=check.duplicate_rows)
    reasons = [i.reason for i in items if isinstance(i, RejectedRow)]
    assert reasons == ["duplicate id 'a' (first on line 2)", "duplicate id 'b' (first on line 3)"]


def test_a_pass_told_the_duplicates_keeps_no_id(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(f'{{"id": "r{i}", "outcome1": "Yes", "outcome2": "No", "condition": "c{i}"}}\n'
                            for i in range(50)), encoding="utf-8")
    for duplicates, remembered in ((None, 50), ({}, 0)):
        with read_cases(path, duplicates=duplicates) as stream:
            assert sum(1 for _ in stream) == 50
            assert stream._checker is not None and len(stream._checker._first_line) == remembered
