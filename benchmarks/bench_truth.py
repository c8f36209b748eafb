"""``anchor truth bench --quick`` twice, each in a fresh process into a fresh folder: its wall time, CPU time
and peak memory (the issue's budget: 10 minutes on two cores, no model, no network), and whether the two
``results.json`` are the same byte for byte.

    python benchmarks/bench_truth.py [--seed S] [--full] [--json OUT]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUDGET_S = 600


def timed(args: list[str]) -> dict[str, float]:
    """Run ``anchor ARGS`` in a fresh process: its wall and CPU seconds and peak memory (MB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "from anchor.cli.app import main; main()", *args], check=True,
                   stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, cwd=REPO)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "peak_rss_mb": round(after.ru_maxrss / 1024, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--full", action="store_true", help="the full plan instead of --quick (once)")
    parser.add_argument("--json", type=Path, default=REPO / "benchmarks" / "results" / "bench_truth.json")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="anchor-bench-truth-"))
    try:
        plan = [] if args.full else ["--quick"]
        runs, digests = [], []
        for i in range(1 if args.full else 2):
            out = folder / f"bench-{i}"
            runs.append(timed(["truth", "bench", *plan, "--seed", str(args.seed), "--out", str(out)]))
            digests.append(hashlib.sha256((out / "results.json").read_bytes()).hexdigest())
        result = {"plan": "full" if args.full else "quick", "seed": args.seed, "runs": runs,
                  "results_identical": len(set(digests)) == 1, "results_sha256": digests[0],
                  "within_budget": all(r["wall_s"] <= BUDGET_S for r in runs) if not args.full else None,
                  "budget_s": BUDGET_S}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
