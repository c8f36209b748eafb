"""Calibrators of P(O1): fitted on arrays of probabilities and labels, stored as JSON, applied with
NumPy by ``Anchor`` (``calibrator=``), ``anchor infer``/``explain`` and the run engine.

* :mod:`.contract`: the ``Calibrator`` protocol, the shared fitting rules and ``CalibratorFile``;
* :mod:`.platt`, :mod:`.isotonic`, :mod:`.beta`, :mod:`.temperature`: the four kinds;
* :mod:`.registry`: the kinds by name; reading a file into a ``FileCalibrator`` to apply.

Fitting them on labelled evaluation runs and the held-out figures that say whether they help
(``anchor calibrate``) are the evaluation's: :mod:`anchor.evaluation.calibrate`. Nothing here
imports the evaluation.

Only the light parts are imported here (NumPy and pydantic): applying a calibrator must not cost
``anchor infer`` scikit-learn's import.
"""

from anchor.calibration.contract import (
    Calibrator,
    CalibratorError,
    CalibratorFile,
    CalibratorMismatchWarning,
    FittedOn,
)
from anchor.calibration.registry import (
    KINDS,
    FileCalibrator,
    make_calibrator,
    read_calibrator,
    write_calibrator,
)

__all__ = [
    "KINDS",
    "Calibrator",
    "CalibratorError",
    "CalibratorFile",
    "CalibratorMismatchWarning",
    "FileCalibrator",
    "FittedOn",
    "make_calibrator",
    "read_calibrator",
    "write_calibrator",
]
