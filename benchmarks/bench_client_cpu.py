"""anchor's CPU per request against the bare ``openai`` SDK sending the same requests, side by side.

Against the local test server answering at once (in its own process, so its CPU is not counted):

1. ``anchor eval --dataset today --method vanilla --limit N --concurrency C`` with a fresh cache and
   run directory; the server records every request body it receives (``--record-bodies``);
2. a bare script (``AsyncOpenAI``, the same concurrency) replays exactly those bodies with
   ``chat.completions.create(**body)``, as a script written against the SDK's documentation would;
3. the same script sending each body as is (``create(model=..., messages=[], extra_body=body)``, as
   anchor does), which spares the SDK's walk of the messages and the schema: the cheapest way to
   send these requests with the SDK, shown beside the other two (``sdk_raw``).

Both run once with one instance (``--limit 1``: the fixed cost of starting, setting up and writing
the results) and once with ``N``. CPU time is user + system of the process and its children
(``RUSAGE_CHILDREN``), which a busy machine inflates much less than wall time. From the two sizes:

* **fixed**: the CPU of the one-instance run;
* **per request**: (CPU at N − CPU at 1) / (requests at N − requests at 1);
* **total ratio**: anchor's CPU at N over the SDK script's at N (issue 29's check: ≤ 1.35).

Both send through the same HTTP client of the SDK: ``ANCHOR_LLM_HTTP_CLIENT`` (aiohttp, the default, or
httpx) is read by anchor and by the script alike (an anchor older than that setting always used httpx:
set ``ANCHOR_LLM_HTTP_CLIENT=httpx`` when it is the ``--src`` of a before/after).

``--src DIR`` runs anchor from another checkout's ``src`` (before/after: ``git archive COMMIT | tar -x
-C /tmp/before``, then ``--src /tmp/before/src``). Each figure is the median of ``--repeats`` runs.

    python benchmarks/bench_client_cpu.py [--limit 600] [--concurrency 64] [--repeats 3] [--src DIR]
                                          [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The bare client: the official SDK, one AsyncOpenAI, a semaphore, the recorded bodies replayed. It sends
#: through the HTTP client anchor uses (``ANCHOR_LLM_HTTP_CLIENT``, aiohttp by default), like for like.
SDK_SCRIPT = """
import asyncio, json, os, sys
import openai
from openai import AsyncOpenAI

async def main(base_url, bodies_path, concurrency, raw):
    bodies = [json.loads(line) for line in open(bodies_path, encoding="utf-8") if line.strip()]
    aiohttp = os.environ.get("ANCHOR_LLM_HTTP_CLIENT", "aiohttp") == "aiohttp"
    client = AsyncOpenAI(base_url=base_url, api_key="none", max_retries=0,
                         http_client=openai.DefaultAioHttpClient() if aiohttp else None)
    gate = asyncio.Semaphore(concurrency)

    async def one(body):
        async with gate:
            if raw:
                answer = await client.chat.completions.create(model=body["model"], messages=[], extra_body=body)
            else:
                answer = await client.chat.completions.create(**body)
            return answer.choices[0].message.content

    answers = await asyncio.gather(*(one(b) for b in bodies))
    await client.close()
    print(len(answers))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "raw"))
