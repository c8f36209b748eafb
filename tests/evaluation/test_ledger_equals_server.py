"""The ledger equals the server (issue 36, item 4): every request the test server sees is in calls.jsonl
exactly once, at every worker count, including a new helper's format negotiation and the requests of
helper processes that were interrupted. Requests are held at the server (``hold``), so every stop comes
at a known point whatever the machine's speed."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from pydantic import BaseModel

from anchor.llm.client import LLMClient
from anchor.llm.ledger import CallRecord, collapse_sent, total
from anchor.llm.openai_backend import OpenAICompatibleBackend
from anchor.rundir import RunDirectory
from tests.fakeserver import FakeOpenAIServer
from tests.predict.test_predict import COLUMNS, learn_the_format, vanilla, write_csv
from tests.run_helpers import like_a_terminal
from tests.runs.test_ray_local_kill import descendants, running

pytestmark = pytest.mark.usefixtures("clean_anchor_env")
REPO = Path(__file__).resolve().parents[2]
#: Only so that a broken run cannot hang the suite; no assertion depends on it.
DEADLINE_SECONDS = 300
PREDICT = [sys.executable, "-c", "from anchor.cli import main; main()", "predict"]


def requests_recorded(out: Path) -> int:
    """Requests the run directory says were sent: answered or failed attempts (format refusals among them)
    and those a stop cut off, each once, as a reader of the run (anchor cost) counts them."""
    cost = total(RunDirectory(out).call_log())
    return cost.llm_calls + cost.interrupted


def lines_once(path: Path) -> bool:
    """No line of ``path`` is there twice (a record copied twice would be)."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return not [line for line, n in Counter(lines).items() if n > 1]


def wait_for(condition, proc: subprocess.Popen | None = None) -> None:  # noqa: ANN001
    import time

    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert proc is None or proc.poll() is None, "the run ended before the point the test waits for"
        assert time.monotonic() < deadline, "the test waited too long for a point the run never reached"
        time.sleep(0.02)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_every_request_the_server_saw_is_in_calls_jsonl_once_format_negotiation_included(tmp_path, workers):
    """A server that refuses json_schema (as llama.cpp's does): every new client, a helper process too,
    first asks in that format and is refused. Those refusals are requests the server saw."""
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    out = tmp_path / "run"
    with FakeOpenAIServer(responder=vanilla, formats=("json_object",)) as server:
        done = subprocess.run([*PREDICT, str(cases), *COLUMNS, "--method", "vanilla", "--base-url", server.base_url,
                               "--cache-dir", str(tmp_path / "cache"), "--out", str(out), "--workers", workers],
                              cwd=REPO, capture_output=True, text=True, timeout=DEADLINE_SECONDS)
        assert done.returncode == 0, done.stderr[-2000:]
        seen = server.completions
    refused = [r for r in RunDirectory(out).call_log() if r.outcome == "format_rejected"]
    assert len(refused) >= 1 and seen == 12 + len(refused)
    assert requests_recorded(out) == seen
    assert lines_once(out / "calls.jsonl") and not (out / ".workers").exists()


def test_a_run_interrupted_while_its_helpers_negotiate_the_format_counts_what_they_sent(tmp_path):
    """Ctrl-C (SIGINT to the whole process group) while both helper processes wait on their first request,
    the one that finds the output format: the server saw two requests, and calls.jsonl holds both. (A
    helper used to send its records to the runner, and those on their way were lost: 12 requests at the
    server, none in calls.jsonl.)"""
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    out = tmp_path / "run"
    with FakeOpenAIServer(responder=vanilla) as server:
        server.hold(0)
        proc = subprocess.Popen([*PREDICT, str(cases), *COLUMNS, "--method", "vanilla", "--base-url",
                                 server.base_url, "--cache-dir", str(tmp_path / "cache"), "--out", str(out),
                                 "--workers", "2"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True, preexec_fn=like_a_terminal)
        wait_for(lambda: server.held == 2, proc)  # one request a helper: the others wait for its verdict
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=DEADLINE_SECONDS)
        server.release()
        seen = server.completions
    assert proc.returncode != 0, err
    assert seen == 2
    assert requests_recorded(out) == seen  # as calls.jsonl alone says it: the runner copied them in on its way out
    assert (out / "calls.jsonl").read_text(encoding="utf-8").count('"outcome":"sent"') == 2
    assert not (out / ".workers").exists()


def test_a_killed_runner_s_helpers_requests_are_counted_before_and_after_the_resume(tmp_path):
    """kill -9 of the runner while its helpers' requests are held: the run directory, read as it was left,
    counts every request the server saw (the shards' lines the runner had not copied yet included); the
    same command then finishes the run, and its cost is the server's count, each request once."""
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    out = tmp_path / "run"
    cmd = [*PREDICT, str(cases), *COLUMNS, "--method", "vanilla", "--base-url", "URL", "--cache-dir",
           str(tmp_path / "cache"), "--out", str(out), "--workers", "2"]
    with FakeOpenAIServer(responder=vanilla) as server:
        cmd[cmd.index("URL")] = server.base_url
        learn_the_format(cmd[:4], cmd[5:-4], tmp_path, cwd=REPO)  # or one helper's first request may be held
        before = server.completions
        server.hold(before + 5)  # five answered, the others held
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: server.completions == before + 12 and server.held == 7, proc)
        helpers = descendants(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        wait_for(lambda: not any(running(p) for p in helpers))  # they end when their input does
        server.release()
        at_kill = server.completions - before
        assert requests_recorded(out) == at_kill == 12
        resumed = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=DEADLINE_SECONDS)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        seen = server.completions - before
    assert requests_recorded(out) == seen
    assert total(RunDirectory(out).call_log()).interrupted == 7 and seen == 12 + 7
    assert lines_once(out / "calls.jsonl") and not (out / ".workers").exists()


class Answer(BaseModel):
    probability: float


async def test_a_format_refusal_is_recorded_as_it_happens_not_only_when_the_request_ends(tmp_path):
    """The server refuses a request's format and the retry in a simpler format is held: a client stopped
    now has sent two requests, and its records say two (they said one: the refusal was recorded only once
    the retry came back, and a stop before that lost it)."""
    with FakeOpenAIServer(responder=vanilla, formats=("json_object",)) as server:
        server.hold(1)  # the refusal is answered, the retry held
        client = LLMClient(OpenAICompatibleBackend(server.base_url, "fake-model", max_parallel=4), max_concurrency=4)
        made: list[CallRecord] = []
        client.ledger.subscribe(made.append)  # as a run's calls.jsonl gets them
        asking = asyncio.ensure_future(client.complete("vanilla", [{"role": "user", "content": "Condition: c"}],
                                                       schema=Answer))
        await asyncio.to_thread(server.wait_until, lambda: server.held == 1)
        asking.cancel()
        await asyncio.gather(asking, return_exceptions=True)
        server.release()
        await client.aclose()
        seen = server.completions
    cost = total(collapse_sent(made))
    assert seen == 2 and (cost.llm_calls, cost.interrupted) == (1, 1)
    assert [r.outcome for r in made] == ["sent", "format_rejected"]
