"""What a long condition costs: chunked MiniLM embedding, prompt fitting and one mapping call.

For a synthetic news-like document (default 20,000 characters), it times MiniLM's plain ``encode``
(which reads only the first 256 word pieces) against ``encode_long`` (chunk mean over the whole
text), the fitting of the selection prompt to each context size, and one full mapping call (R
selections and the reflection) on a five-factor space with the LLM, once per context size. The
embedded model is used unless --base-url is given; no response cache, so every call really runs.

    python benchmarks/bench_long_condition.py [--chars 20000] [--contexts 8192,2048] [--rounds 3]
                                              [--base-url URL --model M] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SUBJECTS = ("The harbour authority", "A city council spokesperson", "Local fishermen", "The ferry operator",
            "Residents of the old quarter", "An independent engineer", "The regional weather office")
VERBS = ("said", "reported", "warned", "confirmed", "estimated", "noted")
OBJECTS = ("that repairs to the sea wall would take another {n} weeks",
           "that {n} boats had been moved to the northern basin",
           "that the storm surge reached {n} centimetres above the usual high tide",
           "that ticket sales fell by {n} percent during the closure",
           "that the night ferry would resume after {n} days")
FACTORS = (("Repairs", ("sea wall repairs", "harbour maintenance")),
           ("Travel", ("night ferry schedule", "ticket sales")))
LOOSE = ("storm surge height",)


def document(chars: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    parts: list[str] = []
    while sum(len(p) + 1 for p in parts) < chars:
        parts.append(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS).format(n=rng.randint(2, 90))}.")
    return " ".join(parts)[:chars].rsplit(" ", 1)[0].rstrip(".") + "."


def space(embedder):  # noqa: ANN001, ANN201
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

    factors, clusters = [], []
    for cid, (theme, texts) in enumerate(FACTORS):
        ids = []
        for text in texts:
            ids.append(f"f{len(factors) + 1:03d}")
            factors.append(Factor(id=ids[-1], text=text, label=FactorLabel.NEUTRAL, cluster_id=cid, round=1))
        clusters.append(Cluster(id=cid, theme=theme, factor_ids=ids))
    loose = []
    for text in LOOSE:
        loose.append(f"f{len(factors) + 1:03d}")
        factors.append(Factor(id=loose[-1], text=text, label=FactorLabel.NEUTRAL, cluster_id=None, round=1))
    return FactorSpace(
        scenario=Scenario(text="", outcome1="The night ferry resumed within a week of the storm.",
                          outcome2="It is not true that the night ferry resumed within a week of the storm."),
        factors=factors, clusters=clusters, unclustered=loose, stop_reason=StopReason.TARGET_REACHED,
        params=BuildParams(), clustering=ClusteringStats(method="umap+hdbscan", n_factors=len(factors),
                                                         n_clusters=len(clusters), n_unclustered=len(loose)),
        llm=LLMIdentity(backend="none", model="none"), embedding_model=embedder.model_id,
        embeddings=SpaceEmbeddings(
            factor_ids=[f.id for f in factors],
            factors=EmbeddingMatrix.from_array(embedder.model_id, embedder.encode([f.text for f in factors])),
            cluster_ids=[c.id for c in clusters],
            themes=EmbeddingMatrix.from_array(embedder.model_id, embedder.encode([c.theme for c in clusters]))),
    )


async def run(args: argparse.Namespace) -> dict:
    from anchor import prompts
    from anchor.embedding.embed import MiniLMEmbedder
    from anchor.llm.context import fit_prompt
    from anchor.llm.settings import LLMSettings, make_client
    from anchor.mapping.mapper import ConditionMapper, MappingConfig

    doc = document(args.chars)
    embedder = MiniLMEmbedder()
    embedder.encode(["warm-up"])
    t0 = time.perf_counter()
    embedder.encode([doc])
    t1 = time.perf_counter()
    long = embedder.encode_long([doc + " "])  # a different text, so no vector comes from the memory cache
    t2 = time.perf_counter()
    out: dict = {"chars": len(doc), "minilm": {"encode_s": round(t1 - t0, 3), "encode_long_s": round(t2 - t1, 3),
                                               "chunks": long.chunks[0], "word_pieces": long.tokens[0]},
                 "mapping": []}
    the_space = space(embedder)
    candidates = "\n".join(f"- {f.text}" for f in the_space.factors)
    for context in args.contexts:
        client = make_client(LLMSettings.from_env(base_url=args.base_url, model=args.model, use_cache=False,
                                                  context_tokens=context))
        await client.ensure_ready()
        t0 = time.perf_counter()
        fitted = fit_prompt(client.backend, prompts.SELECT_FACTORS, scenario="(none)", condition=doc,
                            candidates=candidates)
        fit_s = time.perf_counter() - t0
        mapper = ConditionMapper(client, embedder, the_space, MappingConfig(rounds=args.rounds))
        t0 = time.perf_counter()
        trace = await mapper.map(doc)
        map_s = time.perf_counter() - t0
        await client.aclose()
        records = [r for r in client.ledger.records if r.stage.startswith("mapping.")]
        cut = trace.condition_truncated
        out["mapping"].append({
            "context_tokens": context, "model": client.identity.model, "rounds": args.rounds,
            "first_fit_s": round(fit_s, 3), "map_s": round(map_s, 1), "llm_calls": len(records),
            "prompt_tokens": [r.prompt_tokens for r in records],
            "kept_chars": cut.kept_chars if cut else len(doc), "truncated_in": cut.stages if cut else [],
            "fitted_chars": len(fitted.values["condition"]),
        })
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chars", type=int, default=20_000)
    parser.add_argument("--contexts", type=lambda s: [int(x) for x in s.split(",")], default=[8192, 2048])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base-url")
    parser.add_argument("--model")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    r = asyncio.run(run(args))
    m = r["minilm"]
    print(f"{r['chars']:,}-character condition")
    print(f"  MiniLM encode (first 256 word pieces only): {m['encode_s']:.3f} s; encode_long: {m['encode_long_s']:.3f} s "
          f"({m['chunks']} chunks, {m['word_pieces']:,} word pieces)")
    for row in r["mapping"]:
        print(f"  context {row['context_tokens']:>6,}: mapping {row['map_s']:.1f} s ({row['llm_calls']} calls, prompt "
              f"tokens {row['prompt_tokens']}), kept {row['kept_chars']:,} chars, truncated in "
              f"{row['truncated_in'] or 'no prompt'}; first fit {row['first_fit_s']:.3f} s  [{row['model']}]")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
