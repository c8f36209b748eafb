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
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serve import SCENARIOS, Service, free_port, load, measured, same_as_infer, start_test_server  # noqa: E402


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
    fake, server = start_test_server(work, args.latency)
    report: dict[str, Any] = {"cpu_count": os.cpu_count(), "load_average": os.getloadavg(), "latency_s": args.latency,
                              "clients": args.clients, "per_client": args.per_client, "replicas": args.replicas}
    try:
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
                asyncio.run(load(service.url, 3, 1, "warm"))
                runs[mode], figures = measured(service, fake, args.clients, args.per_client, "load")
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
