"""Why a build takes the time it takes: ANCHOR against BIRD per scenario, with the critical path.

For each server mode, starts tests/fakeserver.py in a process of its own (a local OpenAI-compatible
server answering schema-valid random JSON), then runs ``anchor eval --dataset common2sense-pairwise
--limit N --concurrency 16`` with ``--method bird`` and ``--method anchor``, each with a fresh cache,
and reads the two run directories with the code behind ``anchor cost`` (A = BIRD, B = ANCHOR, so
B/A reads like the paper's ratios). Per scenario it prints calls, tokens, time (how long the
scenario had a request in flight) and the critical path (its longest chain of requests that had to
wait for one another: the time it takes at least, however many requests run at once), and the
ANCHOR/BIRD ratios beside the paper's. The modes:

* ``fixed``: every request takes 0.2 s, whatever its size;
* ``tokens``: 0.05 s + 0.3 ms per prompt token + 30 ms per completion token, 16 requests served at
  once (the rest queue), roughly how a GPU server behaves.

The answers are random, so what either method finds is meaningless: the figures are the shape of
the cost (how many requests of what size each stage makes, and how they chain). Each run's calls and
tokens are checked against the server's own counts (GET /_stats).

Two more lines per mode (issue 29's checks): the ANCHOR/BIRD ratios over the scenarios whose BIRD
build completed (its stored model is usable: on random answers some BIRD builds stop early and then
make few requests), and each method's time per scenario over its critical path (mean and worst over
the scenarios), beside the whole run's elapsed time.

    python benchmarks/bench_speed.py [--limit 20] [--modes fixed,tokens] [--sizes paper|quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent

#: ANCHOR / BIRD per scenario in the paper's cost analysis.
PAPER = {"time": 0.74, "tokens": 0.24, "calls": 0.37}
#: Server settings of each mode (tests/fakeserver.py flags).
MODES: dict[str, list[str]] = {
    "fixed": ["--latency", "0.2"],
    "tokens": ["--latency", "0.05", "--per-prompt-token", "0.0003", "--per-completion-token", "0.03",
               "--slots", "16"],
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """tests/fakeserver.py in a subprocess, for one mode."""

    def __init__(self, flags: list[str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fakeserver.py"), "--port", str(self.port),
                                      "--deterministic", *flags], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/v1/models", timeout=1).close()
                return
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    self.close()
                    raise SystemExit(f"the test server did not start ({' '.join(flags)})") from None
                time.sleep(0.1)

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url}/_stats", timeout=10) as fh:
            return json.load(fh)

    def reset(self) -> None:
        urllib.request.urlopen(urllib.request.Request(f"{self.url}/_reset", data=b"", method="POST"), timeout=10).close()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def run_eval(server: Server, method: str, out: Path, cache: Path, limit: int, sizes: str) -> dict[str, float]:
    """One ``anchor eval``; its elapsed and CPU seconds (user + sys, its worker processes included)."""
    cmd = [sys.executable, "-c", "from anchor.cli import main; main()", "eval", "--dataset", "common2sense-pairwise",
           "--method", method, "--limit", str(limit), "--concurrency", "16", "--base-url", f"{server.url}/v1",
           "--cache-dir", str(cache), "--out", str(out), "--json"]
    if method == "anchor":
        cmd += ["--sizes", sizes]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"elapsed": round(time.perf_counter() - t0, 2),
            "cpu": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 2)}


def one_mode(name: str, limit: int, sizes: str, tmp: Path) -> dict[str, Any]:
    from anchor.evaluation.cost.compare import compare

    server = Server(MODES[name])
    runs: dict[str, Any] = {}
    try:
        for method in ("bird", "anchor"):
            server.reset()
            timing = run_eval(server, method, tmp / f"{name}-{method}", tmp / f"cache-{name}-{method}", limit, sizes)
            runs[method] = {**timing, "server": server.stats()}
            print(f"[{name}] {method}: {timing['elapsed']:.1f} s elapsed, {timing['cpu']:.1f} s CPU, server counted "
                  f"{runs[method]['server']['requests']} requests", flush=True)
    finally:
        server.close()
    doc = compare(tmp / f"{name}-bird", tmp / f"{name}-anchor")
    for side, method in (("a", "bird"), ("b", "anchor")):
        s, c = doc[side], runs[method]["server"]
        assert s["attempts"] == c["requests"], (method, s["attempts"], c["requests"])
        assert (s["prompt_tokens"], s["completion_tokens"]) == (c["prompt_tokens"], c["completion_tokens"]), method
    return {"mode": name, "server_flags": MODES[name], "runs": runs, "comparison": doc,
            "checks": checks(doc, tmp / f"{name}-bird")}


def bird_completed(bird_dir: Path) -> set[str]:
    """Scenarios (keys) whose BIRD model was built to the end: factors found and the CPT trained."""
    from anchor.bird.io import load_model

    # Named by scenario key, with "-s<seed>" when built per run (RunConfig.artefact_keys 'scenario').
    return {re.sub(r"-s\d+$", "", path.stem) for path in (bird_dir / "bird").glob("*.json")
            if load_model(path).usable}


def checks(doc: dict[str, Any], bird_dir: Path) -> dict[str, Any]:
    """ANCHOR/BIRD over the scenarios whose BIRD build completed, and time over critical path per scenario."""
    scenarios = doc["scenarios"]
    done = sorted(k for k in bird_completed(bird_dir) if k in scenarios)
    ratios = {}
    for what in ("seconds", "requests", "tokens"):
        a = sum(scenarios[k]["a"][what] for k in done)
        b = sum(scenarios[k]["b"][what] for k in done)
        ratios[what] = round(b / a, 3) if a else None
    over_path: dict[str, Any] = {}
    for side, method in (("a", "bird"), ("b", "anchor")):
        each = [row[side]["seconds"] / row["critical_path"][side]["seconds"] for row in scenarios.values()
                if (row.get("critical_path") or {}).get(side) and row["critical_path"][side]["seconds"] > 0]
        over_path[method] = {"mean": round(sum(each) / len(each), 3) if each else None,
                             "max": round(max(each), 3) if each else None, "scenarios": len(each)}
    return {"bird_completed": len(done), "scenarios": len(scenarios), "anchor_over_bird": ratios,
            "time_over_critical_path": over_path}


def table(result: dict[str, Any]) -> str:
    doc = result["comparison"]
    total, path = doc["per_scenario"]["total"], doc["per_scenario"]["critical_path"]

    def cell(x: float | None, digits: int) -> str:
        return "–" if x is None else f"{x:,.{digits}f}"

    def side(key: str) -> list[str]:
        p = path[key] or {}
        return [cell(total[key]["requests"], 1), cell(total[key]["tokens"], 0), cell(total[key]["seconds"], 2),
                f"{cell(p.get('requests'), 1)} / {cell(p.get('seconds'), 2)} s"]

    ratios = [total["ratio"]["requests"], total["ratio"]["tokens"], total["ratio"]["seconds"], path["ratio"]["seconds"]]
    paper = [PAPER["calls"], PAPER["tokens"], PAPER["time"], None]
    rows = [("BIRD", side("a")), ("ANCHOR", side("b")),
            ("ANCHOR/BIRD", ["–" if r is None else f"{r:.2f}x" for r in ratios]),
            ("paper", ["–" if r is None else f"{r:.2f}x" for r in paper])]
    head = f"{'per scenario':14}{'calls':>10}{'tokens':>10}{'time s':>10}{'critical path (req. / s)':>28}"
    lines = [f"mode {result['mode']} ({' '.join(result['server_flags'])}), {doc['slice']['scenarios']} scenarios, "
             "16 requests at once", head]
    lines += [f"{name:14}{c[0]:>10}{c[1]:>10}{c[2]:>10}{c[3]:>28}" for name, c in rows]
    for method in ("bird", "anchor"):
        r = result["runs"][method]
        lines.append(f"{method}: whole run {r['elapsed']:.1f} s elapsed, {r['cpu']:.1f} s CPU")
    ch = result["checks"]
    q = ch["anchor_over_bird"]
    lines.append(f"on the {ch['bird_completed']} of {ch['scenarios']} scenarios whose BIRD build completed, "
                 f"ANCHOR/BIRD: time {cell(q['seconds'], 2)}x, calls {cell(q['requests'], 2)}x, "
                 f"tokens {cell(q['tokens'], 2)}x")
    for method, p in ch["time_over_critical_path"].items():
        lines.append(f"{method}: time per scenario / its critical path: mean {cell(p['mean'], 2)}x, "
                     f"worst {cell(p['max'], 2)}x ({p['scenarios']} scenarios)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=20, help="Common2Sense pairs (default 20; 3 for a quick check).")
    parser.add_argument("--modes", default="fixed,tokens", help="Server modes to run, comma-separated: fixed, tokens.")
    parser.add_argument("--sizes", choices=("paper", "quick"), default="paper", help="ANCHOR's stage-1 sizes.")
    parser.add_argument("--json", type=Path, help="Write the results here.")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        parser.error(f"--modes: unknown mode(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(MODES)}")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in modes:
            results.append(one_mode(name, args.limit, args.sizes, Path(tmp)))
            print(table(results[-1]) + "\n", flush=True)
    print("Calls and tokens of each run equal the server's own counts. Time is how long a scenario had a request "
          "in flight; the critical path is its longest chain of requests that waited for one another.")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "paper": PAPER,
                                         "results": results}, indent=2))


if __name__ == "__main__":
    main()
