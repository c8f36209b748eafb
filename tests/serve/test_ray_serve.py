"""``anchor serve --ray``: the service as a Ray Serve application on a real local Ray instance (started once
for the module: two online replicas and the jobs replica), against the test server. Its answers equal
`anchor infer`'s and the single-process service's; two replicas share the load; a replica killed while its
requests are in flight is replaced, and every prediction sent again under its id is answered; jobs run in
the jobs replica. The flags' checks need no Ray."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.errors import ConfigurationError
from anchor.serve.ray_options import BudgetSplit, RayServeOptions, parse_address, ray_options
from tests.fakeserver import FakeOpenAIServer
from tests.procs import descendants
from tests.serve.helpers import (
    SCENARIO,
    ServeProcess,
    cases_csv,
    llm_settings,
    quick_config,
    running,
    wait_for,
)

pytestmark = pytest.mark.usefixtures("clean_anchor_env")
runner = CliRunner()
#: Only so that a broken deployment cannot hang the suite; no assertion depends on it.
DEADLINE = 240.0
REPLICA = "x-anchor-replica"
linux_only = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads processes from /proc (Linux)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Deployed:
    def __init__(self, server: FakeOpenAIServer, root: Path, url: str) -> None:
        self.server, self.root, self.url = server, root, url

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=120)

    def replicas_seen(self, http: httpx.Client, wanted: int) -> dict[str, dict[str, Any]]:
        """The online replicas answering /healthz (its body, by replica id), once ``wanted`` have answered."""
        seen: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + DEADLINE
        while len(seen) < wanted:
            assert time.monotonic() < deadline, f"only {len(seen)} replica(s) answered"
            answer = http.get("/healthz")
            if answer.status_code == 200:
                seen[answer.headers[REPLICA]] = answer.json()
        return seen


@pytest.fixture(scope="module")
def deployed(tmp_path_factory) -> Iterator[Deployed]:
    """``--ray local --replicas 2`` in this process: a Ray instance of 2 CPUs, started once."""
    ray = pytest.importorskip("ray")
    from anchor.serve import ray_serve
    from anchor.serve.settings import ServeSettings

    root = tmp_path_factory.mktemp("serve-ray")
    with pytest.MonkeyPatch.context() as env:
        for name in [n for n in os.environ if n.startswith("ANCHOR_")]:
            env.delenv(name)  # the replicas' processes inherit this environment
        env.setenv("HF_HUB_OFFLINE", "1")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            with FakeOpenAIServer(deterministic=True) as server:
                settings = ServeSettings(state=root / "state", port=free_port(), shutdown_seconds=5)
                options = RayServeOptions(address="local", replicas=2)
                llm = llm_settings(server, root / "cache", max_concurrency=16)
                ray_serve.start(options, settings, llm, quick_config(), [], "anchor serve (test)", access_log=False)
                try:
                    yield Deployed(server, root, f"http://127.0.0.1:{settings.port}")
                finally:
                    ray_serve.stop(options)
        finally:
            ray.shutdown()


def vanilla_case(i: int) -> dict[str, Any]:
    return {**SCENARIO, "condition": f"The forecast for Monday says {i} mm of rain.", "method": "vanilla",
            "id": f"case-{i}"}


def single_process_answers(server: FakeOpenAIServer, tmp_path: Path, cases: list[dict[str, Any]]) -> dict[str, Any]:
    """P(O1) of each case from the plain service (one process), with a cache of its own."""
    with running(tmp_path / "single", server, cache=tmp_path / "single-cache") as single, single.client() as http:
        answer = http.post("/v1/predictions", json={"cases": cases, "method": "vanilla"})
    assert answer.status_code == 200, answer.text
    return {p["id"]: p["p_outcome1"] for p in answer.json()["predictions"]}


def answered_in_the_end(http: httpx.Client, case: dict[str, Any]) -> dict[str, Any]:
    """POST the case under its id until it is answered: what a client does when a replica is lost (a 5xx,
    a dropped connection) or the answer is not ready yet (202)."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        try:
            answer = http.post("/v1/predictions", json={**case, "wait": 60})
        except httpx.TransportError:
            continue
        if answer.status_code == 200:
            return dict(answer.json())
        assert answer.status_code >= 500 or answer.status_code == 202, answer.text
        time.sleep(0.1)
    raise AssertionError(f"{case['id']} was never answered")


