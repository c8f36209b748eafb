"""A run's configuration: the paper's build sizes per dataset, the task kind, and ``make_run_config``,
which checks the options of ``anchor eval`` and records them (no secrets) as ``RunConfig``."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from anchor.config import AnchorConfig
from anchor.embedding.server import settings_identity
from anchor.evaluation.datasets.bundled import DATASET_NAMES, bundled_file, is_factcheck_dataset
from anchor.evaluation.datasets.selection import resolve_sample
from anchor.llm.settings import LLMSettings
from anchor.methods.registry import METHODS
from anchor.rundir.records import Kind, RunConfig
from anchor.runs.errors import RunError
from anchor.runs.identity import recorded_llm
from anchor.version import __version__


def dataset_kind(name: str) -> Kind:
    if name == "common2sense-pairwise":
        return "pairwise"
    if is_factcheck_dataset(name):
        return "factcheck"
    return "decision"


def file_sha256(dataset: str, path: Path | None) -> str:
    data = Path(path).read_bytes() if path is not None else bundled_file(dataset).read_bytes()
    return hashlib.sha256(data).hexdigest()


def _recorded(spaces_from: Path | None, relative_to: Path | None) -> str | None:
    if spaces_from is None:
        return None
    if relative_to is None:
        return str(spaces_from)
    return os.path.relpath(Path(spaces_from).resolve(), Path(relative_to).resolve())


def make_run_config(
    *, dataset: str, method: str, data_path: Path | None, ablations: Sequence[str], limit: int | None, runs: int,
    seed: int, settings: LLMSettings, anchor_config: AnchorConfig | None, negation: str = "template",
    decision_threshold: float = 0.9, balance_outcomes: bool = False, spaces: str = "per-run",
    spaces_from: Path | None = None, spaces_relative_to: Path | None = None, command: str = "",
    stage: str | None = None,
    sample: str | int | None = None, sample_seed: int | None = None, max_factors: int | None = None,
    estimator: LLMSettings | None = None,
) -> RunConfig:
    """The run's configuration, checked. ``sample``/``sample_seed`` are the options as given (None: not
    given); the dataset's default protocol fills them in (a seeded 100 for the fact-checking sets).
    With ``spaces_relative_to`` (the run's own directory), ``spaces_from`` is recorded from there, so that
    a folder holding both runs can be moved or copied; without it, as given."""
    if data_path is not None and not Path(data_path).is_file():
        raise RunError(f"--data {data_path}: no such file")
    if dataset not in DATASET_NAMES:
        raise RunError(f"unknown dataset {dataset!r}; choose from {', '.join(DATASET_NAMES)}")
    if method not in METHODS:
        raise RunError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    spec = METHODS[method]
    if stage is not None and not spec.stages:
        staged = [name for name, m in METHODS.items() if m.stages]
        raise RunError(f"--stage applies only to --method {' or '.join(staged)}, not to {method!r}")
    if spec.stages and stage not in spec.stages:
        raise RunError(f"--method {method} needs --stage, one of: {', '.join(spec.stages)}"
                        + (f" (got {stage!r})" if stage is not None else ""))
    if spaces_from is not None and not Path(spaces_from).is_dir():
        raise RunError(f"--spaces-from {spaces_from}: no such run directory")
    sample_size, sample_seed = resolve_sample(dataset, sample, sample_seed)
    llm, estimator_llm = recorded_llm(settings), recorded_llm(estimator) if estimator is not None else None
    return RunConfig(
        # Absolute: the run's readers (cost, calibrate, report) may run from another folder.
        anchor_version=__version__, dataset=dataset, data_path=str(Path(data_path).resolve()) if data_path else None,
        data_sha256=file_sha256(dataset, Path(data_path) if data_path else None), kind=dataset_kind(dataset),
        method=method, ablations=list(ablations), limit=limit, runs=runs, seed=seed, negation=negation,  # type: ignore[arg-type]
        decision_threshold=decision_threshold, balance_outcomes=balance_outcomes, spaces=spaces,  # type: ignore[arg-type]
        spaces_from=_recorded(spaces_from, spaces_relative_to),
        spaces_from_base="run" if spaces_from is not None and spaces_relative_to is not None else "cwd",
        llm=llm, sample=sample_size, sample_seed=sample_seed,
        anchor_config=anchor_config.model_dump(mode="json") if anchor_config else None, command=command,
        stage=stage, method_config=spec.method_config(dataset) if spec.method_config else None,
        max_factors=max_factors, estimator=estimator_llm,
        embedder=settings_identity(settings).model_dump(mode="json") if spec.uses_anchor_config else None,
    )
