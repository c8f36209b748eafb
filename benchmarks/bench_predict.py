"""``anchor predict`` on a large made-up table: ``--check`` time, and a whole run's rows per second and
peak memory against the local test server answering at once.

    python benchmarks/bench_predict.py                       # 1,000 scenarios x 100 conditions, vanilla
    python benchmarks/bench_predict.py --scenarios 20 --conditions 10 --method anchor

The table is written to a temporary folder; each command runs in a fresh process, and its wall time,
CPU time and peak resident memory are read from the operating system (``resource``).
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fakeserver import FakeOpenAIServer  # noqa: E402

WORDS = ["budget", "weather", "traffic", "deadline", "noise", "friends", "cost", "quality", "time", "distance",
         "mood", "health", "rain", "price", "staff", "delay"]


def write_table(path: Path, scenarios: int, conditions: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "scenario", "outcome1", "outcome2", "condition", "label"])
        for s in range(scenarios):
            scenario = f"Scenario {s}: a household plans a free weekend given the {rng.choice(WORDS)}."
            for c in range(conditions):
                condition = f"Condition {s}-{c}: " + " ".join(rng.choice(WORDS) for _ in range(25)) + "."
                w.writerow([f"s{s}-c{c}", scenario, f"They stay home ({s}).", f"They travel ({s}).", condition,
                            rng.choice([1, 2])])


def timed(args: list[str]) -> dict[str, float]:
    """Run ``anchor ARGS`` in a fresh process: its wall and CPU seconds and peak memory (MB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # anchor.cli is a package without __main__: the console script's own entry point, as `anchor` runs it.
    entry = "import sys; from anchor.cli import main; sys.argv[0] = 'anchor'; main()"
    subprocess.run([sys.executable, "-c", entry, *args], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, cwd=REPO)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "peak_rss_mb": round(after.ru_maxrss / 1024, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", type=int, default=1000)
    parser.add_argument("--conditions", type=int, default=100)
    parser.add_argument("--method", default="vanilla")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--check-only", action="store_true", help="time --check only")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "predict.json")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="anchor-bench-predict-"))
    try:
        table = folder / "cases.csv"
        write_table(table, args.scenarios, args.conditions)
        rows = args.scenarios * args.conditions
        result: dict[str, object] = {"rows": rows, "scenarios": args.scenarios, "method": args.method,
                                     "file_mb": round(table.stat().st_size / 1e6, 1)}
        result["check"] = timed(["predict", str(table), "--check", "--method", args.method])
        if not args.check_only:
            with FakeOpenAIServer() as server:
                run = timed(["predict", str(table), "--method", args.method, "--out", str(folder / "run"),
                             "--base-url", server.base_url, "--cache-dir", str(folder / "cache"),
                             "--concurrency", str(args.concurrency), "--format", "csv"])
                run["requests_at_server"] = server.completions
            run["rows_per_s"] = round(rows / run["wall_s"], 1)
            run["cpu_ms_per_row"] = round(1000 * run["cpu_s"] / rows, 2)
            result["run"] = run
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2))
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
