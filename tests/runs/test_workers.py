"""Answering in helper processes (--workers N) and on a real local Ray instance (--ray): the same
predictions, metrics and ledger totals as one process, the run directory written by the runner alone."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.cases import CaseStream
from anchor.cli import app
from anchor.predict.config import CasesInput
from tests.fakeserver import FakeOpenAIServer
from tests.predict.test_predict import COLUMNS, SCENARIOS, learn_the_format, vanilla, write_csv

pytestmark = pytest.mark.usefixtures("clean_anchor_env")
runner = CliRunner()
TOTALS = ("logical_requests", "llm_calls", "prompt_tokens", "completion_tokens", "cache_hits", "samples")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def outcome(run: Path) -> tuple[list, dict, dict]:
    """What must not depend on where the instances were answered: each prediction (in (run, id) order,
    its measured times aside, its cost per stage in stage order: stages that ran at once are listed
    in the order they first answered), the scores and the cost totals."""
    preds = sorted(read_jsonl(run / "predictions.jsonl"), key=lambda r: (r["run"], r["id"]))
    timeless = [{**{k: v for k, v in p.items() if k not in ("seconds", "cost")},
                 "cost": sorted(({k: v for k, v in c.items() if not k.endswith("seconds")} for c in p["cost"]),
                                key=lambda c: c["stage"])}
                for p in preds]
    metrics = json.loads((run / "metrics.json").read_text())
    return timeless, metrics["mean"], {k: metrics["cost"]["total"][k] for k in TOTALS}


def run_cli(*args: str) -> None:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output


@pytest.mark.slow
def test_an_anchor_eval_in_two_processes_equals_one_in_one(tmp_path):
    with FakeOpenAIServer(deterministic=True) as server:
        for workers in ("1", "2"):
            run_cli("eval", "--dataset", "today", "--method", "anchor", "--limit", "6", "--sizes", "quick",
                    "--balance-outcomes", "--base-url", server.base_url, "--cache-dir", str(tmp_path / f"cache{workers}"),
                    "--out", str(tmp_path / f"w{workers}"), "--workers", workers)
    one, two = outcome(tmp_path / "w1"), outcome(tmp_path / "w2")
    assert one == two
    assert sorted(p.name for p in (tmp_path / "w1" / "spaces").glob("*.json")) == \
        sorted(p.name for p in (tmp_path / "w2" / "spaces").glob("*.json"))
    # The runner alone wrote the call log: every request once, as many as the server saw.
    assert one[2]["llm_calls"] > 0


def test_a_predict_run_in_two_processes_equals_one_in_one(tmp_path, monkeypatch):
    """The same run directory, and with helpers the runner does not read the rows to answer them: each
    helper reads its own share of the file (the runner's only pass over it is the check)."""
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    with open(cases, "a", encoding="utf-8", newline="") as fh:
        fh.write("case-bad,A situation.,It happens.,It does not.,,1\r\n")  # no condition: rejected
    opened: list[str] = []
    open_cases = CasesInput.open

    def noted_open(self: CasesInput, **kw: bool) -> CaseStream:
        opened.append(workers)
        return open_cases(self, **kw)

    monkeypatch.setattr(CasesInput, "open", noted_open)
    with FakeOpenAIServer(responder=vanilla) as server:
        for workers in ("1", "2"):
            run_cli("predict", str(cases), *COLUMNS, "--method", "vanilla", "--base-url", server.base_url,
                    "--cache-dir", str(tmp_path / f"cache{workers}"), "--out", str(tmp_path / f"w{workers}"),
                    "--workers", workers)
        assert server.completions == 24
    assert outcome(tmp_path / "w1") == outcome(tmp_path / "w2")
    assert (tmp_path / "w2" / "predictions.jsonl").read_text().count("\n") == 12
    for name in ("instances.jsonl", "rejected.jsonl"):
        assert (tmp_path / "w1" / name).read_bytes() == (tmp_path / "w2" / name).read_bytes(), name
    assert json.loads((tmp_path / "w2" / "metrics.json").read_text())["data"]["skipped"] == 1
    assert opened == ["1"]


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_a_predict_run_on_a_local_ray_instance_equals_one_in_one_process(tmp_path, local_ray):
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    store = tmp_path / "store"
    with FakeOpenAIServer(deterministic=True) as server:
        for where in (("--workers", "1"), ("--ray", "auto", "--workers", "2")):
            out = tmp_path / where[1]
            run_cli("predict", str(cases), *COLUMNS, "--sizes", "quick", "--base-url", server.base_url,
                    "--cache-dir", str(tmp_path / f"cache-{where[1]}"), "--out", str(out), "--spaces", str(store / where[1]),
                    *where)
    assert outcome(tmp_path / "1") == outcome(tmp_path / "auto")
    # The actors built the spaces; the runner saved them in the run directory and in the store.
    names = sorted(p.name for p in (tmp_path / "1" / "spaces").glob("*.json"))
    assert len(names) == 3
    assert sorted(p.name for p in (tmp_path / "auto" / "spaces").glob("*.json")) == names
    assert sorted(p.name for p in (store / "auto" / "spaces").glob("*.json")) == names


@pytest.mark.slow
async def test_a_lost_ray_worker_is_started_again_and_its_instances_answered_once(tmp_path, local_ray):
    """An actor killed while its instances wait on the server: Ray starts it again, the pool sends
    those instances again, and every instance comes back once."""
    from anchor.llm.settings import LLMSettings
    from anchor.predict.config import CasesInput, make_predict_config
    from anchor.rundir import RunDirectory
    from anchor.rundir.instances import DecisionInstance
    from anchor.runs.ray_pool import RayPool
    from anchor.runs.worker import Work, WorkerSetup
    from anchor.types import Scenario, scenario_key

    cases = tmp_path / "cases.csv"
    write_csv(cases)
    run = tmp_path / "run"
    run.mkdir()
    with FakeOpenAIServer(responder=vanilla) as server:
        settings = LLMSettings(base_url=server.base_url, model="fake-model", cache_dir=tmp_path / "cache")
        config = make_predict_config(cases=CasesInput.of(cases, columns=dict(c.split("=") for c in COLUMNS[1::2])),
                                     method="vanilla", settings=settings, anchor_config=None)
        config.llm["model"] = "fake-model"
        directory = RunDirectory(run)
        pool = RayPool(WorkerSetup(config=config, settings=settings, artefacts=run), 2, "auto", directory)
        await pool.start()
        scenario = Scenario(text=SCENARIOS[0][0], outcome1=SCENARIOS[0][1], outcome2=SCENARIOS[0][2])
        group = scenario_key(scenario)
        index = int(group[:8], 16) % 2
        instances = [DecisionInstance(id=f"i{k}", dataset="cases", scenario=scenario, condition=f"condition 0-{k}",
                                      label=1) for k in range(4)]
        server.hold(after=0)
        answers = [asyncio.ensure_future(pool.answer(Work(0, inst, group))) for inst in instances]
        # The worker's requests wait on the server (waited for in a thread: the answers are tasks of this
        # loop). How many it sends before an answer comes is its client's choice (it starts cautiously).
        await asyncio.to_thread(server.wait_until, lambda: len(server.requests) >= 1)
        local_ray.kill(pool._actors[index], no_restart=False)  # the worker is lost; Ray starts it again
        # ray.kill returns at once: until the old actor is gone it may still get the held answers (and
        # cache them). It is gone when a call fails or its successor answers, having made no request.
        while True:
            try:
                if await pool._actors[index].count.remote() == 0:
                    break
            except local_ray.exceptions.RayActorError:
                break
            await asyncio.sleep(0.05)
        sent_before = server.completions
        server.release()
        results = await asyncio.gather(*answers)
        await pool.settle()
        folders = [Path(await actor.folder.remote()) for actor in pool._actors]
        assert all(folder.is_dir() for folder in folders)
        await pool.close()
        for log in directory.logs():
            log.close()
    assert not any(folder.exists() for folder in folders)  # the actors' scratch folders went with them
    assert sorted(a.id for a in results) == ["i0", "i1", "i2", "i3"]
    written = sorted(read_jsonl(run / "predictions.jsonl"), key=lambda p: p["id"])
    assert [p["p_outcome1"] for p in written] == [0.9, 0.2, 0.5, 0.7]  # each instance written once
    # Those the lost actor had sent were sent again by its successor: each instance answered once.
    assert server.completions == sent_before + 4
    assert sum(1 for r in read_jsonl(run / "calls.jsonl") if r["outcome"] == "ok") == 4


class _GatedActor:
    """A stand-in for the pool's actor (a real Ray actor): once started, a restart waits for a gate
    file, as a worker on a loaded machine takes its time to come back."""

    def __init__(self, started: str, gate: str, answer: str) -> None:
        if Path(started).exists():
            while not Path(gate).exists():
                time.sleep(0.05)
        Path(started).touch()
        self.answer_json = answer

    async def count(self) -> int:
        return 0

    async def answer(self, work, rank, artefacts):
        from anchor.runs.pool import Tally
        from anchor.runs.worker import Answered

        return (Answered(run=work.run, id=work.instance.id, status="ok", unknown=False), Tally(),
                {"predictions.jsonl": [self.answer_json]}, {})


class _CountingHandle:
    """An actor handle that counts the calls refused while the actor restarts."""

    def __init__(self, handle, unavailable) -> None:
        self.handle, self.unavailable, self.refused = handle, unavailable, 0

    def __getattr__(self, name):
        method, outer = getattr(self.handle, name), self

        class Method:
            def remote(self, *args):
                async def called():
                    try:
                        return await method.remote(*args)
                    except outer.unavailable:
                        outer.refused += 1
                        raise
                return called()
        return Method()


@pytest.mark.slow
async def test_a_lost_ray_worker_slow_to_come_back_is_waited_for_not_given_up(tmp_path, local_ray):
    """While Ray restarts a lost actor every call to it is refused at once: those refusals are not
    losses. The instance waits for the actor and is answered (it was given up after four refusals)."""
    from anchor.llm.settings import LLMSettings
    from anchor.predict.config import CasesInput, make_predict_config
    from anchor.rundir import RunDirectory
    from anchor.rundir.instances import DecisionInstance
    from anchor.rundir.records import Prediction
    from anchor.runs.ray_pool import MAX_RESENDS, RayPool
    from anchor.runs.worker import Work, WorkerSetup
    from anchor.types import Scenario

    cases = tmp_path / "cases.csv"
    write_csv(cases)
    run = tmp_path / "run"
    run.mkdir()
    settings = LLMSettings(base_url="http://127.0.0.1:9/v1", model="fake-model", cache_dir=tmp_path / "cache")
    config = make_predict_config(cases=CasesInput.of(cases, columns=dict(c.split("=") for c in COLUMNS[1::2])),
                                 method="vanilla", settings=settings, anchor_config=None)
    directory = RunDirectory(run)
    pool = RayPool(WorkerSetup(config=config, settings=settings, artefacts=run), 1, "auto", directory)
    answer = Prediction(run=0, id="i0", seed=0, kind="decision", label=1, p_outcome1=0.9, p_outcome2=0.1)
    gated = local_ray.remote(max_restarts=-1, max_task_retries=0)(_GatedActor).remote(
        str(tmp_path / "started"), str(tmp_path / "gate"), answer.model_dump_json())
    handle = _CountingHandle(gated, local_ray.exceptions.ActorUnavailableError)
    pool._actors = [handle]
    await handle.count.remote()  # started once
    local_ray.kill(gated, no_restart=False)
    while handle.refused == 0:  # until the kill has taken effect (a call just after it may still pass)
        try:
            await handle.count.remote()
        except local_ray.exceptions.RayActorError:
            pass
    scenario = Scenario(text=SCENARIOS[0][0], outcome1=SCENARIOS[0][1], outcome2=SCENARIOS[0][2])
    work = Work(0, DecisionInstance(id="i0", dataset="cases", scenario=scenario, condition="c", label=1), "0" * 16)
    task = asyncio.ensure_future(pool.answer(work))
    while not task.done() and handle.refused < MAX_RESENDS + 3:
        await asyncio.sleep(0.05)
    (tmp_path / "gate").touch()  # now the actor may come back
    answered = await task
    for log in directory.logs():
        log.close()
    assert handle.refused >= MAX_RESENDS + 3  # refused more often than an instance is resent
    written = [Prediction.model_validate(p) for p in read_jsonl(run / "predictions.jsonl")]
    assert (answered.id, [(p.id, p.p_outcome1) for p in written]) == ("i0", [("i0", 0.9)])
    assert not (run / "traces.jsonl").exists()
    local_ray.kill(gated)


REPO = Path(__file__).resolve().parents[2]


def two_helper_predict(server: FakeOpenAIServer, tmp_path: Path, out: Path) -> list[str]:
    """``anchor predict`` of the test cases into ``out`` with two helper processes, as its own process (run it
    with ``cwd=REPO``), once the server's output format is remembered in its cache folder."""
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    cmd = [sys.executable, "-c", "from anchor.cli import main; main()", "predict", str(cases), *COLUMNS,
           "--method", "vanilla", "--base-url", server.base_url, "--cache-dir", str(tmp_path / "cache"),
           "--out", str(out), "--workers", "2"]
    learn_the_format(cmd[:4], cmd[5:-4], tmp_path, cwd=REPO)
    return cmd


@pytest.mark.slow
def test_a_killed_runner_with_helper_processes_resumes_and_asks_again_only_what_was_in_flight(tmp_path):
    """kill -9 of the runner while its two helper processes wait on the server: the helpers stop with
    it (they ask nothing more), and the same command resumes; the only requests the server sees twice
    are those in flight at the kill, as in one process."""
    from tests.runs.test_ray_local_kill import descendants, running  # (it imports this module)

    with FakeOpenAIServer(responder=vanilla, record_bodies=str(tmp_path / "bodies.jsonl")) as server:
        out = tmp_path / "killed"
        cmd = two_helper_predict(server, tmp_path, out)
        before = server.completions
        server.hold(before + 5)  # 5 rows answered, the others held in flight
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        preds = out / "predictions.jsonl"
        deadline = time.time() + 240  # only so that a broken run cannot hang the suite
        while time.time() < deadline and proc.poll() is None:
            if preds.exists() and len(preds.read_text().splitlines()) >= 5 and server.completions == before + 12 \
                    and (out / "calls.jsonl").read_text().count('"outcome":"sent"') == 12:
                # 5 answered, the other 7 held at the server, and the runner has recorded every request
                # (a helper's record of a request travels to the runner as the request goes out).
                break
            time.sleep(0.05)
        helpers = descendants(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        held = server.completions - before - 5
        # The helpers end once they see the runner's end (their input closes). Until then, a held request
        # let go would still be answered and recorded (and not asked again): wait for that end first.
        while time.time() < deadline and any(running(pid) for pid in helpers):
            time.sleep(0.05)
        assert not any(running(pid) for pid in helpers)
        server.release()
        # Every connection of the dead processes read to its end: what they sent has all been counted.
        server.wait_until(lambda: server.connections == 0, timeout=30)
        assert held == 7
        assert server.completions == before + 5 + held  # the helpers asked nothing after the runner died
        resumed = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr
    bodies = (tmp_path / "bodies.jsonl").read_text().splitlines()
    twice = len(bodies) - len(set(bodies))
    assert twice == held
    calls = read_jsonl(out / "calls.jsonl")
    answered = {r["request_id"] for r in calls if r["outcome"] != "sent"}
    interrupted = {r["request_id"] for r in calls if r["outcome"] == "sent"} - answered
    assert len(interrupted) == held
    assert [p["id"] for p in read_jsonl(preds)] == [f"case-{i}" for i in range(12)]


def test_workers_and_ray_come_from_the_flag_then_the_environment_then_the_default(monkeypatch):
    from anchor.cli.options import ScaleOptions

    monkeypatch.delenv("ANCHOR_WORKERS", raising=False)
    monkeypatch.delenv("ANCHOR_RAY", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 6)
    assert ScaleOptions().resolve(uses_server=True) == (1, None)   # one process unless asked
    assert ScaleOptions(workers="auto").resolve(uses_server=True) == (6, None)   # every core for a server
    assert ScaleOptions(workers="auto").resolve(uses_server=False) == (1, None)  # the embedded model: one
    monkeypatch.setenv("ANCHOR_WORKERS", "3")
    assert ScaleOptions().resolve(uses_server=True) == (3, None)
    assert ScaleOptions(workers="2").resolve(uses_server=True) == (2, None)
    monkeypatch.setenv("ANCHOR_RAY", "auto")
    assert ScaleOptions(workers="2").resolve(uses_server=True) == (2, "auto")
    monkeypatch.delenv("ANCHOR_WORKERS")
    assert ScaleOptions().resolve(uses_server=True) == (0, "auto")  # 0: one actor per CPU of the cluster
    monkeypatch.setenv("ANCHOR_WORKERS", "two")
    with pytest.raises(Exception, match="ANCHOR_WORKERS must be a whole number from 1 to 1024, or auto"):
        ScaleOptions().resolve(uses_server=True)
    with pytest.raises(Exception, match="--workers must be a whole number"):
        ScaleOptions(workers="0").resolve(uses_server=True)


@pytest.mark.slow
def test_a_helper_killed_while_it_reads_and_answers_its_share_stops_the_run_in_one_line_and_it_resumes(tmp_path):
    """kill -9 of one helper process while it answers its share of a predict run: the run stops with one
    line naming the helper and what to do, and the same command finishes it."""
    from tests.runs.test_ray_local_kill import descendants  # (it imports this module)

    with FakeOpenAIServer(responder=vanilla) as server:
        out = tmp_path / "run"
        cmd = two_helper_predict(server, tmp_path, out)
        before = server.completions
        server.hold(before + 5)
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 240  # only so that a broken run cannot hang the suite
        while time.time() < deadline and proc.poll() is None and server.completions < before + 12:
            time.sleep(0.05)
        helpers = [pid for pid in descendants(proc.pid)
                   if b"anchor.runs.helper" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(helpers) == 2
        os.kill(helpers[0], signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
        server.release()
        assert proc.returncode == 2, err  # anchor's exit code for a run that cannot go on
        lines = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and re.fullmatch(
            r"error: worker process [01] stopped \(exit code -9\); run the same command again to resume", lines[0])
        assert "Traceback" not in err
        resumed = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr
    assert sorted(p["id"] for p in read_jsonl(out / "predictions.jsonl")) == sorted(f"case-{i}" for i in range(12))
    assert (out / "instances.jsonl").read_text().count("\n") == 12
    assert not list(out.glob("*.share*"))
