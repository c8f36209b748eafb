"""The backend protocol: one raw chat completion, no retries, no caching, no parsing.

A backend may also offer ``complete_choices`` (``SamplingBackend``): several answers to one
request (the OpenAI API's ``n``), for self-consistency samples of one prompt. Servers differ: vLLM
and OpenAI honour ``n``, llama.cpp's server answers once whatever ``n`` says, some hosted APIs
refuse it. A backend finds out on its first such request and says so in ``honours_n``; the
client then stops asking and sends separate requests.
"""

from __future__ import annotations

import contextvars
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

#: A request the server refused for its shape, and that the backend asks again in another shape: a
#: structured-output format it does not take, or several answers (``n``) in one request.
Refusal = Literal["format", "n"]


class AttemptWatch(Protocol):
    """What the transport is told, as it happens, of one attempt a backend makes (see :func:`note_sending`)."""

    def sending(self) -> None: ...

    def refused(self, kind: Refusal) -> None: ...


_attempt: contextvars.ContextVar[AttemptWatch | None] = contextvars.ContextVar("anchor_attempt", default=None)


def note_sending() -> None:
    """Called by a backend that says so (``Backend.notes_sending``) just before a request leaves for the
    server: the transport records the request as sent then, not while it still waits in the backend (for
    the verdict on the output format, say), so that a stop never counts a request that never left."""
    watch = _attempt.get()
    if watch is not None:
        watch.sending()


def note_refused(kind: Refusal) -> None:
    """Called by a backend as the server refuses a request's shape, before it asks again: the server
    received that request, so the transport records it now, and a process stopped during the next
    attempt still counts it."""
    watch = _attempt.get()
    if watch is not None:
        watch.refused(kind)


def watching_attempt(watch: AttemptWatch) -> contextvars.Token[AttemptWatch | None]:
    """Have :func:`note_sending` and :func:`note_refused` tell ``watch`` (undone with the returned token)."""
    return _attempt.set(watch)


def unwatch_attempt(token: contextvars.Token[AttemptWatch | None]) -> None:
    _attempt.reset(token)


class TokenLogprob(BaseModel):
    token: str
    logprob: float
    top: dict[str, float] = Field(default_factory=dict, description="Alternatives at this position.")


class RawCompletion(BaseModel):
    text: str
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    logprobs: list[TokenLogprob] | None = None
    format_fallbacks: int = Field(default=0, description="Extra requests the backend made because the server "
                                                         "refused a structured-output format.")


Message = dict[str, str]


@runtime_checkable
class Backend(Protocol):
    """One raw round trip to a chat model.

    Implementations raise ``TransientBackendError`` for failures worth retrying and
    ``FatalBackendError`` for the rest; the client owns retries, caching and validation.
    """

    #: Shown in messages and recorded with artefacts; never carries credentials.
    name: str
    #: The kind of backend (not its address): part of every cache key, so that a server and the
    #: embedded model never share answers while a server that moved to another port still does.
    kind: str
    model: str
    #: Most requests worth running at once against this backend.
    max_parallel: int

    async def complete(
        self,
        messages: list[Message],
        *,
        json_schema: dict[str, Any] | None,
        schema_name: str,
        temperature: float,
        max_tokens: int,
        seed: int | None,
        top_logprobs: int | None,
    ) -> RawCompletion: ...

    @property
    def supports_logprobs(self) -> bool: ...

    async def aclose(self) -> None: ...


class MultiCompletion(BaseModel):
    """The answers to one request for several samples, and the request's token counts."""

    choices: list[RawCompletion]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    format_fallbacks: int = Field(default=0, description="Extra requests spent finding a response format the "
                                                         "server accepts (as on RawCompletion).")
    n_refused: int = Field(default=0, description="Requests for several answers the server refused (HTTP 400) "
                                                  "before the same request was sent for one.")


@runtime_checkable
class SamplingBackend(Protocol):
    """A backend that can return several sampled answers to one request."""

    honours_n: bool | None
    """None until a request for several answers has been made; then whether the backend gave
    as many as were asked for."""

    async def complete_choices(
        self,
        messages: list[Message],
        *,
        n: int,
        json_schema: dict[str, Any] | None,
        schema_name: str,
        temperature: float,
        max_tokens: int,
        seed: int | None,
    ) -> MultiCompletion:
        """Up to ``n`` answers (fewer when the server ignores ``n``), in the server's order."""
        ...
