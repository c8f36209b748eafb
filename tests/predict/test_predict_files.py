"""A user's files and a run's own (issue 34, items 4 to 7): ``--out`` never writes over a folder of other
files, the CSV table is safe to open in a spreadsheet, a run's readers do not need its cases file where
it was, and a start refused before it recorded anything leaves no trace. Against a real local server."""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.predict.export import check_table_format, csv_cell
from anchor.runs.errors import RunError
from anchor.runs.pool import LocalPool
from anchor.runs.processes import ProcessPool
from tests.fakeserver import FakeOpenAIServer
from tests.predict.test_predict import CASES, COLUMNS, read_jsonl, vanilla, write_csv

pytestmark = pytest.mark.usefixtures("clean_anchor_env")
runner = CliRunner()


def predict(server: FakeOpenAIServer, cache: Path, cases: Path | str, out: Path | str, *extra: str):
    return runner.invoke(app, ["predict", str(cases), "--base-url", server.base_url, "--cache-dir", str(cache),
                               "--out", str(out), "--method", "vanilla", *extra])


def listing(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------- item 4: --out


def test_out_a_folder_of_other_files_is_refused_in_one_line_and_left_as_it_was(tmp_path):
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "index.html").write_text("<p>my page</p>")
    (mine / "metrics.json").write_text('{"mine": 1}')
    (mine / "predictions.csv").write_text("a,b\n1,2\n")
    before = listing(mine)
    with FakeOpenAIServer(responder=vanilla) as server:
        result = predict(server, tmp_path / "cache", cases, mine, *COLUMNS)
        evaluated = runner.invoke(app, ["eval", "--dataset", "today", "--method", "vanilla", "--limit", "1",
                                        "--base-url", server.base_url, "--cache-dir", str(tmp_path / "cache"),
                                        "--out", str(mine)])
        assert server.completions == 0
    for refused in (result, evaluated):
        assert refused.exit_code == 2
        assert refused.stderr.strip().splitlines() == [
            f"error: --out {mine}: the folder holds other files (index.html, metrics.json, predictions.csv) and no "
            "anchor run (no config.json); give a new or empty folder, or the run directory of a run to resume"]
    assert listing(mine) == before and sorted(p.name for p in mine.iterdir()) == sorted(before)


def test_out_a_dangling_link_or_a_folder_with_its_own_config_json_is_refused_in_one_line_naming_out(tmp_path):
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.json").write_text('{"my": "settings"}')
    with FakeOpenAIServer(responder=vanilla) as server:
        linked = predict(server, tmp_path / "cache", cases, dangling, *COLUMNS)
        own = predict(server, tmp_path / "cache", cases, mine, *COLUMNS)
        evaluated = runner.invoke(app, ["eval", "--dataset", "today", "--method", "vanilla", "--limit", "1",
                                        "--base-url", server.base_url, "--cache-dir", str(tmp_path / "cache"),
                                        "--out", str(mine)])
        assert server.completions == 0
    assert linked.exit_code == 2
    assert linked.stderr.strip().splitlines() == [
        f"error: --out {dangling}: a symbolic link to {tmp_path / 'nowhere'}, which does not exist; give a folder, "
        "or create the link's target first"]
    for refused in (own, evaluated):
        assert refused.exit_code == 2
        assert refused.stderr.strip().splitlines() == [
            f"error: --out {mine}: the folder holds a config.json that is not an anchor run's; give a new or empty "
            "folder, or the run directory of a run to resume"]
    assert dangling.is_symlink() and not dangling.exists()
    assert listing(mine) == {"config.json": b'{"my": "settings"}'}


def test_out_an_empty_folder_or_a_run_to_resume_is_fine(tmp_path):
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    empty = tmp_path / "empty"
    empty.mkdir()
    with FakeOpenAIServer(responder=vanilla) as server:
        assert predict(server, tmp_path / "cache", cases, empty, *COLUMNS).exit_code == 0
        (empty / "notes.txt").write_text("my notes on this run")  # a run directory with a file of the user's
        again = predict(server, tmp_path / "cache", cases, empty, *COLUMNS)
        assert again.exit_code == 0, again.output
    assert len(read_jsonl(empty / "predictions.jsonl")) == 12


