"""The calibrator kinds by name, and a calibrator file made ready to apply.

``KINDS`` maps each ``--kind`` to its class. :func:`read_calibrator` reads a file written by
``anchor calibrate fit`` (one clear error naming the file and the field that is wrong) and returns a
:class:`FileCalibrator`, what ``Anchor(calibrator=...)``, ``anchor infer --calibrator`` and
``anchor eval --calibrator`` apply: the file's record plus the fitted map, NumPy only.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import ValidationError

from anchor.calibration.beta import BetaCalibrator
from anchor.calibration.contract import Calibrator, CalibratorError, CalibratorFile
from anchor.calibration.isotonic import IsotonicCalibrator
from anchor.calibration.platt import PlattCalibrator
from anchor.calibration.temperature import TemperatureCalibrator
from anchor.files import write_atomic

KINDS: dict[str, type[Calibrator]] = {
    "platt": PlattCalibrator,
    "isotonic": IsotonicCalibrator,
    "beta": BetaCalibrator,
    "temperature": TemperatureCalibrator,
}


def make_calibrator(kind: str) -> Calibrator:
    """An unfitted calibrator of ``kind``."""
    if kind not in KINDS:
        raise CalibratorError(f"unknown calibrator kind {kind!r}; choose from {', '.join(KINDS)}")
    return KINDS[kind]()


class FileCalibrator:
    """A calibrator file, read and ready: ``calibrate(p)`` maps one raw P(O1) to the calibrated one."""

    def __init__(self, file: CalibratorFile, path: Path | None = None, sha256: str | None = None) -> None:
        self.file = file
        self.path = path
        self.sha256 = sha256
        where = f"{path}: " if path else ""
        try:
            self.calibrator = KINDS[file.kind].from_parameters(file.parameters)
        except ValidationError as exc:
            raise CalibratorError(f"{where}{_problem(exc, 'parameters')} (the {file.kind} calibrator's parameters "
                                  "are unusable)") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise CalibratorError(f"{where}parameters of the {file.kind} calibrator are unusable ({exc})") from None

    @property
    def kind(self) -> str:
        return self.file.kind

    def calibrate(self, p: float) -> float:
        q = float(self.calibrator.predict([p])[0])
        if not 0.0 <= q <= 1.0:  # NaN included; validated parameters never get here
            raise CalibratorError(f"{self.path or 'the calibrator'}: the {self.kind} calibrator mapped P(O1) = {p!r} "
                                  f"to {q!r}, not a probability")
        return q

    def mismatch(self, *, model: str | None, method: str | None, kind: str | None = None) -> str | None:
        return self.file.mismatch(model=model, method=method, kind=kind)

    def describe(self) -> dict[str, object]:
        """What a run records about the calibrator it applied (config.json)."""
        return {"path": str(self.path) if self.path else None, "sha256": self.sha256, "kind": self.kind,
                "fitted_on": self.file.fitted_on.model_dump(mode="json")}


def read_calibrator(path: Path | str, what: str = "--calibrator") -> FileCalibrator:
    """Read a calibrator file; ``CalibratorError`` names ``what`` (the flag), the file and the problem."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CalibratorError(f"{what} {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CalibratorError(f"{what} {path}: not a JSON calibrator file ({exc})") from None
    try:
        file = CalibratorFile.model_validate(data)
    except ValidationError as exc:
        raise CalibratorError(f"{what} {path}: not a calibrator file written by `anchor calibrate fit` "
                              f"({_problem(exc)})") from None
    try:
        return FileCalibrator(file, path, hashlib.sha256(raw).hexdigest())
    except CalibratorError as exc:
        raise CalibratorError(f"{what} {exc}") from None


def _problem(exc: ValidationError, prefix: str = "") -> str:
    """The first problem of ``exc`` as ``field.path: message (got value)``."""
    err = exc.errors()[0]
    field = ".".join(str(p) for p in (prefix, *err.get("loc", ())) if p != "") or "(top level)"
    got = f" (got {err['input']!r})" if "input" in err and not isinstance(err["input"], dict | list) else ""
    return f"{field}: {err.get('msg')}{got}"


def write_calibrator(file: CalibratorFile, path: Path | str) -> Path:
    return write_atomic(path, file.model_dump_json(indent=2) + "\n")
