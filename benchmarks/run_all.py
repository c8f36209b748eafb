"""Run every benchmark with its defaults and keep the JSON results in benchmarks/results/.

    python benchmarks/run_all.py [--base-url URL --model M]   (LLM parts use the embedded model otherwise)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base-url")
    parser.add_argument("--model")
    args = parser.parse_args()
    llm = [*(["--base-url", args.base_url] if args.base_url else []), *(["--model", args.model] if args.model else [])]
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    jobs = [
        ("bench_cbn.py", []),
        ("bench_infer.py", []),
        ("bench_structure.py", []),
        ("bench_audit_size.py", []),
        ("bench_embed.py", []),
        ("bench_retrieval.py", []),
        ("bench_build.py", llm),
        ("bench_vote_batching.py", llm),
        ("bench_throughput.py", []),  # its own local test server: the point is a known 200 ms latency
        ("bench_bird.py", llm),
        ("bench_cost_compare.py", []),  # ANCHOR vs BIRD against the local test server with a fixed latency
        ("bench_speed.py", []),  # the same per scenario with the critical path, fixed and token-proportional latency
        ("bench_abduction_window.py", []),  # ANCHOR vs BIRD per --abduction-window, token-proportional server
        ("bench_long_condition.py", llm),
        ("bench_startup.py", []),  # fresh processes against its own local test server answering at once
        ("bench_predict.py", []),  # anchor predict on 100,000 made-up rows against its own instant server
        ("bench_truth.py", []),  # anchor truth bench --quick twice: time against its budget, identical results
        ("bench_serve.py", []),  # anchor serve under load against its own 0.2 s test server; beside a job
        ("bench_serve_ray.py", []),  # the same load on one process and on --ray local --replicas 2
        ("bench_workers.py", []),  # requests/s and CPU a request per --workers count, several servers on one port
    ]
    failed = []
    for script, extra in jobs:
        print(f"\n=== {script} ===", flush=True)
        out = results / (Path(script).stem + ".json")
        code = subprocess.call([sys.executable, str(HERE / script), *extra, "--json", str(out)])
        if code:
            failed.append(script)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
