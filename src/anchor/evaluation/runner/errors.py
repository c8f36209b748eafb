"""The error of an evaluation that cannot start or go on."""

from __future__ import annotations

from anchor.errors import AnchorError


class EvalError(AnchorError):
    """An evaluation that cannot start or go on (bad arguments, a directory holding another run)."""
