"""``anchor calibrate fit``: one calibrator fitted on every answered instance of the runs given.

The runs must share one method and one model (a calibrator corrects the habits of one method on
one model; mixing them would correct neither); they may cover several datasets. Nothing is held
out here: the figures that say whether calibrating helps are ``anchor calibrate report``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from anchor.calibration.contract import FEW_LABELS, CalibratorError, CalibratorFile, FittedOn
from anchor.calibration.registry import make_calibrator
from anchor.evaluation.calibrate.data import LabelledRun, load_labelled_run
from anchor.version import __version__


def load_runs(run_dirs: Sequence[Path | str]) -> list[LabelledRun]:
    """Each run directory once (the same directory given twice counts once), read for calibration."""
    seen: set[Path] = set()
    runs = []
    for d in run_dirs:
        key = Path(d).resolve()
        if key not in seen:
            seen.add(key)
            runs.append(load_labelled_run(d))
    if not runs:
        raise CalibratorError("no run directories given")
    return runs


def fit_calibrator(run_dirs: Sequence[Path | str], kind: str) -> CalibratorFile:
    """Fit a calibrator of ``kind`` on the answered instances of ``run_dirs``."""
    runs = load_runs(run_dirs)
    make_calibrator(kind)  # an unknown kind fails before anything is read further
    first = runs[0]
    for run in runs[1:]:
        for what, a, b in (("method", first.method, run.method), ("model", first.model, run.model)):
            if a != b:
                raise CalibratorError(f"the runs must share one {what}: {first.path} has {a!r}, {run.path} has "
                                      f"{b!r}; fit one calibrator per {what}")
    answered = [i for r in runs for i in r.answered]
    unanswered = sum(len(r.instances) for r in runs) - len(answered)
    if len(answered) < 2:
        raise CalibratorError(f"only {len(answered)} answered instance(s) in {', '.join(str(r.path) for r in runs)}: "
                              "too few to fit a calibrator")
    p = np.array([i.p_raw for i in answered], dtype=float)
    y = np.array([i.outcome1 for i in answered], dtype=float)
    calibrator = make_calibrator(kind).fit(p, y)
    n1 = int(y.sum())
    notes = []
    if n1 in (0, len(y)):
        which = "outcome 1" if n1 else "outcome 2"
        notes.append(f"Every one of the {len(y)} instances has {which} as its gold outcome: this calibrator only "
                     "learned to lean towards it (for Plasma and Today, evaluate with --balance-outcomes).")
    if len(y) < FEW_LABELS:
        notes.append(f"Fitted on {len(y)} labelled instances only; its held-out figures (anchor calibrate report) "
                     "say how much to trust it.")
    if unanswered:
        notes.append(f"{unanswered} instance(s) without a probability (unknown or failed) were left out; the "
                     "calibrator maps answers and never changes which instances are answered.")
    small = any(r.small_model for r in runs)
    if small:
        notes.append("Fitted on answers of the embedded 135M model: a pipeline check, not a calibrator to use.")
    fitted_on = FittedOn(
        runs=[str(r.path) for r in runs], datasets=list(dict.fromkeys(r.dataset for r in runs)), method=first.method,
        model=first.model, backend=first.config.llm.get("backend"), n=len(y), n_outcome1=n1,
        n_unanswered=unanswered, kinds=sorted({r.config.kind for r in runs}), small_model=small, date=datetime.now(UTC).isoformat(timespec="seconds"),
        anchor_version=__version__)
    return CalibratorFile(kind=kind, parameters=calibrator.parameters(), fitted_on=fitted_on, notes=notes)
