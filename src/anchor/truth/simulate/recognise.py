"""Recognising a request: which prompt it is, and the values its template was filled with.

The table is built from :mod:`anchor.prompts` when this module is imported: every ``PromptSpec``
the package exports, by its system text, plus the logits baseline's plain system text. No prompt
wording is copied here, so a prompt reworded in ``anchor.prompts`` is still recognised. Several
prompts may share a system text (BIRD's factor prompts do); the user message then tells them
apart: each template becomes a regular expression (``{name}`` -> a named group) and the one that
matches the whole last user message is the prompt.

A server that cannot enforce a schema gets it spelt out at the end of the system message (see
``anchor.llm.openai_backend``); that hint is recognised and taken off, and the schema read from it,
so that the request is the same request whichever way its schema travelled.

Anything that cannot be placed raises :class:`Unrecognised`, naming what was not recognised.
"""

from __future__ import annotations

import json
import re
import string
from dataclasses import dataclass
from typing import Any

from anchor import prompts
from anchor.errors import FatalBackendError
from anchor.llm.prompt import PromptSpec

#: The name the logits baseline's free-text request is known by (it has no PromptSpec).
LOGITS = "LOGITS"
#: How ``anchor.llm.openai_backend`` starts the schema it spells out in a system message.
SCHEMA_HINT = "\n\nReply with a single JSON value and nothing else. It must match this JSON schema: "


class Unrecognised(FatalBackendError):
    """A request the simulated LLM cannot place (unknown prompt, scenario, or world)."""


@dataclass(frozen=True)
class Template:
    """One recognisable prompt: its name in ``anchor.prompts``, stage, system text and user pattern."""

    name: str
    stage: str
    system: str
    pattern: re.Pattern[str]
    spec: PromptSpec[Any] | None


def template_pattern(template: str) -> re.Pattern[str]:
    """A regular expression matching ``template`` filled with any values (``{name}`` -> a named
    group; a field used twice must hold the same text both times)."""
    parts: list[str] = []
    seen: set[str] = set()
    for literal, field, _spec, _conv in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if field is None:
            continue
        if field in seen:
            parts.append(f"(?P={field})")
        else:
            seen.add(field)
            parts.append(f"(?P<{field}>.*?)")
    return re.compile("".join(parts) + r"\Z", re.DOTALL)


def _table() -> dict[str, list[Template]]:
    table: dict[str, list[Template]] = {}
    for name in prompts.__all__:
        spec = getattr(prompts, name)
        if isinstance(spec, PromptSpec):
            table.setdefault(spec.system, []).append(
                Template(name, spec.stage, spec.system, template_pattern(spec.user), spec))
    table.setdefault(prompts.LOGITS_MESSAGES_SYSTEM, []).append(
        Template(LOGITS, "baseline.logits", prompts.LOGITS_MESSAGES_SYSTEM, template_pattern(prompts.LOGITS_USER),
                 None))
    return table


TEMPLATES: dict[str, list[Template]] = _table()


@dataclass(frozen=True)
class Request:
    """A recognised request: the prompt, the values of its fields, and what the answer must be."""

    template: Template
    fields: dict[str, str]
    messages: list[dict[str, str]]
    schema: dict[str, Any] | None
    seed: int
    top_logprobs: int | None
    max_tokens: int

    @property
    def name(self) -> str:
        return self.template.name

    @property
    def stage(self) -> str:
        return self.template.stage


def _short(text: str, limit: int = 100) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[:limit] + "..."


def _text(content: Any) -> str:
    """A message's content as text (OpenAI also allows a list of text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    raise Unrecognised("a message's content is neither text nor a list of text parts")


def normalise(messages: list[dict[str, Any]], schema: dict[str, Any] | None
              ) -> tuple[list[dict[str, str]], dict[str, Any] | None]:
    """Messages as plain role/content pairs with any spelt-out schema taken off the system text,
    and the schema (from the request, else from that hint)."""
    out: list[dict[str, str]] = []
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise Unrecognised("a message has no role")
        out.append({"role": m["role"], "content": _text(m.get("content", ""))})
    if out and out[0]["role"] == "system" and SCHEMA_HINT in out[0]["content"]:
        system, _, hint = out[0]["content"].partition(SCHEMA_HINT)
        out[0] = {"role": "system", "content": system}
        if schema is None:
            try:
                schema = json.loads(hint)
            except json.JSONDecodeError:
                raise Unrecognised("the schema spelt out in the system message is not JSON") from None
    return out, schema


def recognise(messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None, seed: int | None,
              top_logprobs: int | None = None, max_tokens: int = 512) -> Request:
    """The request ``messages`` make, or :class:`Unrecognised` naming what could not be placed."""
    plain, schema = normalise(messages, json_schema)
    if not plain or plain[0]["role"] != "system":
        raise Unrecognised("the request has no system message, so its prompt cannot be told")
    users = [m for m in plain if m["role"] == "user"]
    if not users or plain[-1]["role"] != "user":
        raise Unrecognised("the request does not end with a user message")
    system = plain[0]["content"]
    candidates = TEMPLATES.get(system)
    if candidates is None:
        raise Unrecognised(f"unrecognised system message (no anchor prompt starts {_short(system)!r})")
    user = plain[-1]["content"]
    for template in candidates:
        found = template.pattern.match(user)
        if found is not None:
            return Request(template, dict(found.groupdict()), plain, schema, 0 if seed is None else int(seed),
                           top_logprobs, max_tokens)
    names = ", ".join(t.name for t in candidates)
    raise Unrecognised(f"the user message fits no template of prompt {names} (it starts {_short(user)!r})")


# --------------------------------------------------------------------------- list layouts in the fields

_KEYED = re.compile(r"^([A-Z]\d+):\s?(.*)$")
_NUMBERED = re.compile(r"^\d+\.\s?(.*)$")


def keyed_lines(text: str, what: str) -> list[tuple[str, str]]:
    """``F1: text`` (or ``L1:``, ``V1:``) lines as (key, text)."""
    out = []
    for line in text.split("\n"):
        if not line.strip():
            continue
        m = _KEYED.match(line)
        if m is None:
            raise Unrecognised(f"{what}: a line is not 'KEY: text' ({_short(line)!r})")
        out.append((m.group(1), m.group(2)))
    return out


def numbered_lines(text: str, what: str) -> list[str]:
    """``1. text`` lines as texts."""
    out = []
    for line in text.split("\n"):
        if not line.strip():
            continue
        m = _NUMBERED.match(line)
        if m is None:
            raise Unrecognised(f"{what}: a line is not '1. text' ({_short(line)!r})")
        out.append(m.group(1))
    return out


def bullet_lines(text: str, what: str) -> list[str]:
    """``- text`` lines as texts."""
    out = []
    for line in text.split("\n"):
        if not line.strip():
            continue
        if not line.startswith("- "):
            raise Unrecognised(f"{what}: a line is not '- text' ({_short(line)!r})")
        out.append(line[2:])
    return out
