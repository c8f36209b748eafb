"""BIRD's condition mapping: vote threshold, invalid answers, reflection, relaxed fallback."""

from __future__ import annotations

import asyncio

import pytest

from anchor.bird.mapping import MappingSlot, map_condition, match_value, resolve_closest
from anchor.bird.types import BirdConfig, MappedValue
from anchor.llm.scripted import ScriptedRequest
from anchor.types import Scenario
from tests.bird.script import BirdScript

SCENARIO = Scenario(text="Choosing how to commute to work.", outcome1="Cycling is the better way to commute.",
                    outcome2="Driving is the better way to commute.")
SLOTS = [
    MappingSlot(key="distance", name="distance to work", values=("under 5 km", "over 20 km")),
    MappingSlot(key="weather", name="weather", values=("dry and mild", "heavy rain", "snow")),
]
CONDITION = "It is pouring down outside."


def run_map(scripted_client, answers: dict[str, list[str]], *, config: BirdConfig | None = None,
            relaxed: bool = False, reflect=None, closest=None, responder=None):
    s = BirdScript(choose=lambda condition, factor, values, r: answers.get(factor, ["none"] * 9)[r],
                   reflect=reflect or (lambda condition, values: list(values)), closest=closest)
    client = scripted_client(responder or s)
    trace = asyncio.run(map_condition(client, SCENARIO, SLOTS, CONDITION, config or BirdConfig(), relaxed=relaxed))
    return trace, client


def stages(client) -> dict[str, int]:
    return {c.stage: c.llm_calls for c in client.ledger.summary()}


def test_a_value_needs_two_of_three_votes(scripted_client):
    trace, client = run_map(scripted_client, {"weather": ["heavy rain", "heavy rain", "snow"],
                                              "distance to work": ["over 20 km", "none", "none"]})
    assert trace.votes == {"distance": {"under 5 km": 0, "over 20 km": 1},
                           "weather": {"dry and mild": 0, "heavy rain": 2, "snow": 1}}
    assert trace.voted == [MappedValue(factor="weather", value="heavy rain")]
    assert trace.mapped == trace.voted and trace.reflection_ran
    assert stages(client) == {"bird.mapping": 6, "bird.reflect": 1}
    reflection = [r for r in client.backend.requests if r.schema_name == "BirdReflection"]
    assert "Matched values:\n- heavy rain\n" in reflection[0].user


def test_threshold_is_configurable(scripted_client):
    answers = {"weather": ["heavy rain", "heavy rain", "snow"]}
    trace, _ = run_map(scripted_client, answers, config=BirdConfig(mapping_votes=3))
    assert trace.voted == [] and trace.mapped == [] and not trace.reflection_ran
    trace, _ = run_map(scripted_client, {"weather": ["snow", "heavy rain", "none", "heavy rain", "none"]},
                       config=BirdConfig(mapping_rounds=5, mapping_votes=2))
    assert trace.voted == [MappedValue(factor="weather", value="heavy rain")] and len(trace.rounds) == 5
    with pytest.raises(ValueError, match="mapping_votes"):
        BirdConfig(mapping_rounds=3, mapping_votes=4)


def test_several_values_voted_in_keep_the_strongest_or_none_on_a_tie(scripted_client):
    one = BirdConfig(mapping_votes=1)
    trace, _ = run_map(scripted_client, {"weather": ["heavy rain", "snow", "heavy rain"]}, config=one)
    assert trace.voted == [MappedValue(factor="weather", value="heavy rain")] and trace.conflicts == ["weather"]
    trace, _ = run_map(scripted_client, {"weather": ["heavy rain", "snow", "none"]}, config=one)
    assert trace.voted == [] and trace.conflicts == ["weather"]


def test_answers_naming_no_listed_value_are_discarded_and_counted(scripted_client):
    trace, _ = run_map(scripted_client, {"weather": ["Heavy Rain.", "rainy", "light drizzle"],
                                         "distance to work": ["NONE", "None", "far away"]})
    assert trace.invalid_answers == 3
    assert [r.invalid for r in trace.rounds] == [[], ["weather"], ["distance", "weather"]]
    assert trace.rounds[0].chosen == {"distance": None, "weather": "heavy rain"}  # case and period ignored
    assert trace.votes["weather"]["heavy rain"] == 1 and trace.mapped == []


