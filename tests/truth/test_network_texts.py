"""The texts of network worlds: every state of every node of a written network has words of the stated
shape, and what the simulated LLM reads off a condition (WorldKnowledge.present: a factor is present when
its text or a mention occurs in the condition, case aside) maps each text and mention back to exactly its
own factor, for every state of the written networks and for the plain texts of every network pgmpy ships."""

from __future__ import annotations

import gzip
import random
import re

import pytest

pytest.importorskip("pgmpy")
from anchor.truth.networks.build import plain_words
from anchor.truth.networks.source import available_networks, models_folder
from anchor.truth.networks.spec import NetworkNode, NetworkSpec
from anchor.truth.networks.words import WRITTEN
from anchor.truth.simulate import SimErrors
from anchor.truth.simulate.knowledge import WorldKnowledge
from anchor.truth.vocabulary import DISTRACTORS, SENTENCE_FRAMES
from anchor.truth.world import World, WorldFactor

WRITTEN_NAMES = sorted(WRITTEN)
_VARIABLE = re.compile(r"variable\s+(\S+)\s*\{[^}]*?\{([^}]*)\}", re.MULTILINE)


def test_six_networks_have_written_texts() -> None:
    assert {"asia", "cancer", "earthquake", "survey", "sachs"} <= set(WRITTEN) and len(WRITTEN) >= 6
    assert set(WRITTEN) <= set(available_networks())


def names_in_file(name: str) -> dict[str, list[str]]:
    """Each node's states, read straight from the shipped BIF file (a quick read of its declarations)."""
    text = gzip.decompress((models_folder() / f"{name}.bif.gz").read_bytes()).decode("utf-8")
    return {node: [s.strip() for s in states.split(",")] for node, states in _VARIABLE.findall(text)}


def world_of(name: str, factors: list[WorldFactor]) -> World:
    """A world holding these factors, over a stand-in network of the same nodes and states (the texts are
    what is tested here, not the numbers)."""
    nodes = {f.node: [] for f in factors}
    for f in factors:
        nodes[f.node].append(f.state)
    spec = NetworkSpec(name=name.lower(), source="test", published_nodes=len(nodes) + 1, outcome_node="__outcome",
                       outcome_state="yes",
                       nodes=[NetworkNode(name="__outcome", states=["yes", "no"], cpt=[[0.5, 0.5]]),
                              *(NetworkNode(name=n, states=s, cpt=[[1 / len(s)] * len(s)]) for n, s in nodes.items())])
    return World(id="texts", structure="network", seed=0, scenario="s", outcome1="a", outcome2="b", variables=[],
                 factors=factors, network=spec)


def assert_read_back_exactly(world: World) -> None:
    knowledge = WorldKnowledge(world, SimErrors.zero(), seed=0)
    frames = random.Random(3)
    for f in world.factors:
        for said in (f.text, *f.mentions):
            assert knowledge.present(said) == [f.id], (f.node, f.state, said)
            sentence = frames.choice(SENTENCE_FRAMES).format(clause=said)
            assert knowledge.present(f"{sentence} {frames.choice(DISTRACTORS)}") == [f.id], sentence
    for sentence in DISTRACTORS:
        assert knowledge.present(sentence) == [], sentence


@pytest.mark.parametrize("name", WRITTEN_NAMES)
def test_every_state_of_a_written_network_has_words_of_the_stated_shape(name: str) -> None:
    words = WRITTEN[name]
    states = names_in_file(name)
    assert {n: list(s) for n, s in words.states.items()} == states  # every node and state, nothing else
    assert set(words.topics) == set(states)
    assert words.outcome[1] in states[words.outcome[0]]
    for node, by_state in words.states.items():
        for state, said in by_state.items():
            assert 2 <= len(said.text.split()) <= 8 and len(said.text) <= 80, (node, state, said.text)
            assert 1 <= len(said.mentions) <= 2, (node, state)
            # clauses: a condition frames them into sentences ("It turns out that ...").
            assert all(m == m.strip() and m and not m.endswith(".") for m in said.mentions), (node, state)
    for topic in words.topics.values():
        assert len(topic) <= 40


@pytest.mark.parametrize("name", WRITTEN_NAMES)
def test_written_texts_are_read_back_as_exactly_their_factor(name: str) -> None:
    words = WRITTEN[name]
    factors = [WorldFactor(id=f"f{j}", text=said.text, theme="t", mentions=list(said.mentions), node=node, state=state)
               for j, (node, state, said) in enumerate(((n, s, w) for n, by in words.states.items()
                                                        for s, w in by.items()), start=1)]
    assert_read_back_exactly(world_of(name, factors))


@pytest.mark.parametrize("name", available_networks())
def test_plain_texts_are_read_back_as_exactly_their_factor(name: str) -> None:
    states = names_in_file(name)
    assert all('"' not in n and all('"' not in s for s in st) for n, st in states.items())
    pairs = [(n, s) for n, st in states.items() for s in st]
    # Case aside, no two nodes share a name, nor two states of a node: their quoted texts stay apart.
    assert len({n.casefold() for n in states}) == len(states)
    assert all(len({s.casefold() for s in st}) == len(st) for st in states.values())
    if len(pairs) > 240:  # the large networks: a seeded sample (a world holds 40 factors at most)
        pairs = random.Random(name).sample(pairs, 240)
    factors = []
    for j, (node, state) in enumerate(pairs, start=1):
        text, mentions = plain_words(node, state)
        assert len(text) <= 80
        factors.append(WorldFactor(id=f"f{j}", text=text, theme="t", mentions=mentions, node=node, state=state))
    assert_read_back_exactly(world_of(name, factors))
