"""Requests per second and CPU per request of a run at each ``--workers`` count: the runner's own CPU and
its workers' apart, against several test-server processes sharing one port (so that the server is not
the limit), with the ledger checked against the servers' own count.

    python benchmarks/bench_workers.py                                  # vanilla predict, 16,000 rows
    python benchmarks/bench_workers.py --rows 4000 --workers 1,2 --latency 0.05
    python benchmarks/bench_workers.py --eval today:anchor:40 --sizes quick
    python benchmarks/bench_workers.py --src /path/to/other/checkout/src   # another version of anchor

Each run is a fresh ``anchor`` process (the installed console script, or ``--src``'s code through
PYTHONPATH) with a fresh cache, so every request reaches a server. Its CPU is read from the kernel when
it has ended (``/proc/PID/stat`` of the process before it is reaped): ``utime + stime`` is the runner's
own, ``cutime + cstime`` that of every process it started and waited for (its helper processes and
their embedding and clustering processes). The servers (``tests/fakeserver.py --reuse-port``) write
their counts when stopped; requests/s is their requests over the span from the first arrival to the
last answer. The run directory's ledger (requests answered or cut off, as ``anchor cost`` counts them)
must equal the servers' count, and each run's predictions must equal those of the first count given.
A second run of ``--start-rows`` rows (with ``--eval``, instances: an eighth of its limit by default)
at each count gives what a run costs whatever its length (the start-up, the helpers' start): the CPU
beyond it, over the requests beyond its own, is what each request costs in all
(``*_ms_per_request_beyond_start``), including the work at both ends that grows with the rows (the check
pass before the first request; ordering, collecting and scoring after the last), which one process does
as well. The runner's own CPU is also read every 50 ms while it runs: what it spent from the first
request's arrival to the last answer, over the requests, is its CPU while they flow
(``runner_ms_per_request_while_flowing``), the figure that says how many requests a second one runner
keeps up with. Linux only (``/proc``). Results: one JSON object per run, printed and written to ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
WORDS = ["budget", "weather", "traffic", "deadline", "noise", "friends", "cost", "quality", "time", "distance",
         "mood", "health", "rain", "price", "staff", "delay"]


def write_cases(path: Path, rows: int, groups: int, seed: int = 7) -> None:
    """``rows`` made-up cases in ``groups`` scenarios, labelled, dealt out round-robin."""
    rng = random.Random(seed)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "scenario", "outcome1", "outcome2", "condition", "label"])
        for i in range(rows):
            g = i % groups
            w.writerow([f"r{i}", f"Scenario {g}: a household plans a free weekend given the {WORDS[g % len(WORDS)]}.",
                        f"They stay home ({g}).", f"They travel ({g}).",
                        f"Condition {i}: " + " ".join(rng.choice(WORDS) for _ in range(20)) + ".", rng.choice([1, 2])])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Servers:
    """``count`` test-server processes on one port."""

    def __init__(self, count: int, folder: Path, flags: list[str]) -> None:
        self.port = free_port()
        self.folder = folder
        self.procs = []
        for k in range(count):
            stats = folder / f"server-{k}.json"
            stats.unlink(missing_ok=True)
            self.procs.append(subprocess.Popen(
                [sys.executable, str(REPO / "tests" / "fakeserver.py"), "--port", str(self.port), "--reuse-port",
                 "--stats-file", str(stats), *flags], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
        for proc in self.procs:
            assert proc.stdout is not None
            proc.stdout.readline()  # "serving ...": it listens

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> dict[str, Any]:
        """Stop every process; their counts added up, and the span of the requests."""
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            proc.wait(timeout=60)
        stats = [json.loads(p.read_text()) for p in sorted(self.folder.glob("server-*.json"))]
        firsts = [s["first_arrival"] for s in stats if s["first_arrival"] is not None]
        lasts = [s["last_finish"] for s in stats if s["last_finish"] is not None]
        return {"requests": sum(s["requests"] for s in stats),
                "per_server": [s["requests"] for s in stats],
                "span_s": (max(lasts) - min(firsts)) if firsts else None,
                "first_arrival": min(firsts) if firsts else None, "last_finish": max(lasts) if lasts else None}


def _cpu_seconds(pid: int) -> tuple[float, float, float, float]:
    """``utime, stime, cutime, cstime`` of a process from ``/proc/PID/stat``, in seconds."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    utime, stime, cutime, cstime = (int(fields[i]) / tick for i in (11, 12, 13, 14))
    return utime, stime, cutime, cstime


def _own_cpu(pid: int) -> float | None:
    """``utime + stime`` of a running process, in seconds; None once it cannot be read."""
    try:
        utime, stime, _, _ = _cpu_seconds(pid)
    except OSError:
        return None
    return utime + stime


