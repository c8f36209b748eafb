#!/usr/bin/env python
"""Size (and render time) of the HTML audit pages on synthetic but paper-sized inputs.

The factor space has the paper's default size (80 factors, here in 8 themes plus unclustered and
pruned ones, 384-d vectors, 10 abduction rounds); each condition has a full retrieval trace
(3 clusters, K1*K2 + K2 = 20 candidates, 3 selection rounds, 6 mapped factors in 3 latents).
The run is 350 pairwise instances (700 conditions) with every file of the run-directory contract:
config.json, predictions.jsonl, traces.jsonl and one factor space per 10 instances.

Texts and vectors are random (seeded): only their lengths matter here, not their meaning.

    python benchmarks/bench_audit_size.py
    python benchmarks/bench_audit_size.py --pairs 350 --json out.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from anchor.audit import explain_html, space_html
from anchor.evaluation.datasets import scenario_key
from anchor.evaluation.report import run_index_html, write_run_index
from anchor.evaluation.report.run_index import index_rows
from anchor.rundir.records import Prediction, RunConfig
from anchor.settings.space import BuildParams
from anchor.space.io import save_space
from anchor.types import (
    AbductionRound,
    Cluster,
    ClusterHit,
    ClusteringStats,
    EmbeddingMatrix,
    Factor,
    FactorEvidence,
    FactorLabel,
    FactorSpace,
    InferenceResult,
    LabelVotes,
    Latent,
    LLMIdentity,
    MappingTrace,
    PrunedFactor,
    RejectedCandidate,
    RetrievedFactor,
    Scenario,
    SpaceEmbeddings,
    StageCost,
    StopReason,
)

WORDS = ("water heat pot salt starch boil simmer texture flavour energy cost gas stove time altitude pressure "
         "pasta noodle dough grain soak rinse bacteria safety bowl lid steam minute quality kitchen cook").split()


def sentence(rng: random.Random, low: int = 7, high: int = 14) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(low, high))]
    return " ".join(words).capitalize() + "."


def synthetic_space(rng: random.Random, n_factors: int = 80, n_themes: int = 8, n_loose: int = 8,
                    n_pruned: int = 4) -> FactorSpace:
    labels = list(FactorLabel)
    factors = []
    for i in range(n_factors):
        votes = LabelVotes(**dict(zip(("outcome1", "outcome2", "neutral"),
                                      np.random.default_rng(i).multinomial(3, [0.45, 0.35, 0.2]).tolist(),
                                      strict=True)))
        factors.append(Factor(id=f"f{i + 1:03d}", text=sentence(rng), label=rng.choice(labels), votes=votes,
                              round=1 + i // 8))
    ids = [f.id for f in factors]
    clustered, loose = ids[: n_factors - n_loose], ids[n_factors - n_loose:]
    clusters = []
    per = len(clustered) // n_themes
    for c in range(n_themes):
        members = clustered[c * per:(c + 1) * per] if c < n_themes - 1 else clustered[c * per:]
        pruned = []
        if c < n_pruned:
            victim = members.pop()
            pruned = [PrunedFactor(factor_id=victim, text=factors[ids.index(victim)].text,
                                   reason="redundant within its cluster", duplicate_of=members[0])]
        clusters.append(Cluster(id=c, theme=" ".join(rng.choice(WORDS).capitalize() for _ in range(2)),
                                factor_ids=members, pruned=pruned))
        for fid in members:
            factors[ids.index(fid)].cluster_id = c
    vectors = np.random.default_rng(0).normal(size=(n_factors, 384)).astype(np.float32)
    themes = np.random.default_rng(1).normal(size=(n_themes, 384)).astype(np.float32)
    rounds = [AbductionRound(round=r + 1, sentences=[sentence(rng) for _ in range(10)],
                             extracted=[sentence(rng, 3, 6) for _ in range(9)], added=[sentence(rng, 3, 6)] * 8,
                             rejected=[RejectedCandidate(text=sentence(rng, 3, 6), reason="duplicate")])
              for r in range(10)]
    return FactorSpace(
        scenario=Scenario(text=sentence(rng, 14, 20), outcome1=sentence(rng, 10, 14),
                          outcome2=sentence(rng, 10, 14)),
        factors=factors, clusters=clusters, unclustered=loose, stop_reason=StopReason.TARGET_REACHED, rounds=rounds,
        params=BuildParams(), clustering=ClusteringStats(method="umap+hdbscan", n_factors=n_factors,
                                                         n_clusters=n_themes, n_unclustered=n_loose,
                                                         silhouette=0.31, umap_n_components=5, umap_n_neighbors=15,
                                                         hdbscan_min_cluster_size=5),
        cost=[StageCost(stage=s, llm_calls=rng.randint(5, 60), prompt_tokens=rng.randint(5000, 90000),
                        completion_tokens=rng.randint(1000, 20000), llm_seconds=rng.uniform(5, 90))
              for s in ("abduction.generate", "abduction.extract", "abduction.validate", "voting", "themes")],
        compute_seconds={"embedding": 0.8, "clustering": 2.1, "total_wall": 95.0},
        llm=LLMIdentity(backend="openai-compatible", model="some-model"), embedding_model="all-MiniLM-L6-v2",
        embeddings=SpaceEmbeddings(factor_ids=ids, factors=EmbeddingMatrix.from_array("all-MiniLM-L6-v2", vectors),
                                   cluster_ids=[c.id for c in clusters],
                                   themes=EmbeddingMatrix.from_array("all-MiniLM-L6-v2", themes)),
    )


def synthetic_result(rng: random.Random, space: FactorSpace, condition: str) -> InferenceResult:
    by_id = space.by_id()
    hits = rng.sample(space.clusters, 3)
    candidates = []
    for hit in hits:
        for fid in hit.factor_ids[:5]:
            candidates.append(RetrievedFactor(factor_id=fid, text=by_id[fid].text, distance=rng.uniform(0.8, 1.3),
                                              source=f"cluster:{hit.id}"))
    for fid in space.unclustered[:5]:
        candidates.append(RetrievedFactor(factor_id=fid, text=by_id[fid].text, distance=rng.uniform(0.8, 1.3),
                                          source="unclustered"))
    cand_ids = [c.factor_id for c in candidates]
    voted = rng.sample(cand_ids, 7)
    rounds = [rng.sample(cand_ids, 6) for _ in range(3)]
    votes = {fid: sum(fid in r for r in rounds) for fid in cand_ids} | {fid: 2 for fid in voted}
    mapped = voted[:6]
    evidence = [FactorEvidence(factor_id=fid, text=by_id[fid].text, theme=space.theme_of(fid),
                               label=by_id[fid].label, phi=round(rng.uniform(0.1, 0.9), 3)) for fid in mapped]
    latents = [Latent(name=" ".join(rng.choice(WORDS) for _ in range(3)), factor_ids=mapped[i * 2:i * 2 + 2],
                      p_given_o1=round(rng.uniform(0.2, 0.9), 2), p_given_o2=round(rng.uniform(0.1, 0.8), 2))
               for i in range(3)]
    nb, cbn = rng.uniform(0.05, 0.95), rng.uniform(0.05, 0.95)
    pooled = 0.5 * nb + 0.5 * cbn
    trace = MappingTrace(condition=condition, retrieval="hierarchical",
                         clusters=[ClusterHit(cluster_id=h.id, theme=h.theme, distance=rng.uniform(0.9, 1.3))
                                   for h in hits],
                         candidates=candidates, selection_rounds=rounds, votes=votes, vote_threshold=2, voted=voted,
                         reflection_removed=voted[6:], mapped=mapped)
    return InferenceResult(
        condition=condition, p_outcome1=pooled, p_outcome2=1 - pooled, unknown=False, factors=evidence, nb=nb,
        cbn=cbn, latents=latents, weights={"nb": 0.5, "cbn": 0.5}, mapping=trace,
        cost=[StageCost(stage=s, llm_calls=n, prompt_tokens=rng.randint(300, 3000), completion_tokens=rng.randint(20, 300),
                        llm_seconds=rng.uniform(0.2, 3)) for s, n in
              (("mapping.select", 3), ("mapping.reflect", 1), ("inference.phi", 1), ("inference.latents", 1),
               ("inference.latent_params", 1))],
        compute_seconds={"embed_condition": 0.01, "retrieval": 0.002, "total_wall": 9.3},
    )


def synthetic_run(rng: random.Random, run_dir: Path, pairs: int, pairs_per_space: int = 10) -> None:
    config = RunConfig(anchor_version="0.1.0", dataset="common2sense-pairwise", data_sha256="0" * 64,
                       kind="pairwise", method="anchor", runs=1, seed=0,
                       llm={"backend": "openai-compatible", "model": "some-model"})
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(config.model_dump_json(indent=2), encoding="utf-8")
    preds, traces = [], []
    space = key = None
    for i in range(pairs):
        if i % pairs_per_space == 0:
            space = synthetic_space(rng)
            key = scenario_key(space.scenario)
            save_space(space, run_dir / "spaces" / f"{key}.json")
        sides = [synthetic_result(rng, space, sentence(rng, 8, 16)) for _ in range(2)]
        human = rng.choice((1, 2, 3))
        p1, p2 = sides[0].p_outcome1, sides[1].p_outcome1
        prediction = 1 if p1 > p2 else 2 if p2 > p1 else 3
        preds.append(Prediction(run=0, id=f"c2s-pair-{i:04d}", seed=0, kind="pairwise", human=human, gold=1,
                                p_gold_1=p1, p_gold_2=p2, prediction=prediction, n_factors=[6, 6]))
        for side, result in enumerate(sides):
            traces.append(json.dumps({"run": 0, "id": preds[-1].id, "side": side, "condition": result.condition,
                                      "space": key, "result": result.model_dump(mode="json")}))
    (run_dir / "predictions.jsonl").write_text("".join(p.model_dump_json() + "\n" for p in preds), encoding="utf-8")
    (run_dir / "traces.jsonl").write_text("\n".join(traces) + "\n", encoding="utf-8")


def kib(n: int) -> float:
    return round(n / 1024, 1)


def measure(label: str, text: str, seconds: float, out: dict) -> None:
    raw = len(text.encode("utf-8"))
    packed = len(gzip.compress(text.encode("utf-8")))
    out[label] = {"bytes": raw, "gzip_bytes": packed, "render_seconds": round(seconds, 4)}
    print(f"{label:<46} {kib(raw):>9.1f} KiB  (gzip {kib(packed):>7.1f} KiB)  rendered in {seconds * 1000:8.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=350, help="pairwise instances in the synthetic run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    figures: dict = {}

    space = synthetic_space(rng)
    results = [synthetic_result(rng, space, sentence(rng, 8, 16)) for _ in range(2)]
    t0 = time.perf_counter()
    page = space_html(space)
    measure("factor-space page (80 factors)", page, time.perf_counter() - t0, figures)
    t0 = time.perf_counter()
    page = explain_html(space, results[:1])
    measure("explanation page: space + 1 condition", page, time.perf_counter() - t0, figures)
    t0 = time.perf_counter()
    page = explain_html(space, results)
    measure("explanation page: space + 2 conditions", page, time.perf_counter() - t0, figures)

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        synthetic_run(rng, run_dir, args.pairs)
        config = RunConfig.model_validate_json((run_dir / "config.json").read_text(encoding="utf-8"))
        preds = [Prediction.model_validate_json(line) for line in
                 (run_dir / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
        rows = index_rows(preds, config, pages={(p.run, p.id): f"explain/r0-{p.id}.html" for p in preds})
        t0 = time.perf_counter()
        page = run_index_html(rows, title="synthetic run", config=config)
        measure(f"run index ({args.pairs} pairs)", page, time.perf_counter() - t0, figures)

        t0 = time.perf_counter()
        written = write_run_index(run_dir)
        seconds = time.perf_counter() - t0
        pages = [p.stat().st_size for p in written.pages]
        spaces = [p.stat().st_size for p in written.space_pages]
        figures["run_directory"] = {
            "pairs": args.pairs, "instance_pages": len(pages), "space_pages": len(spaces),
            "instance_page_median_bytes": int(np.median(pages)), "space_page_median_bytes": int(np.median(spaces)),
            "index_bytes": written.index.stat().st_size, "total_bytes": sum(pages) + sum(spaces)
            + written.index.stat().st_size, "write_seconds": round(seconds, 3),
            "traces_jsonl_bytes": (run_dir / "traces.jsonl").stat().st_size,
        }
        r = figures["run_directory"]
        print(f"write_run_index: {r['instance_pages']} instance pages (median {kib(r['instance_page_median_bytes'])} "
              f"KiB), {r['space_pages']} space pages (median {kib(r['space_page_median_bytes'])} KiB), index "
              f"{kib(r['index_bytes'])} KiB; {kib(r['total_bytes']) / 1024:.1f} MiB in all, written in "
              f"{r['write_seconds']:.1f} s (traces.jsonl: {kib(r['traces_jsonl_bytes']) / 1024:.1f} MiB)")
    figures["python"] = sys.version.split()[0]
    figures["machine"] = platform.machine()
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
