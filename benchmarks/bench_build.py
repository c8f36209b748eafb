"""Stage-1 build time, split into LLM time and compute time.

(a) n = 80 synthetic factors, the post-abduction part of a build with the LLM in the loop:
    factor-outcome voting (m samples, batched) and theme naming/pruning by the LLM; MiniLM
    embedding, UMAP and HDBSCAN on the CPU. LLM time comes from the cost ledger.
(b) n = 2,000 synthetic factors, compute only: MiniLM embedding, UMAP (first fit, including
    numba compilation, reported apart), HDBSCAN, silhouette.

Synthetic factors are short phrases combined from fixed word lists, so runs are comparable.
Uses the embedded model unless --base-url is given.

    python benchmarks/bench_build.py [--n-llm 80] [--n-compute 2000] [--base-url URL --model M] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ASPECTS = ["water temperature", "starch release", "cooking time", "energy use", "noodle texture", "pot size",
           "boiling point", "salt content", "heat transfer", "stirring", "noodle thickness", "altitude",
           "food safety", "flavour absorption", "water volume", "stove power", "lid use", "sticking",
           "surface foam", "serving time"]
MODIFIERS = ["faster", "slower", "uneven", "consistent", "reduced", "increased", "controlled", "poor",
             "better", "limited", "excess", "stable", "variable", "higher", "lower", "gentle", "rapid",
             "delayed", "improved", "risky", "extra", "minimal", "steady", "optimal", "irregular"]


def synthetic_factors(n: int) -> list[str]:
    pairs = itertools.product(MODIFIERS, ASPECTS)
    return [f"{m} {a}" for m, a in itertools.islice(pairs, n)]


async def llm_part(n: int, args: argparse.Namespace) -> dict:
    from anchor.embedding.embed import MiniLMEmbedder
    from anchor.llm.settings import LLMSettings, make_client
    from anchor.space.structure import cluster_embeddings
    from anchor.space.themes import name_and_prune
    from anchor.space.voting import vote_labels
    from anchor.types import Factor, Scenario

    scenario = Scenario(text="The efficiency of cooking noodles is compared between hot water and warm water.",
                        outcome1="Noodles cook more efficiently in hot water.",
                        outcome2="Noodles cook more efficiently in warm water.")
    settings = LLMSettings.from_env(base_url=args.base_url, model=args.model, use_cache=False)
    client = make_client(settings)
    texts = synthetic_factors(n)
    embedder = MiniLMEmbedder()
    t0 = time.perf_counter()
    embedder.encode(["warm-up"])
    load_s = time.perf_counter() - t0

    wall0 = time.perf_counter()
    votes = await vote_labels(client, scenario, texts, samples=args.vote_samples, batch_size=args.vote_batch)
    t0 = time.perf_counter()
    vecs = embedder.encode(texts)
    embed_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = cluster_embeddings(vecs, seed=0)
    cluster_s = time.perf_counter() - t0
    factors = [Factor(id=f"f{i + 1:03d}", text=t, label=v.majority(), votes=v) for i, (t, v) in
               enumerate(zip(texts, votes, strict=True))]
    groups: dict[int, list[Factor]] = {}
    for f, label in zip(factors, result.labels.tolist(), strict=True):
        if label >= 0:
            groups.setdefault(label, []).append(f)
    await name_and_prune(client, scenario, groups)
    wall = time.perf_counter() - wall0
    await client.aclose()
    costs = {c.stage: c.model_dump() for c in client.ledger.summary()}
    llm_s = sum(c["llm_seconds"] for c in costs.values())
    return {
        "n_factors": n, "llm": client.identity.model_dump(), "wall_s": round(wall, 2), "llm_s": round(llm_s, 2),
        "compute_s": round(wall - llm_s, 2), "embed_s": round(embed_s, 3),
        "cluster_s_incl_first_umap_fit": round(cluster_s, 3), "minilm_load_s": round(load_s, 2),
        "clusters": result.stats.n_clusters, "unclustered": result.stats.n_unclustered, "per_stage": costs,
    }


def compute_part(n: int) -> dict:
    import numpy as np

    from anchor.embedding.embed import MiniLMEmbedder
    from anchor.space.structure import HDBSCANClusterer, UMAPReducer, _silhouette

    texts = synthetic_factors(len(ASPECTS) * len(MODIFIERS))
    texts = (texts * (n // len(texts) + 1))[:n]
    texts = [f"{t} ({i // len(ASPECTS) // len(MODIFIERS)})" if i >= len(ASPECTS) * len(MODIFIERS) else t
             for i, t in enumerate(texts)]
    embedder = MiniLMEmbedder(batch_size=64)
    embedder.encode(["warm-up"])
    t0 = time.perf_counter()
    vecs = embedder.encode(texts)
    embed_s = time.perf_counter() - t0
    small = UMAPReducer(seed=0)
    t0 = time.perf_counter()
    small.fit_transform(vecs[:80])
    first_fit_s = time.perf_counter() - t0
    reducer = UMAPReducer(seed=0)
    t0 = time.perf_counter()
    reduced = reducer.fit_transform(vecs)
    umap_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    labels = HDBSCANClusterer().fit_predict(reduced)
    hdb_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    sil = _silhouette(reduced, labels)
    sil_s = time.perf_counter() - t0
    return {"n_factors": n, "embed_s": round(embed_s, 2), "texts_per_s": round(n / embed_s, 1),
            "umap_first_fit_80_incl_jit_s": round(first_fit_s, 2), "umap_s": round(umap_s, 2),
            "hdbscan_s": round(hdb_s, 3), "silhouette_s": round(sil_s, 3), "silhouette": sil,
            "clusters": int(len(set(labels.tolist()) - {-1})), "noise": int(np.sum(labels < 0))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-llm", type=int, default=80)
    parser.add_argument("--n-compute", type=int, default=2000)
    parser.add_argument("--vote-samples", type=int, default=3)
    parser.add_argument("--vote-batch", type=int, default=8)
    parser.add_argument("--base-url")
    parser.add_argument("--model")
    parser.add_argument("--skip-llm", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    out: dict = {}
    if not args.skip_llm:
        out["llm_build"] = asyncio.run(llm_part(args.n_llm, args))
        r = out["llm_build"]
        print(f"(a) n={r['n_factors']} with {r['llm']['model']}: wall {r['wall_s']} s = LLM {r['llm_s']} s + "
              f"compute {r['compute_s']} s (embedding {r['embed_s']} s, UMAP+HDBSCAN incl. first-fit JIT "
              f"{r['cluster_s_incl_first_umap_fit']} s); {r['clusters']} clusters, {r['unclustered']} unclustered")
        for stage, c in r["per_stage"].items():
            print(f"    {stage:<10} calls {c['llm_calls']:>3}  tokens {c['prompt_tokens']}+{c['completion_tokens']}"
                  f"  {c['llm_seconds']:.1f} s")
    out["compute_only"] = compute_part(args.n_compute)
    r = out["compute_only"]
    jit = "numba JIT already paid in (a)" if not args.skip_llm else "incl. numba JIT"
    print(f"(b) n={r['n_factors']} compute only: MiniLM {r['embed_s']} s ({r['texts_per_s']} texts/s), UMAP "
          f"{r['umap_s']} s (first fit on 80 points, {jit}: {r['umap_first_fit_80_incl_jit_s']} s), "
          f"HDBSCAN {r['hdbscan_s']} s, silhouette {r['silhouette_s']} s -> {r['clusters']} clusters, "
          f"{r['noise']} noise")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