"""


def http_json(url: str, method: str = "GET") -> dict:
    req = urllib.request.Request(url, method=method, data=b"{}" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def start_server(bodies: Path) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, str(ROOT / "tests" / "fakeserver.py"), "--port", "0", "--deterministic",
           "--record-bodies", str(bodies)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("serving "):
        proc.kill()
        raise SystemExit(f"the test server did not start: {line!r}")
    return proc, line.split()[1]


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:6])}... failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def one_size(limit: int, args: argparse.Namespace, src: Path) -> dict:
    work = Path(tempfile.mkdtemp(prefix="anchor-client-cpu-"))
    bodies = work / "bodies.jsonl"
    proc, base_url = start_server(bodies)
    server = base_url[: -len("/v1")]
    try:
        env = dict(os.environ, PYTHONPATH=str(src), HF_HUB_OFFLINE="1")
        env.pop("ANCHOR_LLM_BASE_URL", None)
        cmd = [sys.executable, "-c", "from anchor.cli import main; main()", "eval", "--dataset", "today",
               "--method", "vanilla", "--limit", str(limit), "--concurrency", str(args.concurrency),
               "--base-url", base_url, "--model", "fake-model", "--cache-dir", str(work / "cache"),
               "--out", str(work / "out"), "--json"]
        http_json(server + "/_reset", "POST")
        a_wall, a_cpu = timed(cmd, env)
        a_requests = http_json(server + "/_stats")["requests"]
        replay = work / "replay.jsonl"
        shutil.copy(bodies, replay)
        out = {"limit": limit, "anchor_cpu_s": a_cpu, "anchor_wall_s": a_wall, "anchor_requests": a_requests}
        for name, mode in (("sdk", "typed"), ("sdk_raw", "raw")):
            http_json(server + "/_reset", "POST")
            s_wall, s_cpu = timed([sys.executable, "-c", SDK_SCRIPT, base_url, str(replay), str(args.concurrency),
                                   mode], dict(os.environ))
            out.update({f"{name}_cpu_s": s_cpu, f"{name}_wall_s": s_wall,
                        f"{name}_requests": http_json(server + "/_stats")["requests"]})
        return out
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def median_of(rows: list[dict]) -> dict:
    return {k: (statistics.median(r[k] for r in rows) if isinstance(rows[0][k], float) else rows[0][k])
            for k in rows[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--src", default=None, help="run anchor from this src folder (default: this checkout)")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args()
    src = Path(args.src) if args.src else ROOT / "src"
    small = median_of([one_size(1, args, src) for _ in range(args.repeats)])
    large = median_of([one_size(args.limit, args, src) for _ in range(args.repeats)])
    extra_requests = large["anchor_requests"] - small["anchor_requests"]
    out = {
        "limit": args.limit, "concurrency": args.concurrency, "repeats": args.repeats, "src": str(src),
        "one_instance": small, "n_instances": large,
        "anchor_fixed_cpu_s": round(small["anchor_cpu_s"], 3), "sdk_fixed_cpu_s": round(small["sdk_cpu_s"], 3),
        "anchor_ms_per_request": round(1000 * (large["anchor_cpu_s"] - small["anchor_cpu_s"]) / extra_requests, 2),
        "sdk_ms_per_request": round(1000 * (large["sdk_cpu_s"] - small["sdk_cpu_s"]) / extra_requests, 2),
        "sdk_raw_fixed_cpu_s": round(small["sdk_raw_cpu_s"], 3),
        "sdk_raw_ms_per_request": round(1000 * (large["sdk_raw_cpu_s"] - small["sdk_raw_cpu_s"]) / extra_requests, 2),
        "sdk_raw_requests_per_s": round(large["sdk_raw_requests"] / large["sdk_raw_wall_s"], 1),
        "total_cpu_ratio_raw": round(large["anchor_cpu_s"] / large["sdk_raw_cpu_s"], 2),
        "anchor_requests_per_s": round(large["anchor_requests"] / large["anchor_wall_s"], 1),
        "sdk_requests_per_s": round(large["sdk_requests"] / large["sdk_wall_s"], 1),
        "total_cpu_ratio": round(large["anchor_cpu_s"] / large["sdk_cpu_s"], 2),
    }
    out["per_request_ratio"] = round(out["anchor_ms_per_request"] / out["sdk_ms_per_request"], 2)
    out["per_request_ratio_raw"] = round(out["anchor_ms_per_request"] / out["sdk_raw_ms_per_request"], 2)
    print(f"{'':22}{'anchor':>10}{'bare SDK':>10}{'ratio':>8}{'SDK, raw':>10}{'ratio':>8}")
    print(f"{'CPU, 1 instance (s)':22}{out['anchor_fixed_cpu_s']:>10.2f}{out['sdk_fixed_cpu_s']:>10.2f}{'':8}"
          f"{out['sdk_raw_fixed_cpu_s']:>10.2f}")
    print(f"{'CPU per request (ms)':22}{out['anchor_ms_per_request']:>10.2f}{out['sdk_ms_per_request']:>10.2f}"
          f"{out['per_request_ratio']:>8.2f}{out['sdk_raw_ms_per_request']:>10.2f}{out['per_request_ratio_raw']:>8.2f}")
    print(f"{f'CPU, {args.limit} inst. (s)':22}{large['anchor_cpu_s']:>10.2f}{large['sdk_cpu_s']:>10.2f}"
          f"{out['total_cpu_ratio']:>8.2f}{large['sdk_raw_cpu_s']:>10.2f}{out['total_cpu_ratio_raw']:>8.2f}")
    print(f"{'requests/s':22}{out['anchor_requests_per_s']:>10.1f}{out['sdk_requests_per_s']:>10.1f}{'':8}"
          f"{out['sdk_raw_requests_per_s']:>10.1f}")
    print(f"requests: anchor {large['anchor_requests']}, SDK {large['sdk_requests']}, SDK raw {large['sdk_raw_requests']}")
    print(f"load average at the end: {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
