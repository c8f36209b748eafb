"""ANCHOR against BIRD in calls, tokens and time per scenario (the paper's cost figure).

Runs ``anchor eval --method bird`` and ``--method anchor`` on the first N Common2Sense pairs (20 by
default) against tests/fakeserver.py, a local OpenAI-compatible server that answers schema-valid
random JSON after a fixed latency per request, each run with its own fresh cache, then compares the
two run directories with ``anchor cost`` (A = BIRD, B = ANCHOR, so B/A reads like the paper's
ratios) and checks that each run's calls and tokens equal what its server counted. The paper's
ratios are printed beside ours. The answers are random, so what either method finds is
meaningless: the figures are the shape of the cost (how many requests of what size each stage
makes, and how they chain), not the paper's measurement on Qwen2.5-72B.

The server's latency can grow with tokens and its slots be limited, as on a GPU server (``--per-prompt-token
0.0003 --per-completion-token 0.03 --slots 16``, the issue-49 measurement), and it can ignore ``n`` as
llama.cpp's server does (``--ignore-n``): the ledger must still equal the server's counts.

    python benchmarks/bench_cost_compare.py [--limit 20] [--latency 0.05] [--concurrency 16]
                                            [--per-prompt-token S] [--per-completion-token S] [--slots N]
                                            [--ignore-n] [--sizes paper|quick] [--json PATH]
                                            [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.fakeserver

#: ANCHOR / BIRD per scenario in the paper's cost analysis.
PAPER = {"time": 0.74, "tokens": 0.24, "calls": 0.37, "mapping tokens": 0.17, "mapping time": 0.55}


def run_eval(server_url: str, method: str, out: Path, cache: Path, limit: int, concurrency: int,
             sizes: str) -> float:
    cmd = [sys.executable, "-c", "from anchor.cli import main; main()", "eval", "--dataset",
           "common2sense-pairwise", "--method", method, "--limit", str(limit), "--base-url", server_url,
           "--cache-dir", str(cache), "--out", str(out), "--json"]
    if method == "anchor":
        cmd += ["--sizes", sizes]
    env = dict(os.environ, ANCHOR_LLM_CONCURRENCY=str(concurrency))
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - t0


def bird_complete(run: Path) -> set[str]:
    """The scenarios (16-character keys, as ``anchor cost`` gives them) whose BIRD model was trained:
    with random answers some builds keep no usable factor and stop early, which would flatter BIRD's
    cost on them."""
    from anchor.methods.bird_eval import BIRD_MODELS
    from anchor.rundir.directory import RunDirectory

    folder = RunDirectory(run).artefacts(BIRD_MODELS.name)
    return {path.stem[:16] for path in folder.glob("*.json") if BIRD_MODELS.load(path).training is not None}


def on_scenarios(doc: dict, keys: set[str]) -> dict:
    """ANCHOR / BIRD over ``keys`` (sums of requests, tokens and seconds), and ANCHOR's wall time over
    its critical path for every scenario."""
    rows = {k: v for k, v in doc["scenarios"].items() if k in keys}

    def ratio(field: str) -> float:
        a = sum(r["a"][field] for r in rows.values())
        return sum(r["b"][field] for r in rows.values()) / a if a else float("nan")

    walls = [r["b"]["seconds"] / r["critical_path"]["b"]["seconds"] for r in doc["scenarios"].values()
             if r["critical_path"]["b"]["seconds"]]
    return {"scenarios": sorted(rows), "ratio": {k: ratio(f) for k, f in
                                                 (("requests", "requests"), ("tokens", "tokens"), ("time", "seconds"))},
            "wall_over_critical_path": walls}


def main() -> None:
    from tests.fakeserver import FakeOpenAIServer

    from anchor.evaluation.cost.compare import compare, markdown

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=20, help="Common2Sense pairs (default 20).")
    parser.add_argument("--latency", type=float, default=0.05, help="Seconds per request at the server.")
    parser.add_argument("--concurrency", type=int, default=16, help="Requests in flight at once (both runs).")
    parser.add_argument("--per-prompt-token", type=float, default=0.0, help="Seconds per prompt token.")
    parser.add_argument("--per-completion-token", type=float, default=0.0,
                        help="Seconds per token of a request's longest answer.")
    parser.add_argument("--slots", type=int, help="Requests the server serves at once (the rest wait).")
    parser.add_argument("--ignore-n", action="store_true", help="The server answers one choice whatever n says.")
    parser.add_argument("--sizes", choices=("paper", "quick"), default="paper", help="ANCHOR's stage-1 sizes.")
    parser.add_argument("--json", type=Path, help="Write the results here.")
    parser.add_argument("--keep", type=Path, help="Keep both run directories (and caches) under this new folder.")
    args = parser.parse_args()
    if args.keep is not None and args.keep.exists():
        parser.error(f"--keep: {args.keep} already exists")

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp) if args.keep is None else args.keep
        tmp_path.mkdir(parents=True, exist_ok=True)
        elapsed = {}
        counted = {}
        for method in ("bird", "anchor"):
            with FakeOpenAIServer(deterministic=True, latency=args.latency, per_prompt_token=args.per_prompt_token,
                                  per_completion_token=args.per_completion_token, slots=args.slots,
                                  honour_n=not args.ignore_n) as server:
                elapsed[method] = run_eval(server.base_url, method, tmp_path / method, tmp_path / f"cache-{method}",
                                           args.limit, args.concurrency, args.sizes)
                counted[method] = server.stats()
            print(f"{method}: {elapsed[method]:.1f} s, server counted {counted[method]['requests']} requests",
                  flush=True)
        doc = compare(tmp_path / "bird", tmp_path / "anchor")
        complete = bird_complete(tmp_path / "bird")
    for side, method in (("a", "bird"), ("b", "anchor")):
        s, c = doc[side], counted[method]
        assert s["attempts"] == c["requests"], (method, s["attempts"], c["requests"])
        assert (s["prompt_tokens"], s["completion_tokens"]) == (c["prompt_tokens"], c["completion_tokens"]), method
    print(markdown(doc))
    total = doc["per_scenario"]["total"]["ratio"]
    mapping = doc["per_scenario"]["phases"].get("mapping", {}).get("ratio", {})
    ours = {"time": total["seconds"], "tokens": total["tokens"], "calls": total["requests"],
            "mapping tokens": mapping.get("tokens"), "mapping time": mapping.get("seconds")}
    print(f"ANCHOR / BIRD per scenario ({doc['slice']['scenarios']} scenarios, latency {args.latency} s "
          f"+ {args.per_prompt_token} s a prompt token + {args.per_completion_token} s an answer token, "
          f"slots {args.slots or 'unlimited'}, n {'ignored' if args.ignore_n else 'honoured'}, "
          f"concurrency {args.concurrency}, ANCHOR sizes {args.sizes}):")
    print(f"{'':16}{'ours':>8}{'paper':>8}")
    for key, paper in PAPER.items():
        value = ours[key]
        print(f"{key:16}{'–' if value is None else f'{value:.2f}x':>8}{paper:>7.2f}x")
    print("Attempts and tokens of each run equal the server's own counts; calls are requests (each once).")
    subset = on_scenarios(doc, complete)
    print(f"On the {len(subset['scenarios'])} scenarios whose BIRD build completed (the issue-49 targets): "
          + ", ".join(f"{k} {v:.3f}x" for k, v in subset["ratio"].items()))
    walls = subset["wall_over_critical_path"]
    print(f"ANCHOR's wall time over its critical path, per scenario (all {len(walls)}): median {statistics.median(walls):.2f}, "
          f"max {max(walls):.2f}, {sum(w > 1.2 for w in walls)} over 1.2")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "elapsed": elapsed,
                                         "server": counted, "comparison": doc, "ours": ours, "paper": PAPER,
                                         "bird_complete": subset},
                                        indent=2))


if __name__ == "__main__":
    main()
