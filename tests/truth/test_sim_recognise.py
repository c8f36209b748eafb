"""Recognising requests: every prompt anchor sends is told apart by its own template, and a request
the simulated LLM cannot place is refused with an error naming what was not recognised."""

from __future__ import annotations

import asyncio
import json

import pytest

from anchor import prompts
from anchor.errors import FatalBackendError
from anchor.llm.openai_backend import _with_schema_hint
from anchor.llm.prompt import PromptSpec
from anchor.llm.structured import inline_schema
from anchor.truth.simulate import SimErrors, SimulatedLLM, Unrecognised
from anchor.truth.simulate.recognise import LOGITS, TEMPLATES, recognise, template_pattern
from tests.truth.sim_worlds import NB_FACTORS, nb_world, sim_client, world_file

NB = nb_world()
SPECS = {name: getattr(prompts, name) for name in prompts.__all__ if isinstance(getattr(prompts, name), PromptSpec)}


def fields_of(template: str) -> list[str]:
    import string

    return [f for _, f, _, _ in string.Formatter().parse(template) if f]


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_prompt_is_recognised_with_its_fields(name: str) -> None:
    spec = SPECS[name]
    values = {f: f"<{f} value>\nwith a second line" for f in fields_of(spec.user)}
    req = recognise(spec.render(**values), json_schema=None, seed=5)
    assert req.name == name and req.stage == spec.stage
    assert req.fields == values
    assert req.seed == 5


def test_the_logits_request_is_recognised() -> None:
    values = {"scenario": "s", "condition": "c", "outcome1": "o1", "outcome2": "o2"}
    messages = [{"role": "system", "content": prompts.LOGITS_MESSAGES_SYSTEM},
                {"role": "user", "content": prompts.LOGITS_USER.format(**values)}]
    assert recognise(messages, json_schema=None, seed=None).name == LOGITS


def test_the_table_holds_every_prompt_and_no_copied_wording() -> None:
    names = {t.name for group in TEMPLATES.values() for t in group}
    assert names == {*SPECS, LOGITS}
    # prompts that share a system text (BIRD's factor prompts) are told apart by their user templates
    shared = [group for group in TEMPLATES.values() if len(group) > 1]
    assert shared and all(len({t.pattern.pattern for t in group}) == len(group) for group in shared)


def test_a_field_used_twice_must_repeat() -> None:
    pattern = template_pattern("A {x} and again {x}.")
    assert pattern.match("A cat and again cat.") and not pattern.match("A cat and again dog.")


def test_an_unknown_system_message_is_refused_naming_it() -> None:
    llm = SimulatedLLM(world_file(), SimErrors.zero())
    with pytest.raises(Unrecognised, match="unrecognised system message .*'You are a pirate"):
        llm.answer([{"role": "system", "content": "You are a pirate."}, {"role": "user", "content": "Ahoy"}])
    with pytest.raises(Unrecognised, match="no system message"):
        llm.answer([{"role": "user", "content": "Hello"}])
    assert issubclass(Unrecognised, FatalBackendError)


def test_a_user_message_off_its_template_is_refused() -> None:
    llm = SimulatedLLM(world_file(), SimErrors.zero())
    messages = prompts.VANILLA.render(scenario=NB.scenario, condition="x", outcome1=NB.outcome1, outcome2=NB.outcome2)
    messages[-1]["content"] += " Please answer in French."
    with pytest.raises(Unrecognised, match="fits no template of prompt VANILLA"):
        llm.answer(messages, json_schema=inline_schema(prompts.VerbalProbability))


def test_an_unknown_scenario_or_outcome_is_refused() -> None:
    llm = SimulatedLLM(world_file(), SimErrors.zero())
    messages = prompts.VANILLA.render(scenario="A scenario no world has.", condition="x", outcome1=NB.outcome1,
                                      outcome2=NB.outcome2)
    with pytest.raises(Unrecognised, match="VANILLA: unknown scenario 'A scenario no world has.'"):
        llm.answer(messages)
    swapped = prompts.VANILLA.render(scenario=NB.scenario, condition="x", outcome1=NB.outcome2, outcome2=NB.outcome1)
    with pytest.raises(Unrecognised, match="are not those of the world"):
        llm.answer(swapped)
    reflect = prompts.REFLECT_FACTORS.render(condition="x", factors="- a factor of no world")
    with pytest.raises(Unrecognised, match="belongs to a world"):
        llm.answer(reflect)


def test_the_client_fails_at_once_on_an_unrecognised_request() -> None:
    client = sim_client(NB)

    async def go() -> None:
        await client.ask(prompts.VANILLA, scenario="Nobody's scenario.", condition="x", outcome1="a", outcome2="b")

    with pytest.raises(FatalBackendError, match="unknown scenario"):
        asyncio.run(go())
    assert len([r for r in client.ledger.records if r.stage == "baseline.vanilla"]) == 1  # not retried


def test_a_schema_spelt_out_in_the_system_message_is_the_same_request() -> None:
    llm = SimulatedLLM(world_file(), SimErrors())  # noisy: the draws depend on the request
    texts = [spec[0] for spec in NB_FACTORS.values()]
    messages = prompts.ELICIT_PHI.render(scenario=NB.scenario, outcome1=NB.outcome1, outcome2=NB.outcome2,
                                         factors=prompts.numbered([f"{t} (rough: 0.50)" for t in texts], keys=True))
    schema = inline_schema(prompts.keyed_schema("FactorProbabilities", len(texts), "prob"))
    plain = llm.answer(messages, json_schema=schema, seed=9)
    hinted = llm.answer(_with_schema_hint(messages, schema), json_schema=None, seed=9)
    assert hinted.text == plain.text
    assert json.loads(plain.text) != json.loads(llm.answer(messages, json_schema=schema, seed=10).text)


def test_every_recognised_prompt_has_an_answer() -> None:
    from anchor.truth.simulate.llm import HANDLERS

    assert set(HANDLERS) == {t.name for group in TEMPLATES.values() for t in group}
