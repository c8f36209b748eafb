"""The path the README and the data provenance name for the sampling protocol; the module itself is
:mod:`anchor.evaluation.datasets.sampling`."""

from anchor.evaluation.datasets.sampling import *  # noqa: F403
from anchor.evaluation.datasets.sampling import __all__  # noqa: F401
