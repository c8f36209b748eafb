"""BIRD's seven-level verbal scale: reading an answer, reconciling the two outcomes, and the target.

The LLM judges each outcome on the scale *very unlikely ... very likely*; the training target is
a number read off O1's (reconciled) level. Two parsers and two reconciliation rules exist:

* the defaults read the scale case-insensitively and reconcile the two answers symmetrically;
* ``case_sensitive=True`` and ``rule="original"`` reproduce the reference code, bugs included
  (a lowercase answer becomes *neutral*; (very likely, likely) flips to 0.2).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict


class VerbalLevel(StrEnum):
    VERY_UNLIKELY = "very unlikely"
    UNLIKELY = "unlikely"
    SOMEWHAT_UNLIKELY = "somewhat unlikely"
    NEUTRAL = "neutral"
    SOMEWHAT_LIKELY = "somewhat likely"
    LIKELY = "likely"
    VERY_LIKELY = "very likely"


#: Levels as the prompt lists them, from most to least likely.
SCALE: tuple[VerbalLevel, ...] = (
    VerbalLevel.VERY_LIKELY, VerbalLevel.LIKELY, VerbalLevel.SOMEWHAT_LIKELY, VerbalLevel.NEUTRAL,
    VerbalLevel.SOMEWHAT_UNLIKELY, VerbalLevel.UNLIKELY, VerbalLevel.VERY_UNLIKELY,
)

#: The training target of each level (BIRD's numbers).
TARGET: dict[VerbalLevel, float] = {
    VerbalLevel.VERY_UNLIKELY: 0.0,
    VerbalLevel.UNLIKELY: 0.2,
    VerbalLevel.SOMEWHAT_UNLIKELY: 0.4,
    VerbalLevel.NEUTRAL: 0.5,
    VerbalLevel.SOMEWHAT_LIKELY: 0.6,
    VerbalLevel.LIKELY: 0.8,
    VerbalLevel.VERY_LIKELY: 1.0,
}

#: Signed strength: +3 very likely ... -3 very unlikely.
STRENGTH: dict[VerbalLevel, int] = {
    VerbalLevel.VERY_UNLIKELY: -3,
    VerbalLevel.UNLIKELY: -2,
    VerbalLevel.SOMEWHAT_UNLIKELY: -1,
    VerbalLevel.NEUTRAL: 0,
    VerbalLevel.SOMEWHAT_LIKELY: 1,
    VerbalLevel.LIKELY: 2,
    VerbalLevel.VERY_LIKELY: 3,
}
_BY_STRENGTH = {s: level for level, s in STRENGTH.items()}

ReconciliationRule = Literal["balanced", "original"]


class VerbalParseError(ValueError):
    """An answer that names no level of the scale (or names two different ones)."""


# The reference code tests these capitalised spellings in this order and takes the first one found.
_ORIGINAL_ORDER: tuple[tuple[str, VerbalLevel], ...] = (
    ("Very unlikely", VerbalLevel.VERY_UNLIKELY),
    ("Unlikely", VerbalLevel.UNLIKELY),
    ("Somewhat unlikely", VerbalLevel.SOMEWHAT_UNLIKELY),
    ("Neutral", VerbalLevel.NEUTRAL),
    ("Somewhat likely", VerbalLevel.SOMEWHAT_LIKELY),
    ("Likely", VerbalLevel.LIKELY),
    ("Very likely", VerbalLevel.VERY_LIKELY),
)

# Longest phrases first so that "very unlikely" is not read as "unlikely" or "likely".
_PHRASES = sorted(((lvl.value, lvl) for lvl in VerbalLevel), key=lambda item: -len(item[0]))
_PATTERN = re.compile(r"\b(" + "|".join(re.escape(p).replace(r"\ ", r"\s+") for p, _ in _PHRASES) + r")\b")


def parse_level(text: str, *, case_sensitive: bool = False) -> VerbalLevel:
    """The level an answer names.

    Default: case-insensitive, tolerant of ``_``/``-`` for spaces and of surrounding words
    ("It is very likely."); an answer naming no level, or two different ones, raises
    ``VerbalParseError``. ``case_sensitive=True`` is the reference parser: capitalised spellings
    only, first match in its fixed order, and *neutral* when nothing matches.
    """
    if case_sensitive:
        for spelling, level in _ORIGINAL_ORDER:
            if spelling in text:
                return level
        return VerbalLevel.NEUTRAL
    norm = re.sub(r"[_\-]+", " ", text.casefold())
    found = {VerbalLevel(" ".join(m.group(1).split())) for m in _PATTERN.finditer(norm)}
    if len(found) == 1:
        return found.pop()
    shown = text if len(text) <= 80 else text[:77] + "..."
    if not found:
        raise VerbalParseError(f"answer {shown!r} names no level of the verbal scale")
    names = ", ".join(sorted(level.value for level in found))
    raise VerbalParseError(f"answer {shown!r} names several levels of the verbal scale ({names})")


def mirror(level: VerbalLevel) -> VerbalLevel:
    """The level the competing outcome should get (likely <-> unlikely, neutral stays)."""
    return _BY_STRENGTH[-STRENGTH[level]]


class Reconciled(BaseModel):
    """The two levels after reconciliation, and the training target read from O1's level."""

    model_config = ConfigDict(extra="forbid")

    outcome1: VerbalLevel
    outcome2: VerbalLevel
    target: float
    changed: bool


