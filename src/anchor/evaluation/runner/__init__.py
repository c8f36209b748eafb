"""Evaluation runs: resumable, repeatable over seeds, with metrics and exact costs on disk.

* :mod:`.loop`: ``EvalRunner``, the loop over (run, instance) that asks the method and appends
  each prediction as it finishes;
* :mod:`.config`: ``make_run_config`` (the options, checked and recorded) and the paper's sizes;
* :mod:`.identity`: which recorded settings must match for a rerun to resume a run directory;
* :mod:`.scoring`: ``metrics.json``, the metrics, calibration, cost and notes of a run;
* :mod:`.errors`: ``EvalError``, and ``WorkersCapped`` (fewer helpers started than ``--workers`` asked).

The run directory's files, its lock and its logs are :mod:`anchor.evaluation.rundir`'s; the
runner's own public names are below.
"""

from anchor.evaluation.runner.config import (
    BUILD_SIZES,
    dataset_kind,
    default_build_params,
    file_sha256,
    make_run_config,
)
from anchor.evaluation.runner.errors import EvalError, WorkersCapped
from anchor.evaluation.runner.identity import (
    check_resumable,
    first_difference,
    identity_difference,
    run_identity,
)
from anchor.evaluation.runner.loop import EvalRunner, Instance, instance_slots
from anchor.evaluation.runner.scoring import RunScorer

__all__ = [
    "BUILD_SIZES",
    "EvalError",
    "EvalRunner",
    "Instance",
    "RunScorer",
    "WorkersCapped",
    "check_resumable",
    "dataset_kind",
    "default_build_params",
    "file_sha256",
    "first_difference",
    "identity_difference",
    "instance_slots",
    "make_run_config",
    "run_identity",
]
