"""Compute cost of stage 1's clustering and stage 2's candidate retrieval, on synthetic vectors.

Everything here is the pure-compute part of the pipeline: no LLM calls and no embedding model.
The vectors are random unit vectors in 384 dimensions (MiniLM's size) drawn around ``n / 20``
random centres, which is enough to exercise UMAP, HDBSCAN and the nearest-neighbour indexes at
realistic sizes; they say nothing about the quality of clusters on real factor texts.

(a) Build: for n = 80 and n = 2000 factors, the time of ``import umap``, the first UMAP fit in
    the process (which includes numba's JIT compilation) separately from a warm refit, HDBSCAN,
    and the silhouette score.
(b) Retrieval: for spaces of 80 and 10,000 factors, the one-off cost of building the index
    (prototypes plus the nearest-neighbour structures) and the per-condition query time (median
    and 90th percentile over single queries, and the per-query time of one batched call), for the
    hierarchical index and the flat ablation.

Usage: ``python benchmarks/bench_structure.py [--json results.json] [--queries 200] [--seed 0]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from anchor.mapping.retrieval import FlatIndex, HierarchicalIndex
from anchor.settings.space import BuildParams
from anchor.space.structure import HDBSCANClusterer, UMAPReducer, hdbscan_min_cluster_size, umap_params
from anchor.types import Cluster, ClusteringStats, Factor, FactorSpace, LLMIdentity, Scenario, StopReason

DIM = 384
T = TypeVar("T")


def synthetic(
    n: int, rng: np.random.Generator, centres: int | None = None, spread: float = 0.05
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` unit vectors around ``centres`` (default ``max(1, n // 20)``) random unit centres.

    Returns (vectors as float32, generating centre of each vector, the centres).
    """
    k = centres if centres is not None else max(1, n // 20)
    middle = rng.normal(size=(k, DIM))
    middle /= np.linalg.norm(middle, axis=1, keepdims=True)
    which = rng.integers(0, k, size=n)
    X = middle[which] + spread * rng.normal(size=(n, DIM))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X.astype(np.float32), which, middle


def timed(fn: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T, float]:
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


# --------------------------------------------------------------------------- (a) build


def bench_build(cases: list[tuple[int, int]], seed: int) -> list[dict]:
    """Time each clustering step for (n factors, n generating centres) cases."""
    from sklearn.metrics import silhouette_score

    rows: list[dict] = []
    _, import_s = timed(__import__, "umap")
    rows.append({"step": "import umap", "n": None, "centres": None, "seconds": import_s})

    first = True
    for n, k in cases:
        X, _, _ = synthetic(n, np.random.default_rng(seed + n + k), centres=k)
        params = umap_params(n)
        shape = f"n_components={params.n_components}, n_neighbors={params.n_neighbors}"
        reduced, fit_s = timed(UMAPReducer(seed=seed).fit_transform, X)
        if first:
            rows.append({"step": "UMAP first fit (incl. numba JIT)", "n": n, "centres": k, "seconds": fit_s,
                         "detail": shape})
            reduced, fit_s = timed(UMAPReducer(seed=seed).fit_transform, X)
            first = False
        rows.append({"step": "UMAP warm fit", "n": n, "centres": k, "seconds": fit_s, "detail": shape})

        labels, hdb_s = timed(HDBSCANClusterer().fit_predict, reduced)
        n_clusters = int(labels.max()) + 1 if (labels >= 0).any() else 0
        rows.append({"step": "HDBSCAN", "n": n, "centres": k, "seconds": hdb_s,
                     "detail": f"min_cluster_size={hdbscan_min_cluster_size(n)}: {n_clusters} clusters, "
                               f"{int((labels < 0).sum())} noise"})

        kept = labels >= 0
        if n_clusters >= 2 and kept.sum() > n_clusters:
            score, sil_s = timed(silhouette_score, reduced[kept], labels[kept])
            rows.append({"step": "silhouette", "n": n, "centres": k, "seconds": sil_s,
                         "detail": f"{score:.3f}"})
        else:
            rows.append({"step": "silhouette", "n": n, "centres": k, "seconds": None,
                         "detail": "undefined (fewer than 2 clusters)"})
    return rows


# --------------------------------------------------------------------------- (b) retrieval


def synthetic_space(n: int, rng: np.random.Generator) -> tuple[FactorSpace, dict, dict, np.ndarray]:
    """A factor space whose clusters are the generating centres; about 10% of factors left unclustered."""
    X, which, centres = synthetic(n, rng)
    ids = [f"f{i + 1}" for i in range(n)]
    loose = rng.random(n) < 0.10
    members: dict[int, list[str]] = {}
    for i, c in enumerate(which.tolist()):
        if not loose[i]:
            members.setdefault(c, []).append(ids[i])
    groups = sorted(members.items())
    clusters = [Cluster(id=j, theme=f"theme {j}", factor_ids=m) for j, (_, m) in enumerate(groups)]
    centre_of = {j: c for j, (c, _) in enumerate(groups)}
    unclustered = [ids[i] for i in np.flatnonzero(loose).tolist()]
    space = FactorSpace(
        scenario=Scenario(text="synthetic", outcome1="yes", outcome2="no"),
        factors=[Factor(id=fid, text=f"factor {fid}") for fid in ids],
        clusters=clusters,
        unclustered=unclustered,
        stop_reason=StopReason.TARGET_REACHED,
        params=BuildParams(),
        clustering=ClusteringStats(method="umap+hdbscan", n_factors=n, n_clusters=len(clusters),
                                   n_unclustered=len(unclustered)),
        llm=LLMIdentity(backend="bench", model="none"),
        embedding_model="synthetic",
    )
    factor_vectors = dict(zip(ids, X, strict=True))
    # A theme name's vector lands near, not on, its cluster's centre.
    theme_vectors = {}
    for j, c in centre_of.items():
        v = centres[c] + 0.05 * rng.normal(size=DIM)
        theme_vectors[j] = (v / np.linalg.norm(v)).astype(np.float32)
    return space, factor_vectors, theme_vectors, centres


def bench_retrieval(sizes: list[int], n_queries: int, seed: int) -> list[dict]:
    rows: list[dict] = []
    for n in sizes:
        rng = np.random.default_rng(seed + 10 * n)
        space, fvec, tvec, centres = synthetic_space(n, rng)
        # Conditions: near a random centre, noisier than the factors themselves.
        Q = centres[rng.integers(0, len(centres), size=n_queries)] + 0.1 * rng.normal(size=(n_queries, DIM))
        Q = (Q / np.linalg.norm(Q, axis=1, keepdims=True)).astype(np.float32)
        for label, threads in (("threads=1", 1), ("threads=default", None)):
            for kind in ("hierarchical", "flat"):
                if kind == "hierarchical":
                    index, build_s = timed(HierarchicalIndex, space, fvec, tvec, threads=threads)
                else:
                    index, build_s = timed(FlatIndex, space, fvec, threads=threads)
                index.query(Q[0])  # first call pays lazy set-up (thread-pool controller)
                times, sizes_out = [], []
                for q in Q:
                    (_, cands), dt = timed(index.query, q)
                    times.append(dt)
                    sizes_out.append(len(cands))
                _, batch_s = timed(index.query_many, Q)
                rows.append({
                    "n_factors": n, "index": kind, "threads": label,
                    "clusters": len(space.clusters), "unclustered": len(space.unclustered),
                    "build_ms": build_s * 1e3,
                    "query_median_ms": float(np.median(times)) * 1e3,
                    "query_p90_ms": float(np.percentile(times, 90)) * 1e3,
                    "batched_per_query_ms": batch_s / len(Q) * 1e3,
                    "mean_candidates": float(np.mean(sizes_out)),
                })
    return rows


# --------------------------------------------------------------------------- output


def fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_tables(build: list[dict], retrieval: list[dict]) -> None:
    print("\n(a) clustering build compute (synthetic 384-d unit vectors)")
    print(f"{'step':34} {'n':>6} {'centres':>7} {'seconds':>9}  detail")
    for r in build:
        n = "" if r["n"] is None else r["n"]
        k = "" if r["centres"] is None else r["centres"]
        print(f"{r['step']:34} {n:>6} {k:>7} {fmt(r['seconds']):>9}  {r.get('detail', '')}")

    print("\n(b) candidate retrieval per condition (synthetic vectors; exact brute-force KNN)")
    head = (f"{'factors':>7} {'index':12} {'threads':15} {'clusters':>8} {'build ms':>9} "
            f"{'median ms':>9} {'p90 ms':>8} {'batch ms/q':>10} {'cands':>6}")
    print(head)
    for r in retrieval:
        print(f"{r['n_factors']:>7} {r['index']:12} {r['threads']:15} {r['clusters']:>8} "
              f"{r['build_ms']:>9.1f} {r['query_median_ms']:>9.3f} {r['query_p90_ms']:>8.3f} "
              f"{r['batched_per_query_ms']:>10.3f} {r['mean_candidates']:>6.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument("--queries", type=int, default=200, help="condition vectors per retrieval case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--build-cases", nargs="+", default=["80:4", "2000:100", "2000:20"], metavar="N:CENTRES",
        help="clustering cases; 2000:100 is n/20 centres, which the paper's min_cluster_size = n/20 "
             "cannot resolve (every group is smaller than 100), so 2000:20 is timed as well",
    )
    parser.add_argument("--space-sizes", type=int, nargs="+", default=[80, 10_000])
    args = parser.parse_args(argv)

    started = time.perf_counter()
    cases = [(int(a), int(b)) for a, b in (case.split(":") for case in args.build_cases)]
    build = bench_build(cases, args.seed)
    retrieval = bench_retrieval(args.space_sizes, args.queries, args.seed)
    total = time.perf_counter() - started
    print_tables(build, retrieval)

    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    env = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": load,
        "numpy": np.__version__,
        "sklearn": __import__("sklearn").__version__,
        "umap": getattr(sys.modules.get("umap"), "__version__", None),
        "total_seconds": total,
    }
    print(f"\nPython {env['python']}, {env['cpus']} CPUs, load average {load}, total {total:.1f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"env": env, "build": build, "retrieval": retrieval}, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
