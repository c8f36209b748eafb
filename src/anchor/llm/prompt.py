"""A prompt with its declared output schema. Every prompt anchor sends is one of these
(see ``anchor.prompts``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from anchor.llm.base import Message

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class Example:
    """One few-shot turn: the user's text and the assistant's answer (an instance of the schema)."""

    user: str
    answer: BaseModel | str


@dataclass(frozen=True)
class PromptSpec(Generic[T]):
    """System text, few-shot examples and a user template, plus the schema the answer must fit.

    ``user`` is a ``str.format`` template; values are passed to ``render``. Lists and dicts are
    rendered as JSON so that item boundaries stay unambiguous. ``schema`` is None when the answer's
    shape depends on the request (how many items, which strings); the caller then passes the
    schema built by the matching factory in ``anchor.prompts``.
    """

    stage: str
    system: str
    user: str
    schema: type[T] | None
    examples: tuple[Example, ...] = ()
    max_tokens: int = 512
    temperature: float = 0.0
    notes: str = field(default="", compare=False)

    def render(self, **values: Any) -> list[Message]:
        rendered = {k: _as_text(v) for k, v in values.items()}
        try:
            user = self.user.format(**rendered)
        except KeyError as exc:
            raise TypeError(f"prompt '{self.stage}' needs a value for {exc}") from None
        # New dicts on every call: a caller may change its messages without changing the template's.
        messages: list[Message] = [{"role": role, "content": content} for role, content in self._fixed_turns]
        messages.append({"role": "user", "content": user})
        return messages

    @cached_property
    def _fixed_turns(self) -> tuple[tuple[str, str], ...]:
        """The system text and the few-shot turns, the same for every request: built once per template
        (serialising the example answers with pydantic on every request was a cost per request)."""
        turns = [("system", self.system)]
        for ex in self.examples:
            turns.append(("user", ex.user))
            turns.append(("assistant", ex.answer if isinstance(ex.answer, str) else ex.answer.model_dump_json()))
        return tuple(turns)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
