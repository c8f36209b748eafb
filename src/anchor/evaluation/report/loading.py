"""Reading a finished run directory (``config.json`` and ``metrics.json``) for the report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from anchor.rundir import RunDirectory
from anchor.rundir.records import MetricsReport, RunConfig


class ReportError(ValueError):
    """A run directory cannot be reported on (missing, unfinished, or malformed files)."""


@dataclass(frozen=True)
class LoadedRun:
    """One finished run directory: its configuration, its metrics and where it lives."""

    config: RunConfig
    metrics: MetricsReport
    path: Path

    @property
    def directory(self) -> RunDirectory:
        """The run directory, read with the report's error."""
        return RunDirectory(self.path, error=ReportError)


def load_run(dir: Path) -> LoadedRun:  # noqa: A002 - the name is part of the agreed API
    """Read ``config.json`` and ``metrics.json`` from a run directory.

    Raises :class:`ReportError` naming the offending file when the directory or a file is missing (a
    missing ``metrics.json`` next to a ``config.json`` means the run has not finished), when a file is not
    JSON, when it does not match the models of :mod:`anchor.rundir.records`, or when the directory was
    written by a newer anchor (its schema version).
    """
    path = Path(dir)
    run = RunDirectory(path, error=ReportError)
    if not path.exists():
        raise ReportError(f"{path}: no such run directory")
    if not path.is_dir():
        raise ReportError(f"{path}: not a directory (pass the run directory, not a file inside it)")
    if not run.is_run() and not run.has_metrics():
        raise ReportError(
            f"{path}: not an evaluation run directory (no config.json and no metrics.json); "
            "pass directories written by `anchor eval` or `anchor predict`"
        )
    if not run.is_run():
        raise ReportError(
            f"{run.config_path}: missing, although metrics.json is there; the run directory is incomplete "
            "(was config.json deleted or moved?)"
        )
    run.schema_version()  # a newer layout is refused before anything else is said of it
    if not run.has_metrics():
        done = run.count_predictions()
        so_far = f" ({done} prediction{'s' if done != 1 else ''} written so far)" if done else ""
        raise ReportError(
            f"{run.metrics_path}: no metrics.json yet — the run has not finished{so_far}; "
            "rerun `anchor eval` with the same arguments to resume"
        )
    config = run.read_config()
    metrics = run.read_metrics()
    if config.kind != metrics.kind:
        raise ReportError(
            f"{path}: config.json says kind {config.kind!r} but metrics.json says {metrics.kind!r}; "
            "the two files come from different runs"
        )
    return LoadedRun(config=config, metrics=metrics, path=path)
