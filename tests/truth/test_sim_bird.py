"""BIRD on the simulated LLM: under zero error each BIRD answer is the truth where BIRD's definitions
allow it (labels, the verbal level of an assignment, the mapping), and BIRD runs end to end on a
hand-made world. BIRD's estimate itself cannot equal the truth (seven verbal levels, an SGD fit,
uniform marginalisation: see anchor.truth.simulate.bird), so the end-to-end test asks only that it
falls on the truth's side wherever the truth leans clearly."""

from __future__ import annotations

import asyncio
from typing import Any

from anchor import prompts
from anchor.bird.method import BirdMethod
from anchor.llm.structured import inline_schema
from anchor.truth.simulate import SimErrors, SimulatedLLM
from anchor.truth.simulate.bird import ABSENT, PRESENT
from tests.truth.sim_worlds import NB_FACTORS, nb_world, scenario_of, sim_client, world_file

NB = nb_world()
TEXT = {fid: spec[0] for fid, spec in NB_FACTORS.items()}


def ask(spec: Any, schema: Any = None, seed: int = 0, errors: SimErrors | None = None, **values: Any) -> Any:
    import json

    llm = SimulatedLLM(world_file(), errors or SimErrors.zero())
    raw = llm.answer(spec.render(**values), json_schema=inline_schema(schema or spec.schema), seed=seed)
    return json.loads(raw.text)


def condition(cid: str) -> str:
    return next(c.text for c in NB.conditions if c.id == cid)


def test_labels_are_the_side_each_value_favours() -> None:
    values = [TEXT["f1"] + PRESENT, TEXT["f1"] + ABSENT, TEXT["f3"] + PRESENT, TEXT["f3"] + ABSENT, "tidy desks"]
    answer = ask(prompts.BIRD_LABELS, prompts.bird_label_schema(5), scenario=NB.scenario, outcome1=NB.outcome1,
                 outcome2=NB.outcome2, factor=TEXT["f1"],
                 values="\n".join(f"{k}: {v}" for k, v in zip(prompts.bird_value_keys(5), values, strict=True)))
    # f1 present: 2/3; absent: 0.4 / (0.4 + 0.7) = 0.36; f3 present 10/19, absent 0.5 / 1.05: both near 0.5
    assert answer["labels"] == {"V1": "statement 1", "V2": "statement 2", "V3": "both", "V4": "both",
                                "V5": "neither"}


def test_an_assignment_is_judged_at_the_nearest_verbal_level() -> None:
    # f1 present (odds 2), f7 absent (0.7 / 0.45): odds 28/9, P(O1) = 0.757 -> likely (0.8)
    text = f"{TEXT['f1'] + PRESENT}. {TEXT['f7'] + ABSENT}."
    answer = ask(prompts.BIRD_CPT_DATA, scenario=NB.scenario, condition=text, outcome1=NB.outcome1,
                 outcome2=NB.outcome2)
    assert (answer["outcome1"], answer["outcome2"]) == ("likely", "unlikely")
    # f5 and f2 present: 0.4 * 0.5 = 0.2 -> 1/6 = 0.167 -> unlikely (0.2)
    text = f"{TEXT['f5'] + PRESENT}. {TEXT['f2'] + PRESENT}."
    answer = ask(prompts.BIRD_CPT_DATA, scenario=NB.scenario, condition=text, outcome1=NB.outcome1,
                 outcome2=NB.outcome2)
    assert (answer["outcome1"], answer["outcome2"]) == ("unlikely", "likely")


def test_mapping_names_the_value_a_condition_makes_present() -> None:
    f5 = [TEXT["f5"] + ABSENT, TEXT["f5"] + PRESENT]
    schema = prompts.bird_value_choice_schema(tuple(f5))
    got = ask(prompts.BIRD_MAPPING, schema, scenario=NB.scenario, condition=condition("c3"), factor=TEXT["f5"],
              values="\n".join(f"- {v}" for v in f5))
    assert got == {"value": TEXT["f5"] + PRESENT}
    f1 = [TEXT["f1"] + PRESENT, TEXT["f1"] + ABSENT]
    got = ask(prompts.BIRD_MAPPING, prompts.bird_value_choice_schema(tuple(f1)), scenario=NB.scenario,
              condition=condition("c3"), factor=TEXT["f1"], values="\n".join(f"- {v}" for v in f1))
    assert got == {"value": "none"}
    shown = (TEXT["f5"] + PRESENT, TEXT["f1"] + PRESENT)
    kept = ask(prompts.BIRD_REFLECT, prompts.choice_list_schema("BirdReflection", "keep", shown),
               condition=condition("c3"), values="\n".join(f"- {v}" for v in shown))
    assert kept == {"keep": [TEXT["f5"] + PRESENT]}


def test_relaxed_mapping_prefers_a_present_factor_then_shared_words() -> None:
    options = f"- {TEXT['f1']}:\n  - {TEXT['f1'] + PRESENT}\n- {TEXT['f4']}:\n  - {TEXT['f4'] + PRESENT}"
    names, values = (TEXT["f1"], TEXT["f4"]), (TEXT["f1"] + PRESENT, TEXT["f4"] + PRESENT)
    got = ask(prompts.BIRD_MAPPING_RELAXED, prompts.bird_closest_schema(names, values), scenario=NB.scenario,
              condition=condition("c5"), options=options)
    assert got == {"factor": TEXT["f4"], "value": TEXT["f4"] + PRESENT}
    got = ask(prompts.BIRD_MAPPING_RELAXED, prompts.bird_closest_schema(names, values), scenario=NB.scenario,
              condition="A new college opened near the high street.", options=options)
    assert got == {"factor": TEXT["f1"], "value": TEXT["f1"] + PRESENT}  # shares 'college'


def test_bird_runs_end_to_end_and_leans_the_truths_way() -> None:
    client = sim_client(NB)

    async def run() -> tuple[Any, list[Any]]:
        method = BirdMethod(client, relaxed=False)
        model = await method.prepare(scenario_of(NB))
        return model, [await method.estimate(model, c.text) for c in NB.conditions]

    model, estimates = asyncio.run(run())
    # the reranking turn keeps 7 of the 8 factors: all but f3, the one nearest to neutral
    assert sorted(f.name for f in model.factors) == sorted(t for fid, t in TEXT.items() if fid != "f3")
    for factor in model.factors:
        fid = next(k for k, t in TEXT.items() if t == factor.name)
        side = "outcome1" if NB_FACTORS[fid][3] > NB_FACTORS[fid][4] else "outcome2"
        assert {v.text: v.label.value for v in factor.values}[factor.name + PRESENT] == side
    assert model.usable
    for cond, est in zip(NB.conditions, estimates, strict=True):
        if not cond.present:
            assert est.status == "abstained"  # strict mapping: nothing maps, unknown
            continue
        assert sorted(m.value for m in est.trace.mapped) == sorted(TEXT[f] + PRESENT for f in cond.present)
        if abs(cond.p_true - 0.5) >= 0.1:
            assert (est.p_outcome1 > 0.5) == (cond.p_true > 0.5), cond.id
