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
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx2 as httpx
import pytest
from typer.testing import CliRunner

from anchor.cli import app
from tests.fakeserver import FakeOpenAIServer
from tests.serve.helpers import SCENARIO, ServeProcess, cases_csv, vanilla, wait_for
from tests.serve.test_jobs import conditions_asked, job_state, predict_reference, untimed

pytestmark = pytest.mark.usefixtures("clean_anchor_env")
runner = CliRunner()


def pinned_clients(url: str, n: int = 2) -> list[httpx.Client]:
    """``n`` kept-alive clients, each talking to a different process (a connection stays with the process
    that accepted it; the kernel chooses which, so new ones are opened until each process has one)."""
    found: dict[int, httpx.Client] = {}
    spare: list[httpx.Client] = []
    for _ in range(400):
        client = httpx.Client(base_url=url, timeout=120)
        pid = client.get("/healthz").json()["process"]
        if pid in found:
            spare.append(client)
        else:
            found[pid] = client
        if len(found) == n:
            break
    for client in spare:
        client.close()
    assert len(found) == n, f"{len(found)} processes answered 400 connections"
    return list(found.values())


def process_of(client: httpx.Client) -> int:
    return client.get("/healthz").json()["process"]


def sample(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_workers_flag_refuses_a_bad_value_in_one_line(tmp_path):
    for bad in ("0", "-2", "many"):
        result = runner.invoke(app, ["serve", "--workers", bad, "--state", str(tmp_path / "s"), "--port", "0"])
        assert result.exit_code != 0
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert len(lines) == 1 and "--workers" in lines[0], result.output


def test_two_processes_share_one_port_the_metrics_and_the_state_folder(tmp_path):
    args = ["--workers", "2", "--state", str(tmp_path / "state"), "--cache-dir", str(tmp_path / "cache"),
            "--concurrency", "4", "--shutdown-seconds", "2"]
    with FakeOpenAIServer(responder=vanilla) as server:
        service = ServeProcess(["--base-url", server.base_url, *args])
        try:
            service.wait_ready()
            first, second = pinned_clients(service.url)
            assert process_of(first) != process_of(second)
            answers = []
            for i in range(6):
                for http in (first, second):
                    sent = http.post("/v1/predictions", json={**SCENARIO, "condition": f"Case {i} of {http is first}.",
                                                              "method": "vanilla"})
                    assert sent.status_code == 200, sent.text
                    answers.append(sent.json())
            # An answer given by one process is read back through the other (its file in the state folder,
            # written just after the answer is sent).
            wait_for(lambda: second.get(f"/v1/predictions/{answers[0]['id']}").status_code == 200,
                     what="the answer read through the other process")

            posts = 'anchor_serve_http_requests_total{route="/v1/predictions",method="POST",status="200"}'
            llm = 'anchor_serve_llm_requests_total{stage="baseline.vanilla",class="online",outcome="ok"}'
            wait_for(lambda: sample(first.get("/metrics").text, posts) >= 12, what="the answers counted")
            scrapes = [first.get("/metrics").text, second.get("/metrics").text]
            assert [sample(t, posts) for t in scrapes] == [12, 12]  # every answer once, whichever is scraped
            assert [sample(t, llm) for t in scrapes] == [12, 12] == [len(server.requests)] * 2
            assert all("anchor_serve_llm_in_flight 0" in t for t in scrapes)

            # One LLM budget over both processes: each asks 4 at once, and the server sees 4 in all (--concurrency),
            # the other 4 waiting for a slot, whichever process they are in.
            server.hold(after=server.completions)
            with ThreadPoolExecutor(2) as pool:
                sent_together = [pool.submit(http.post, "/v1/predictions", json={"method": "vanilla", "cases": [
                    {**SCENARIO, "condition": f"Held {i} of {http is first}."} for i in range(4)]})
                    for http in (first, second)]
                waiting = 'anchor_serve_llm_waiting{class="online"}'
                server.wait_until(lambda: server.held == 4)
                wait_for(lambda: sample(first.get("/metrics").text, waiting) == 4, what="4 requests waiting")
                assert server.held == 4
                server.release()
                assert [f.result().status_code for f in sent_together] == [200, 200]

            # A second service on the same folder is refused, whatever its --workers.
            for workers in ("1", "2"):
                intruder = ServeProcess(["--base-url", server.base_url, *args[:1], workers, *args[2:]])
                code = intruder.proc.wait(120)
                assert code != 0 and "another anchor serve uses this folder" in "".join(intruder.stderr) + (
                    intruder.proc.stdout.read() if intruder.proc.stdout else "")
            pids = [process_of(first), process_of(second)]
            first.close()
            second.close()
            service.proc.send_signal(signal.SIGTERM)  # stops every process, cleanly
            assert service.proc.wait(120) == 0, "".join(service.stderr)[-2000:]
            for pid in pids:
                wait_for(lambda pid=pid: not _alive(pid), what=f"process {pid} to end")
        finally:
            service.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_job_whose_process_is_killed_finishes_in_another(tmp_path):
    """kill -9 of the process running a job: another takes it on and the results equal an uninterrupted run;
    the run's ledger equals what the server was asked, but for the requests in flight when it died."""
    cases = cases_csv(tmp_path / "cases.csv", [f"Statement {i} is what happened." for i in range(40)])
    args = ["--workers", "2", "--state", str(tmp_path / "state"), "--cache-dir", str(tmp_path / "cache"),
            "--concurrency", "4", "--shutdown-seconds", "2"]
    with FakeOpenAIServer(responder=vanilla) as server:
        service = ServeProcess(["--base-url", server.base_url, *args])
        try:
            service.wait_ready()
            first, second = pinned_clients(service.url)
            server.hold(after=15)
            sent = first.post("/v1/jobs?method=vanilla&id=long", content=cases.read_bytes(),
                              headers={"Content-Type": "text/csv"})
            assert sent.status_code == 202, sent.text
            # Seen by the other process at once: its record, the list, the live page.
            assert second.get("/v1/jobs/long").status_code == 200
            assert [j["id"] for j in second.get("/v1/jobs").json()["jobs"]] == ["long"]
            assert 'data-job="long"' in second.get("/").text
            server.wait_until(lambda: server.held == 4)
            runner_pid = first.get("/v1/jobs/long").json()["process"]
            assert runner_pid in (process_of(first), process_of(second))
            survivor = second if runner_pid == process_of(first) else first
            os.kill(runner_pid, signal.SIGKILL)
            wait_for(lambda: not _alive(runner_pid), what="the killed process to end")
            server.release()
            wait_for(lambda: job_state(survivor, "long") == "done", what="the job taken on by another process")
            record = survivor.get("/v1/jobs/long").json()
            lines = survivor.get("/v1/jobs/long/results").text.splitlines()
            first.close()
            second.close()
        finally:
            service.stop()
        asked = Counter(conditions_asked(server))
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
