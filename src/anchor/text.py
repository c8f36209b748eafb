"""Plain-text helpers every reader of user files shares: whitespace clean-up, and one-line
descriptions of a value's type and of a validation error for messages."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError


def normalise_space(text: str) -> str:
    """Runs of whitespace collapsed to one space, ends stripped (as :class:`anchor.types.Scenario` does)."""
    return " ".join(text.split())


def kind_of(value: Any) -> str:
    """What a JSON value is, for a message: "an object", "a number", ..."""
    return {
        dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
        int: "a number", float: "a number",
    }.get(type(value), type(value).__name__)


def validation_message(exc: ValidationError) -> str:
    """The first three problems of a pydantic error, each as ``field: message``."""
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(x) for x in err.get("loc", ()))
        msg = str(err.get("msg", "invalid"))
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)