def reconcile(level1: VerbalLevel, level2: VerbalLevel, rule: ReconciliationRule = "balanced") -> Reconciled:
    """Make the two judgements complementary and return the target.

    ``balanced`` (default): read both answers on O1's scale (O2's answer mirrored). If they agree,
    that level stands; otherwise the more confident answer wins, one level less confident because
    the other answer disagrees, and two equally confident answers that contradict each other give
    neutral. The rule treats the outcomes alike (swapping O1 and O2 mirrors the target) and is
    monotone in each answer. Examples: (very likely, likely) -> likely (0.8); (very unlikely,
    unlikely) -> unlikely (0.2); (very likely, neutral) -> likely (0.8); (likely, likely) -> 0.5.

    ``original``: the reference code's rule, kept for strict replication. Equal answers become
    neutral; otherwise the first of four rules that fires decides, and those rules look at O2 as
    well as O1, so (very likely, likely) becomes (unlikely, likely), target 0.2.
    """
    if rule == "original":
        o1, o2 = _original_rule(level1, level2)
    elif rule == "balanced":
        o1 = _balanced_rule(level1, level2)
        o2 = mirror(o1)
    else:  # pragma: no cover - guarded by the config's Literal
        raise ValueError(f"unknown reconciliation rule {rule!r}")
    return Reconciled(outcome1=o1, outcome2=o2, target=TARGET[o1], changed=(o1, o2) != (level1, level2))


def _balanced_rule(level1: VerbalLevel, level2: VerbalLevel) -> VerbalLevel:
    a = STRENGTH[level1]
    b = -STRENGTH[level2]  # O2's answer read on O1's scale
    if a == b:
        return _BY_STRENGTH[a]
    if abs(a) == abs(b):  # e.g. both outcomes judged "likely": no side is favoured
        return VerbalLevel.NEUTRAL
    strong = a if abs(a) > abs(b) else b
    softened = strong - 1 if strong > 0 else strong + 1
    return _BY_STRENGTH[softened]


def _original_rule(level1: VerbalLevel, level2: VerbalLevel) -> tuple[VerbalLevel, VerbalLevel]:
    if level2 == mirror(level1):
        return level1, level2
    if level1 == level2:
        return VerbalLevel.NEUTRAL, VerbalLevel.NEUTRAL
    sl, su = VerbalLevel.SOMEWHAT_LIKELY, VerbalLevel.SOMEWHAT_UNLIKELY
    lk, ul = VerbalLevel.LIKELY, VerbalLevel.UNLIKELY
    if level1 == sl or level2 == su:
        return sl, su
    if level1 == su or level2 == sl:
        return su, sl
    if level1 == lk or level2 == ul:
        return lk, ul
    if level1 == ul or level2 == lk:
        return ul, lk
    return level1, level2
