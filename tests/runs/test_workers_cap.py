"""``--workers`` above what a run can use (issue 34, item 11): capped at the scenario groups and the cores,
said in one line, every process started given a group; an absurd number refused with the flag's other
bad values, before anything is read or asked."""

from __future__ import annotations

import os

import pytest
import typer
from typer.testing import CliRunner

from anchor.cli import app
from anchor.cli.options import MAX_WORKERS, ScaleOptions
from anchor.runs.processes import ProcessPool
from tests.fakeserver import FakeOpenAIServer
from tests.predict.test_predict import COLUMNS, read_jsonl, vanilla, write_csv

pytestmark = pytest.mark.usefixtures("clean_anchor_env")
runner = CliRunner()


def test_an_absurd_number_of_workers_is_refused_at_validation(tmp_path):
    with pytest.raises(typer.BadParameter, match=f"--workers must be a whole number from 1 to {MAX_WORKERS}"):
        ScaleOptions(workers="100000").resolve(uses_server=True)
    assert ScaleOptions(workers=str(MAX_WORKERS)).resolve(uses_server=True) == (MAX_WORKERS, None)
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    with FakeOpenAIServer(responder=vanilla) as server:
        result = runner.invoke(app, ["predict", str(cases), *COLUMNS, "--method", "vanilla", "--base-url",
                                     server.base_url, "--out", str(tmp_path / "run"), "--workers", "100000"])
        assert server.completions == 0
    assert result.exit_code == 2 and "--workers must be a whole number from 1 to 1024" in result.output
    assert not (tmp_path / "run").exists()


def test_workers_above_the_scenario_groups_are_capped_and_each_process_gets_a_group(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    started: list[int] = []
    answered_by: set[int] = set()
    start, handle = ProcessPool.start, ProcessPool._handle

    async def counted_start(self: ProcessPool) -> None:
        started.append(self.workers)
        await start(self)

    def noted_handle(self: ProcessPool, index: int, message: tuple) -> None:
        if message[0] == "done" and message[1]:
            answered_by.add(index)  # the helpers read their own rows: what comes back says who answered
        handle(self, index, message)

    monkeypatch.setattr(ProcessPool, "start", counted_start)
    monkeypatch.setattr(ProcessPool, "_handle", noted_handle)
    cases = tmp_path / "cases.csv"
    write_csv(cases)  # 3 scenario groups of 4 rows
    with FakeOpenAIServer(responder=vanilla) as server:
        result = runner.invoke(app, ["predict", str(cases), *COLUMNS, "--method", "vanilla", "--base-url",
                                     server.base_url, "--cache-dir", str(tmp_path / "cache"), "--out",
                                     str(tmp_path / "run"), "--workers", "8"])
        assert result.exit_code == 0, result.output
        assert server.completions == 12
    assert started == [3]
    assert answered_by == {0, 1, 2}  # no process left without a group
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: --workers 8: 3 helper process(es) started, as there are 3 scenario group(s) in "
                        "the run, each answered by one helper"]
    assert len(read_jsonl(tmp_path / "run" / "predictions.jsonl")) == 12