# --------------------------------------------------------------------------- with Ray


@linux_only
@pytest.mark.slow
def test_the_command_serves_on_its_own_ray_instance_and_sigterm_stops_it_cleanly(tmp_path):
    """`anchor serve --ray local` as a user starts it (its own Ray instance): it answers, and SIGTERM
    ends it with exit status 0 and no process of its instance left."""
    pytest.importorskip("ray")
    port = free_port()
    with FakeOpenAIServer(deterministic=True) as server:
        process = ServeProcess(["--ray", "local", "--port", str(port), "--state", str(tmp_path / "state"),
                                "--base-url", server.base_url, "--cache-dir", str(tmp_path / "cache"),
                                "--no-access-log"])  # its --port comes after the helper's --port 0
        try:
            url = process.wait_ready(DEADLINE)
            assert url == f"http://127.0.0.1:{port}"
            with process.client() as http:
                answer = http.post("/v1/predictions", json=vanilla_case(1))
            assert answer.status_code == 200 and answer.json()["state"] == "done", answer.text
            instance = descendants(process.proc.pid)
            process.proc.send_signal(signal.SIGTERM)
            assert process.proc.wait(DEADLINE) == 0, "".join(process.stderr)[-2000:]
            wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in instance), DEADLINE,
                     "the Ray instance's processes to end")
        finally:
            process.stop()



