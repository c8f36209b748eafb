"""Per-condition compute time of stages 2-3 without the LLM: retrieval + Naive Bayes + latent CBN.

For synthetic factor spaces of 80 and 10,000 factors (random unit vectors around cluster centres,
themes near their centres, ~10% unclustered), it times, per condition: the coarse-to-fine
retrieval (and the flat variant), then NB and the closed-form CBN over the mapped factors (the
retrieved candidates standing in for the LLM's selection, with random phi and 1-5 latents). It
also reports the one-off costs: loading the space JSON and building the index, and MiniLM's time to
embed one condition. LLM calls are excluded by construction.

    python benchmarks/bench_infer.py [--sizes 80,10000] [--queries 200] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def synthetic_space(n: int, seed: int = 0):
    from anchor.settings.space import BuildParams
    from anchor.types import (
        Cluster,
        ClusteringStats,
        EmbeddingMatrix,
        Factor,
        FactorLabel,
        FactorSpace,
        LLMIdentity,
        Scenario,
        SpaceEmbeddings,
        StopReason,
    )

    rng = np.random.default_rng(seed)
    k = max(2, n // 20)
    centres = rng.normal(size=(k, 384))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    assign = rng.integers(0, k, size=n)
    vecs = centres[assign] + 0.35 * rng.normal(size=(n, 384)) / np.sqrt(384)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    noise = rng.random(n) < 0.1
    labels = [FactorLabel.OUTCOME1, FactorLabel.OUTCOME2, FactorLabel.NEUTRAL]
    factors = [Factor(id=f"f{i + 1:05d}", text=f"synthetic factor {i}", label=labels[i % 3],
                      cluster_id=None if noise[i] else int(assign[i])) for i in range(n)]
    clusters = []
    for c in range(k):
        members = [f.id for f, a, z in zip(factors, assign, noise, strict=True) if a == c and not z]
        if members:
            clusters.append(Cluster(id=c, theme=f"theme {c}", factor_ids=members))
    themes = centres[[c.id for c in clusters]] + 0.1 * rng.normal(size=(len(clusters), 384)) / np.sqrt(384)
    space = FactorSpace(
        scenario=Scenario(text="synthetic", outcome1="a", outcome2="b"), factors=factors, clusters=clusters,
        unclustered=[f.id for f, z in zip(factors, noise, strict=True) if z], stop_reason=StopReason.TARGET_REACHED,
        params=BuildParams(), clustering=ClusteringStats(method="umap+hdbscan", n_factors=n, n_clusters=len(clusters),
                                                         n_unclustered=int(noise.sum())),
        llm=LLMIdentity(backend="synthetic", model="none"), embedding_model="synthetic",
        embeddings=SpaceEmbeddings(factor_ids=[f.id for f in factors],
                                   factors=EmbeddingMatrix.from_array("synthetic", vecs),
                                   cluster_ids=[c.id for c in clusters],
                                   themes=EmbeddingMatrix.from_array("synthetic", themes)),
    )
    return space, rng


def bench(n: int, queries: int) -> dict:
    from anchor.inference.bayes import cbn_posterior, naive_bayes_posterior
    from anchor.mapping.mapper import space_vectors
    from anchor.mapping.retrieval import FlatIndex, HierarchicalIndex
    from anchor.space.io import load_space, save_space

    space, rng = synthetic_space(n)
    with tempfile.TemporaryDirectory() as tmp:
        path = save_space(space, Path(tmp) / "space.json")
        size_mb = path.stat().st_size / 1e6
        t0 = time.perf_counter()
        space = load_space(path)
        load_s = time.perf_counter() - t0

    class _StoredOnly:
        model_id = "synthetic"

        def encode(self, texts):  # the stored vectors are used; this is never called
            raise AssertionError("stored vectors expected")

    t0 = time.perf_counter()
    fvec, tvec = space_vectors(space, _StoredOnly())
    hier = HierarchicalIndex(space, fvec, tvec)
    build_s = time.perf_counter() - t0
    flat = FlatIndex(space, fvec)

    conds = rng.normal(size=(queries, 384))
    conds /= np.linalg.norm(conds, axis=1, keepdims=True)
    t_retrieval, t_flat, t_nb, t_cbn, n_cands = [], [], [], [], []
    for q in conds:
        t0 = time.perf_counter()
        _, cands = hier.query(q)
        t_retrieval.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        flat.query(q)
        t_flat.append(time.perf_counter() - t0)
        m = max(1, len(cands))
        phis = list(rng.uniform(0.05, 0.95, size=m))
        k = int(rng.integers(1, min(5, m) + 1))
        assignment = [i % k for i in range(m)]
        params = [tuple(rng.uniform(0.05, 0.95, size=2)) for _ in range(k)]
        t0 = time.perf_counter()
        naive_bayes_posterior(phis)
        t_nb.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        cbn_posterior(phis, assignment, params)
        t_cbn.append(time.perf_counter() - t0)
        n_cands.append(len(cands))

    def ms(values: list[float]) -> float:
        return round(statistics.median(values) * 1000, 4)

    per_condition = [r + f + c for r, f, c in zip(t_retrieval, t_nb, t_cbn, strict=True)]
    return {"n_factors": n, "clusters": len(space.clusters), "unclustered": len(space.unclustered),
            "space_json_mb": round(size_mb, 2), "load_space_s": round(load_s, 3), "index_build_s": round(build_s, 3),
            "median_ms": {"retrieval_hierarchical": ms(t_retrieval), "retrieval_flat": ms(t_flat),
                          "naive_bayes": ms(t_nb), "cbn_closed_form": ms(t_cbn),
                          "per_condition_total": ms(per_condition)},
            "p90_ms_per_condition_total": round(float(np.percentile(per_condition, 90)) * 1000, 4),
            "median_candidates": statistics.median(n_cands)}


def embed_one_condition() -> float:
    from anchor.embedding.embed import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    embedder.encode(["warm-up"])
    times = []
    for i in range(20):
        t0 = time.perf_counter()
        embedder.encode([f"You are at a high altitude where water boils at a lower temperature ({i})."])
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1000, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="80,10000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    out = {"spaces": [bench(int(s), args.queries) for s in args.sizes.split(",")],
           "minilm_embed_one_condition_ms": embed_one_condition()}
    print(f"{'factors':>8} {'clusters':>8} {'json MB':>8} {'load s':>7} {'index s':>8} {'retr ms':>8} {'flat ms':>8} "
          f"{'NB ms':>7} {'CBN ms':>7} {'total ms':>9} {'p90 ms':>7}")
    for r in out["spaces"]:
        m = r["median_ms"]
        print(f"{r['n_factors']:>8} {r['clusters']:>8} {r['space_json_mb']:>8} {r['load_space_s']:>7} "
              f"{r['index_build_s']:>8} {m['retrieval_hierarchical']:>8} {m['retrieval_flat']:>8} "
              f"{m['naive_bayes']:>7} {m['cbn_closed_form']:>7} {m['per_condition_total']:>9} "
              f"{r['p90_ms_per_condition_total']:>7}")
    print(f"MiniLM embedding of one condition (warm model): {out['minilm_embed_one_condition_ms']} ms median")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
