"""``--ray local`` and a runner killed with ``kill -9``: its actors stop with it (no request reaches the
server after the kill), no Ray process and no scratch folder outside the run directory remains, and
after the same command resumes the run, its cost counts every request the server saw, once.

The runner is a real ``anchor predict`` process with its own local Ray instance; the test server holds
requests (``hold``), so the kill comes at a known point whatever the machine's speed."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from anchor.llm.ledger import CallRecord, total
from anchor.rundir import RunDirectory
from anchor.rundir.shards import ShardWriter
from anchor.runs import ray_watchdog
from anchor.runs.pool import worker_of
from anchor.runs.ray_local import WORKERS_FOLDER
from anchor.types import Scenario, scenario_key
from tests.fakeserver import FakeOpenAIServer
from tests.predict.test_predict import COLUMNS, SCENARIOS, learn_the_format, vanilla, write_csv
from tests.procs import descendants
from tests.runs.test_workers import read_jsonl

pytestmark = pytest.mark.usefixtures("clean_anchor_env")
REPO = Path(__file__).resolve().parents[2]
#: Only so that a broken run cannot hang the suite; no assertion depends on it.
DEADLINE_SECONDS = 300


def running(pid: int) -> bool:
    """Is ``pid`` a live process (a zombie waiting to be reaped has ended)?"""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def sent_records(out: Path) -> int:
    calls = out / "calls.jsonl"
    return calls.read_text(encoding="utf-8").count('"outcome":"sent"') if calls.exists() else 0


class KilledRunner:
    """``anchor predict --ray local --workers 2`` on the 12 test cases, in its own process, against
    ``server``, with its temporary folder apart (where actors used to keep their scratch folders)."""

    def __init__(self, server: FakeOpenAIServer, tmp_path: Path, private_tmp: Path) -> None:
        cases = tmp_path / "cases.csv"
        # Scenario 2's rows first: the runner admits 2 x --concurrency instances at once, so both
        # actors get four instances of which two are in flight (their share of --concurrency 4).
        self.ids = write_csv(cases, order=[8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 6, 7])
        groups = {worker_of(scenario_key(Scenario(text=s, outcome1=a, outcome2=b)), 2) for s, a, b in SCENARIOS[::2]}
        assert groups == {0, 1}, "the first two scenarios of the file go to different actors"
        self.out = tmp_path / "run"
        predict = [sys.executable, "-c", "from anchor.cli import main; main()", "predict"]
        common = [*COLUMNS, "--method", "vanilla", "--base-url", server.base_url, "--cache-dir", str(tmp_path / "cache")]
        self.cmd = [*predict, str(cases), *common, "--out", str(self.out), "--ray", "local", "--workers", "2",
                    "--concurrency", "4"]
        # Ray's own session folders stay where they are (socket paths have a length limit).
        self.env = {**os.environ, "TMPDIR": str(private_tmp), "RAY_TMPDIR": tempfile.gettempdir(),
                    "HF_HUB_OFFLINE": "1"}
        learn_the_format(predict, common, tmp_path, cwd=REPO, env=self.env)  # (a first run, without Ray)

    def start_held(self, server: FakeOpenAIServer) -> subprocess.Popen[bytes]:
        """Start the runner with every request held at the server, and return once both actors wait on
        their two requests (all four recorded by the runner)."""
        server.hold(server.completions)
        proc = subprocess.Popen(self.cmd, cwd=REPO, env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + DEADLINE_SECONDS
        while not (server.held == 4 and sent_records(self.out) == 4):
            assert proc.poll() is None and time.monotonic() < deadline, "the runner never had four requests held"
            time.sleep(0.05)
        return proc

    def resume(self) -> None:
        done = subprocess.run(self.cmd, cwd=REPO, env=self.env, capture_output=True, text=True,
                              timeout=DEADLINE_SECONDS)
        assert done.returncode == 0, done.stderr[-2000:]


def wait_until_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + 120  # Ray's own agents used to take 62 s
    started = time.monotonic()
    while any(running(p) for p in pids):
        assert time.monotonic() < deadline, "processes of the killed runner's Ray instance still run"
        time.sleep(0.1)
    print(f"the {len(pids)} processes of the killed runner were gone {time.monotonic() - started:.2f} s after the kill")


@pytest.fixture
def private_tmp():
    """A temporary folder of the runner's own (TMPDIR), where scratch folders used to be left."""
    folder = Path(tempfile.mkdtemp(prefix="anchor-kill-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


linux_only = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads processes from /proc (Linux)")


@linux_only
@pytest.mark.slow
def test_a_killed_runner_takes_its_local_ray_instance_with_it_and_resumes_counting_each_request_once(
        tmp_path, private_tmp):
    """kill -9 while four requests are held and four more instances wait in the actors: once the server
    answers, no actor asks anything more, every process of the instance ends, no scratch folder stays
    in the temporary folder; after the resume the ledger counts every request the server saw, once."""
    pytest.importorskip("ray")
    with FakeOpenAIServer(responder=vanilla, record_bodies=str(tmp_path / "bodies.jsonl")) as server:
        runner = KilledRunner(server, tmp_path, private_tmp)
        before = server.completions
        proc = runner.start_held(server)
        tree = descendants(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        at_kill = server.completions
        server.release()  # the held requests are answered: a surviving actor would ask its next ones
        wait_until_gone(tree)
        assert server.completions == at_kill == before + 4  # nothing asked after the kill
        assert list(private_tmp.iterdir()) == []  # no scratch folder left in the temporary folder
        runner.resume()
        asked = server.completions - before
    cost = total(RunDirectory(runner.out).call_log())
    assert cost.llm_calls + cost.interrupted == asked  # the server's count, each request once
    # The requests in flight at the kill (four) are counted as interrupted and asked again at the resume,
    # but for any answer an actor got before it ended (it went to the response cache and its journal).
    bodies = (tmp_path / "bodies.jsonl").read_text().splitlines()[-asked:]
    assert len(bodies) - len(set(bodies)) == cost.interrupted <= 4
    assert cost.llm_calls == 12
    assert [p["id"] for p in read_jsonl(runner.out / "predictions.jsonl")] == runner.ids
    assert not (runner.out / WORKERS_FOLDER).exists()  # the killed actors' folders went at the resume


@linux_only
@pytest.mark.slow
def test_requests_whose_records_had_not_reached_a_killed_runner_are_counted_after_the_resume(
        tmp_path, private_tmp):
    """The runner is stopped (SIGSTOP) while its actors' requests are answered, so their records wait in
    the actors' shards, then killed: the resume copies them into calls.jsonl, and the run's cost equals
    the server's count, tokens included."""
    pytest.importorskip("ray")
    with FakeOpenAIServer(responder=vanilla) as server:
        runner = KilledRunner(server, tmp_path, private_tmp)
        before, tokens_before = server.completions, server.prompt_tokens_served + server.completion_tokens_served
        proc = runner.start_held(server)
        tree = descendants(proc.pid)
        os.kill(proc.pid, signal.SIGSTOP)
        server.release()
        # Both actors answer their four instances (four more requests), and nothing reaches the runner.
        shards = runner.out / WORKERS_FOLDER
        assert len(list(shards.glob("*/calls.jsonl"))) == 2  # each actor writes its requests in the run directory
        deadline = time.monotonic() + DEADLINE_SECONDS
        while sum(p.read_text().count('"outcome":"ok"') for p in shards.glob("*/calls.jsonl")) < 8:
            assert time.monotonic() < deadline, "the actors never answered their instances"
            time.sleep(0.05)
        assert sent_records(runner.out) == 4
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        wait_until_gone(tree)
        runner.resume()
        asked = server.completions - before
        tokens = server.prompt_tokens_served + server.completion_tokens_served - tokens_before
    cost = total(RunDirectory(runner.out).call_log())
    assert asked == 12  # 8 before the kill, the 4 never asked after it; the 8 answers came from the cache
    assert (cost.llm_calls, cost.interrupted, cost.prompt_tokens + cost.completion_tokens) == (12, 0, tokens)


def test_a_shard_is_copied_as_it_grows_and_removed_once_its_worker_is_gone(tmp_path):
    """A live worker's shard is copied into calls.jsonl (complete lines only) and kept; once its worker is
    gone the rest is copied, once, and its folder goes. Until then readers see the lines not copied yet."""
    run = RunDirectory(tmp_path)
    received = CallRecord(stage="s", outcome="sent", request_id="a1", started=1.0)
    lost = [CallRecord(stage="s", outcome="ok", request_id="a1", prompt_tokens=7, started=1.0),
            CallRecord(stage="s", outcome="sent", request_id="b2", started=2.0)]
    shard = ShardWriter(tmp_path)  # its worker: this process, holding the shard's lock
    shard.write("calls.jsonl", received.model_dump_json())
    assert run.calls.read() == [received]  # a reader sees it before it is copied
    run.merge_shards()
    assert (tmp_path / "calls.jsonl").read_text().count("\n") == 1 and shard.folder.is_dir()  # alive: kept
    for record in lost:
        shard.write("calls.jsonl", record.model_dump_json())
    with open(shard.folder / "calls.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"stage": "s", "outc')  # the line a kill cut off
    assert run.calls.read() == [received, *lost]
    shard.close()  # the worker ends: its lock goes with it
    run.merge_shards()
    run.calls.close()
    assert run.calls.read() == [received, *lost]
    assert (tmp_path / "calls.jsonl").read_text().count("\n") == 3
    assert not (tmp_path / WORKERS_FOLDER).exists()


@linux_only
@pytest.mark.parametrize("told", [True, False], ids=["session-told", "killed-before-ray-started"])
def test_the_watchdog_ends_the_instance_processes_once_its_runner_ends(tmp_path, told):
    """The watchdog's runner (here: this test, closing the pipe) ends: the watchdog kills the processes
    that carry the instance's tag, and Ray's titled ones that hold a file in its session folder (found
    by the runner's id when the runner died before it could say which), and no other."""
    tag = f"{os.getpid()}-{os.urandom(4).hex()}"
    session = tmp_path / f"session_2026-01-01_00-00-00_000000_{os.getpid()}"
    session.mkdir()
    tagged = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                              env={**os.environ, ray_watchdog.TAG_VARIABLE: tag})
    # A Ray agent's title hides the environment; it writes a log in the session folder.
    agent = subprocess.Popen(["bash", "-c", f'exec -a "ray::DashboardAgent" sleep 600 >> {session}/agent.log'])
    stranger = subprocess.Popen(["bash", "-c", 'exec -a "ray::DashboardAgent" sleep 600'])
    try:
        watchdog = ray_watchdog.start(tag)
        if told:
            ray_watchdog.tell(watchdog, str(session))
        assert watchdog.stdin is not None
        watchdog.stdin.close()  # the runner's end
        assert watchdog.wait(timeout=60) == 0  # it swept, then ended
        assert (tagged.wait(timeout=60), agent.wait(timeout=60)) == (-signal.SIGKILL, -signal.SIGKILL)
        assert stranger.poll() is None  # another instance's agent
    finally:
        for proc in (tagged, agent, stranger):
            proc.kill()
            proc.wait()
