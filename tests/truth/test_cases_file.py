"""A world file written as a cases file: read back by anchor's own cases reader, the truth exact."""

from __future__ import annotations

import pytest

from anchor.cases import CaseRow, check_cases, read_cases
from anchor.truth.cases import CASES_COLUMNS, cases_text, write_cases
from anchor.truth.generate import generate_worlds


@pytest.fixture(scope="module")
def worlds():
    return generate_worlds("all", 1, seed=2, n_conditions=12)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_the_cases_reader_reads_every_condition_with_its_truth_and_label(worlds, tmp_path, suffix):
    path = write_cases(worlds, tmp_path / f"cases{suffix}")
    rows = list(read_cases(path))
    conditions = [(w, c) for w in worlds.worlds for c in w.conditions]
    assert len(rows) == len(conditions) == 36 and all(isinstance(r, CaseRow) for r in rows)
    for row, (world, cond) in zip(rows, conditions, strict=True):
        assert (row.id, row.scenario, row.outcome1, row.outcome2) == (cond.id, world.scenario, world.outcome1,
                                                                      world.outcome2)
        assert row.condition == cond.text and row.label == cond.label
        assert row.p_true == cond.p_true  # exactly: the text holds every digit the float needs
    summary = check_cases(path)
    assert (summary.good, summary.bad, summary.groups, summary.labelled) == (36, 0, 3, 36)
    assert list(summary.columns_used) == list(CASES_COLUMNS) and summary.notes == []


def test_the_csv_header_and_other_suffixes(worlds):
    assert cases_text(worlds).splitlines()[0] == ",".join(CASES_COLUMNS)
    with pytest.raises(ValueError, match=r"\.csv or \.jsonl, not \.tsv"):
        cases_text(worlds, ".tsv")
