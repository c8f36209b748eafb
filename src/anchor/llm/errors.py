"""Errors raised by the LLM layer, and how long a server asked to wait before a retry. Messages
are meant to be read by a person."""

from __future__ import annotations

import email.utils
import time
from typing import Any


class AnchorError(Exception):
    """Base class of every error anchor raises on purpose."""


class ConfigurationError(AnchorError):
    """The backend cannot be set up as configured (missing model file, bad URL, ...)."""


class BackendError(AnchorError):
    """A request to the backend failed."""


class TransientBackendError(BackendError):
    """A failure worth retrying: HTTP 429/5xx, connection reset, time-out."""

    def __init__(self, message: str, *, retry_after: float | None = None, kind: str = "transient") -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.kind = kind


def retry_after_seconds(headers: Any) -> float | None:
    """Read ``Retry-After`` (seconds or an HTTP date) or ``retry-after-ms`` from response headers."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
        value = headers.get("retry-after")
    except Exception:  # headers of an unexpected type: no hint
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class FatalBackendError(BackendError):
    """A failure that retrying will not fix: bad request, authentication, unknown model."""


class RequestRejected(FatalBackendError):
    """The server refused this particular request (e.g. HTTP 400 or 413): retrying it will not help,
    but other requests may well succeed."""


class RetryBudgetExhausted(BackendError):
    """Transient failures went on past the configured number of retries."""


class LLMOutputError(AnchorError):
    """The model kept answering with output that does not fit the declared schema."""

    def __init__(self, stage: str, attempts: int, last_answer: str, reason: str) -> None:
        shown = last_answer if len(last_answer) <= 600 else last_answer[:600] + " ...[truncated]"
        super().__init__(
            f"stage '{stage}': no valid answer after {attempts} attempt(s); last problem: {reason}; "
            f"last answer: {shown!r}"
        )
        self.stage = stage
        self.attempts = attempts
        self.last_answer = last_answer
        self.reason = reason


class LogprobsUnavailable(AnchorError):
    """The backend does not return token log-probabilities."""
