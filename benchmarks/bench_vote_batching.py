"""Does labelling several factors per call change the labels? Batched vs one-at-a-time voting.

On a fixed set of factors for the noodles scenario, runs self-consistent voting (m samples) once
with ``--batch`` factors per call and once with one factor per call, and reports: per-factor
agreement of the majority labels, Cohen's kappa, the label distribution of each, and the calls,
tokens and LLM seconds each needed. Uses the embedded model unless --base-url is given; no cache,
so both settings really run.

    python benchmarks/bench_vote_batching.py [--batch 8] [--samples 3] [--base-url URL --model M] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

FACTORS = [
    "faster starch gelatinization", "shorter cooking time", "higher energy use", "boiling point at altitude",
    "noodle texture", "overcooking risk", "sticking together", "even heat distribution", "pot size",
    "water volume", "salt in the water", "food safety", "flavour absorption", "delicate rice noodles",
    "stove power", "gradual softening", "large batch of noodles", "time to heat the water",
    "evaporation", "al dente bite", "instant noodles", "thick udon noodles", "lid on the pot",
    "starch left in the water",
]


async def run(args: argparse.Namespace) -> dict:
    from sklearn.metrics import cohen_kappa_score

    from anchor.llm.settings import LLMSettings, make_client
    from anchor.space.voting import vote_labels
    from anchor.types import Scenario

    scenario = Scenario(text="The efficiency of cooking noodles is being compared between hot water and warm water.",
                        outcome1="Noodles cook much more efficiently in hot water than they do in warm water.",
                        outcome2="Noodles cook much more efficiently in warm water than they do in hot water.")
    results = {}
    for batch in (args.batch, 1):
        client = make_client(LLMSettings.from_env(base_url=args.base_url, model=args.model, use_cache=False))
        votes = await vote_labels(client, scenario, FACTORS, samples=args.samples, batch_size=batch)
        await client.aclose()
        total = client.ledger.total()
        results[batch] = {"labels": [v.majority().value for v in votes],
                          "calls": total.llm_calls, "tokens": total.prompt_tokens + total.completion_tokens,
                          "llm_s": round(total.llm_seconds, 1), "model": client.identity.model}
    a, b = results[args.batch]["labels"], results[1]["labels"]
    agree = sum(x == y for x, y in zip(a, b, strict=True)) / len(a)
    kappa = cohen_kappa_score(a, b) if len(set(a) | set(b)) > 1 else float("nan")
    return {"n_factors": len(FACTORS), "samples": args.samples, "batch": args.batch, "agreement": round(agree, 3),
            "cohen_kappa": None if kappa != kappa else round(float(kappa), 3),
            "distribution_batched": dict(Counter(a)), "distribution_single": dict(Counter(b)),
            "cost_batched": {k: v for k, v in results[args.batch].items() if k != "labels"},
            "cost_single": {k: v for k, v in results[1].items() if k != "labels"},
            "labels_batched": a, "labels_single": b}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--base-url")
    parser.add_argument("--model")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    r = asyncio.run(run(args))
    print(f"{r['n_factors']} factors, m={r['samples']}, model {r['cost_batched']['model']}")
    print(f"  agreement batched({r['batch']}) vs single: {r['agreement']:.1%}   Cohen's kappa: {r['cohen_kappa']}")
    print(f"  labels batched: {r['distribution_batched']}   single: {r['distribution_single']}")
    for name in ("cost_batched", "cost_single"):
        c = r[name]
        print(f"  {name:<13} calls {c['calls']:>3}  tokens {c['tokens']:>6}  LLM {c['llm_s']} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
