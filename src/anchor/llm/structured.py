"""Structured output: JSON schemas for requests, and tolerant parsing of what comes back.

Servers that honour ``response_format`` return bare JSON; others (or small models) wrap it in
prose, code fences or a "Final answer:" line. We extract every JSON value in the text and keep
the last one that validates, because answers put their conclusion at the end.
"""

from __future__ import annotations

import copy
import json
import threading
import weakref
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)


class OutputInvalid(ValueError):
    """The answer could not be turned into the declared schema."""


#: Inlined schemas by answer class. Built once per class: pydantic regenerating the schema on every
#: request cost more CPU than the rest of the client's work on it. Weak keys, so that the classes
#: the schema factories make (``anchor.prompts.schemas``, themselves cached) can still go.
_INLINED: weakref.WeakKeyDictionary[type[BaseModel], dict[str, Any]] = weakref.WeakKeyDictionary()
_INLINED_LOCK = threading.Lock()


def inline_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with every ``$ref`` inlined.

    Grammar converters and some servers handle ``$defs`` poorly; an inlined schema works
    everywhere. Titles are dropped since they only cost prompt tokens.

    The same dict is returned for every call with one class: it is serialised into requests and
    cache keys, never changed (copy it first to change it).
    """
    with _INLINED_LOCK:
        found = _INLINED.get(model)
    if found is None:
        found = _build_inline_schema(model)
        with _INLINED_LOCK:
            found = _INLINED.setdefault(model, found)
    return found


def _build_inline_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def resolve(node: Any, depth: int = 0) -> Any:
        if depth > 32:
            raise ValueError(f"schema of {model.__name__} is too deeply nested or recursive")
        if isinstance(node, dict):
            if "$ref" in node:
                name = node["$ref"].rsplit("/", 1)[-1]
                target = copy.deepcopy(defs[name])
                extra = {k: v for k, v in node.items() if k != "$ref"}
                target.update(extra)
                return resolve(target, depth + 1)
            out = {k: resolve(v, depth + 1) for k, v in node.items() if k != "title"}
            if "properties" in out:
                # Closed objects: grammars and strict servers then emit exactly the declared keys.
                out.setdefault("additionalProperties", False)
            return out
        if isinstance(node, list):
            return [resolve(v, depth + 1) for v in node]
        return node

    return resolve(schema)


def json_candidates(text: str) -> list[Any]:
    """Every JSON object or array that can be decoded from ``text``, outermost ones, in order."""
    stripped = text.strip()
    try:
        return [json.loads(stripped)]
    except (json.JSONDecodeError, ValueError):
        pass
    decoder = json.JSONDecoder()
    found: list[Any] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in "{[":
            try:
                value, end = decoder.raw_decode(text, i)
            except (json.JSONDecodeError, ValueError):
                i += 1
                continue
            found.append(value)
            i = end
        else:
            i += 1
    return found


def _wrap_if_single_field(model: type[BaseModel], value: Any) -> Any:
    """Accept a bare list/scalar when the schema is an object with exactly one field."""
    fields = model.model_fields
    if len(fields) == 1 and not isinstance(value, dict):
        (name,) = fields
        return {name: value}
    return value


def parse_structured(text: str, model: type[T]) -> T:
    """Validate ``text`` against ``model``; raise ``OutputInvalid`` with a short reason."""
    candidates = json_candidates(text)
    if not candidates:
        reason = "no JSON found in the answer" if text.strip() else "empty answer"
        raise OutputInvalid(reason)
    last_error: str = ""
    for value in reversed(candidates):
        try:
            return model.model_validate(_wrap_if_single_field(model, value))
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first.get("loc", ())) or "<root>"
            last_error = f"schema violation at {loc}: {first.get('msg')}"
    raise OutputInvalid(last_error)
