"""``benchmarks/bench_serve.py`` on a tiny load: the steps a flag switches off are skipped with a line that
says so, the figures reach ``--json``, and no process it started outlives it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.runs.test_ray_local_kill import descendants, running

pytest.importorskip("uvicorn")
REPO = Path(__file__).resolve().parents[2]
BENCH = [sys.executable, str(REPO / "benchmarks" / "bench_serve.py")]


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_a_run_without_the_job_check_ends_cleanly_and_keeps_its_figures(tmp_path):
    """--job-rows 0 used to send an empty job (422, an AssertionError) and leave two services running."""
    figures = tmp_path / "serve.json"
    proc = subprocess.Popen([*BENCH, "--clients", "1", "--per-client", "2", "--sweep", "", "--runs", "1",
                             "--job-rows", "0", "--skip-infer", "--keep", str(tmp_path / "work"), "--json",
                             str(figures)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    started: set[int] = set()
    while proc.poll() is None:  # every process it starts (services, their helpers, the test server)
        started.update(descendants(proc.pid))
        time.sleep(0.2)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    assert "beside a job: not checked (--job-rows 0)" in out
    assert "anchor infer: not compared (--skip-infer)" in out
    report = json.loads(figures.read_text())
    assert report["runs"][0]["answers"] == 2 and report["runs"][0]["statuses"] == {"200": 2}
    assert "beside_a_job" not in report
    assert len(started) >= 3  # the test server, the service that builds, the one that answers
    # A service's own helpers end when it does, a moment later; one left running never does. (The deadline
    # only keeps a leak from hanging the suite.)
    deadline = time.monotonic() + 60
    while any(running(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in started if running(pid)]


def test_a_count_out_of_range_is_refused_naming_its_flag():
    done = subprocess.run([*BENCH, "--per-client", "0"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("error: --per-client must be at least 1")