@pytest.mark.slow
def test_two_replicas_share_the_load_and_answer_as_the_single_process_service(deployed, tmp_path):
    cases = [vanilla_case(i) for i in range(24)]
    answers: dict[str, dict[str, Any]] = {}
    replicas: dict[str, str] = {}

    def send(case: dict[str, Any]) -> None:
        with deployed.client() as http:
            answer = http.post("/v1/predictions", json=case)
        assert answer.status_code == 200, answer.text
        answers[case["id"]], replicas[case["id"]] = answer.json(), answer.headers[REPLICA]

    threads = [threading.Thread(target=send, args=(c,)) for c in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
    assert len(answers) == len(cases)
    assert len(set(replicas.values())) == 2, "both replicas answered"
    expected = single_process_answers(deployed.server, tmp_path, [{k: v for k, v in c.items() if k != "method"}
                                                                  for c in cases])
    assert {i: a["p_outcome1"] for i, a in answers.items()} == expected
    assert all(a["state"] == "done" and a["status"] == "ok" for a in answers.values())


@pytest.mark.slow
def test_anchor_answers_equal_anchor_infer_on_the_space_the_replicas_built(deployed, tmp_path):
    conditions = ["Heavy rain is forecast for the whole morning.", "The bus drivers are on strike."]
    with deployed.client() as http:
        answers = http.post("/v1/predictions", json={"cases": [{**SCENARIO, "condition": c} for c in conditions],
                                                     "wait": 180})
        assert answers.status_code == 200, answers.text
        answers = answers.json()["predictions"]
        space = answers[0]["space"]
        page = http.get(answers[0]["links"]["explanation"])  # from the shared state folder, on any replica
    path = deployed.root / "state" / "store" / "spaces" / f"{space}.json"
    args = ["infer", "--space", str(path), "--base-url", deployed.server.base_url, "--cache-dir",
            str(tmp_path / "own"), "--json"]
    result = runner.invoke(app, [*args, *[a for c in conditions for a in ("-c", c)]])
    assert result.exit_code == 0, result.output
    infer = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    for answer, expected in zip(answers, infer, strict=True):
        assert answer["space"] == space and answer["p_outcome1"] == expected["p_outcome1"]
        assert [(f["id"], f["phi"]) for f in answer["factors"]] == [(f["id"], f["phi"]) for f in expected["factors"]]
    assert page.status_code == 200 and conditions[0] in page.text


@pytest.mark.slow
def test_a_job_sent_to_any_replica_is_run_by_the_jobs_replica_and_listed_on_the_live_page(deployed, tmp_path):
    conditions = ["It snows.", "A colleague offers her a lift.", "The roads are icy."]
    with deployed.client() as http:
        sent = http.post("/v1/jobs?method=vanilla", content=cases_csv(tmp_path / "cases.csv", conditions).read_bytes(),
                         headers={"Content-Type": "text/csv"})
        assert sent.status_code == 202, sent.text
        job = sent.json()["id"]
        wait_for(lambda: http.get(f"/v1/jobs/{job}").json()["state"] == "done", DEADLINE, "the job")
        results = [json.loads(line) for line in http.get(f"/v1/jobs/{job}/results").text.splitlines()]
        page = http.get("/")
    assert sorted(r["id"] for r in results) == ["c0", "c1", "c2"]
    expected = single_process_answers(deployed.server, tmp_path, [
        {**SCENARIO, "condition": c, "id": f"c{i}"} for i, c in enumerate(conditions)])
    assert {r["id"]: r["p_outcome1"] for r in results} == expected
    assert page.status_code == 200 and job in page.text


@pytest.mark.slow
def test_a_replica_killed_with_answers_in_flight_is_replaced_and_every_prediction_is_answered(deployed, tmp_path):
    import ray
    from ray import serve

    from anchor.serve.ray_serve import APP_NAME, ONLINE

    server = deployed.server
    cases = [vanilla_case(100 + i) for i in range(8)]
    answers: dict[str, dict[str, Any]] = {}
    with deployed.client() as http:
        before = set(deployed.replicas_seen(http, 2))
        server.hold(server.completions)  # every request from now on waits at the server
        threads = [threading.Thread(target=lambda c=c: answers.__setitem__(c["id"], answered_in_the_end(
            deployed.client(), c))) for c in cases]
        for t in threads:
            t.start()
        server.wait_until(lambda: server.held == len(cases), DEADLINE)
        busy = next(uid for uid, health in deployed.replicas_seen(http, 2).items() if health["pending"])
        ray.kill(ray.get_actor(f"SERVE_REPLICA::{APP_NAME}#{ONLINE}#{busy}", namespace="serve"), no_restart=True)
        server.release()
        for t in threads:
            t.join(DEADLINE)
        # Ray Serve starts another replica in place of the killed one.
        wait_for(lambda: busy not in (now := set(deployed.replicas_seen(http, 2))) and len(now - before) == 1,
                 DEADLINE, "the killed replica to be replaced")
    assert serve.status().applications[APP_NAME].deployments[ONLINE].replica_states.get("RUNNING") == 2
    assert sorted(answers) == sorted(c["id"] for c in cases)
    expected = single_process_answers(server, tmp_path, [{k: v for k, v in c.items() if k != "method"} for c in cases])
    assert {i: a["p_outcome1"] for i, a in answers.items()} == expected


@pytest.mark.slow
def test_the_jobs_replica_killed_mid_job_is_started_again_and_resumes_the_job(deployed, tmp_path):
    import ray

    from anchor.serve.ray_serve import APP_NAME, JOBS

    server = deployed.server
    conditions = [f"The office opens at {h} o'clock." for h in range(6, 10)]
    with deployed.client() as http:
        server.hold(server.completions)
        sent = http.post("/v1/jobs?method=vanilla&id=resumed", headers={"Content-Type": "text/csv"},
                         content=cases_csv(tmp_path / "cases.csv", conditions).read_bytes())
        assert sent.status_code == 202, sent.text
        server.wait_until(lambda: server.held >= 1, DEADLINE)
        prefix = f"SERVE_REPLICA::{APP_NAME}#{JOBS}#"
        (name,) = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith(prefix)]
        ray.kill(ray.get_actor(name, namespace="serve"), no_restart=True)
        server.release()

        def state() -> str | None:
            answer = http.get("/v1/jobs/resumed")
            return answer.json()["state"] if answer.status_code == 200 else None  # 503 while it is restarted

        wait_for(lambda: state() == "done", DEADLINE, "the job to finish after the restart")
        job = http.get("/v1/jobs/resumed").json()
        results = [json.loads(line) for line in http.get("/v1/jobs/resumed/results").text.splitlines()]
    assert job["starts"] == 2  # started, and started again by the new jobs replica
    expected = single_process_answers(server, tmp_path, [
        {**SCENARIO, "condition": c, "id": f"c{i}"} for i, c in enumerate(conditions)])
    assert {r["id"]: r["p_outcome1"] for r in results} == expected


