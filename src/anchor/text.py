"""Plain-text helpers every reader of user files shares: whitespace clean-up, whether two texts read
the same, and one-line descriptions of a value's type and of a validation error for messages."""

from __future__ import annotations

import functools
import unicodedata
from typing import Any

from pydantic import ValidationError


def normalise_space(text: str) -> str:
    """Runs of whitespace collapsed to one space, ends stripped (as :class:`anchor.types.Scenario` does)."""
    return " ".join(text.split())


@functools.lru_cache(maxsize=4096)  # a file's rows repeat their group's outcomes
def comparable_text(text: str) -> str:
    """``text`` as compared for sameness: compatibility-normalised (NFKC: a full-width letter or a
    ligature is its plain form), without invisible format characters (zero-width spaces and joiners,
    soft hyphens, byte-order marks), case-folded, whitespace collapsed. Two texts that read the same
    compare equal, so "Alice wins." and "Alice\u200b wins." are one outcome, not two."""
    if text.isascii():  # the usual case: nothing to normalise, no format character
        return normalise_space(text.casefold())
    text = unicodedata.normalize("NFKC", text)
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return normalise_space(unicodedata.normalize("NFKC", text.casefold()))


def same_text(a: str, b: str) -> bool:
    """Do ``a`` and ``b`` read the same (see :func:`comparable_text`)?"""
    return comparable_text(a) == comparable_text(b)


def kind_of(value: Any) -> str:
    """What a JSON value is, for a message: "an object", "a number", ..."""
    kind = {
        dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
        int: "a number", float: "a number",
    }.get(type(value))
    return kind or ("an object" if isinstance(value, dict) else type(value).__name__)


def validation_message(exc: ValidationError) -> str:
    """The first three problems of a pydantic error, each as ``field: message``."""
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(x) for x in err.get("loc", ()))
        msg = str(err.get("msg", "invalid"))
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)
