"""Does the client keep an LLM server busy? Wall time of a real evaluation against its lower bound.

Runs ``anchor eval --dataset common2sense-pairwise --method anchor --limit 10 --runs 1
--concurrency C`` (as a separate process, cold caches) against the local OpenAI-compatible test
server (tests/fakeserver.py, also a separate process) that takes ``--latency`` seconds (0.2) to
answer every request, for each C in ``--concurrency`` (1 8 32). Per run it reports:

* wall time of the command, and the client's CPU time (user + system);
* requests and samples (a request asking for n answers carries n samples), from metrics.json;
* mean requests in flight at the server (from the first arrival to the last answer), and how long
  the client took to send its first request and to exit after the last answer;
* the two lower bounds: throughput (requests x latency / C) and the longest chain of dependent
  requests x latency, worked out from the run's calls.jsonl (abduction's requests one after
  another, then one level each for voting and themes; per condition one level each for selection
  and reflection, then the longer of phi elicitation and latent discovery + latent parameters),
  and the ratio of wall time to the larger bound.

``--src DIR`` runs the command from another checkout's ``src`` (for before/after figures, e.g. an
export of an older commit: ``git archive COMMIT | tar -x -C /tmp/before``). ``--ignore-n`` makes
the server answer one choice whatever ``n`` asks (like llama.cpp's server).

    python benchmarks/bench_throughput.py [--concurrency 1 8 32] [--latency 0.2] [--limit 10]
                                          [--src DIR] [--ignore-n] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

#: Abduction's requests: each needs the previous one's answer.
SEQUENTIAL = ("abduction.generate", "abduction.extract", "abduction.validate")
#: Stages whose requests of one scenario or condition go out together: one level each.
SPACE_LEVELS = ("voting", "themes")
CONDITION_LEVELS = ("mapping.select", "mapping.reflect")


def chain_levels(calls: list[dict], predictions: list[dict]) -> int:
    """The longest chain of dependent requests of any instance (space build + its conditions)."""
    by_scope: dict[str, Counter[str]] = defaultdict(Counter)
    for rec in calls:
        if rec.get("outcome") not in ("cache_hit", "sent"):  # "sent" announces a request logged again
            by_scope[rec.get("scope", "")][rec["stage"]] += 1

    def space_levels(stages: Counter[str]) -> int:
        return sum(stages[s] for s in SEQUENTIAL) + sum(1 for s in SPACE_LEVELS if stages[s])

    def condition_levels(stages: Counter[str]) -> int:
        latent = int(bool(stages["inference.latents"])) + int(bool(stages["inference.latent_params"]))
        return sum(1 for s in CONDITION_LEVELS if stages[s]) + max(int(bool(stages["inference.phi"])), latent)

    longest = 0
    for pred in predictions:
        spaces = {side.get("artefact") for side in pred.get("sides", []) if side.get("artefact")}
        build = max((space_levels(by_scope[f"space:{key}"]) for key in spaces), default=0)
        conditions = condition_levels(by_scope[f"instance:{pred['run']}:{pred['id']}"])
        longest = max(longest, build + conditions)
    return longest


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def http_json(url: str, method: str = "GET") -> dict:
    req = urllib.request.Request(url, method=method, data=b"{}" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def start_server(latency: float, ignore_n: bool) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, str(REPO / "tests" / "fakeserver.py"), "--port", "0", "--latency", str(latency),
           "--deterministic", *(["--ignore-n"] if ignore_n else [])]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("serving "):
        proc.kill()
        raise SystemExit(f"the test server did not start: {line!r}")
    return proc, line.split()[1]


def one_run(args: argparse.Namespace, base_url: str, concurrency: int) -> dict:
    root = HERE.parent / "src" if args.src is None else Path(args.src)
    work = Path(tempfile.mkdtemp(prefix="anchor-throughput-"))
    server = base_url[: -len("/v1")]
    try:
        cmd = [sys.executable, "-c", "from anchor.cli import main; main()", "eval", "--dataset", args.dataset,
               "--method", "anchor", "--limit", str(args.limit), "--runs", "1", "--concurrency", str(concurrency),
               "--base-url", base_url, "--cache-dir", str(work / "cache"), "--out", str(work / "out"), "--json"]
        env = dict(os.environ, PYTHONPATH=str(root), HF_HUB_OFFLINE="1")
        http_json(server + "/_reset", "POST")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        ended = time.monotonic()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"anchor eval failed ({done.returncode}): {done.stderr[-2000:]}")
        stats = http_json(server + "/_stats")
        metrics = json.loads((work / "out" / "metrics.json").read_text())
        total = metrics["cost"]["total"]
        requests = total["llm_calls"]
        samples = total.get("samples", requests)  # older versions had one sample per request
        levels = chain_levels(read_jsonl(work / "out" / "calls.jsonl"), read_jsonl(work / "out" / "predictions.jsonl"))
        wall = ended - started
        throughput_bound = requests * args.latency / concurrency
        chain_bound = levels * args.latency
        bound = max(throughput_bound, chain_bound)
        return {
            "concurrency": concurrency, "wall_s": round(wall, 2),
            "client_cpu_s": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 2),
            "requests": requests, "samples": samples, "server_requests": stats["requests"],
            "mean_in_flight": stats["mean_in_flight"], "max_in_flight": stats["max_in_flight"],
            "first_request_after_s": round(stats["first_arrival"] - started, 2) if stats["first_arrival"] else None,
            "exit_after_last_answer_s": round(ended - stats["last_finish"], 2) if stats["last_finish"] else None,
            "chain_levels": levels, "throughput_bound_s": round(throughput_bound, 2),
            "chain_bound_s": round(chain_bound, 2), "bound_s": round(bound, 2), "ratio": round(wall / bound, 2),
            "f1_micro": metrics["mean"].get("f1_micro"),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--dataset", default="common2sense-pairwise")
    parser.add_argument("--src", help="run anchor from this src folder instead of this checkout's")
    parser.add_argument("--ignore-n", action="store_true", help="the server answers one choice whatever n asks")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    proc, base_url = start_server(args.latency, args.ignore_n)
    rows = []
    try:
        for c in args.concurrency:
            row = one_run(args, base_url, c)
            rows.append(row)
            print(f"concurrency {c:>2}: wall {row['wall_s']:>6.1f} s  bound {row['bound_s']:>5.1f} s "
                  f"(throughput {row['throughput_bound_s']:.1f}, chain {row['chain_levels']} x {args.latency} = "
                  f"{row['chain_bound_s']:.1f})  ratio {row['ratio']:.2f}  requests {row['requests']}  "
                  f"samples {row['samples']}  in flight {row['mean_in_flight']}  client CPU {row['client_cpu_s']} s  "
                  f"first request after {row['first_request_after_s']} s, exit {row['exit_after_last_answer_s']} s "
                  "after the last answer", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    out = {"latency_s": args.latency, "limit": args.limit, "dataset": args.dataset, "server_ignores_n": args.ignore_n,
           "src": args.src or "this checkout", "cpus": os.cpu_count(), "load_average_at_end": os.getloadavg(),
           "runs": rows}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