class CpuTrace:
    """The runner's own CPU, read every ``every`` seconds while it runs (``time.monotonic()``, the clock the
    test server stamps requests with): what it spent between the first request's arrival and the last
    answer is its CPU while requests flow, apart from its start and its end (the check pass, ordering,
    scoring), which one process pays as well."""

    def __init__(self, pid: int, every: float = 0.05) -> None:
        self.samples: list[tuple[float, float]] = []
        self._pid, self._every, self._stop = pid, every, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            cpu = _own_cpu(self._pid)
            if cpu is not None:
                self.samples.append((time.monotonic(), cpu))
            self._stop.wait(self._every)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def at(self, when: float) -> float | None:
        """The CPU at ``when``, interpolated between the samples around it; None outside them."""
        for (t0, c0), (t1, c1) in zip(self.samples, self.samples[1:], strict=False):
            if t0 <= when <= t1:
                return c0 + (c1 - c0) * ((when - t0) / (t1 - t0) if t1 > t0 else 0.0)
        return None


def ended_cpu(proc: subprocess.Popen[bytes]) -> tuple[float, float]:
    """(own, children's) CPU seconds of ``proc``, read once it has ended and before it is reaped."""
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    utime, stime, cutime, cstime = _cpu_seconds(proc.pid)
    return utime + stime, cutime + cstime


def anchor_command(src: Path | None) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")])
        return [sys.executable, "-c", "import sys; from anchor.cli import main; sys.argv[0] = 'anchor'; main()"], env
    installed = shutil.which("anchor", path=str(Path(sys.executable).parent)) or "anchor"
    return [installed], env


def timeless(run: Path) -> list[dict[str, Any]]:
    """The predictions, their measured times and per-stage costs aside, in (run, id) order."""
    rows = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines() if line.strip()]
    return sorted(({k: v for k, v in p.items() if k not in ("seconds", "cost")} for p in rows),
                  key=lambda p: (p["run"], p["id"]))


def ledger(run: Path) -> int:
    """Requests the run directory records (answered or failed attempts, and those cut off), as anchor cost counts."""
    from anchor.llm.ledger import total
    from anchor.rundir import RunDirectory

    cost = total(RunDirectory(run).call_log())
    return cost.llm_calls + cost.interrupted


