"""The shapes of the bank's entries: a factor's words, a theme, a domain."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FillerKind = Literal["people", "places", "brands"]


@dataclass(frozen=True)
class FactorWords:
    """One factor of the bank: its noun phrase and the clauses that say it in other words."""

    text: str
    paraphrases: tuple[str, ...]


@dataclass(frozen=True)
class Theme:
    """A group of factors about one concept (a latent variable's theme in a ``latent`` world)."""

    name: str
    factors: tuple[FactorWords, ...]


@dataclass(frozen=True)
class Domain:
    """A kind of situation: its scenario (with a ``{name}`` slot), its two outcomes and its themes."""

    key: str
    scenario: str
    outcome1: str
    outcome2: str
    filler: FillerKind
    themes: tuple[Theme, ...]

    def scenario_for(self, name: str) -> str:
        return self.scenario.format(name=name)


def theme(name: str, *factors: tuple[str, ...]) -> Theme:
    """A theme from ``(text, paraphrase, [paraphrase])`` tuples (the bank's compact spelling)."""
    return Theme(name=name, factors=tuple(FactorWords(text=f[0], paraphrases=tuple(f[1:])) for f in factors))
