"""What an ``anchor predict`` run reads and how: the cases file with its reading settings, and the
run's configuration (a ``RunConfig`` of kind ``cases``, recorded in ``config.json``)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchor.calibration.registry import FileCalibrator
from anchor.cases import CaseFormat, CaseLimits, CaseStream, detect_format, read_cases
from anchor.cases.columns import check_column_mapping
from anchor.config import AnchorConfig
from anchor.embedding.server import settings_identity
from anchor.llm.settings import LLMSettings
from anchor.methods.registry import METHODS
from anchor.rundir.records import RunConfig
from anchor.runs.errors import RunError
from anchor.runs.identity import recorded_llm
from anchor.version import __version__

#: The dataset name a predict run records (its kind is ``cases``).
CASES_DATASET = "cases"
#: A case is decided for outcome 1 above this P(O1), for outcome 2 below it (a tie is no decision).
CASES_THRESHOLD = 0.5


@dataclass(frozen=True)
class CasesInput:
    """A cases file and how to read it: its format, the column mapping and the length limits."""

    path: Path
    format: CaseFormat
    columns: dict[str, str] = field(default_factory=dict)
    limits: CaseLimits = field(default_factory=CaseLimits)

    @classmethod
    def of(cls, path: Path | str, *, format: str | None = None, columns: dict[str, str] | None = None,
           limits: CaseLimits | None = None) -> CasesInput:
        """Checked: the format known (from ``format`` or the suffix) and the mapping well formed."""
        path = Path(path)
        return cls(path=path, format=detect_format(str(path), format), columns=check_column_mapping(dict(columns or {})),
                   limits=limits or CaseLimits())

    def describe(self) -> dict[str, Any]:
        """``RunConfig.cases``: what a reader of the run needs to read the file the same way."""
        return {"format": self.format, "columns": dict(sorted(self.columns.items())),
                "limits": self.limits.model_dump()}

    def open(self, *, strict: bool = False, duplicates: Mapping[int, int] | None = None) -> CaseStream:
        return read_cases(self.path, format=self.format, columns=self.columns, limits=self.limits, strict=strict,
                          duplicates=duplicates)


def file_digest(path: Path) -> str:
    """sha256 of a file, read in chunks (a cases file may be large)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        raise RunError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    return digest.hexdigest()


def check_predict_method(method: str, stage: str | None) -> None:
    """Refuse, in one line, a method that cannot answer a case on its own (the error names the setting at
    fault in its ``field``)."""
    spec = METHODS.get(method)
    if spec is None:
        raise RunError(f"unknown method {method!r}; choose from {', '.join(METHODS)}", field="method")
    if spec.pairwise_only:
        raise RunError(f"--method {method} compares two conditions of a pair; a case has one condition",
                        field="method")
    if spec.oracle:
        raise RunError(f"--method {method} is an oracle (it sees the gold outcome), not a way to predict a case",
                        field="method")
    if stage is not None and not spec.stages:
        raise RunError(f"--stage applies only to methods with stages, not to {method!r}", field="stage")
    if spec.stages and stage not in spec.stages:
        raise RunError(f"--method {method} needs --stage, one of: {', '.join(spec.stages)}", field="stage")


def method_settings(method: str, anchor_config: AnchorConfig | None,
                    ablations: Sequence[str]) -> tuple[AnchorConfig | None, list[str]]:
    """The ANCHOR settings ``method`` runs under: all of them for ANCHOR's methods, none for another (a
    service set up once for every method hands each only what it uses)."""
    if METHODS[method].uses_anchor_config:
        return anchor_config, list(ablations)
    return None, []


def make_predict_config(
    *, cases: CasesInput | None, method: str, settings: LLMSettings, anchor_config: AnchorConfig | None,
    ablations: Sequence[str] = (), stage: str | None = None, limit: int | None = None,
    spaces: Path | None = None, command: str = "", estimator: LLMSettings | None = None,
    calibrator: FileCalibrator | None = None,
) -> RunConfig:
    """The run's configuration, checked. ``spaces`` is a store of per-scenario artefacts shared with
    other runs (None: the run directory's own folders); artefacts are named by their content there,
    so runs with other settings never take each other's.

    ``cases`` None: the configuration a case answered on its own runs under (the service's online
    answers), the same as a run's apart from the file it would record. The model and the embedder are
    recorded as the settings name them; a run records what the server and the embedder say once they
    are ready (:func:`anchor.runs.session.resolve_config`)."""
    check_predict_method(method, stage)
    if cases is not None and not cases.path.is_file():
        raise RunError(f"{cases.path}: no such file")
    spec = METHODS[method]
    llm, estimator_llm = recorded_llm(settings), recorded_llm(estimator) if estimator is not None else None
    return RunConfig(
        # Absolute: the run's readers (cost, calibrate, report) may run from another folder.
        anchor_version=__version__, dataset=CASES_DATASET,
        data_path=str(cases.path.resolve()) if cases is not None else None,
        data_sha256=file_digest(cases.path) if cases is not None else "", kind="cases", method=method,
        ablations=list(ablations), limit=limit,
        runs=1, seed=settings.seed, decision_threshold=CASES_THRESHOLD, spaces="shared",
        spaces_from=str(spaces) if spaces is not None else None, llm=llm,
        anchor_config=anchor_config.model_dump(mode="json") if anchor_config else None, command=command,
        stage=stage, method_config=spec.method_config(CASES_DATASET) if spec.method_config else None,
        estimator=estimator_llm, cases=cases.describe() if cases is not None else None, artefact_keys="content",
        calibrator=calibrator.describe() if calibrator is not None else None,
        embedder=settings_identity(settings).model_dump(mode="json") if spec.uses_anchor_config else None,
    )