def one_run(args: argparse.Namespace, workers: int, folder: Path, task: list[str]) -> dict[str, Any]:
    run, cache = folder / f"run-w{workers}", folder / f"cache-w{workers}"
    for path in (run, cache):
        shutil.rmtree(path, ignore_errors=True)
    flags = ["--latency", str(args.latency), "--deterministic", "--forget-bodies"]  # the same answers at every count
    for name in ("per_prompt_token", "per_completion_token", "slots"):
        if getattr(args, name) is not None:
            flags += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    servers = Servers(args.servers, folder, flags)
    command, env = anchor_command(args.src)
    started = time.perf_counter()
    log = folder / f"stderr-w{workers}.txt"
    with open(log, "wb") as err:  # a file, not a pipe: a long run's progress lines would fill a pipe
        proc = subprocess.Popen([*command, *task, "--base-url", servers.base_url, "--cache-dir", str(cache), "--out",
                                 str(run), "--workers", str(workers), "--concurrency", str(args.concurrency)],
                                stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=folder)
        trace = CpuTrace(proc.pid)
        own, children = ended_cpu(proc)
        trace.stop()
        wall = time.perf_counter() - started
        proc.wait()
    served = servers.stop()
    if proc.returncode != 0:
        raise SystemExit(f"--workers {workers}: anchor failed:\n{log.read_text()[-3000:]}")
    n = served["requests"]
    one_process = own + children
    flowing = None
    if served["first_arrival"] is not None and n:
        first, last = trace.at(served["first_arrival"]), trace.at(served["last_finish"])
        if first is not None and last is not None:
            flowing = round(1000 * (last - first) / n, 3)
    return {"workers": workers, "requests": n, "per_server": served["per_server"], "wall_s": round(wall, 2),
            "requests_per_s": round(n / served["span_s"], 1) if served["span_s"] else None,
            "runner_cpu_s": round(own, 2), "workers_cpu_s": round(children, 2),
            "runner_ms_per_request": round(1000 * own / n, 3),
            "workers_ms_per_request": round(1000 * children / n, 3),
            "runner_ms_per_request_while_flowing": flowing,
            "total_ms_per_request": round(1000 * one_process / n, 3),
            "ledger_requests": ledger(run), "ledger_equals_server": ledger(run) == n, "_run": str(run)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=16000)
    parser.add_argument("--groups", type=int, default=160, help="scenario groups the rows are dealt into")
    parser.add_argument("--start-rows", type=int, default=None,
                        help="rows (with --eval: instances) of a second, short run at each count, whose CPU is "
                             "what a run costs whatever its length (start-up, the helpers' start, the end): "
                             "subtracted to give what each further request costs; 0: no such run (default: 100 "
                             "rows, or an eighth of --eval's limit)")
    parser.add_argument("--method", default="vanilla")
    parser.add_argument("--eval", metavar="DATASET:METHOD:LIMIT", default=None,
                        help="time `anchor eval` instead of `anchor predict` (e.g. today:anchor:80)")
    parser.add_argument("--sizes", default=None, help="anchor's --sizes (quick: small factor spaces)")
    parser.add_argument("--workers", default=None,
                        help="comma-separated counts (default: 1, 2, 4, ... up to the cores)")
    parser.add_argument("--servers", type=int, default=max(2, (os.cpu_count() or 2) // 2),
                        help="test-server processes sharing the port")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--per-prompt-token", type=float, default=None)
    parser.add_argument("--per-completion-token", type=float, default=None)
    parser.add_argument("--slots", type=int, default=None)
    parser.add_argument("--src", type=Path, default=None, help="run the anchor whose package is in this folder")
    parser.add_argument("--out", "--json", type=Path, default=REPO / "benchmarks" / "results" / "workers.json")
    args = parser.parse_args()
    if args.start_rows is not None and args.start_rows < 0:
        parser.error("--start-rows must be 0 or more")
    cores = os.cpu_count() or 1
    counts = [int(w) for w in args.workers.split(",")] if args.workers else \
        [w for w in (1, 2, 4, 8, 16, 32, 64) if w <= cores] or [1]
    folder = Path(tempfile.mkdtemp(prefix="anchor-bench-workers-"))
    try:
        if args.eval:
            try:
                dataset, method, limit = args.eval.split(":")
                whole = int(limit)
            except ValueError:
                parser.error(f"--eval must be DATASET:METHOD:LIMIT with a whole-number limit, got {args.eval!r}")
            task = ["eval", "--dataset", dataset, "--method", method, "--limit", limit]
        else:
            cases = folder / "cases.csv"
            write_cases(cases, args.rows, args.groups)
            task = ["predict", str(cases), "--method", args.method]
        if args.sizes:
            task += ["--sizes", args.sizes]
        results = []
        first: list[dict[str, Any]] | None = None
        start_task: list[str] | None = None
        if args.eval:
            # The same evaluation on fewer instances (and so fewer scenarios' spaces): it pays the start-up
            # of the runner and of every helper stack (imports, MiniLM, UMAP's kernels) all the same.
            few = max(1, whole // 8) if args.start_rows is None else args.start_rows
            if 0 < few < whole:
                start_task = list(task)
                start_task[task.index("--limit") + 1] = str(few)
        else:
            few = 100 if args.start_rows is None else args.start_rows
            if few:
                small = folder / "small.csv"
                write_cases(small, few, min(args.groups, few))
                start_task = ["predict", str(small), *task[2:]]
        for workers in counts:
            result = one_run(args, workers, folder, task)
            predictions = timeless(Path(result.pop("_run")))
            first = first if first is not None else predictions
            result["same_predictions_as_first"] = predictions == first
            if start_task is not None:
                # What a run costs the runner whatever its length (start-up, the helpers' start, the end),
                # from a run of a few rows: what remains is the runner's CPU while requests flow.
                start = one_run(args, workers, folder, start_task)
                start.pop("_run")
                extra = result["requests"] - start["requests"]
                result["start_requests"] = start["requests"]
                result["start_runner_cpu_s"] = start["runner_cpu_s"]
                result["start_workers_cpu_s"] = start["workers_cpu_s"]
                result["runner_ms_per_request_beyond_start"] = round(
                    1000 * (result["runner_cpu_s"] - start["runner_cpu_s"]) / extra, 3) if extra > 0 else None
                result["workers_ms_per_request_beyond_start"] = round(
                    1000 * (result["workers_cpu_s"] - start["workers_cpu_s"]) / extra, 3) if extra > 0 else None
            results.append(result)
            print(json.dumps(result), flush=True)
        base = results[0]
        for r in results:
            r["speed_up"] = round(r["requests_per_s"] / base["requests_per_s"], 2) if base["requests_per_s"] else None
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"task": task, "cores": cores, "servers": args.servers,
                                        "concurrency": args.concurrency, "latency": args.latency,
                                        "src": str(args.src) if args.src else "installed", "runs": results},
                                       indent=2) + "\n")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
