"""``anchor serve`` in one process against ``anchor serve --ray local --replicas N``, under the same load.

    python benchmarks/bench_serve_ray.py                          # 20 clients x 10, 0.2 s latency, 2 replicas
    python benchmarks/bench_serve_ray.py --clients 200 --replicas 8   # on a machine of many cores

The three stored scenarios of ``bench_serve.py`` are built once into a shared store; then each service (a
fresh state folder and cache, ``--no-cache``: every answer asks the test server) gets ``--clients``
concurrent clients, each sending ``--per-client`` ANCHOR predictions with new conditions, the same
conditions for both. For each: answers a second, the latency and what the service adds over the LLM's own
critical path (median, p99), and the CPU seconds of the service's whole process tree (with Ray: the Ray
instance's processes, replicas, proxy and controller included) per answer. Every Ray answer must equal the
single process's and ``anchor infer``'s. The load generator and the test server run on the same machine;
the figures say how many cores it has.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serve import REPO, SCENARIOS, Service, free_port, load, same_as_infer, summary  # noqa: E402
from tests.procs import descendants  # noqa: E402


def tree_cpu_seconds(pid: int) -> float:
    """User and system CPU of ``pid`` and every process under it (ended children's are in the parent's
    cumulative fields once reaped)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in [pid, *descendants(pid)]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    return total / ticks


def measure(service: Service, clients: int, per_client: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    asyncio.run(load(service.url, 3, 1, "warm"))
    before = tree_cpu_seconds(service.proc.pid)
    started = time.perf_counter()
    results = asyncio.run(load(service.url, clients, per_client, "load"))
    figures = summary(results, time.perf_counter() - started)
    figures["cpu_ms_per_answer"] = round((tree_cpu_seconds(service.proc.pid) - before) * 1000 / len(results), 1)
    return figures, results


def answers_equal(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, int]:
    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        body = r["body"]
        return body.get("p_outcome1"), body.get("unknown"), tuple((f["id"], f["phi"]) for f in body.get("factors", []))

    theirs = {r["case"]["condition"]: key(r) for r in b}
    return {"compared": len(a), "different": sum(1 for r in a if theirs.get(r["case"]["condition"]) != key(r))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--per-client", type=int, default=10)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=512, help="the LLM budget (split among the replicas)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the working folder here")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-serve-ray-"))
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    fake = subprocess.Popen([sys.executable, str(REPO / "tests" / "fakeserver.py"), "--port", str(port), "--latency",
                             str(args.latency), "--deterministic"], stdout=subprocess.DEVNULL,
                            stderr=(work / "fakeserver.log").open("w"))
    server = f"http://127.0.0.1:{port}/v1"
    report: dict[str, Any] = {"cpu_count": os.cpu_count(), "load_average": os.getloadavg(), "latency_s": args.latency,
                              "clients": args.clients, "per_client": args.per_client, "replicas": args.replicas}
    try:
        for _ in range(100):
            try:
                httpx.get(f"{server}/models", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        store = work / "store"
        common = ["--base-url", server, "--spaces", str(store), "--sizes", "quick", "--no-access-log"]
        builder = Service([*common, "--state", str(work / "build"), "--cache-dir", str(work / "cache-build"),
                           "--concurrency", "64"], work / "build.log")
        with httpx.Client(base_url=builder.url, timeout=900) as http:
            for s in SCENARIOS:
                http.post("/v1/spaces", json={**s, "wait": 600}).raise_for_status()
        builder.stop()
        runs: dict[str, list[dict[str, Any]]] = {}
        for mode in ("single", "ray"):
            extra = (["--ray", "local", "--replicas", str(args.replicas), "--port", str(free_port())]
                     if mode == "ray" else [])
            started = time.perf_counter()
            service = Service([*common, "--state", str(work / f"state-{mode}"), "--cache-dir", str(work / f"cache-{mode}"),
                               "--no-cache", "--concurrency", str(args.concurrency), "--queue", "100000", *extra],
                              work / f"{mode}.log")
            start_s = round(time.perf_counter() - started, 1)
            try:
                figures, runs[mode] = measure(service, args.clients, args.per_client)
            finally:
                service.stop()
            report[mode] = {"start_s": start_s, **figures}
            print(f"{mode}: {json.dumps(report[mode])}", flush=True)
        report["ray_equals_single"] = answers_equal(runs["ray"], runs["single"])
        report["ray_equals_infer"] = same_as_infer(server, store, runs["ray"], work)
        print(f"ray = single: {report['ray_equals_single']}; ray = anchor infer: "
              f"{json.dumps(report['ray_equals_infer'])}", flush=True)
    finally:
        for service in list(Service.running):
            service.stop()
        fake.terminate()
        fake.wait(30)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