# --------------------------------------------------------------------------- item 5: the CSV table

FORMULAS = ['=HYPERLINK("http://example.com/x","click")', "+1+2", "-2+3+cmd|' /C calc'!A0", "@SUM(A1:A2)"]


def test_csv_cells_a_spreadsheet_would_run_are_neutralised_and_numbers_have_no_float_noise(tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    ids = [*FORMULAS, "-3", "+4.5", "plain"]
    cases = tmp_path / "cases.csv"
    with cases.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["id", "outcome1", "outcome2", "condition"])
        writer.writerows([i, "It rains.", "It stays dry.", f"Reading {n}."] for n, i in enumerate(ids))
    answer = lambda body: json.dumps({"probability": 0.582})  # noqa: E731 - 1 - 0.582 = 0.41800000000000004
    with FakeOpenAIServer(responder=answer) as server:
        for fmt in ("csv", "parquet"):
            result = predict(server, tmp_path / "cache", cases, tmp_path / fmt, "--format", fmt)
            assert result.exit_code == 0, result.output
    table = list(csv.DictReader((tmp_path / "csv" / "predictions.csv").open(encoding="utf-8", newline="")))
    assert [r["id"] for r in table] == [f"'{i}" for i in FORMULAS] + ["-3", "+4.5", "plain"]
    assert {r["p_outcome1"] for r in table} == {"0.582"} and {r["p_outcome2"] for r in table} == {"0.418"}
    # The JSON lines and Parquet keep every value as it is.
    assert [r["id"] for r in read_jsonl(tmp_path / "csv" / "predictions.jsonl")] == ids
    rows = pq.read_table(tmp_path / "parquet" / "predictions.parquet").to_pylist()
    assert [r["id"] for r in rows] == ids and rows[0]["p_outcome2"] == 1 - 0.582


@pytest.mark.parametrize(("value", "cell"), [
    ("=1+1", "'=1+1"), ("+x", "'+x"), ("-x", "'-x"), ("@x", "'@x"), ("\tx", "'\tx"), ("\rx", "'\rx"),
    # The full-width forms, which a spreadsheet in a Japanese setting runs as formulas too.
    ("\uff1d1+1", "'\uff1d1+1"), ("\uff0bx", "'\uff0bx"), ("\uff0d3", "'\uff0d3"), ("\uff20x", "'\uff20x"),
    ("-3", "-3"), ("-0.5e3", "-0.5e3"), ("a=b", "a=b"), (-0.25, "-0.25"), (1 - 0.582, "0.418"), (1.0, "1.0"),
    (1 / 3, "0.333333333333"), (7, 7), (True, True), (None, ""), (float("nan"), "nan"),
])
def test_a_csv_cell(value, cell):
    assert csv_cell(value) == cell


