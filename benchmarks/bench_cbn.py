#!/usr/bin/env python
"""Time the closed-form CBN posterior against pgmpy variable elimination and brute-force enumeration.

Every method runs on the same random networks (Outcome -> L_i -> F_j, all factors observed).
Each cell is the median wall time of one call over all networks and repeats; pgmpy is imported
and warmed up before timing, so its import cost is reported separately. The last two columns are
the largest disagreement with the closed form, as a sanity check that the timings compare like
with like.

    python benchmarks/bench_cbn.py
    python benchmarks/bench_cbn.py --sizes 2x10,6x30,12x60,16x120 --repeats 10 --json out.json
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from anchor.inference.bayes import cbn_posterior
from anchor.inference.cbn_reference import cbn_posterior_enumeration, cbn_posterior_pgmpy

Network = tuple[list[float], list[int], list[tuple[float, float]]]
# Brute force doubles in cost with every latent; past this it would dominate the run time.
ENUMERATION_MAX_LATENTS = 12


def parse_sizes(text: str) -> list[tuple[int, int]]:
    sizes: list[tuple[int, int]] = []
    for chunk in text.split(","):
        k, _, n = chunk.strip().partition("x")
        try:
            sizes.append((int(k), int(n)))
        except ValueError:
            msg = f"bad size {chunk!r}; expected LATENTSxFACTORS, e.g. 6x30"
            raise argparse.ArgumentTypeError(msg) from None
        if sizes[-1][0] < 1 or sizes[-1][1] < 0:
            raise argparse.ArgumentTypeError(f"bad size {chunk!r}; need at least one latent")
    return sizes


def random_network(rng: random.Random, k: int, n: int) -> Network:
    phis = [rng.uniform(0.05, 0.95) for _ in range(n)]
    # Every latent gets at least one factor when there are enough, so k is the real width.
    assignment = [j % k if j < k else rng.randrange(k) for j in range(n)]
    rng.shuffle(assignment)
    params = [(rng.uniform(0.05, 0.95), rng.uniform(0.05, 0.95)) for _ in range(k)]
    return phis, assignment, params


def time_calls(fn: Callable[..., float], nets: Sequence[Network], repeats: int) -> tuple[float, list[float]]:
    """Median seconds per call over all networks x repeats, plus the value for each network."""
    samples: list[float] = []
    values: list[float] = []
    for net in nets:
        value = fn(*net)  # warm-up, and the value we compare
        values.append(value)
        for _ in range(repeats):
            start = time.perf_counter()
            fn(*net)
            samples.append(time.perf_counter() - start)
    return statistics.median(samples), values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=parse_sizes("2x10,6x30,12x60"),
        help="comma-separated LATENTSxFACTORS (default: 2x10,6x30,12x60)",
    )
    parser.add_argument("--networks", type=int, default=5, help="random networks per size (default: 5)")
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per network (default: 10)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    if args.networks < 1 or args.repeats < 1:
        parser.error("--networks and --repeats must be at least 1")

    start = time.perf_counter()
    import pgmpy  # noqa: F401  (timed on its own so it does not pollute the first pgmpy sample)

    cbn_posterior_pgmpy([0.6], [0], [(0.7, 0.3)])
    pgmpy_import_s = time.perf_counter() - start

    rng = random.Random(args.seed)
    rows: list[dict[str, object]] = []
    for k, n in args.sizes:
        nets = [random_network(rng, k, n) for _ in range(args.networks)]
        closed_s, closed_v = time_calls(cbn_posterior, nets, args.repeats)
        pgmpy_s, pgmpy_v = time_calls(cbn_posterior_pgmpy, nets, args.repeats)
        row: dict[str, object] = {
            "latents": k,
            "factors": n,
            "closed_form_us": closed_s * 1e6,
            "pgmpy_ve_us": pgmpy_s * 1e6,
            "pgmpy_over_closed": pgmpy_s / closed_s,
            "max_abs_diff_pgmpy": max(abs(a - b) for a, b in zip(closed_v, pgmpy_v, strict=True)),
            "enumeration_us": None,
            "max_abs_diff_enumeration": None,
        }
        if k <= ENUMERATION_MAX_LATENTS:
            enum_s, enum_v = time_calls(cbn_posterior_enumeration, nets, args.repeats)
            row["enumeration_us"] = enum_s * 1e6
            row["max_abs_diff_enumeration"] = max(abs(a - b) for a, b in zip(closed_v, enum_v, strict=True))
        rows.append(row)

    def fmt_us(x: object) -> str:
        return "-" if x is None else f"{x:,.0f}" if x >= 100 else f"{x:.1f}"  # type: ignore[operator]

    def fmt_diff(x: object) -> str:
        return "-" if x is None else f"{x:.1e}"

    header = ("k", "n", "closed us", "enum us", "pgmpy VE us", "pgmpy/closed", "|d| enum", "|d| pgmpy")
    table = [header] + [
        (
            str(r["latents"]),
            str(r["factors"]),
            fmt_us(r["closed_form_us"]),
            fmt_us(r["enumeration_us"]),
            fmt_us(r["pgmpy_ve_us"]),
            f"{r['pgmpy_over_closed']:.0f}x",
            fmt_diff(r["max_abs_diff_enumeration"]),
            fmt_diff(r["max_abs_diff_pgmpy"]),
        )
        for r in rows
    ]
    widths = [max(len(row[c]) for row in table) for c in range(len(header))]
    for i, row in enumerate(table):
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print(
        f"median of {args.networks} networks x {args.repeats} calls per cell; "
        f"pgmpy import + first call: {pgmpy_import_s:.2f} s (not included above)"
    )

    if args.json is not None:
        import numpy

        payload = {
            "benchmark": "cbn_posterior",
            "config": {
                "sizes": [list(s) for s in args.sizes],
                "networks": args.networks,
                "repeats": args.repeats,
                "seed": args.seed,
            },
            "environment": {
                "python": sys.version.split()[0],
                "platform": platform.platform(),
                "numpy": numpy.__version__,
                "pgmpy": pgmpy.__version__,
            },
            "pgmpy_import_and_first_call_s": pgmpy_import_s,
            "rows": rows,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
