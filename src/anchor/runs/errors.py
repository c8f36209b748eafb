"""The error of a run (of any kind: eval, predict, a service's job or answer) that cannot start or go on,
and the warning of one that starts with less than it was asked for."""

from __future__ import annotations

from anchor.errors import AnchorError


class RunError(AnchorError):
    """A run (of any kind: eval, predict, a service's answer or job) that cannot start or go on: bad arguments,
    a method that cannot answer this input, a directory holding another run.

    ``field``: the setting at fault, by its name without dashes (``method``, ``stage``), when one is; the
    command line names it as its flag, the service as the request's field."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class WorkersCapped(UserWarning):
    """``--workers`` asked for more helpers than could have work: as many as the run's scenario groups (a
    group is answered by one helper) and, for processes, the machine's cores are started."""
