"""The backend protocol: one raw chat completion, no retries, no caching, no parsing."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field


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

    name: str
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
