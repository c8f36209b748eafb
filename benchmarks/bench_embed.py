"""MiniLM (all-MiniLM-L6-v2) embedding throughput at batch sizes 1 to 256: the ceiling of every
embedding-bound step (deduplication during abduction, factor and theme vectors, one vector per
condition at mapping time).

Texts are fresh factor-like sentences (8-16 words) so that neither the in-memory nor the SQLite
vector cache answers; each batch size gets a new ``MiniLMEmbedder`` (no cache file) and encodes
the same number of texts. The model is loaded and warmed up before any timing. Reported per batch
size: texts per second, milliseconds per text and CPU milliseconds per text (the process's CPU time,
which a busy shared machine does not inflate as it does the wall clock), the median of ``--repeats`` passes.

    python benchmarks/bench_embed.py [--texts 512] [--repeats 3] [--batch-sizes 1,2,4,...,256] [--json PATH]
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

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

WORDS = ("water heat pot stove boil pasta noodle salt kitchen time energy cost gas price pressure altitude "
         "temperature starch texture grain flour steam lid flame timer recipe cook taste soft firm quick slow "
         "cold warm hot high low thin thick fresh dry wet bubble mineral hard tap bottle metal steel copper").split()


def sentences(n: int, tag: str, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        words = rng.choice(WORDS, size=int(rng.integers(8, 17)))
        out.append(f"{' '.join(words).capitalize()} ({tag} {i}).")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=512, help="texts encoded per pass")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-sizes", default="1,2,4,8,16,32,64,128,256")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    from anchor.embedding.embed import MiniLMEmbedder

    sizes = [int(s) for s in args.batch_sizes.split(",")]
    t0 = time.perf_counter()
    MiniLMEmbedder().encode(["warm-up sentence about boiling water"] * 4)
    load_s = time.perf_counter() - t0
    MiniLMEmbedder(batch_size=32).encode(sentences(64, "warm", seed=99))

    rows = []
    for b in sizes:
        passes = []
        cpu = []
        for r in range(args.repeats):
            texts = sentences(args.texts, f"b{b}r{r}", seed=1000 * b + r)
            embedder = MiniLMEmbedder(batch_size=b)
            t0, c0 = time.perf_counter(), time.process_time()
            vectors = embedder.encode(texts)
            passes.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            assert vectors.shape == (args.texts, 384) and embedder.encoded_count == args.texts
        s = statistics.median(passes)
        rows.append({"batch_size": b, "texts": args.texts, "seconds_median": round(s, 4),
                     "texts_per_second": round(args.texts / s, 1), "ms_per_text": round(1000 * s / args.texts, 3),
                     "cpu_ms_per_text": round(1000 * statistics.median(cpu) / args.texts, 3),
                     "seconds_all": [round(p, 4) for p in passes]})

    print(f"{'batch':>6} {'texts/s':>9} {'ms/text':>8} {'CPU ms/text':>12}")
    for r in rows:
        print(f"{r['batch_size']:>6} {r['texts_per_second']:>9.1f} {r['ms_per_text']:>8.3f} {r['cpu_ms_per_text']:>12.3f}")
    env = {"python": platform.python_version(), "cpus": os.cpu_count(), "engine": "numpy (anchor.embedding.minilm), one BLAS thread",
           "numpy": np.__version__, "load_average": os.getloadavg(), "model_load_and_first_call_s": round(load_s, 2)}
    print(f"{env['engine']}, numpy {env['numpy']}, {env['cpus']} CPUs, load {env['load_average']}; "
          f"model load + first call {env['model_load_and_first_call_s']} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"env": env, "throughput": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
