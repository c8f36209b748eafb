"""Batch jobs: a job is a predict run directory. Its results equal `anchor predict`'s on the same file; it can
be cancelled; online predictions take the LLM budget ahead of it; and a service killed with `kill -9` (or
stopped with SIGTERM) and started again resumes it, asking no question twice but those in flight."""

from __future__ import annotations

import json
import re
import signal
from collections import Counter

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from tests.fakeserver import FakeOpenAIServer
from tests.serve.helpers import (
    CONDITION,
    SCENARIO,
    ServeProcess,
    cases_csv,
    running,
    vanilla,
    wait_for,
)

pytestmark = pytest.mark.usefixtures("clean_anchor_env")
runner = CliRunner()


def untimed(record: dict) -> dict:
    """A prediction record without what a clock measured."""
    cost = [{k: v for k, v in c.items() if not k.endswith("seconds")} for c in record["cost"]]
    return {**{k: v for k, v in record.items() if k != "seconds"}, "cost": cost}


def conditions_asked(server: FakeOpenAIServer) -> list[str]:
    return [CONDITION.search(body["messages"][-1]["content"]).group(1) for body in server.requests]


def job_state(http, job_id: str) -> str:
    return http.get(f"/v1/jobs/{job_id}").json()["state"]


def predict_reference(server: FakeOpenAIServer, cases, out) -> list[dict]:
    """`anchor predict` on the same file, with a cache of its own: the uninterrupted run."""
    result = runner.invoke(app, ["predict", str(cases), "--method", "vanilla", "--base-url", server.base_url,
                                 "--cache-dir", str(out.parent / "reference-cache"), "--out", str(out), "--format", "csv"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


def test_a_job_answers_its_file_like_anchor_predict_and_streams_its_results(tmp_path):
    cases = cases_csv(tmp_path / "cases.csv", [f"Condition number {i} holds." for i in range(12)], bad=True)
    with FakeOpenAIServer(responder=vanilla) as server, running(tmp_path / "state", server) as live, \
            live.client() as http:
        sent = http.post("/v1/jobs?method=vanilla", content=cases.read_bytes(), headers={"Content-Type": "text/csv"})
        assert sent.status_code == 202, sent.text
        job = sent.json()
        assert sent.headers["location"] == f"/v1/jobs/{job['id']}"
        assert job["check"]["good"] == 12 and job["check"]["bad"] == 1
        assert job["check"]["rejected"][0]["field"] == "outcome1"
        wait_for(lambda: job_state(http, job["id"]) == "done", what="the job")
        view = http.get(f"/v1/jobs/{job['id']}").json()
        lines = http.get(f"/v1/jobs/{job['id']}/results").text.splitlines()
        table = http.get(f"/v1/jobs/{job['id']}/results", params={"format": "csv"}).text
        reference = predict_reference(server, cases, tmp_path / "reference")
    assert view["progress"]["rows_done"] == view["progress"]["rows_total"] == 12
    assert view["progress"]["requests"] == 12 and view["progress"]["tokens"] > 0
    assert view["summary"]["rejected"] == 1
    run_dir = tmp_path / "state" / "jobs" / job["id"] / "run"
    assert (run_dir / "config.json").exists() and (run_dir / "rejected.jsonl").exists()
    assert [untimed(json.loads(line)) for line in lines] == [untimed(r) for r in reference]
    expected = (tmp_path / "reference" / "predictions.csv").read_text()
    drop_timing = lambda text: [re.sub(r",[0-9.]+,(?=[^,]*$)", ",", row) for row in text.splitlines()]  # noqa: E731
    assert drop_timing(table) == drop_timing(expected)


def test_a_running_job_is_cancelled_and_keeps_the_rows_it_answered(tmp_path):
    cases = cases_csv(tmp_path / "cases.csv", [f"Row {i} is true." for i in range(30)])
    with FakeOpenAIServer(responder=vanilla) as server, running(tmp_path / "state", server,
                                                               llm={"max_concurrency": 2}) as live, live.client() as http:
        server.hold(after=5)
        try:
            job = http.post("/v1/jobs?method=vanilla&id=to-cancel", content=cases.read_bytes(),
                            headers={"Content-Type": "text/csv"}).json()
            server.wait_until(lambda: server.held == 2)
            wait_for(lambda: http.get("/v1/jobs/to-cancel").json()["progress"]["rows_done"] == 5, what="5 rows")
            cancelled = http.delete("/v1/jobs/to-cancel")
            assert cancelled.status_code == 202
            wait_for(lambda: job_state(http, "to-cancel") == "cancelled", what="the cancellation")
        finally:
            server.release()
        rows = http.get("/v1/jobs/to-cancel/results").text.splitlines()
        again = http.delete("/v1/jobs/to-cancel")
    assert job["id"] == "to-cancel" and len(rows) == 5
    assert again.status_code == 409 and again.json()["error"]["field"] == "id"


def test_a_job_that_has_finished_cancelling_is_409_before_its_thread_is_cleared(tmp_path, monkeypatch):
    """The job's thread writes 'cancelled', then hands the job back to the service's loop, which forgets the
    running job a moment later: a DELETE in that moment found it still running and got 202 (seen under
    load). Here the loop never forgets it, so the moment lasts."""
    from anchor.serve.jobs import Jobs

    monkeypatch.setattr(Jobs, "_ended", lambda self, handle: None)
    cases = cases_csv(tmp_path / "cases.csv", [f"Row {i} is true." for i in range(10)])
    with FakeOpenAIServer(responder=vanilla) as server, running(tmp_path / "state", server,
                                                               llm={"max_concurrency": 2}) as live, live.client() as http:
        server.hold(after=1)
        try:
            http.post("/v1/jobs?method=vanilla&id=slow-to-clear", content=cases.read_bytes(),
                      headers={"Content-Type": "text/csv"})
            server.wait_until(lambda: server.held == 2)
            assert http.delete("/v1/jobs/slow-to-clear").status_code == 202
            wait_for(lambda: job_state(http, "slow-to-clear") == "cancelled", what="the cancellation")
        finally:
            server.release()
        again = http.delete("/v1/jobs/slow-to-clear")
    assert again.status_code == 409 and again.json()["error"]["field"] == "id"


def test_a_running_job_whose_cancellation_ends_at_once_is_still_answered_202(tmp_path, monkeypatch):
    """The job's thread may finish cancelling before the route looks at the record again: the answer says
    what the request found (a running job, cancellation under way), not what came of it since."""
    from anchor.serve.jobs import Jobs

    cancel = Jobs._cancel

    def at_once(handle) -> None:  # the job's thread, fast: cancelled before the route goes on
        cancel(handle)
        handle.record.state = "cancelled"

    monkeypatch.setattr(Jobs, "_cancel", staticmethod(at_once))
    cases = cases_csv(tmp_path / "cases.csv", [f"Row {i} is true." for i in range(10)])
    with FakeOpenAIServer(responder=vanilla) as server, running(tmp_path / "state", server,
                                                               llm={"max_concurrency": 2}) as live, live.client() as http:
        server.hold(after=1)
        try:
            http.post("/v1/jobs?method=vanilla&id=quick", content=cases.read_bytes(), headers={"Content-Type": "text/csv"})
            server.wait_until(lambda: server.held == 2)
            cancelled = http.delete("/v1/jobs/quick")
        finally:
            server.release()
    assert cancelled.status_code == 202 and "cancelling" in cancelled.json()["note"]


def test_online_predictions_take_the_llm_budget_ahead_of_a_running_job(tmp_path):
    cases = cases_csv(tmp_path / "cases.csv", [f"Batch row {i}." for i in range(40)])
    with FakeOpenAIServer(responder=vanilla) as server, running(tmp_path / "state", server,
                                                               llm={"max_concurrency": 2}) as live, live.client() as http:
        server.hold(after=1)  # the first request goes alone (the client learns which format the server takes)
        try:
            http.post("/v1/jobs?method=vanilla", content=cases.read_bytes(), headers={"Content-Type": "text/csv"})
            server.wait_until(lambda: server.held == 2)  # the job has every slot of the budget (the others wait)
            online = http.post("/v1/predictions", json={**SCENARIO, "condition": "An online question.",
                                                        "method": "vanilla", "wait": 0})
            assert online.status_code == 202
            wait_for(lambda: live.service.budget.waiting(0) == 1, what="the online request waiting")
            # The two held batch requests are answered; the two requests that take their slots are held in
            # turn, so which requests got the slots is seen whatever order they reach the server in.
            server.release_held()
            server.wait_until(lambda: len(server.requests) >= 5 and server.held == 2)
            taken = conditions_asked(server)[3:]
        finally:
            server.release()
        wait_for(lambda: http.get(online.json()["links"]["self"]).status_code == 200, what="the online answer")
    # The first and the two held batch requests, then the two freed slots: one went to the online request,
    # not both to the batch requests that had been waiting longer.
    assert len(taken) == 2 and "An online question." in taken, taken


def _kill_and_resume(tmp_path, stop) -> None:
    """A job of 40 rows stopped with 4 requests in flight (``stop``), then resumed by a new service."""
    cases = cases_csv(tmp_path / "cases.csv", [f"Statement {i} is what happened." for i in range(40)])
    args = ["--state", str(tmp_path / "state"), "--cache-dir", str(tmp_path / "cache"), "--concurrency", "4",
            "--shutdown-seconds", "2"]
    with FakeOpenAIServer(responder=vanilla) as server:
        first = ServeProcess(["--base-url", server.base_url, *args])
        try:
            first.wait_ready()
            server.hold(after=15)
            with first.client() as http:
                job = http.post("/v1/jobs?method=vanilla&id=long", content=cases.read_bytes(),
                                headers={"Content-Type": "text/csv"}).json()
            server.wait_until(lambda: server.held == 4)
            code = stop(first)
        finally:
            first.stop()
            server.release()
        record = json.loads((tmp_path / "state" / "jobs" / "long" / "job.json").read_text())
        second = ServeProcess(["--base-url", server.base_url, *args])
        try:
            second.wait_ready()
            with second.client() as http:
                wait_for(lambda: job_state(http, "long") == "done", what="the resumed job")
                lines = http.get("/v1/jobs/long/results").text.splitlines()
                progress = http.get("/v1/jobs/long").json()["progress"]
        finally:
            second.stop()
        asked = Counter(conditions_asked(server))
        reference = predict_reference(server, cases, tmp_path / "reference")
    twice = [c for c, n in asked.items() if n > 1]
    assert job["state"] in ("queued", "running") and code is not None
    assert record["state"] in ("running", "queued")
    assert len(asked) == 40  # every row asked
    assert len(twice) == 4 and sum(asked.values()) == 44  # and again only the 4 in flight when it stopped
    assert [untimed(json.loads(line)) for line in lines] == [untimed(r) for r in reference]
    calls = [json.loads(line) for line in (tmp_path / "state" / "jobs" / "long" / "run" / "calls.jsonl").read_text()
             .splitlines()]
    sent = {c["request_id"] for c in calls if c["outcome"] == "sent"}
    answered = {c["request_id"] for c in calls if c["outcome"] == "ok"}
    assert len(sent - answered) == len(twice)  # the ledger counts as interrupted exactly what the server saw twice
    # The job's figures count both sessions, its tokens as its prompt and completion tokens do.
    ok = [c for c in calls if c["outcome"] == "ok"]
    assert progress["requests"] == len(ok) == 40
    assert progress["prompt_tokens"] == sum(c["prompt_tokens"] for c in ok)
    assert progress["completion_tokens"] == sum(c["completion_tokens"] for c in ok)
    assert progress["tokens"] == progress["prompt_tokens"] + progress["completion_tokens"]
    return record


def test_a_job_survives_kill_9_of_the_service(tmp_path):
    def kill(proc: ServeProcess) -> int:
        proc.proc.send_signal(signal.SIGKILL)
        return proc.proc.wait(30)

    record = _kill_and_resume(tmp_path, kill)
    assert record["state"] == "running"  # as the killed service left it


def test_sigterm_stops_the_service_cleanly_and_the_job_resumes(tmp_path):
    def term(proc: ServeProcess) -> int:
        proc.proc.send_signal(signal.SIGTERM)
        code = proc.proc.wait(60)
        assert code == 0, "".join(proc.stderr)[-2000:]
        return code

    record = _kill_and_resume(tmp_path, term)
    assert record["state"] == "queued" and "resumes" in record["note"]
