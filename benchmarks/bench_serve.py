"""``anchor serve`` under load, against the local test server (``tests/fakeserver.py``) with a fixed latency.

    python benchmarks/bench_serve.py                 # 200 clients x 10, 0.2 s latency, a 2,000-row job
    python benchmarks/bench_serve.py --clients 20 --per-client 5 --job-rows 200 --stream 10   # a quick look

1. **Three stored scenarios.** A service builds the three factor spaces (``POST /v1/spaces``) and stops.
2. **Online load.** A fresh service (``--no-cache``: every answer asks the LLM) gets ``--clients``
   concurrent clients, each sending ``--per-client`` predictions one after another, every one a new
   condition. For each answer: the latency the client saw, and the LLM time on the answer's critical path
   (its longest chain of requests that waited for one another, ``cost.critical_path.seconds``). What the
   service adds is the difference: median and p99, against the targets of 20 ms and 100 ms. The same load
   runs twice; the service's resident memory (its process, and its helpers') is read after each run.
3. **The same answers as** ``anchor infer``: every condition of the first run is answered again by
   ``anchor infer --space`` on the stored space (``--no-cache``, the same deterministic server), and
   P(O1), the mapped factors and their φ must be equal.
4. **Online beside a job.** 30 online predictions one after another with the service idle, then a job of
   ``--job-rows`` rows is sent and 30 more are made while it runs: the online p99 with the job, over its
   idle value (target: at most 2).

**CPU an answer.** Every load (the sweep's and the full one) reports the CPU seconds the service's whole
process tree spent on it (the service, its embedding and clustering helpers, and any worker processes;
read from ``/proc``) divided by its answers: ``cpu_ms_per_answer``. Each client count runs twice, the
second time with the same conditions: first with **new** conditions (MiniLM embeds each), then with
**cached** ones (their vectors are in the embedding helper's memory; the LLM is still asked, ``--no-cache``).
The CPU of the test server and of the load generator is reported beside it (they share the machine).
``--workers N`` is passed to ``anchor serve`` (several service processes); a service that does not know
the flag is reported and the benchmark stops there. ``--profile DIR`` runs the load's service under
``py-spy record --gil --subprocesses`` (samples taken while a thread holds the GIL: Python's own CPU,
not the BLAS products MiniLM runs without it) and writes its collapsed stacks and a table of where the
samples went (``benchmarks/profile_table.py``).

Prints a summary and writes every figure as JSON (``--json``). The load generator runs on the same
machine as the service and the test server: on a small machine they share its cores, and the figures
say so (``cpu_count``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # for tests.procs
from tests.procs import descendants  # noqa: E402

ENTRY = "import sys; from anchor.cli import main; sys.argv[0] = 'anchor'; main()"
SCENARIOS = [
    {"scenario": "Priya is deciding how to get to work on Monday morning; her office is 6 km away.",
     "outcome1": "Priya cycles to work.", "outcome2": "Priya takes the bus to work."},
    {"scenario": "A bakery decides what to bake for Sunday's market.", "outcome1": "It bakes mostly bread.",
     "outcome2": "It bakes mostly cakes."},
    {"scenario": "A family plans a free weekend in late autumn.", "outcome1": "They stay at home.",
     "outcome2": "They travel to the coast."},
]
WORDS = ["rain", "a strike", "a deadline", "a discount", "a cold", "a festival", "roadworks", "a heatwave", "guests",
         "a delivery", "low stock", "a holiday"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def condition(tag: str, i: int) -> str:
    return f"Case {tag}-{i}: there is {WORDS[i % len(WORDS)]} and {WORDS[(i * 7 + 3) % len(WORDS)]} this time."


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def rss_mb(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    return round(int(re.search(r"VmRSS:\s+(\d+)", text).group(1)) / 1024, 1)


TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int, *, children: bool = False) -> float:
    """CPU seconds (user + system) of one process; with ``children``, also of its children that ended."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    used = int(fields[11]) + int(fields[12]) + ((int(fields[13]) + int(fields[14])) if children else 0)
    return used / TICK


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of a process, the children it reaped and every live descendant: all a service used."""
    total = cpu_s(pid, children=True)
    for child in descendants(pid):
        try:
            total += cpu_s(child)
        except (OSError, IndexError):
            pass  # ended meanwhile (its time is in its parent's once reaped)
    return total


def tree_rss_mb(pid: int) -> dict[str, float]:
    """Resident memory of the service's process and of its helpers (what it holds in all)."""
    helpers = 0.0
    for child in descendants(pid):
        try:
            helpers += rss_mb(child)
        except (OSError, AttributeError):
            pass  # ended meanwhile
    main = rss_mb(pid)
    return {"rss_mb": main, "helpers_rss_mb": round(helpers, 1), "all_rss_mb": round(main + helpers, 1)}


