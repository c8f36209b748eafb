"""The errors anchor raises on purpose: ``AnchorError`` and its family. Messages are meant to be read
by a person.

They sit at the bottom of the package, imported by every layer (the LLM client, the embedders, the
stages, the evaluation, the command line, which turns them into one ``error:`` line)."""

from __future__ import annotations


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