# --------------------------------------------------------------------------- without Ray


def test_an_online_replica_answers_once_the_answer_file_is_written(tmp_path):
    """The next request about an answer (its explanation page, the case sent again) may reach another
    replica, which reads the answer's file: the answer comes back only once that file is written."""
    pytest.importorskip("ray")
    from anchor.serve.models import PredictionRequest
    from anchor.serve.ray_serve import ReplicaService
    from anchor.serve.settings import ServeSettings

    with FakeOpenAIServer(deterministic=True) as server:
        service = ReplicaService(ServeSettings(state=tmp_path / "state", port=0),
                                 llm_settings(server, tmp_path / "cache"), quick_config())
        gate = threading.Event()
        write = service.state.write_answer

        def held_write(answer_id: str, record: dict[str, Any]) -> None:
            gate.wait(DEADLINE)
            write(answer_id, record)

        service.state.write_answer = held_write  # type: ignore[method-assign]

        async def main() -> None:
            await service.start()
            try:
                case = vanilla_case(1)
                task = asyncio.ensure_future(service.online.submit(PredictionRequest(**case)))
                deadline = time.monotonic() + DEADLINE
                while case["id"] not in service.online.writing:  # answered, its file being written
                    assert time.monotonic() < deadline and not task.done()
                    await asyncio.sleep(0.01)
                await asyncio.wait([task], timeout=0.5)
                assert not task.done(), "the answer came back before its file was written"
                gate.set()
                records, complete = await task
                assert complete and service.state.read_answer(case["id"]) is not None
            finally:
                gate.set()
                await service.stop()

        asyncio.run(main())




@pytest.mark.parametrize(("args", "named"), [
    (["--ray", "not an address"], "--ray 'not an address': not an address"),
    (["--replicas", "2"], "--replicas needs --ray"),
    (["--ray", "local", "--ray-autoscale", "3,1"], "--ray-autoscale '3,1': max_replicas 1 is below min_replicas 3"),
    (["--ray", "local", "--ray-autoscale", "2"], "--ray-autoscale '2': 1 value(s)"),
    (["--ray", "local", "--replicas", "2", "--ray-autoscale", "1,2"], "--replicas and --ray-autoscale: give one"),
    (["--ray", "local", "--replicas", "4", "--concurrency", "4"], "--concurrency 4: too small to share among 4"),
])
def test_a_bad_ray_flag_is_one_line_naming_it(args, named, tmp_path):
    result = runner.invoke(app, ["serve", "--state", str(tmp_path / "state"), *args])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {named}"), result.output
    assert not (tmp_path / "state").exists()


def test_the_budget_split_never_asks_more_than_concurrency():
    for concurrency in range(3, 40):
        for replicas in range(1, concurrency):
            try:
                split = BudgetSplit.of(concurrency, 0.25, replicas)
            except ConfigurationError as exc:
                assert str(exc).startswith(f"--concurrency {concurrency}:")
                continue
            assert split.jobs >= 1 and split.online_each >= 1
            assert split.jobs + split.online_each * replicas <= concurrency


def test_addresses_and_the_autoscaling_bounds():
    assert [parse_address(a) for a in ("local", "auto", "10.0.0.5:6379", "ray://head:10001")] == [
        "local", "auto", "10.0.0.5:6379", "ray://head:10001"]
    scaled = ray_options("local", None, "2,6,16")
    assert scaled is not None and scaled.max_replicas == 6
    assert scaled.autoscale is not None and scaled.autoscale.ray_config() == {
        "min_replicas": 2, "max_replicas": 6, "target_ongoing_requests": 16.0}
    assert ray_options(None, None, None) is None
