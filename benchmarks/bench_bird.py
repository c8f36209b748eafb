"""BIRD's cost and compute.

(a) CPT fit time (compute only) for products of 2^3 .. 6^7 assignments: 128 samples, BIRD's
    schedule (20 epochs, batch 4: 640 SGD steps), the margin term over the full product (a seeded
    sample of 65,536 above that), constrained (log-odds shortcut) and unconstrained (product form).
(b) LLM cost of BIRD on the scenarios and conditions of the first N Common2Sense pairs: calls,
    prompt/completion tokens and wall time per scenario (build) and per condition (mapping), by
    stage, next to the reference code's call count (4 + 4 + 3*F0 + 128 per scenario, 3*F + 1 per
    condition). By default against tests/fakeserver.py, a local OpenAI-compatible server that
    answers schema-valid random JSON after a fixed latency (so calls and tokens are real requests,
    but what BIRD finds is meaningless); ``--base-url`` uses a real server instead.

    python benchmarks/bench_bird.py [--pairs 20] [--latency 0.05] [--concurrency 8] [--relaxed]
                                    [--base-url URL --model M] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.fakeserver


def fit_times() -> list[dict]:
    import numpy as np

    from anchor.bird.cpt import fit_cpt, margin_rows, one_hot_rows, sample_assignments

    fit_cpt(np.ones((1, 1), dtype=bool), np.ones(1), np.full(1, 0.5), np.ones((1, 1), dtype=bool), np.zeros(1),
            epochs=1, lr=0.01, batch_size=1, margin_weight=10, constrained=True, eps=1e-3, seed=0)  # import torch
    out = []
    for sizes in ([2] * 3, [2] * 7, [3] * 7, [4] * 7, [6] * 7):
        rng = random.Random(0)
        drawn, _ = sample_assignments(sizes, 128, rng)
        rows = one_hot_rows(drawn, sizes)
        n_params = sum(sizes)
        init = np.where(np.arange(n_params) % 2 == 0, 0.75, 0.25)
        signs = np.where(init > 0.5, 1.0, -1.0)
        targets = np.array([rng.choice([0.0, 0.2, 0.4, 0.5, 0.6, 0.8, 1.0]) for _ in drawn])
        margin, sampled = margin_rows(sizes, 65_536, rng)
        row = {"sizes": f"{sizes[0]}^{len(sizes)}", "product": int(np.prod(sizes)), "margin_rows": int(margin.shape[0]),
               "margin_sampled": sampled}
        for constrained in (True, False):
            t0 = time.perf_counter()
            fit_cpt(rows, targets, init, margin, signs, epochs=20, lr=0.01, batch_size=4, margin_weight=10,
                    constrained=constrained, eps=1e-3, seed=0)
            row["constrained_s" if constrained else "unconstrained_s"] = round(time.perf_counter() - t0, 3)
        out.append(row)
        print(f"fit {row['sizes']:>4} product {row['product']:>7} margin rows {row['margin_rows']:>6}: "
              f"constrained {row['constrained_s']:.2f} s, unconstrained {row['unconstrained_s']:.2f} s", flush=True)
    return out


async def llm_cost(args: argparse.Namespace, base_url: str, model: str | None) -> dict:
    from anchor.bird import BirdConfig, BirdMethod
    from anchor.evaluation.datasets import load_pairwise
    from anchor.llm.ledger import merge_costs
    from anchor.llm.settings import LLMSettings, make_client

    pairs = load_pairwise()[: args.pairs]
    scenarios: dict[tuple[str, str, str], tuple[object, list[str]]] = {}
    for p in pairs:
        k = (p.scenario.text, p.scenario.outcome1, p.scenario.outcome2)
        entry = scenarios.setdefault(k, (p.scenario, []))
        for c in (p.condition1, p.condition2):
            if c not in entry[1]:
                entry[1].append(c)
    settings = LLMSettings(base_url=base_url, model=model, use_cache=False, max_concurrency=args.concurrency)
    client = make_client(settings)
    method = BirdMethod(client, BirdConfig(value_completion="opposites"), relaxed=args.relaxed)
    per_scenario = []
    try:
        for scenario, conditions in scenarios.values():
            t0 = time.perf_counter()
            model_ = await method.prepare(scenario)  # type: ignore[arg-type]
            build_wall = time.perf_counter() - t0
            t0 = time.perf_counter()
            estimates = await asyncio.gather(*(method.estimate(model_, c) for c in conditions))
            map_wall = time.perf_counter() - t0
            f0 = len(model_.abduction.drafts.get("completed") or model_.abduction.drafts.get("initial") or [])
            f = len(model_.factors)
            mapping = merge_costs([c for e in estimates for c in e.cost])
            per_scenario.append({
                "factors_before_pruning": min(f0, 7), "factors": f, "conditions": len(conditions),
                "build": {c.stage: c.model_dump(exclude={"stage"}) for c in model_.cost},
                "build_wall_s": round(build_wall, 3),
                "mapping": {c.stage: c.model_dump(exclude={"stage"}) for c in mapping},
                "mapping_wall_s": round(map_wall, 3),
                "reference_build_calls": (4 + 4 + 3 * min(f0, 7) + 128) if f0 else 8,
                "reference_mapping_calls_max": len(conditions) * (3 * f + 1) if f else 0,
                "status": {s: sum(e.status == s for e in estimates) for s in ("ok", "abstained", "failed")},
            })
            row = per_scenario[-1]
            calls = sum(c.llm_calls for c in model_.cost)
            print(f"scenario F0={row['factors_before_pruning']} F={f}: build {calls} calls "
                  f"(reference {row['reference_build_calls']}), {build_wall:.2f} s; {len(conditions)} conditions "
                  f"{sum(c.llm_calls for c in mapping)} calls (reference at most "
                  f"{row['reference_mapping_calls_max']}), {map_wall:.2f} s; {row['status']}", flush=True)
    finally:
        await client.aclose()
    return {"pairs": len(pairs), "scenarios": len(per_scenario), "relaxed": args.relaxed,
            "concurrency": args.concurrency, "per_scenario": per_scenario}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.05, help="Fake server: seconds per request.")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--relaxed", action="store_true", help="BIRD-double-dagger mapping.")
    parser.add_argument("--base-url")
    parser.add_argument("--model")
    parser.add_argument("--skip-llm", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result: dict = {"fit": fit_times()}
    if not args.skip_llm:
        if args.base_url:
            result["llm"] = asyncio.run(llm_cost(args, args.base_url, args.model))
            result["server"] = args.base_url
        else:
            from tests.fakeserver import FakeOpenAIServer

            with FakeOpenAIServer(fault_rates={"slow": 1.0}, slow_seconds=args.latency, deterministic=True) as server:
                result["llm"] = asyncio.run(llm_cost(args, server.base_url, None))
                result["server"] = f"tests/fakeserver.py, {args.latency} s per request, random schema-valid answers"
                result["llm"]["server_requests"] = server.completions
            ledger_calls = sum(c["llm_calls"] for s in result["llm"]["per_scenario"] for part in ("build", "mapping")
                               for c in s[part].values())
            result["llm"]["ledger_calls"] = ledger_calls
            print(f"server counted {result['llm']['server_requests']} requests; the ledger {ledger_calls}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
