"""Runs side by side only on the instances they share.

The report puts every run of one (kind, dataset) in one table (or one column). Runs of the same data
file that chose their instances alike (sample, sample seed, --limit) scored the same instances, and
their ``metrics.json`` figures are shown as they are. When they chose differently (a ``--limit 20``
run beside a ``--limit 6`` one), each is scored again here, from its ``predictions.jsonl``, on the
instances every run of the group scored, with the functions that wrote ``metrics.json``
(:func:`anchor.scoring.scores.score_runs`), and the report says so. Runs that cannot be put side
by side are refused in one line: runs of one dataset name on different data files, with and without
``--balance-outcomes`` (the same ids then have different gold outcomes), or sharing no instance.

Cost figures are not rescored: they stay each run's own, per instance of its own (the cost section
says how many).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from anchor.evaluation.report.loading import LoadedRun, ReportError
from anchor.methods.registry import METHODS
from anchor.rundir.records import Prediction
from anchor.scoring.scores import score_runs

#: Settings that decide which instances of a data file a run scores: runs that agree on all of them
#: scored the same instances.
SELECTION_FIELDS = ("sample", "sample_seed", "limit")

GroupKey = tuple[str, str]


@dataclass(frozen=True)
class SharedInstances:
    """A (kind, dataset) whose runs scored different instances and are shown on those they share."""

    kind: str
    dataset: str
    n_shared: int
    own: dict[Path, int]
    """Each run directory (resolved) and its own instance count (what its metrics.json scores)."""


def _predictions(run: LoadedRun) -> dict[tuple[int, str], Prediction]:
    """The run's predictions, read strictly: a score computed here must not quietly lose a line."""
    log = run.directory.predictions
    if not log.exists():
        raise ReportError(f"{log.path}: missing; the run is shown beside runs that scored other instances, so it "
                          "is scored again on the instances they share, which needs its predictions")
    preds = run.directory.latest_predictions()
    return {key: p for key, p in preds.items() if p.run < run.config.runs}


def _check_same_data(group: Sequence[LoadedRun]) -> None:
    first = group[0]
    for run in group[1:]:
        a, b = first.config, run.config
        if a.data_sha256 != b.data_sha256:
            raise ReportError(f"{first.path} and {run.path} are runs of {a.dataset} on different data files "
                              f"(sha256 {a.data_sha256[:12]}… and {b.data_sha256[:12]}…): their instances differ, "
                              "so their scores cannot stand side by side; report them separately")
        if a.cases != b.cases:
            raise ReportError(f"{first.path} and {run.path} read {a.data_path} with other settings (columns, format "
                              "or limits), so their rows may differ; report them separately")
        if a.balance_outcomes != b.balance_outcomes:
            with_flag, without = (first, run) if a.balance_outcomes else (run, first)
            raise ReportError(f"{with_flag.path} was run with --balance-outcomes and {without.path} without: the same "
                              f"instances of {a.dataset} have other gold outcomes in each, so their scores cannot "
                              "stand side by side; report them separately")


def _rescored(run: LoadedRun, done: dict[tuple[int, str], Prediction], shared: set[str]) -> LoadedRun:
    c = run.config
    spec = METHODS.get(c.method)
    by_run = [(r, c.seed + r, [p for (pr, i), p in done.items() if pr == r and i in shared]) for r in range(c.runs)]
    scores = score_runs(c.kind, by_run, pairwise_only=bool(spec and spec.pairwise_only),
                        threshold=c.decision_threshold)
    metrics = run.metrics.model_copy(update={"runs": scores.runs, "mean": scores.mean, "std": scores.std,
                                             "calibration": scores.calibration})
    return dataclasses.replace(run, metrics=metrics)


def on_shared_instances(runs: Sequence[LoadedRun]) -> tuple[list[LoadedRun], list[SharedInstances]]:
    """The runs, each scored on the instances it shares with the other runs of its (kind, dataset), and
    the groups where that changed anything. Raises :class:`ReportError` for runs that cannot be put
    side by side (see the module docstring)."""
    groups: dict[GroupKey, list[LoadedRun]] = {}
    for run in runs:
        groups.setdefault((run.config.kind, run.config.dataset), []).append(run)
    replaced: dict[int, LoadedRun] = {}
    found: list[SharedInstances] = []
    for (kind, dataset), group in groups.items():
        _check_same_data(group)
        if len({tuple(getattr(r.config, f) for f in SELECTION_FIELDS) for r in group}) == 1:
            continue  # the same selection of the same file: the same instances
        done = {id(r): _predictions(r) for r in group}
        ids = {id(r): {i for _, i in done[id(r)]} for r in group}
        for r in group:
            if len(ids[id(r)]) < r.metrics.n_instances:
                raise ReportError(f"{r.directory.predictions.path}: predictions for {len(ids[id(r)])} of the "
                                  f"{r.metrics.n_instances} instances metrics.json scores; the file was cut short or "
                                  "is not this run's")
        shared = set.intersection(*ids.values())
        if not shared:
            listed = "; ".join(f"{r.path} scored {len(ids[id(r)])}" for r in group)
            raise ReportError(f"the runs of {dataset} ({kind}) share no instance ({listed}), so no score of one can "
                              "stand beside another's; report them separately")
        if all(ids[id(r)] == shared for r in group):
            continue
        for r in group:
            if ids[id(r)] != shared:
                replaced[id(r)] = _rescored(r, done[id(r)], shared)
        found.append(SharedInstances(kind=kind, dataset=dataset, n_shared=len(shared),
                                     own={r.path.resolve(): len(ids[id(r)]) for r in group}))
    return [replaced.get(id(r), r) for r in runs], found