class Refused(RuntimeError):
    """The service would not start with these flags (its first line of error output says why)."""


class Service:
    #: Every service started and not stopped yet: stopped on the way out, whatever ended the benchmark.
    running: list[Service] = []

    def __init__(self, args: list[str], log: Path, profile: Path | None = None) -> None:
        self.log = log.open("w")
        command = [sys.executable, "-c", ENTRY, "serve", "--port", "0", *args]
        if profile is not None:  # py-spy starts the service, so it may sample it and its helpers
            spy = Path(sys.executable).with_name("py-spy")
            command = [str(spy), "record", "--subprocesses", "--gil", "--rate", "50", "--format", "raw",
                       "--output", str(profile), "--", *command]
        self.proc = subprocess.Popen(command,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=REPO,
                                     env={**os.environ, "HF_HUB_OFFLINE": "1"})
        Service.running.append(self)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        while line.startswith("py-spy>") or line == "\n":  # py-spy's own banner comes first under --profile
            line = self.proc.stdout.readline()
        found = re.search(r"listening at (\S+)", line)
        if not found:
            self.stop()
            lines = [ln.strip(" │\t") for ln in log.read_text().splitlines() if ln.strip(" │\t")]
            said = next((ln for ln in lines if "rror" in ln or "such option" in ln), lines[0] if lines else "")
            raise Refused(f"anchor serve did not start: {said or line!r} (see {log})")
        self.url = found.group(1).rstrip(" (")

    @property
    def pid(self) -> int:
        """The service's own process (under py-spy: py-spy's child)."""
        if Path(self.proc.args[0]).name == "py-spy":
            kids = [p for p in descendants(self.proc.pid) if p != self.proc.pid]
            return kids[0] if kids else self.proc.pid
        return self.proc.pid

    def stop(self) -> None:
        """SIGTERM, as a supervisor stops it; killed if it has not ended two minutes later."""
        if self in Service.running:
            Service.running.remove(self)
        if self.proc.poll() is None:
            # The service itself (under py-spy, py-spy's child: py-spy writes its samples when it ends).
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


