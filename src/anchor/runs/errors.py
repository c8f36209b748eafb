"""The error of an evaluation that cannot start or go on, and the warning of one that starts with less
than it was asked for."""

from __future__ import annotations

from anchor.errors import AnchorError


class EvalError(AnchorError):
    """An evaluation that cannot start or go on (bad arguments, a directory holding another run)."""


class WorkersCapped(UserWarning):
    """``--workers`` asked for more helpers than could have work: as many as the run's scenario groups (a
    group is answered by one helper) and, for processes, the machine's cores are started."""
