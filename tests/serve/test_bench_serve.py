"""``benchmarks/bench_serve.py`` on a tiny load: the steps a flag switches off are skipped with a line that
says so, the figures reach ``--json``, and no process it started outlives it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")
REPO = Path(__file__).resolve().parents[2]
BENCH = [sys.executable, str(REPO / "benchmarks" / "bench_serve.py")]


def children_of(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (read from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                out.append(int(entry.name))
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_a_run_without_the_job_check_ends_cleanly_and_keeps_its_figures(tmp_path):
    """--job-rows 0 used to send an empty job (422, an AssertionError) and leave two services running."""
    figures = tmp_path / "serve.json"
    proc = subprocess.Popen([*BENCH, "--clients", "1", "--per-client", "2", "--sweep", "", "--runs", "1",
                             "--job-rows", "0", "--skip-infer", "--keep", str(tmp_path / "work"), "--json",
                             str(figures)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    started: set[int] = set()
    while proc.poll() is None:  # every service and test server it starts, as long as it runs
        started.update(children_of(proc.pid))
        try:
            proc.wait(0.2)
        except subprocess.TimeoutExpired:
            pass
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    assert "beside a job: not checked (--job-rows 0)" in out
    assert "anchor infer: not compared (--skip-infer)" in out
    report = json.loads(figures.read_text())
    assert report["runs"][0]["answers"] == 2 and report["runs"][0]["statuses"] == {"200": 2}
    assert "beside_a_job" not in report
    assert len(started) >= 3  # the test server, the service that builds, the one that answers
    assert not [pid for pid in started if Path(f"/proc/{pid}").exists()
                and "Z" not in Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]]


def test_a_count_out_of_range_is_refused_naming_its_flag():
    done = subprocess.run([*BENCH, "--per-client", "0"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("error: --per-client must be at least 1")
