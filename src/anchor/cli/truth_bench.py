"""``anchor truth bench``: every method against the truth of synthetic worlds, over sweeps of the simulated
LLM's errors, with a verdict per claim of the paper.

A function of its own, registered by the ``truth`` command group (:mod:`anchor.cli.truth`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from anchor.cli.build import JsonOut
from anchor.cli.console import emit_json, err, friendly_errors, out


def bench_command(
    out_dir: Annotated[Path, typer.Option("--out", "-o", help=(
        "The bench's directory: a run directory per cell (runs/<setting>/<group>-<method>), results.json, "
        "table.md, the figures (map.png: where ANCHOR beats asking directly). Run the same command again to finish an interrupted bench."))],
    quick: Annotated[bool, typer.Option("--quick", help=(
        "The small plan: each structure at priors 0.5, 0.3 and 0.15, 10 worlds a group with 24 conditions each, "
        "the published networks with written texts, 3 or 4 levels a sweep (about 7 minutes on two cores); "
        "without it 26 worlds a group, 45 conditions, 4 to 6 levels a sweep (hours)."))] = False,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the worlds and of the simulated LLM.")] = 0,
    json_out: JsonOut = False,
) -> None:
    """Score ANCHOR (the consistent rule and the paper's), its parts, the direct baselines and BIRD against the
    truth of synthetic worlds at several priors and of published networks, over sweeps of the simulated LLM's
    errors; give each claim a verdict, say what the bench can tell, and map where ANCHOR wins.

    Every cell runs `anchor predict` on a world's cases file, in process, with the simulated LLM as its
    backend; it measures the methods under a stated model of LLM error, not any real LLM (docs/known-truth.md).
    Example: anchor truth bench --quick --out bench
    """
    from anchor.truth_bench import BenchPlan, default_networks, run_bench
    from anchor.truth_bench.report import console_lines

    with friendly_errors({"seed": "--seed"}):
        if out_dir.exists() and not out_dir.is_dir():
            raise NotADirectoryError(f"--out {out_dir}: exists and is not a directory")
        plan = BenchPlan.make(quick=quick, seed=seed, networks=default_networks())
        results = run_bench(plan, out_dir, say=lambda line: err.print(line, markup=False, highlight=False))
        if json_out:
            emit_json(results.model_dump(mode="json"))
            return
        out.print("\n".join(console_lines(results)), markup=False, highlight=False, soft_wrap=True)
        err.print(f"wrote {out_dir / 'results.json'}, {out_dir / 'table.md'} and the figures", markup=False,
                  highlight=False)