def test_parquet_without_pyarrow_says_writing(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(Exception) as exc:
        check_table_format("parquet")
    assert str(exc.value) == "--format parquet: writing Parquet needs pyarrow: pip install 'anchor-infer[parquet]'"


# --------------------------------------------------------------------------- item 6: where the cases file is


def test_a_runs_readers_work_from_another_folder_and_after_the_cases_file_moved(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    write_csv(work / "cases.csv")
    with FakeOpenAIServer(responder=vanilla) as server:
        for method in ("vanilla", "cot"):
            result = runner.invoke(app, ["predict", "cases.csv", "--base-url", server.base_url, "--cache-dir",
                                         "cache", "--out", f"runs/{method}", "--method", method, *COLUMNS])
            assert result.exit_code == 0, result.output
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    runs = [str(work / "runs" / m) for m in ("vanilla", "cot")]

    def readers_work() -> None:
        cost = runner.invoke(app, ["cost", *runs, "--json"])
        assert cost.exit_code == 0, cost.output
        assert json.loads(cost.stdout)["slice"]["scenarios"] == 3
        fit = runner.invoke(app, ["calibrate", "fit", runs[0], "--out", "cal.json"])
        assert fit.exit_code == 0, fit.output
        report = runner.invoke(app, ["calibrate", "report", runs[0], "--out", "cal-report", "--no-html"])
        assert report.exit_code == 0, report.output
        index = runner.invoke(app, ["report", runs[0], "--out", "report"])
        assert index.exit_code == 0, index.output
        page = (work / "runs" / "vanilla" / "index.html").read_text(encoding="utf-8")
        assert "Condition texts not shown" not in page and CASES[5][1] in page

    readers_work()
    (work / "cases.csv").rename(tmp_path / "moved.csv")
    readers_work()
    # A run without its instances.jsonl (an older anchor's) needs the file, and says which.
    os.remove(work / "runs" / "vanilla" / "instances.jsonl")
    result = runner.invoke(app, ["calibrate", "fit", runs[0], "--out", "cal.json"])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert f"{work / 'cases.csv'}: cannot read the run's data file (No such file or directory)" in line


def test_the_recorded_instances_are_the_rows_the_run_scored(tmp_path):
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    with FakeOpenAIServer(responder=vanilla) as server:
        assert predict(server, tmp_path / "cache", cases, tmp_path / "run", "--limit", "5", *COLUMNS).exit_code == 0
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["data_path"] == str(cases.resolve())
    kept = read_jsonl(tmp_path / "run" / "instances.jsonl")
    assert [i["id"] for i in kept] == [p["id"] for p in read_jsonl(tmp_path / "run" / "predictions.jsonl")]
    assert [i["condition"] for i in kept] == [c for _, c, _, _ in CASES[:5]]


# --------------------------------------------------------------------------- item 7: a refused start


def failing_start(seen: list[int]):
    async def start(self: ProcessPool) -> None:
        seen.append(self.workers)
        raise RunError("the helper processes cannot start")
    return start


def test_a_start_refused_before_its_first_instance_leaves_no_folder_behind(tmp_path, monkeypatch):
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    seen: list[int] = []
    monkeypatch.setattr(ProcessPool, "start", failing_start(seen))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    out = tmp_path / "new" / "deeper" / "run"
    with FakeOpenAIServer(responder=vanilla) as server:
        result = predict(server, tmp_path / "cache", cases, out, "--workers", "3", *COLUMNS)
    assert result.exit_code == 2 and "the helper processes cannot start" in result.stderr
    assert not (tmp_path / "new").exists()
    # The cap on the cores is said in one line: 2 processes for 3 groups on a 2-core machine.
    assert seen == [2]
    assert "warning: --workers 3: 2 helper process(es) started, as there are 2 core(s) on this machine" in \
        result.stderr


def test_a_start_refused_for_other_settings_adds_no_lock_file(tmp_path):
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    out = tmp_path / "run"
    with FakeOpenAIServer(responder=vanilla) as server:
        assert predict(server, tmp_path / "cache", cases, out, *COLUMNS).exit_code == 0
        (out / ".lock").unlink()
        before = listing(out)
        result = predict(server, tmp_path / "cache", cases, out, "--limit", "3", *COLUMNS)
    assert result.exit_code == 2 and "holds a run with other settings: limit was None, now 3" in result.stderr
    assert listing(out) == before


def test_a_start_refused_on_an_empty_folder_leaves_it_empty(tmp_path, monkeypatch):
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    monkeypatch.setattr(ProcessPool, "start", failing_start([]))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    out = tmp_path / "empty"
    out.mkdir()
    with FakeOpenAIServer(responder=vanilla) as server:
        result = predict(server, tmp_path / "cache", cases, out, "--workers", "2", *COLUMNS)
    assert result.exit_code == 2
    assert out.is_dir() and list(out.iterdir()) == []


def test_a_start_that_handed_out_an_instance_is_a_run_and_keeps_its_folder(tmp_path, monkeypatch):
    # A helper process may have sent requests whose records have not reached calls.jsonl: once an
    # instance is handed out, the folder is a run to resume, not a refused start to take back.
    async def broken(self: LocalPool, work: object, rank: int = 0) -> None:
        raise RunError("the worker broke")

    monkeypatch.setattr(LocalPool, "answer", broken)
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    out = tmp_path / "run"
    with FakeOpenAIServer(responder=vanilla) as server:
        result = predict(server, tmp_path / "cache", cases, out, *COLUMNS)
    assert result.exit_code == 2 and "the worker broke" in result.stderr
    assert (out / "config.json").is_file()