async def one(http: httpx.AsyncClient, case: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    response = await http.post("/v1/predictions", json=case)
    seconds = time.perf_counter() - started
    body = response.json()
    critical = ((body.get("cost") or {}).get("critical_path") or {}).get("seconds")
    return {"status": response.status_code, "seconds": seconds, "llm_path": critical, "body": body,
            "case": case, "method_s": body.get("seconds")}


async def load(url: str, clients: int, per_client: int, tag: str) -> list[dict[str, Any]]:
    limits = httpx.Limits(max_connections=clients + 10, max_keepalive_connections=clients + 10)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as http:
        async def client(c: int) -> list[dict[str, Any]]:
            out = []
            for i in range(per_client):
                case = {**SCENARIOS[c % 3], "condition": condition(f"{tag}{c}", i), "wait": 600}
                out.append(await one(http, case))
            return out

        results = await asyncio.gather(*(client(c) for c in range(clients)))
    return [r for rs in results for r in rs]


def start_test_server(work: Path, latency: float) -> tuple[subprocess.Popen, str]:
    """The local test server (deterministic answers after ``latency`` seconds), and its base URL once it answers."""
    port = free_port()
    fake = subprocess.Popen([sys.executable, str(REPO / "tests" / "fakeserver.py"), "--port", str(port), "--latency",
                             str(latency), "--deterministic"], stdout=subprocess.DEVNULL,
                            stderr=(work / "fakeserver.log").open("w"))
    server = f"http://127.0.0.1:{port}/v1"
    for _ in range(100):
        try:
            httpx.get(f"{server}/models", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    return fake, server


def measured(service: Service, fake: subprocess.Popen, clients: int, per_client: int,
             tag: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One load, with the CPU it cost the service's process tree, the test server and this process."""
    before = (tree_cpu_s(service.pid), tree_cpu_s(fake.pid), sum(os.times()[:2]))
    started = time.perf_counter()
    results = asyncio.run(load(service.url, clients, per_client, tag))
    figures = summary(results, time.perf_counter() - started)
    service_s, fake_s, own_s = (a - b for a, b in zip(
        (tree_cpu_s(service.pid), tree_cpu_s(fake.pid), sum(os.times()[:2])), before, strict=True))
    figures["cpu"] = {"service_s": round(service_s, 2), "test_server_s": round(fake_s, 2),
                      "load_generator_s": round(own_s, 2)}
    figures["cpu_ms_per_answer"] = round(1000 * service_s / max(1, len(results)), 2)
    return results, figures


def summary(results: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    ok = [r for r in results if r["status"] == 200 and r["llm_path"] is not None]
    added = [(r["seconds"] - r["llm_path"]) * 1000 for r in ok]
    # The split: outside the method (HTTP, checks, the event loop's queue) and inside it beside the LLM
    # (embedding the condition, retrieval, the posteriors, parsing answers).
    outside = [(r["seconds"] - r["method_s"]) * 1000 for r in ok]
    inside = [(r["method_s"] - r["llm_path"]) * 1000 for r in ok]
    statuses: dict[str, int] = {}
    for r in results:
        statuses[str(r["status"])] = statuses.get(str(r["status"]), 0) + 1
    return {"answers": len(results), "statuses": statuses, "wall_s": round(wall, 2),
            "answers_per_s": round(len(results) / wall, 1),
            "latency_ms": {"median": round(statistics.median(r["seconds"] for r in ok) * 1000, 1),
                           "p99": round(percentile([r["seconds"] for r in ok], 0.99) * 1000, 1)},
            "llm_path_ms": {"median": round(statistics.median(r["llm_path"] for r in ok) * 1000, 1),
                            "p99": round(percentile([r["llm_path"] for r in ok], 0.99) * 1000, 1)},
            "added_ms": {"median": round(statistics.median(added), 1), "p99": round(percentile(added, 0.99), 1),
                         "max": round(max(added), 1)},
            "added_outside_method_ms": {"median": round(statistics.median(outside), 1),
                                        "p99": round(percentile(outside, 0.99), 1)},
            "added_inside_method_ms": {"median": round(statistics.median(inside), 1),
                                       "p99": round(percentile(inside, 0.99), 1)},
            "unknown": sum(1 for r in ok if r["body"].get("unknown"))}


def same_as_infer(server: str, store: Path, results: list[dict[str, Any]], work: Path) -> dict[str, Any]:
    by_space: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_space.setdefault(r["body"]["space"], []).append(r)
    compared = differ = 0
    examples = []
    for key, rs in by_space.items():
        conditions = work / f"conditions-{key}.txt"
        conditions.write_text("\n".join(r["case"]["condition"] for r in rs) + "\n")
        done = subprocess.run([sys.executable, "-c", ENTRY, "infer", "--space", str(store / "spaces" / f"{key}.json"),
                               "--conditions-file", str(conditions), "--json", "--no-cache", "--base-url", server,
                               "--concurrency", "128"], capture_output=True, text=True, cwd=REPO,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"})
        if done.returncode:
            raise SystemExit(f"anchor infer failed: {done.stderr[-2000:]}")
        infer = {o["condition"]: o for o in map(json.loads, filter(None, done.stdout.splitlines()))}
        for r in rs:
            mine, theirs = r["body"], infer[r["case"]["condition"]]
            same = (mine["p_outcome1"] == theirs["p_outcome1"] and mine["unknown"] == theirs["unknown"]
                    and [(f["id"], f["phi"]) for f in mine["factors"]] == [(f["id"], f["phi"]) for f in theirs["factors"]])
            compared += 1
            if not same:
                differ += 1
                examples.append({"condition": r["case"]["condition"], "serve": mine["p_outcome1"],
                                 "infer": theirs["p_outcome1"]})
    return {"compared": compared, "different": differ, "examples": examples[:5]}


async def stream(url: str, n: int, tag: str, job: str | None = None) -> list[dict[str, Any]]:
    out = []
    async with httpx.AsyncClient(base_url=url, timeout=600) as http:
        for i in range(n):
            result = await one(http, {**SCENARIOS[i % 3], "condition": condition(tag, i), "wait": 600})
            if job is not None:
                result["job_state"] = (await http.get(f"/v1/jobs/{job}")).json()["state"]
            out.append(result)
    return out


def write_job(path: Path, rows: int) -> None:
    import csv

    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "scenario", "outcome1", "outcome2", "condition"])
        for i in range(rows):
            s = SCENARIOS[i % 3]
            w.writerow([f"r{i}", s["scenario"], s["outcome1"], s["outcome2"], condition("job", i)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--sweep", default="1,20", help="fewer clients first (comma-separated), for the shape")
    parser.add_argument("--runs", type=int, default=2, help="runs of the full load (memory is read after each)")
    parser.add_argument("--per-client", type=int, default=10)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=512, help="the service's LLM budget")
    parser.add_argument("--job-rows", type=int, default=2000, help="rows of the job beside the online stream "
                        "(0: no job check)")
    parser.add_argument("--job-concurrency", type=int, default=64, help="the LLM budget of the job check")
    parser.add_argument("--stream", type=int, default=30, help="online predictions idle and beside the job "
                        "(0: no job check)")
    parser.add_argument("--skip-infer", action="store_true", help="do not compare with anchor infer")
    parser.add_argument("--workers", type=int, default=None, help="passed to anchor serve as --workers N "
                        "(service processes); skipped, with a note, where the service does not know it")
    parser.add_argument("--serve-arg", action="append", default=[], metavar="ARG",
                        help="one more argument for the load's anchor serve (repeatable), e.g. "
                             "--serve-arg=--embed-window-ms --serve-arg=2")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="run the load's service under py-spy record and write its samples here")
    parser.add_argument("--no-cached", action="store_true", help="only new conditions at each client count "
                        "(the --clients load still runs --runs times)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the working folder here")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    for flag in ("clients", "per_client", "concurrency", "job_concurrency"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1")
    for flag in ("runs", "job_rows", "stream"):
        if getattr(args, flag) < 0:
            parser.error(f"--{flag.replace('_', '-')} must be 0 or more")
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-serve-"))
    work.mkdir(parents=True, exist_ok=True)
    fake, server = start_test_server(work, args.latency)
    report: dict[str, Any] = {"cpu_count": os.cpu_count(), "load_average": os.getloadavg(), "latency_s": args.latency,
                              "clients": args.clients, "per_client": args.per_client, "workers": args.workers}
    try:
        state, store = work / "state", work / "state" / "store"
        base = ["--base-url", server, "--state", str(state), "--sizes", "quick", "--no-access-log"]
        # 1. Three stored scenarios.
        builder = Service([*base, "--cache-dir", str(work / "cache"), "--concurrency", "64"], work / "build.log")
        started = time.perf_counter()
        with httpx.Client(base_url=builder.url, timeout=900) as http:
            spaces = [http.post("/v1/spaces", json={**s, "wait": 600}).json()["id"] for s in SCENARIOS]
        report["build_s"] = round(time.perf_counter() - started, 1)
        builder.stop()
        print(f"3 spaces built in {report['build_s']} s: {', '.join(spaces)}", flush=True)

        # 2. Online load on a fresh service that asks the LLM every time: each client count with new
        # conditions, then the same conditions again (their vectors cached), then the full load --runs times.
        extra = [*(["--workers", str(args.workers)] if args.workers is not None else []), *args.serve_arg]
        if args.profile is not None:
            args.profile.mkdir(parents=True, exist_ok=True)
        try:
            service = Service([*base, "--no-cache", "--concurrency", str(args.concurrency), "--queue", "100000",
                               *extra], work / "serve.log",
                              profile=args.profile / "serve.raw" if args.profile is not None else None)
        except Refused as exc:
            report["refused"] = str(exc)
            print(f"not measured: {exc}", flush=True)
            return
        report["serve_args"] = extra
        asyncio.run(load(service.url, 3, 1, "warm"))
        report["sweep"] = {}
        for clients in [int(c) for c in args.sweep.split(",") if c.strip()]:
            for kind in ("new",) if args.no_cached else ("new", "cached"):
                _, figures = measured(service, fake, clients, args.per_client, f"sweep{clients}-")
                report["sweep"][f"{clients} {kind}"] = figures
                print(f"{clients} client(s), {kind} conditions: {json.dumps(figures)}", flush=True)
        report.update({f"{k}_start": v for k, v in tree_rss_mb(service.pid).items()})
        runs = []
        for n in range(1, args.runs + 1):
            results, figures = measured(service, fake, args.clients, args.per_client, "load")
            figures["conditions"] = "new" if n == 1 else "cached"
            figures.update(tree_rss_mb(service.pid))
            runs.append(figures)
            print(f"run {n}: {json.dumps(figures)}", flush=True)
            if n == 1:
                first = results
        report["runs"] = runs
        report["cpu_ms_per_answer"] = {**{k: v["cpu_ms_per_answer"] for k, v in report["sweep"].items()},
                                       **{f"{args.clients} {r['conditions']} (run {i})": r["cpu_ms_per_answer"]
                                          for i, r in enumerate(runs, 1)}}
        print("CPU of the service's process tree, ms an answer: " + json.dumps(report["cpu_ms_per_answer"]),
              flush=True)
        # 3. The same answers as anchor infer.
        if args.skip_infer or not runs:
            print("anchor infer: not compared (" + ("--skip-infer" if args.skip_infer else "--runs 0") + ")")
        else:
            report["same_as_infer"] = same_as_infer(server, store, first, work)
            print(f"anchor infer: {json.dumps(report['same_as_infer'])}", flush=True)
        service.stop()
        if args.profile is not None:
            from profile_table import table

            (args.profile / "serve.txt").write_text(table(args.profile / "serve.raw"))
            print(f"profile: {args.profile / 'serve.raw'} and {args.profile / 'serve.txt'}", flush=True)

        # 4. Online beside a job.
        if not args.job_rows or not args.stream:
            print(f"beside a job: not checked ({'--job-rows 0' if not args.job_rows else '--stream 0'})")
            return
        service = Service([*base, "--no-cache", "--concurrency", str(args.job_concurrency), *extra], work / "job.log")
        asyncio.run(load(service.url, 3, 1, "warm2"))
        idle = asyncio.run(stream(service.url, args.stream, "idle"))
        cases = work / "job.csv"
        write_job(cases, args.job_rows)
        with httpx.Client(base_url=service.url, timeout=600) as http:
            sent = http.post("/v1/jobs?id=bench", content=cases.read_bytes(), headers={"Content-Type": "text/csv"})
            assert sent.status_code == 202, sent.text
            job_started = time.perf_counter()
            while http.get("/v1/jobs/bench").json()["progress"]["rows_done"] < 1:
                time.sleep(0.2)
        busy = asyncio.run(stream(service.url, args.stream, "busy", job="bench"))
        with httpx.Client(base_url=service.url, timeout=600) as http:
            while (view := http.get("/v1/jobs/bench").json())["state"] in ("queued", "running"):
                time.sleep(0.5)
        job_seconds = time.perf_counter() - job_started
        service.stop()
        idle_s = [r["seconds"] for r in idle]
        during = [r["seconds"] for r in busy if r["job_state"] == "running"]
        report["beside_a_job"] = {
            "job_rows": args.job_rows, "job_state": view["state"], "job_s": round(job_seconds, 1),
            "job_requests": view["progress"]["requests"], "llm_budget": args.job_concurrency,
            "online_while_running": len(during), "online": args.stream,
            "idle_ms": {"median": round(statistics.median(idle_s) * 1000, 1), "p99": round(percentile(idle_s, 0.99) * 1000, 1)},
            "with_job_ms": {"median": round(statistics.median(during) * 1000, 1) if during else None,
                            "p99": round(percentile(during, 0.99) * 1000, 1) if during else None},
            "statuses": sorted({r["status"] for r in idle + busy})}
        if during:
            report["beside_a_job"]["p99_ratio"] = round(percentile(during, 0.99) / percentile(idle_s, 0.99), 2)
        print(f"beside a job: {json.dumps(report['beside_a_job'])}", flush=True)
    finally:
        for service in list(Service.running):
            service.stop()
        fake.terminate()
        fake.wait(30)
        if args.json:  # what was measured, also when a later step failed
            args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
