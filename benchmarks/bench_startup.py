"""Start-up costs, each in fresh processes: the time to the first embedding, to the first UMAP fit,
``anchor infer`` end to end against a server that answers at once, and an evaluation's idle gaps.

* **first embedding**: a new Python process embeds one text with the bundled MiniLM (no vector cache);
* **first UMAP fit**: a new process clusters 24 unit vectors (UMAP + HDBSCAN), as a build's first
  space does (UMAP's kernels come from numba's cache once ``anchor warm-up`` has run);
* **infer**: ``anchor infer --space S -c "..." --json`` on a stored space (16 factors) against the local
  test server answering at once like a scripted LLM (every request of the infer path: selection,
  reflection, phi, latents), a fresh cache directory each time;
* **eval idle gaps**: ``anchor eval --dataset common2sense-pairwise --method anchor --limit L
  --concurrency C`` against the test server (``--latency``, default 0: answers at once). From the
  server's request spans (``GET /_stats?spans=1``): when the first request arrived, and the longest
  stretch with no request in flight between the first arrival and the last answer (the run still
  had work left: its last request was yet to come).

Each figure is the median of ``--repeats`` runs, with wall time and CPU time (user + system of the
process and its helper processes): wall time is inflated on a busy machine, CPU time much less.
``--src DIR`` runs anchor from another checkout's ``src`` (before/after figures: ``git archive
COMMIT | tar -x -C /tmp/before``, then ``--src /tmp/before/src``).

    python benchmarks/bench_startup.py [--repeats 3] [--limit 10] [--concurrency 8] [--latency 0]
                                       [--skip-eval] [--src DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.fakeserver and the scripted responder

FIRST_EMBEDDING = """
import time
t0 = time.perf_counter()
from anchor.embedding.embed import MiniLMEmbedder
vector = MiniLMEmbedder().encode(["You are cooking at a high altitude."])[0]
print(round(time.perf_counter() - t0, 3))
"""

FIRST_UMAP_FIT = """
import time
import numpy as np
t0 = time.perf_counter()
from anchor.space.structure import cluster_embeddings
points = np.random.default_rng(0).normal(size=(24, 384))
cluster_embeddings(points / np.linalg.norm(points, axis=1, keepdims=True), seed=0)
print(round(time.perf_counter() - t0, 3))
"""

#: Factor texts of the stored space (two abduction rounds of eight).
FACTORS = [
    ["water temperature", "boiling point of water", "heat transfer rate", "starch gelatinization speed",
     "killing bacteria in the pot", "foodborne pathogens", "electricity bill", "gas price"],
    ["stove efficiency", "fuel consumption", "noodle texture", "mushy overcooked pasta",
     "chewiness of the strands", "altitude of the kitchen", "cooking time", "size of the pot"],
]
CONDITION = "You are at a high altitude where water boils at a lower temperature."


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds of the process and its children, the finished process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])}... failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, done


def summary(rows: list[tuple[float, float]]) -> dict[str, float]:
    return {"wall_s": round(statistics.median(w for w, _ in rows), 2),
            "cpu_s": round(statistics.median(c for _, c in rows), 2), "runs": len(rows)}


def anchor_cmd(*args: str) -> list[str]:
    return [sys.executable, "-c", "from anchor.cli import main; main()", *args]


def http_json(url: str, method: str = "GET") -> dict:
    req = urllib.request.Request(url, method=method, data=b"{}" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def idle_gaps(spans: list[list[float | None]]) -> tuple[float, float, float]:
    """(first arrival, last finish, longest stretch between them with no request in flight)."""
    done = sorted((a, b) for a, b in spans if a is not None and b is not None)
    first, last = done[0][0], max(b for _, b in done)
    longest, covered = 0.0, done[0][1]
    for a, b in done[1:]:
        longest = max(longest, a - covered)
        covered = max(covered, b)
    return first, last, longest


def scripted_server():  # noqa: ANN201 - a FakeOpenAIServer
    from tests.fakeserver import FakeOpenAIServer
    from tests.helpers import ScriptedLLM
    from tests.run_helpers import server_responder

    script = ScriptedLLM(rounds=FACTORS, label=lambda text: "outcome1" if len(text) % 2 else "outcome2",
                         theme=lambda texts: {"theme": f"About {texts[0]}", "redundant": []})
    return FakeOpenAIServer(responder=server_responder(script))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--skip-eval", action="store_true")
    parser.add_argument("--src", help="run anchor from this src folder instead of this checkout's")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    src = Path(args.src) if args.src else ROOT / "src"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANCHOR_")}
    env.update(PYTHONPATH=str(src), HF_HUB_OFFLINE="1")
    out: dict[str, object] = {"src": args.src or "this checkout", "cpus": os.cpu_count()}

    rows = []
    for _ in range(args.repeats):
        wall, cpu, done = timed([sys.executable, "-c", FIRST_EMBEDDING], env)
        rows.append((wall, cpu))
    out["first_embedding"] = summary(rows)
    print(f"first embedding, fresh process: {out['first_embedding']}", flush=True)

    rows = []
    for _ in range(args.repeats):
        wall, cpu, done = timed([sys.executable, "-c", FIRST_UMAP_FIT], env)
        rows.append((wall, cpu))
    out["first_umap_fit"] = summary(rows)
    print(f"first UMAP fit, fresh process: {out['first_umap_fit']}", flush=True)

    with tempfile.TemporaryDirectory() as tmp, scripted_server() as server:
        work = Path(tmp)
        space = work / "space.json"
        timed(anchor_cmd("build", "--scenario", "Cooking noodles in hot or warm water.", "--outcome1",
                         "Hot water is more efficient.", "--outcome2", "Warm water is more efficient.",
                         "--n-target", "16", "--batch-size", "8", "--max-rounds", "3", "--vote-samples", "1",
                         "--base-url", server.base_url, "--cache-dir", str(work / "build-cache"),
                         "--out", str(space), "--json"), env)
        rows, answered = [], []
        for i in range(args.repeats):
            server.reset_stats()
            wall, cpu, done = timed(anchor_cmd("infer", "--space", str(space), "-c", CONDITION, "--json",
                                               "--base-url", server.base_url, "--cache-dir", str(work / f"c{i}")),
                                    env)
            rows.append((wall, cpu))
            result = json.loads(done.stdout)
            answered.append({"requests": server.completions, "factors": len(result["factors"]),
                             "p_outcome1": result["p_outcome1"]})
        out["infer"] = summary(rows) | {"answers": answered[0]}
        print(f"anchor infer, stored space, server answering at once: {out['infer']}", flush=True)

    if not args.skip_eval:
        from tests.fakeserver import FakeOpenAIServer

        runs = []
        with tempfile.TemporaryDirectory() as tmp, \
                FakeOpenAIServer(deterministic=True, latency=args.latency) as server:
            for i in range(args.repeats):
                server.reset_stats()
                started = time.monotonic()
                wall, cpu, _ = timed(anchor_cmd("eval", "--dataset", "common2sense-pairwise", "--method", "anchor",
                                                "--limit", str(args.limit), "--runs", "1", "--concurrency",
                                                str(args.concurrency), "--base-url", server.base_url,
                                                "--cache-dir", f"{tmp}/cache{i}", "--out", f"{tmp}/out{i}",
                                                "--json"), env)
                stats = http_json(server.base_url[: -len("/v1")] + "/_stats?spans=1")
                first, last, longest = idle_gaps(stats["spans"])
                runs.append({"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "requests": stats["requests"],
                             "first_request_after_s": round(first - started, 2),
                             "longest_idle_s": round(longest, 2)})
                print(f"anchor eval, {args.limit} pairs, concurrency {args.concurrency}, latency {args.latency} s: "
                      f"{runs[-1]}", flush=True)
        out["eval"] = {"limit": args.limit, "concurrency": args.concurrency, "latency_s": args.latency,
                       "runs": runs, "longest_idle_s": max(r["longest_idle_s"] for r in runs)}
    out["load_average_at_end"] = os.getloadavg()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
