"""Reading a finished run directory (``config.json`` and ``metrics.json``) for the report."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from anchor.evaluation.results import MetricsReport, RunConfig


class ReportError(ValueError):
    """A run directory cannot be reported on (missing, unfinished, or malformed files)."""


@dataclass(frozen=True)
class LoadedRun:
    """One finished run directory: its configuration, its metrics and where it lives."""

    config: RunConfig
    metrics: MetricsReport
    path: Path


def _read_model(path: Path, model: type[RunConfig] | type[MetricsReport]) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "the file may be truncated or hand-edited"
        ) from exc
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}"
            for err in exc.errors()[:5]
        )
        more = f" (+{exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
        raise ReportError(
            f"{path}: does not match {model.__name__} ({problems}{more}); "
            "was it written by a different version of anchor?"
        ) from exc


def load_run(dir: Path) -> LoadedRun:  # noqa: A002 - the name is part of the agreed API
    """Read ``config.json`` and ``metrics.json`` from a run directory.

    Raises :class:`ReportError` naming the offending file when the directory or a file is missing (a
    missing ``metrics.json`` next to a ``config.json`` means the run has not finished), when a file is not
    JSON, or when it does not match the models of :mod:`anchor.evaluation.results`.
    """
    path = Path(dir)
    if not path.exists():
        raise ReportError(f"{path}: no such run directory")
    if not path.is_dir():
        raise ReportError(f"{path}: not a directory (pass the run directory, not a file inside it)")
    config_path, metrics_path = path / "config.json", path / "metrics.json"
    if not config_path.exists() and not metrics_path.exists():
        raise ReportError(
            f"{path}: not an evaluation run directory (no config.json and no metrics.json); "
            "pass directories written by `anchor eval`"
        )
    if not metrics_path.exists():
        done = _count_lines(path / "predictions.jsonl")
        so_far = f" ({done} prediction{'s' if done != 1 else ''} written so far)" if done else ""
        raise ReportError(
            f"{metrics_path}: no metrics.json yet — the run has not finished{so_far}; "
            "rerun `anchor eval` with the same arguments to resume"
        )
    if not config_path.exists():
        raise ReportError(
            f"{config_path}: missing, although metrics.json is there; the run directory is incomplete "
            "(was config.json deleted or moved?)"
        )
    config = _read_model(config_path, RunConfig)
    metrics = _read_model(metrics_path, MetricsReport)
    if config.kind != metrics.kind:
        raise ReportError(
            f"{path}: config.json says kind {config.kind!r} but metrics.json says {metrics.kind!r}; "
            "the two files come from different runs"
        )
    return LoadedRun(config=config, metrics=metrics, path=path)


def _count_lines(path: Path) -> int:
    try:
        with path.open("rb") as fh:
            return sum(1 for line in fh if line.strip())
    except OSError:
        return 0
