"""What is written for a published network: a scenario, its default outcome, and words for each node's
states (see :mod:`anchor.truth.networks.words`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class StateWords:
    """One state of one node: the factor's noun phrase and the clauses that state it."""

    text: str
    mentions: tuple[str, ...]


@dataclass(frozen=True)
class NetworkWords:
    """Everything written for one network."""

    network: str
    scenario: str
    outcome: tuple[str, str]
    outcome1: str
    outcome2: str
    topics: dict[str, str]
    states: dict[str, dict[str, StateWords]] = field(default_factory=dict)

    def words(self, node: str, state: str) -> StateWords:
        return self.states[node][state]


def says(text: str, *mentions: str) -> StateWords:
    """A state's words: its noun phrase and one or two clauses (the first the plain one)."""
    return StateWords(text, tuple(mentions))
