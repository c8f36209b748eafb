"""Texts written for this project for some of the published networks: what each state of each node
means, in words an LLM would use, so that a real model reading a condition understands what the
network's truth is about.

For each network: a scenario, its default outcome (a node and state) with the two outcome sentences,
for every state of every node a noun phrase (``text``, what an LLM would call the factor) and one or
two clauses saying the node is in that state (``mentions``, the first the plain one), and for every
node a short name of the topic it heads (the simulated LLM's name for the group of factors reached
through it, :mod:`anchor.truth.networks.select`).

These texts are ours, not the networks' authors': they say what the nodes and states are documented to
mean as plainly as we could, and the numbers stay the published ones. No text or mention of a network
occurs inside another factor's (tests/truth/test_network_texts.py), so a condition's factors can be read
off its text.
"""

from __future__ import annotations

from anchor.truth.networks.words import asia, cancer, child, earthquake, sachs, survey
from anchor.truth.networks.words.model import NetworkWords, StateWords, says

__all__ = ["WRITTEN", "NetworkWords", "StateWords", "says"]


def _written() -> dict[str, NetworkWords]:
    return {w.network: w for w in (asia.WORDS, cancer.WORDS, earthquake.WORDS, survey.WORDS, sachs.WORDS,
                                   child.WORDS)}


#: The networks with written texts, by name.
WRITTEN: dict[str, NetworkWords] = _written()