def test_reflection_removes_values_and_counts_invalid_ones(scripted_client):
    answers = {"weather": ["heavy rain"] * 3, "distance to work": ["over 20 km"] * 3}
    trace, _ = run_map(scripted_client, answers, reflect=lambda condition, values: ["heavy rain", "wet roads"])
    assert trace.reflection_answer == ["heavy rain", "wet roads"]
    assert trace.reflection_removed == [MappedValue(factor="distance", value="over 20 km")]
    assert trace.reflection_invalid == 1
    assert trace.mapped == [MappedValue(factor="weather", value="heavy rain")]


def test_reflection_can_be_switched_off(scripted_client):
    answers = {"weather": ["heavy rain"] * 3}
    trace, client = run_map(scripted_client, answers, config=BirdConfig(reflection=False),
                            reflect=lambda condition, values: [])
    assert trace.mapped == [MappedValue(factor="weather", value="heavy rain")] and not trace.reflection_ran
    assert "bird.reflect" not in stages(client)


def test_an_unanswerable_reflection_maps_nothing_like_the_reference(scripted_client):
    s = BirdScript(choose=lambda c, f, v, r: "heavy rain" if f == "weather" else "none")

    def responder(req: ScriptedRequest):
        return "no idea" if req.schema_name == "BirdReflection" else s(req)

    trace, client = run_map(scripted_client, {}, responder=responder)
    assert trace.reflection_failed and trace.mapped == []
    assert trace.reflection_removed == [MappedValue(factor="weather", value="heavy rain")]
    assert next(c for c in client.ledger.summary() if c.stage == "bird.reflect").failed_attempts == 3


def test_failed_mapping_calls_count_as_no_vote(scripted_client):
    s = BirdScript(choose=lambda c, f, v, r: "heavy rain" if f == "weather" else "none")

    def responder(req: ScriptedRequest):
        if req.schema_name == "BirdValueChoice" and "Factor: distance to work" in req.user:
            return "not json at all"
        return s(req)

    trace, _ = run_map(scripted_client, {}, responder=responder)
    assert trace.failed_calls == 3 and all(r.answers["distance"] is None for r in trace.rounds)
    assert trace.mapped == [MappedValue(factor="weather", value="heavy rain")]


def test_values_are_shown_in_a_seeded_shuffled_order(scripted_client):
    _, client = run_map(scripted_client, {})
    shown = [r.user.split("Values:\n")[1].split("\nWhich")[0] for r in client.backend.requests
             if "Factor: weather" in r.user]
    _, again = run_map(scripted_client, {})
    assert shown == [r.user.split("Values:\n")[1].split("\nWhich")[0] for r in again.backend.requests
                     if "Factor: weather" in r.user]
    assert all(sorted(s.split("\n")) == ["- dry and mild", "- heavy rain", "- snow"] for s in shown)
    _, other = run_map(scripted_client, {}, config=BirdConfig(seed=11))
    assert shown != [r.user.split("Values:\n")[1].split("\nWhich")[0] for r in other.backend.requests
                     if "Factor: weather" in r.user]


def test_relaxed_pass_runs_only_when_strict_maps_nothing(scripted_client):
    closest = []

    def pick(condition, options):
        closest.append(options)
        return ("weather", "heavy rain")

    trace, client = run_map(scripted_client, {}, relaxed=True, closest=pick)
    assert trace.mode == "relaxed" and trace.relaxed_used
    assert trace.mapped == [MappedValue(factor="weather", value="heavy rain")]
    assert closest == [{"distance to work": ["under 5 km", "over 20 km"], "weather": ["dry and mild", "heavy rain",
                                                                                        "snow"]}]
    assert stages(client) == {"bird.mapping": 6, "bird.mapping.relaxed": 1}

    trace, client = run_map(scripted_client, {"weather": ["snow"] * 3}, relaxed=True, closest=pick)
    assert not trace.relaxed_used and trace.mapped == [MappedValue(factor="weather", value="snow")]
    assert len(closest) == 1


def test_closest_value_resolution():
    slots = [MappingSlot("a", "Heat", ("boiling", "cold")), MappingSlot("b", "Taste", ("salty", "cold"))]
    assert resolve_closest(slots, "anything", "Boiling") == MappedValue(factor="a", value="boiling")
    assert resolve_closest(slots, "taste", "cold") == MappedValue(factor="b", value="cold")
    assert resolve_closest(slots, "texture", "cold") is None  # two factors have it: the name must decide
    assert resolve_closest(slots, "Heat", "lukewarm") is None
    assert match_value("  SALTY. ", ("salty",)) == "salty" and match_value("salt", ("salty",)) is None
