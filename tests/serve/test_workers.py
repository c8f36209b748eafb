"""``anchor serve --workers N``: N real uvicorn processes behind one port, sharing the state folder. Both
answer; a job sent to one is seen, listed and shown by the other; a job whose process is killed with
``kill -9`` finishes in another, as an uninterrupted run would, asking again only what was in flight;
``/metrics`` counts every answer once whichever process is scraped; a second service on the folder is
refused; SIGTERM stops them all."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from typer.testing import CliRunner

from anchor.cli import app
from tests.fakeserver import FakeOpenAIServer
from tests.serve.helpers import SCENARIO, ServeProcess, cases_csv, vanilla, wait_for
from tests.serve.test_jobs import conditions_asked, predict_reference, untimed

pytestmark = pytest.mark.usefixtures("clean_anchor_env")
runner = CliRunner()


def processes(url: str, n: int = 2) -> list[int]:
    """The ids of ``n`` different processes serving ``url`` (the kernel chooses which process accepts a
    connection, so new ones are opened until ``n`` have answered)."""
    found: set[int] = set()
    deadline = time.monotonic() + 120  # only keeps a broken service from hanging the test
    while len(found) < n and time.monotonic() < deadline:
        found.add(httpx.get(f"{url}/healthz", timeout=120).json()["process"])
    assert len(found) == n, f"{len(found)} processes answered in 120 s"
    return sorted(found)


def on(url: str, pid: int, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """One request answered by process ``pid``: sent over a connection that process accepted."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with httpx.Client(base_url=url, timeout=120) as client:
            if client.get("/healthz").json()["process"] == pid:
                return client.request(method, path, **kwargs)
    raise AssertionError(f"process {pid} accepted no connection in 120 s")


def service_args(server: FakeOpenAIServer, tmp_path: Path, workers: str, *extra: str) -> list[str]:
    """``anchor serve``'s arguments for a service of ``workers`` processes on the test's state folder."""
    return ["--base-url", server.base_url, "--workers", workers, "--state", str(tmp_path / "state"), "--cache-dir",
            str(tmp_path / "cache"), "--shutdown-seconds", "2", *extra]


@contextmanager
def two_processes(server: FakeOpenAIServer, tmp_path: Path, *extra: str) -> Iterator[tuple[ServeProcess, int, int]]:
    """A service of two processes, ready, with the id of each; stopped, and its processes gone, at the end."""
    service = ServeProcess(service_args(server, tmp_path, "2", *extra))
    try:
        service.wait_ready()
        a, b = processes(service.url)
        yield service, a, b
    finally:
        stop_tree(service)


def stop_tree(service: ServeProcess) -> None:
    """The supervisor killed at the end of a test: its processes stop on their own (they watch for it)."""
    children = _children(service.proc.pid)
    service.stop()
    for pid in children:
        wait_for(lambda pid=pid: not _alive(pid), what=f"process {pid}, orphaned, to stop")


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def job_state(http: Any, job_id: str, url: str) -> str:
    return http.get(f"{url}/v1/jobs/{job_id}", timeout=120).json()["state"]


