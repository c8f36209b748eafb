"""Per-query latency of each candidate-search backend (exact KNN, FAISS flat, FAISS HNSW, BM25) at
80, 1,000 and 10,000 factors, through the same coarse-to-fine index the mapper uses (K1=3, K2=5)
and through the flat ablation (budget K1*K2+K2 = 20).

Spaces are synthetic: 384-d unit vectors around ``n / 20`` random centres (about 10% unclustered),
theme vectors near their centres, and factor texts of 6-12 words drawn from a 3,000-word
vocabulary with Zipf-like frequencies (each cluster favouring its own 40 words), so that BM25's
posting lists have realistic lengths. Conditions are noisy copies of a random centre (vector) and
8-14 words from that centre's vocabulary (text). The vectors carry no meaning, so this measures
speed only; the agreement columns compare each backend's flat candidates with exact KNN's (FAISS
flat should be 1.0; HNSW is approximate; BM25 ranks by words, not vectors, so its overlap says
little).

    python benchmarks/bench_retrieval.py [--sizes 80,1000,10000] [--queries 200] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from anchor.mapping.retrieval import FlatIndex, HierarchicalIndex
from anchor.mapping.retrievers import RETRIEVER_NAMES, make_retriever
from anchor.settings.space import BuildParams
from anchor.types import Cluster, ClusteringStats, Factor, FactorSpace, LLMIdentity, Scenario, StopReason

DIM = 384
VOCAB = 3000


def synthetic(n: int, seed: int):
    rng = np.random.default_rng(seed)
    k = max(2, n // 20)
    centres = rng.normal(size=(k, DIM))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    assign = rng.integers(0, k, size=n)
    vecs = centres[assign] + 0.35 * rng.normal(size=(n, DIM)) / np.sqrt(DIM)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    noise = rng.random(n) < 0.1

    words = np.array([f"w{i}" for i in range(VOCAB)])
    zipf = 1.0 / np.arange(1, VOCAB + 1)
    zipf /= zipf.sum()
    topics = [rng.choice(VOCAB, size=40, replace=False) for _ in range(k)]

    def text(c: int, length: int) -> str:
        own = rng.choice(topics[c], size=length // 2)
        common = rng.choice(VOCAB, size=length - length // 2, p=zipf)
        return " ".join(words[np.concatenate([own, common])])

    factors = [Factor(id=f"f{i + 1:05d}", text=text(int(assign[i]), int(rng.integers(6, 13))),
                      cluster_id=None if noise[i] else int(assign[i])) for i in range(n)]
    clusters = []
    for c in range(k):
        members = [f.id for f, a, z in zip(factors, assign, noise, strict=True) if a == c and not z]
        if members:
            clusters.append(Cluster(id=c, theme=" ".join(words[topics[c][:3]]), factor_ids=members))
    space = FactorSpace(
        scenario=Scenario(text="synthetic", outcome1="a", outcome2="b"), factors=factors, clusters=clusters,
        unclustered=[f.id for f, z in zip(factors, noise, strict=True) if z], stop_reason=StopReason.TARGET_REACHED,
        params=BuildParams(), clustering=ClusteringStats(method="umap+hdbscan", n_factors=n, n_clusters=len(clusters),
                                                         n_unclustered=int(noise.sum())),
        llm=LLMIdentity(backend="synthetic", model="none"), embedding_model="synthetic")
    fvec = dict(zip([f.id for f in factors], vecs, strict=True))
    tvec = {}
    for c in clusters:
        v = centres[c.id] + 0.1 * rng.normal(size=DIM) / np.sqrt(DIM)
        tvec[c.id] = v / np.linalg.norm(v)
    return space, fvec, tvec, centres, topics, words, rng


def conditions(q: int, centres, topics, words, rng):
    which = rng.integers(0, len(centres), size=q)
    Q = centres[which] + 0.5 * rng.normal(size=(q, DIM)) / np.sqrt(DIM)
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    texts = [" ".join(words[rng.choice(topics[c], size=int(rng.integers(8, 15)))]) for c in which]
    return Q, texts


def bench(n: int, queries: int, seed: int) -> list[dict]:
    space, fvec, tvec, centres, topics, words, rng = synthetic(n, seed)
    Q, texts = conditions(queries, centres, topics, words, rng)
    exact_flat = FlatIndex(space, fvec)
    reference = [{c.factor_id for c in exact_flat.query(q)[1]} for q in Q]
    rows = []
    for name in RETRIEVER_NAMES:
        for kind in ("hierarchical", "flat"):
            t0 = time.perf_counter()
            if kind == "hierarchical":
                index = HierarchicalIndex(space, fvec, tvec, k1=3, k2=5, retriever=make_retriever(name))
            else:
                index = FlatIndex(space, fvec, k1=3, k2=5, retriever=make_retriever(name))
            build_s = time.perf_counter() - t0
            index.query(Q[0], text=texts[0])  # first call pays lazy set-up (thread-pool controller)
            times, counts, overlap = [], [], []
            for i, (q, t) in enumerate(zip(Q, texts, strict=True)):
                t0 = time.perf_counter()
                _, cands = index.query(q, text=t)
                times.append(time.perf_counter() - t0)
                counts.append(len(cands))
                if kind == "flat":
                    overlap.append(len({c.factor_id for c in cands} & reference[i]) / max(1, len(reference[i])))
            rows.append({
                "n_factors": n, "retriever": name, "index": kind, "clusters": len(space.clusters),
                "build_ms": round(build_s * 1e3, 2),
                "query_median_ms": round(statistics.median(times) * 1e3, 4),
                "query_p90_ms": round(float(np.percentile(times, 90)) * 1e3, 4),
                "mean_candidates": round(float(np.mean(counts)), 1),
                "agreement_with_exact_knn": round(float(np.mean(overlap)), 3) if overlap else None,
            })
    return rows


def main(argv: list[str] | None = None) -> int:
    import faiss  # noqa: F401 - imported up front so no build time includes the import
    import rank_bm25  # noqa: F401

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="80,1000,10000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = [r for n in args.sizes.split(",") for r in bench(int(n), args.queries, args.seed)]
    print(f"{'factors':>7} {'retriever':11} {'index':12} {'clusters':>8} {'build ms':>9} {'median ms':>9} "
          f"{'p90 ms':>8} {'cands':>6} {'=exact':>7}")
    for r in rows:
        agree = "" if r["agreement_with_exact_knn"] is None else f"{r['agreement_with_exact_knn']:.3f}"
        print(f"{r['n_factors']:>7} {r['retriever']:11} {r['index']:12} {r['clusters']:>8} {r['build_ms']:>9.1f} "
              f"{r['query_median_ms']:>9.3f} {r['query_p90_ms']:>8.3f} {r['mean_candidates']:>6.1f} {agree:>7}")
    env = {"python": platform.python_version(), "cpus": os.cpu_count(), "load_average": os.getloadavg(),
           "faiss": __import__("faiss").__version__, "total_seconds": round(time.perf_counter() - started, 1)}
    print(f"Python {env['python']}, {env['cpus']} CPUs, load {env['load_average']}, faiss {env['faiss']}, "
          f"total {env['total_seconds']} s; threads=1 (the index default)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"env": env, "retrieval": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
