"""A scripted backend for unit tests only: answers come from a Python function.

It lets a test drive each stage with chosen answers (including broken ones) without a model.
Never use it to produce results.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from anchor.llm.base import Message, RawCompletion


@dataclass
class ScriptedRequest:
    messages: list[Message]
    schema_name: str
    json_schema: dict[str, Any] | None
    temperature: float
    max_tokens: int
    seed: int | None
    top_logprobs: int | None

    @property
    def user(self) -> str:
        return self.messages[-1]["content"]

    @property
    def system(self) -> str:
        return self.messages[0]["content"] if self.messages and self.messages[0]["role"] == "system" else ""


Reply = str | dict | list | RawCompletion | BaseException
Responder = Callable[[ScriptedRequest], Reply]


@dataclass
class ScriptedBackend:
    """Calls ``responder`` for every request; dicts and lists are sent back as JSON text."""

    responder: Responder
    name: str = "scripted"
    kind: str = "scripted"
    model: str = "scripted-model"
    max_parallel: int = 4
    requests: list[ScriptedRequest] = field(default_factory=list)
    #: A context window to pretend to have (prompts are then fitted to it by character estimate).
    context_tokens: int | None = None

    @property
    def supports_logprobs(self) -> bool:
        return True

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
    ) -> RawCompletion:
        request = ScriptedRequest(messages, schema_name, json_schema, temperature, max_tokens, seed, top_logprobs)
        self.requests.append(request)
        reply = self.responder(request)
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, RawCompletion):
            return reply
        text = reply if isinstance(reply, str) else json.dumps(reply)
        return RawCompletion(text=text, finish_reason="stop", prompt_tokens=len(str(messages)) // 4,
                             completion_tokens=max(1, len(text) // 4))

    def calls_for(self, schema_name: str) -> list[ScriptedRequest]:
        return [r for r in self.requests if r.schema_name == schema_name]

    async def aclose(self) -> None:
        return None