def sample(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_workers_flag_refuses_a_bad_value_in_one_line(tmp_path):
    for bad in (["0"], ["-2"], ["many"], ["2", "--ray", "local", "--port", "8123"]):  # --ray has replicas instead
        result = runner.invoke(app, ["serve", "--state", str(tmp_path / "s"), "--port", "0", "--workers", *bad])
        assert result.exit_code != 0
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert len(lines) == 1 and "--workers" in lines[0], result.output


def test_two_processes_share_one_port_the_metrics_and_the_state_folder(tmp_path):
    with FakeOpenAIServer(responder=vanilla) as server, \
            two_processes(server, tmp_path, "--concurrency", "4") as (service, a, b):
        url = service.url
        answers = []
        for i in range(6):
            for pid in (a, b):
                sent = on(url, pid, "POST", "/v1/predictions", json={
                    **SCENARIO, "condition": f"Case {i} of {pid}.", "method": "vanilla"})
                assert sent.status_code == 200, sent.text
                answers.append(sent.json())
        # An answer given by one process is read back through the other (its file in the state folder,
        # written just after the answer is sent).
        wait_for(lambda: on(url, b, "GET", f"/v1/predictions/{answers[0]['id']}").status_code == 200,
                 what="the answer read through the other process")
        # The live page lists every process's latest answers, whichever process shows it.
        for pid in (a, b):
            wait_for(lambda pid=pid: all(f'data-answer="{r["id"]}"' in on(url, pid, "GET", "/").text
                                         for r in answers), what="every answer on the live page")
        # Its status line is the process's own figures, and says so: 6 answered here, not 12.
        status = re.search(r'data-field="status">([^<]*)<', on(url, a, "GET", "/").text).group(1)
        assert "answered 6 since the start by this process, one of 2" in status, status

        posts = 'anchor_serve_http_requests_total{route="/v1/predictions",method="POST",status="200"}'
        llm = 'anchor_serve_llm_requests_total{stage="baseline.vanilla",class="online",outcome="ok"}'
        wait_for(lambda: sample(on(url, a, "GET", "/metrics").text, posts) >= 12, what="the answers counted")
        scrapes = [on(url, pid, "GET", "/metrics").text for pid in (a, b)]
        assert [sample(t, posts) for t in scrapes] == [12, 12]  # every answer once, whichever is scraped
        assert [sample(t, llm) for t in scrapes] == [12, 12] == [len(server.requests)] * 2
        assert all("anchor_serve_llm_in_flight 0" in t for t in scrapes)

        # One LLM budget over both processes: each asks 4 at once, and the server sees 4 in all (--concurrency),
        # the other 4 waiting for a slot, whichever process they are in.
        server.hold(after=server.completions)
        try:
            with ThreadPoolExecutor(2) as pool:
                together = [pool.submit(on, url, pid, "POST", "/v1/predictions", json={"method": "vanilla", "cases": [
                    {**SCENARIO, "condition": f"Held {i} of {pid}."} for i in range(4)]}) for pid in (a, b)]
                waiting = 'anchor_serve_llm_waiting{class="online"}'
                server.wait_until(lambda: server.held == 4)
                wait_for(lambda: sample(httpx.get(f"{url}/metrics").text, waiting) == 4, what="4 requests waiting")
                assert server.held == 4
                # A case still pending in one process (202) is pending when polled through the other.
                late = on(url, a, "POST", "/v1/predictions", json={**SCENARIO, "condition": "Late.",
                                                                    "method": "vanilla", "wait": 0})
                assert late.status_code == 202, late.text
                polled = on(url, b, "GET", late.headers["location"])
                assert polled.status_code == 202 and polled.json()["state"] == "pending"
                server.release()
                assert [f.result().status_code for f in together] == [200, 200]
        finally:
            server.release()
        wait_for(lambda: on(url, b, "GET", late.headers["location"]).status_code == 200, what="the late answer")

        # A second service on the same folder is refused, whatever its --workers.
        for workers in ("1", "2"):
            intruder = ServeProcess(service_args(server, tmp_path, workers, "--concurrency", "4"))
            code = intruder.proc.wait(120)
            assert code != 0 and "another anchor serve uses this folder" in "".join(intruder.stderr) + (
                intruder.proc.stdout.read() if intruder.proc.stdout else "")
        service.proc.send_signal(signal.SIGTERM)  # stops every process, cleanly
        assert service.proc.wait(120) == 0, "".join(service.stderr)[-2000:]
        for pid in (a, b):
            wait_for(lambda pid=pid: not _alive(pid), what=f"process {pid} to end")


def _alive(pid: int) -> bool:
    """Running (not ended, nor ended and not yet reaped by its parent)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_job_whose_process_is_killed_finishes_in_another(tmp_path):
    """kill -9 of the process running a job: another takes it on and the results equal an uninterrupted run;
    the run's ledger equals what the server was asked, but for the requests in flight when it died."""
    cases = cases_csv(tmp_path / "cases.csv", [f"Statement {i} is what happened." for i in range(40)])
    with FakeOpenAIServer(responder=vanilla) as server:
        with two_processes(server, tmp_path, "--concurrency", "4") as (service, a, b):
            url = service.url
            server.hold(after=15)
            try:
                sent = on(url, a, "POST", "/v1/jobs?method=vanilla&id=long", content=cases.read_bytes(),
                          headers={"Content-Type": "text/csv"})
                assert sent.status_code == 202, sent.text
                # Seen by the other process at once: its record, the list, the live page.
                assert on(url, b, "GET", "/v1/jobs/long").status_code == 200
                assert [j["id"] for j in on(url, b, "GET", "/v1/jobs").json()["jobs"]] == ["long"]
                assert 'data-job="long"' in on(url, b, "GET", "/").text
                server.wait_until(lambda: server.held == 4)
                runner_pid = httpx.get(f"{url}/v1/jobs/long").json()["process"]
                assert runner_pid in (a, b)
                os.kill(runner_pid, signal.SIGKILL)
                wait_for(lambda: not _alive(runner_pid), what="the killed process to end")
            finally:
                server.release()
            wait_for(lambda: job_state(httpx, "long", url) == "done", what="the job taken on by another process")
            asked = Counter(conditions_asked(server))
            record = httpx.get(f"{url}/v1/jobs/long").json()
            lines = httpx.get(f"{url}/v1/jobs/long/results").text.splitlines()
            cancelled = _cancel_through_another_process(service, server, cases_csv(
                tmp_path / "other.csv", [f"Another statement {i} holds." for i in range(40)]))
        reference = predict_reference(server, cases, tmp_path / "reference")
    assert record["process"] != runner_pid and record["starts"] == 2
    twice = [c for c, n in asked.items() if n > 1]
    assert len(asked) == 40 and len(twice) == 4 and sum(asked.values()) == 44  # only those in flight again
    assert [untimed(json.loads(line)) for line in lines] == [untimed(r) for r in reference]
    calls = [json.loads(line) for line in (tmp_path / "state" / "jobs" / "long" / "run" / "calls.jsonl").read_text()
             .splitlines()]
    sent_ids = {c["request_id"] for c in calls if c["outcome"] == "sent"}
    answered = {c["request_id"] for c in calls if c["outcome"] == "ok"}
    assert len(answered) == 40 and len(sent_ids - answered) == len(twice)
    assert len(sent_ids) == sum(asked.values())  # the ledger: every request the server saw, once
    assert cancelled["state"] == "cancelled" and cancelled["progress"]["rows_done"] < 40


def _cancel_through_another_process(service: ServeProcess, server: FakeOpenAIServer, cases) -> dict:
    """DELETE of a running job sent to a process that does not run it: the one that does stops it."""
    url = service.url
    server.hold(after=server.completions + 2)
    try:
        sent = httpx.post(f"{url}/v1/jobs?method=vanilla&id=short", content=cases.read_bytes(),
                          headers={"Content-Type": "text/csv"}, timeout=120)
        assert sent.status_code == 202, sent.text
        server.wait_until(lambda: server.held == 4)
        runner_pid = httpx.get(f"{url}/v1/jobs/short").json()["process"]
        other = next(pid for pid in processes(url) if pid != runner_pid)  # the killed process was replaced
        deleted = on(url, other, "DELETE", "/v1/jobs/short")
        assert deleted.status_code == 202, deleted.text
        wait_for(lambda: job_state(httpx, "short", url) == "cancelled", what="the job cancelled by its own process")
    finally:
        server.release()
    return httpx.get(f"{url}/v1/jobs/short").json()


def test_two_processes_building_the_same_space_at_once_store_one_whole_space(tmp_path):
    """Each process builds it (the store has no lock between processes), and what the store keeps is one whole
    space, the same through either process."""
    from anchor.space.io import load_space

    with FakeOpenAIServer(deterministic=True) as server, \
            two_processes(server, tmp_path, "--sizes", "quick") as (service, a, b):
        url = service.url
        with ThreadPoolExecutor(2) as pool:
            started = list(pool.map(lambda pid: on(url, pid, "POST", "/v1/spaces", json={**SCENARIO, "wait": 0}),
                                    (a, b)))
        assert [s.status_code for s in started] == [202, 202], [s.text for s in started]
        location = started[0].headers["location"]
        assert started[1].headers["location"] == location
        for pid in (a, b):
            wait_for(lambda pid=pid: on(url, pid, "GET", location).status_code == 200, what="the space stored")
        spaces = [on(url, pid, "GET", location).json() for pid in (a, b)]
    stored = list((tmp_path / "state" / "store" / "spaces").glob("*.json"))
    assert [p.name for p in stored] == [f"{spaces[0]['id']}.json"]
    assert load_space(stored[0]).factors and spaces[0] == spaces[1]
