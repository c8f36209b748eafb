"""Held-out calibration of P(O1): fit a calibrator on labelled evaluation runs, apply it, and say
honestly (cross-validated, grouped by scenario) whether it helps.

* :mod:`.contract`: the ``Calibrator`` protocol, the shared fitting rules and ``CalibratorFile``;
* :mod:`.platt`, :mod:`.isotonic`, :mod:`.beta`, :mod:`.temperature`: the four kinds;
* :mod:`.registry`: the kinds by name; reading a file into a ``FileCalibrator`` to apply;
* :mod:`.data`: the labelled probabilities of run directories, and the scenario of each instance;
* :mod:`.fit`: ``anchor calibrate fit``;
* :mod:`.folds`: scenario-grouped cross-validation folds, the same for every method;
* :mod:`.evaluate`: cross-validated figures before and after, per dataset and method;
* :mod:`.risk_coverage`: accuracy against the share answered, per run;
* :mod:`.report` and :mod:`.plots`: ``anchor calibrate report`` (Markdown, JSON, PNG).

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
