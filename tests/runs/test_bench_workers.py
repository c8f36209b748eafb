"""``benchmarks/bench_workers.py`` on tiny runs: the CPU "beyond start" comes with its short run's figures for an
evaluation as for a cases file, and a malformed flag is refused naming it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = [sys.executable, str(REPO / "benchmarks" / "bench_workers.py")]

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


@pytest.mark.parametrize(("task", "start_requests"), [
    (["--eval", "today:vanilla:16"], 2),  # an eighth of the instances, one request each
    (["--rows", "24", "--start-rows", "6"], 6),
])
def test_each_run_reports_the_cpu_beyond_a_short_run_of_the_same_task(tmp_path, task, start_requests):
    out = tmp_path / "workers.json"
    done = subprocess.run([*BENCH, *task, "--workers", "1", "--servers", "1", "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (run,) = json.loads(out.read_text())["runs"]
    assert run["ledger_equals_server"] and run["start_requests"] == start_requests
    assert run["requests"] > start_requests
    assert "runner_ms_per_request_while_flowing" in run  # None when the requests took less than two samples
    for key in ("runner_ms_per_request_beyond_start", "workers_ms_per_request_beyond_start",
                "start_runner_cpu_s", "start_workers_cpu_s"):
        assert run[key] is not None, key


@pytest.mark.parametrize(("flags", "named"), [
    (["--eval", "today:vanilla:some"], "--eval must be DATASET:METHOD:LIMIT"),
    (["--eval", "today"], "--eval must be DATASET:METHOD:LIMIT"),
    (["--start-rows", "-1"], "--start-rows must be 0 or more"),
])
def test_a_malformed_flag_is_refused_naming_it(flags, named):
    done = subprocess.run([*BENCH, *flags], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert named in done.stderr.strip().splitlines()[-1]


def _bench_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_workers", REPO / "benchmarks" / "bench_workers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_runners_cpu_while_requests_flow_is_read_between_the_samples_around_each_moment():
    bench = _bench_module()
    trace = bench.CpuTrace.__new__(bench.CpuTrace)  # its samples only, no thread started
    trace.samples = [(10.0, 1.0), (10.5, 1.2), (11.0, 2.2)]
    assert trace.at(10.25) == pytest.approx(1.1)
    assert trace.at(10.75) == pytest.approx(1.7)
    assert trace.at(11.0) == pytest.approx(2.2)
    assert trace.at(9.99) is None and trace.at(11.01) is None  # outside the samples: not guessed
