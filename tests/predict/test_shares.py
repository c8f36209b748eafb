"""A cases file read by each worker for itself (``anchor.predict.shares``): every good row in exactly one
share, a scenario group's rows all in the same one, and what the shares leave (instances.jsonl,
rejected.jsonl, the group of every row) the same however many shares read it."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from anchor.predict.config import CasesInput, file_digest
from anchor.predict.shares import CaseShares
from anchor.rundir import RunDirectory
from anchor.runs.errors import RunError
from tests.predict.test_predict import CASES, write_csv

MAPPING = {"id": "Key", "scenario": "Situation", "outcome1": "A", "outcome2": "B", "condition": "Evidence",
           "label": "Truth"}


def cases_file(tmp_path: Path, *, order: list[int] | None = None, bad_after: int | None = None) -> Path:
    """The 12 cases of the predict tests (three groups of four), in ``order``, with a row whose condition is
    empty after the ``bad_after``-th data line."""
    path = tmp_path / "cases.csv"
    write_csv(path, order=order)
    if bad_after is not None:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        lines.insert(1 + bad_after, "case-bad,A situation.,It happens.,It does not.,,1\r\n")
        path.write_text("".join(lines), encoding="utf-8")
    return path


def shares_of(path: Path, run_dir: Path, **kw) -> CaseShares:
    run_dir.mkdir(exist_ok=True)
    return CaseShares(CasesInput.of(path, columns=MAPPING), run_dir, "cases", **kw)


def read(source: CaseShares, index: int, shares: int) -> list:
    with source.share(index, shares) as work:
        return list(work)


def test_every_row_is_in_one_share_and_the_groups_are_dealt_in_the_order_they_first_come(tmp_path):
    # Groups come in the order 1, 0, 2 (by their first row); rows of a group are spread over the file.
    order = [4, 0, 5, 8, 1, 6, 9, 2, 10, 3, 7, 11]
    source = shares_of(cases_file(tmp_path, order=order), tmp_path / "run")
    whole = read(source, 0, 1)
    parts = [read(source, k, 2) for k in range(2)]
    assert [w.instance.id for w in whole] == [f"case-{i}" for i in order]
    assert sorted(w.instance.id for part in parts for w in part) == sorted(w.instance.id for w in whole)
    groups = [{w.group for w in part} for part in parts]
    assert not groups[0] & groups[1]
    first_come = list(dict.fromkeys(w.group for w in whole))
    assert groups == [{first_come[0], first_come[2]}, {first_come[1]}]
    # Each share keeps the file's order, and its work is what one reader makes of the same rows.
    by_id = {w.instance.id: w for w in whole}
    for part in parts:
        assert [w.instance.id for w in part] == [i for i in by_id if i in {w.instance.id for w in part}]
        assert all(w.instance == by_id[w.instance.id].instance and w.stamp == by_id[w.instance.id].stamp
                   and w.text == by_id[w.instance.id].text for w in part)


@pytest.mark.parametrize("shares", [2, 3, 5])
def test_what_the_shares_leave_is_what_one_reader_leaves(tmp_path, shares):
    path = cases_file(tmp_path, order=[4, 0, 5, 8, 1, 6, 9, 2, 10, 3, 7, 11], bad_after=3)
    one = shares_of(path, tmp_path / "one")
    read(one, 0, 1)
    one_left = one.collect(RunDirectory(tmp_path / "one"), expected=12)
    many = shares_of(path, tmp_path / "many")
    for k in range(shares):
        read(many, k, shares)
    many_left = many.collect(RunDirectory(tmp_path / "many"), expected=12)
    for name in ("instances.jsonl", "rejected.jsonl"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "many" / name).read_bytes()
    assert many_left == one_left
    assert one_left.rejected == 1
    assert json.loads((tmp_path / "one" / "rejected.jsonl").read_text())["line"] == 5
    kept = [json.loads(line) for line in (tmp_path / "one" / "instances.jsonl").read_text().splitlines()]
    assert [k["id"] for k in kept] == [f"case-{i}" for i in (4, 0, 5, 8, 1, 6, 9, 2, 10, 3, 7, 11)]
    # Groups by place in the order they first come; each row's group is its scenario's.
    assert len(one_left.groups) == 3
    scenario = {k["id"]: k["scenario"]["outcome1"] for k in kept}
    for place in range(3):
        members = {i for i, p in one_left.group_of.items() if p == place}
        assert len({scenario[i] for i in members}) == 1 and len(members) == 4
    assert not list((tmp_path / "many").glob("*.share*"))  # the shares' own files are gone


def test_a_limit_takes_the_first_good_rows_of_the_file_whatever_the_share(tmp_path):
    path = cases_file(tmp_path, bad_after=2)
    source = shares_of(path, tmp_path / "run", limit=5)
    taken = sorted((w.stamp["line"], w.instance.id) for k in range(2) for w in read(source, k, 2))
    assert [i for _, i in taken] == [f"case-{i}" for i in range(5)]
    assert len(CASES) > 5


def test_rows_answered_already_are_skipped_and_a_failed_one_is_tried_again_unless_told_not_to(tmp_path):
    path = cases_file(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    with open(run / "predictions.jsonl", "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"run": 0, "id": "case-0", "status": "ok"}) + "\n")
        fh.write(json.dumps({"run": 0, "id": "case-1", "status": "failed"}) + "\n")
    again = shares_of(path, run)
    ids = {w.instance.id for k in range(2) for w in read(again, k, 2)}
    assert "case-0" not in ids and "case-1" in ids and len(ids) == 11
    not_again = shares_of(path, run, retry_failed=False)
    assert {w.instance.id for k in range(2) for w in read(not_again, k, 2)} == ids - {"case-1"}
    # Rows not asked again are still among the instances the run scores.
    not_again.collect(RunDirectory(run), expected=12)
    assert (run / "instances.jsonl").read_text().count("\n") == 12


def test_files_a_killed_start_left_are_cleared_before_the_next(tmp_path):
    source = shares_of(cases_file(tmp_path, bad_after=1), tmp_path / "run")
    for k in range(3):
        read(source, k, 3)  # a start with three shares, killed before it collected them
    source.clear()
    assert not list((tmp_path / "run").glob("*.share*"))
    read(source, 0, 1)
    source.collect(RunDirectory(tmp_path / "run"), expected=12)
    assert (tmp_path / "run" / "instances.jsonl").read_text().count("\n") == 12


def test_a_share_outside_the_shares_is_refused(tmp_path):
    source = shares_of(cases_file(tmp_path), tmp_path / "run")
    with pytest.raises(ValueError), source.share(2, 2):
        pass


def test_shares_that_read_a_file_changed_between_them_are_refused_and_instances_left_as_they_were(tmp_path):
    path = cases_file(tmp_path)
    run = tmp_path / "run"
    source = shares_of(path, run)
    (run / "instances.jsonl").write_text("what an earlier start left\n", encoding="utf-8")
    read(source, 0, 2)
    cases_file(tmp_path, order=[8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 6, 7])  # groups now come in another order
    read(source, 1, 2)
    with pytest.raises(RunError, match=r"cases\.csv: the file changed while the run read it \(.*put the file "
                                         r"back as it was and run the same command again"):
        source.collect(RunDirectory(run), expected=12)
    assert (run / "instances.jsonl").read_text(encoding="utf-8") == "what an earlier start left\n"


def test_a_share_refuses_a_file_that_changed_since_the_run_started(tmp_path):
    path = cases_file(tmp_path)
    source = shares_of(path, tmp_path / "run", sha256=file_digest(path))
    assert len(read(source, 0, 1)) == 12
    cases_file(tmp_path, bad_after=4)
    with pytest.raises(RunError, match="the file changed since the run started"):
        read(source, 0, 1)


def test_statuses_the_runner_read_serve_a_share_read_in_its_process_and_are_not_sent_to_a_helper(tmp_path):
    path = cases_file(tmp_path)
    source = shares_of(path, tmp_path / "run", statuses={"case-0": "ok", "case-1": "failed"})
    # The run directory holds no prediction: only the statuses given say case-0 is answered.
    assert {w.instance.id for w in read(source, 0, 1)} == {f"case-{i}" for i in range(1, 12)}
    sent = pickle.loads(pickle.dumps(source))
    assert sent.statuses is None and sent == source
    assert len(read(sent, 0, 1)) == 12


def _in_format(csv_path: Path, fmt: str) -> Path:
    """The same rows (the bad one too) as a ``fmt`` file: what ``anchor predict`` reads besides CSV."""
    import csv

    with csv_path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    path = csv_path.with_suffix(f".{fmt}")
    if fmt == "tsv":
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]), delimiter="\t")
            writer.writeheader()
            writer.writerows(rows)
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif fmt == "json":
        path.write_text(json.dumps(rows), encoding="utf-8")
    else:
        pq = pytest.importorskip("pyarrow.parquet")
        pa = pytest.importorskip("pyarrow")
        pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.mark.parametrize("fmt", ["tsv", "jsonl", "json", "parquet"])
def test_every_format_predict_reads_is_shared_out_as_one_reader_reads_it(tmp_path, fmt):
    path = _in_format(cases_file(tmp_path, order=[4, 0, 5, 8, 1, 6, 9, 2, 10, 3, 7, 11], bad_after=3), fmt)
    one = shares_of(path, tmp_path / "one")
    one_work = read(one, 0, 1)
    one_left = one.collect(RunDirectory(tmp_path / "one"), expected=12)
    many = shares_of(path, tmp_path / "many")
    many_work = [w for k in range(3) for w in read(many, k, 3)]
    many_left = many.collect(RunDirectory(tmp_path / "many"), expected=12)
    assert len(one_work) == 12 and one_left.rejected == 1
    assert sorted(w.instance.id for w in many_work) == sorted(w.instance.id for w in one_work)
    for name in ("instances.jsonl", "rejected.jsonl"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "many" / name).read_bytes()
    assert many_left == one_left


def test_shares_told_the_checks_duplicates_leave_what_they_leave_when_they_remember_every_id(tmp_path):
    path = cases_file(tmp_path, order=[4, 0, 5, 8, 1, 6, 9, 2, 10, 3, 7, 11])
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines.insert(4, lines[2].replace("condition", "another condition"))  # the id of line 3 again, on line 5
    path.write_text("".join(lines), encoding="utf-8")
    from anchor.cases import check_cases

    check = check_cases(path, columns=MAPPING)
    assert list(check.duplicate_rows.values()) == [3]
    left = {}
    for name, duplicates in (("remember", None), ("told", check.duplicate_rows)):
        source = shares_of(path, tmp_path / name, duplicates=duplicates)
        for k in range(2):
            read(source, k, 2)
        left[name] = source.collect(RunDirectory(tmp_path / name), expected=12)
        assert left[name].rejected == 1
    assert left["told"] == left["remember"]
    for name in ("instances.jsonl", "rejected.jsonl"):
        assert (tmp_path / "told" / name).read_bytes() == (tmp_path / "remember" / name).read_bytes()
