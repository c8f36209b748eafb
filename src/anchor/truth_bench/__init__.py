"""``anchor truth bench``: every method scored against the truth of synthetic worlds and published Bayesian
networks, over sweeps of the simulated LLM's errors, with a verdict for each claim and a map of where
ANCHOR is closer to the truth than asking directly.

* :mod:`.plan`: the groups of worlds (a structure at a prior, the networks), methods and error settings;
* :mod:`.runner`: each cell through ``anchor predict``'s runner, in process, with the simulated LLM as
  the runner's backend, sharing one response cache and one space store, and reusing a run where the
  simulator's answers would be the same (:mod:`anchor.truth.simulate.reads`);
* :mod:`.results`: ``results.json`` (schema_version); :mod:`.compare`: paired comparisons, crossovers,
  calibration against the truth, intervals over worlds and cases; :mod:`.verdicts`: the claims, the map,
  the power; :mod:`.report`: ``table.md``;
  :mod:`.figures`: the PNG figures.

It tests the methods' statistics under a stated model of LLM error, not any real LLM (docs/known-truth.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from anchor.files import write_text_atomic
from anchor.truth_bench.plan import BenchPlan
from anchor.truth_bench.results import BenchResults
from anchor.truth_bench.runner import BenchError, BenchRunner, Say


def default_networks() -> tuple[str, ...]:
    """The published networks a bench runs by default: those with texts written for this project, when
    pgmpy (which ships them) is installed; none otherwise."""
    from anchor.extras import extra_installed

    if not extra_installed("networks"):
        return ()
    from anchor.truth.networks import written_networks

    return tuple(written_networks())


def run_bench(plan: BenchPlan, out: Path | str, *, say: Say = lambda line: None, reuse: bool = True) -> BenchResults:
    """Run ``plan`` into ``out``: run directories, results.json, table.md, the figures and timings.json.
    ``reuse=False`` runs every cell, even where an earlier run's answers are provably the same."""
    from anchor.truth_bench.figures import write_figures
    from anchor.truth_bench.report import table_md
    from anchor.truth_bench.verdicts import judge

    out = Path(out)
    runner = BenchRunner(plan, out, say=say, reuse=reuse)
    results = judge(runner.run())
    write_text_atomic(out / "results.json", json.dumps(results.model_dump(mode="json"), indent=1) + "\n")
    write_text_atomic(out / "table.md", table_md(results))
    write_figures(results, out)
    runner.write_timings()
    return results


__all__ = ["BenchError", "BenchPlan", "BenchResults", "default_networks", "run_bench"]
