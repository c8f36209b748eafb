"""BIRD end to end on the scripted backend: abduction, labels, pruning, CPT data, training, storage,
estimates (strict and relaxed), hand-computed inference, bad input, and one run over real HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import stat

import numpy as np
import pytest

from anchor.bird import (
    BirdConfig,
    BirdEstimate,
    BirdMethod,
    BirdModel,
    BirdModelFileError,
    build_bird_model,
    load_model,
    marginal_probability,
    save_model,
)
from anchor.bird.cpt import cpt_output, one_hot_rows
from anchor.bird.types import BirdFactor, BirdValue, MappedValue, TrainedValue, TrainingRecord
from anchor.bird.verbal import SCALE, TARGET, mirror
from anchor.llm.client import LLMClient
from anchor.llm.ledger import CostLedger
from anchor.llm.openai_backend import OpenAICompatibleBackend
from anchor.llm.scripted import ScriptedRequest
from anchor.types import FactorLabel, LLMIdentity, Scenario
from tests.bird.script import BirdScript
from tests.fakeserver import FakeOpenAIServer

NOODLES = Scenario(
    text="The efficiency of cooking noodles is being compared between hot water and warm water.",
    outcome1="Noodles cook much more efficiently in hot water than they do in warm water.",
    outcome2="Noodles cook much more efficiently in warm water than they do in hot water.",
)

STRUCTURE = [
    ("water temperature", ["boiling water", "lukewarm water"]),
    ("pot lid", ["lid on", "no lid", "glass lid"]),
    ("noodle type", ["thin rice noodles", "thick wheat noodles"]),
    ("kitchen colour", ["white walls", "blue walls"]),
]
EXTENDED = [*STRUCTURE, ("salt in the water", ["salted water", "unsalted water"])]

LABELS = {
    ("water temperature", "boiling water"): ["statement 1"] * 3,
    ("water temperature", "lukewarm water"): ["Statement 2"] * 3,   # capitals are read too
    ("pot lid", "lid on"): ["statement 1"] * 3,
    ("pot lid", "no lid"): ["both", "both", "statement 2"],          # 2 of 3: neutral
    ("pot lid", "glass lid"): ["statement 1", "statement 2", "neither"],  # no label reaches 2/3
    ("noodle type", "thin rice noodles"): ["statement 2", "statement 2", "maybe"],  # 2 of 2 readable votes
    ("noodle type", "thick wheat noodles"): ["statement 1"] * 3,
    ("kitchen colour", "white walls"): ["both"] * 3,
    ("kitchen colour", "blue walls"): ["both"] * 3,
}

#: The parameters the scripted judge answers from (its verbal answer is the nearest scale level).
TRUE = {"boiling water": 0.9, "lukewarm water": 0.15, "lid on": 0.6, "no lid": 0.5, "thin rice noodles": 0.35,
        "thick wheat noodles": 0.6}


def nearest_level(p: float):
    return min(SCALE, key=lambda level: (abs(TARGET[level] - p), TARGET[level]))


def true_p(values: list[str]) -> float:
    ps = [TRUE[v.rstrip(".")] for v in values]
    return float(np.prod(ps) / (np.prod(ps) + np.prod([1 - p for p in ps])))


def truthful_judge(values: list[str]) -> tuple[str, str]:
    level = nearest_level(true_p(values))
    return level.value, mirror(level).value


BOIL = "The water is at a rolling boil."
COVERED_THICK = "The pot is covered and the noodles are thick."
UNRELATED = "The cook is listening to the radio."
MISREAD = "The pot has a lid on it."

MAPPING = {  # condition -> factor -> answers in rounds 0, 1, 2
    BOIL: {"water temperature": ["boiling water", "boiling water", "boiling water"]},
    COVERED_THICK: {"pot lid": ["lid on"] * 3, "noodle type": ["thick wheat noodles", "thick wheat noodles", "none"]},
    MISREAD: {"pot lid": ["lid on", "lid on", "a closed lid"]},  # round 3 names no listed value
}


def script(**overrides) -> BirdScript:
    def choose(condition, factor, values, r):
        answers = MAPPING.get(condition, {}).get(factor)
        return answers[r] if answers else "none"

    def reflect(condition, values):
        return ["a closed pot"] if condition == MISREAD else list(values)

    base = dict(structure=STRUCTURE, extend=EXTENDED, label=lambda f, v, r: LABELS.get((f, v), ["both"] * 3)[r],
                judge=truthful_judge, choose=choose, reflect=reflect,
                closest=lambda condition, options: ("pot lid", "no lid"))
    base.update(overrides)
    return BirdScript(**base)


CONFIG = BirdConfig(max_factors=4)


def build(scripted_client, s: BirdScript | None = None, config: BirdConfig = CONFIG) -> tuple[BirdModel, LLMClient]:
    client = scripted_client(s or script())
    return asyncio.run(build_bird_model(client, NOODLES, config)), client


def by_stage(model: BirdModel) -> dict[str, int]:
    return {c.stage: c.llm_calls for c in model.cost}


# --------------------------------------------------------------------------- building


def test_abduction_labels_and_pruning(scripted_client):
    model, _ = build(scripted_client)
    assert [(f.name, [(v.text, v.label) for v in f.values]) for f in model.factors] == [
        ("water temperature", [("boiling water", FactorLabel.OUTCOME1), ("lukewarm water", FactorLabel.OUTCOME2)]),
        ("pot lid", [("lid on", FactorLabel.OUTCOME1), ("no lid", FactorLabel.NEUTRAL)]),
        ("noodle type", [("thin rice noodles", FactorLabel.OUTCOME2), ("thick wheat noodles", FactorLabel.OUTCOME1)]),
    ]
    thin = model.factors[2].values[0].votes
    assert (thin.outcome2, thin.unreadable, thin.recorded) == (2, 1, 2)
    no_lid = model.factors[1].values[1].votes
    assert (no_lid.both, no_lid.outcome2) == (2, 1)
    assert [(p.factor, p.value, p.reason) for p in model.pruned] == [
        ("salt in the water", None, "over_limit"),
        ("pot lid", "glass lid", "no_accepted_label"),
        ("kitchen colour", None, "single_label"),
    ]
    assert "neither=1" in model.pruned[1].detail
    assert len(model.abduction.sentences_outcome1) == 10 and len(model.abduction.sentences_outcome2) == 10
    assert list(model.abduction.drafts) == ["initial", "extended", "reranked", "completed"]
    assert len(model.abduction.drafts["extended"]) == 5
    # 2 + 2 sentence calls, 4 factor turns, 3 rounds for each of the 4 labelled factors, 128 judgements.
    assert by_stage(model) == {"bird.sentences": 4, "bird.factors": 4, "bird.labels": 12, "bird.cpt_data": 128}


def test_cpt_data_and_training(scripted_client):
    model, client = build(scripted_client)
    t = model.training
    assert t is not None and t.trained and t.seeded and t.seed == 0
    assert (t.product_size, t.cycled, t.n_samples, t.n_used, t.n_dropped) == (8, True, 128, 128, 0)
    assert (t.epochs, t.lr, t.batch_size, t.margin_weight, t.steps, t.margin_configs) == (20, 0.01, 4, 10.0, 640, 8)
    names = [[f.values[i].text for f, i in zip(model.factors, s.values, strict=True)] for s in model.samples]
    # The 8 assignments are each judged 16 times, as independent samples (copy_index 0..15).
    assert sorted(s.copy_index for s in model.samples if s.values == [0, 0, 0]) == list(range(16))
    for s, values in zip(model.samples, names, strict=True):
        expected = nearest_level(true_p(values))
        assert (s.level1, s.level2, s.reconciled1, s.target) == (expected, mirror(expected), expected,
                                                                  TARGET[expected])
    # The CPT data prompt shows the values as sentences.
    judged = [r for r in client.backend.requests if r.schema_name == "BirdJudgement"]
    assert "Condition: boiling water. lid on. thin rice noodles." in judged[0].user
    # The coarse targets are not exactly representable by six parameters; the fit must still get
    # much closer to them than the label initialisation and put every assignment on its side.
    sizes = [2, 2, 2]
    full = one_hot_rows([(a, b, c) for a in range(2) for b in range(2) for c in range(2)], sizes)
    fitted = cpt_output(full, np.array([p.p for p in model.parameters]))
    start = cpt_output(full, np.array([p.init for p in model.parameters]))
    targets = np.array([TARGET[nearest_level(true_p([model.factors[i].values[j].text for i, j in
                                                     enumerate(np.flatnonzero(row) - [0, 2, 4])]))] for row in full])
    assert np.mean((fitted - targets) ** 2) < 0.5 * np.mean((start - targets) ** 2)
    assert np.array_equal(fitted > 0.5, targets > 0.5)
    assert [p.init for p in model.parameters] == [0.75, 0.25, 0.75, 0.5, 0.25, 0.75]
    assert model.parameters[0].p > 0.75 and model.parameters[1].p < 0.25  # boiling / lukewarm moved outwards
    assert t.loss_per_epoch[-1] < t.loss_per_epoch[0]


def test_building_is_deterministic_under_the_seed(scripted_client):
    a, _ = build(scripted_client)
    b, _ = build(scripted_client)
    assert [p.p for p in a.parameters] == [p.p for p in b.parameters]
    assert [s.values for s in a.samples] == [s.values for s in b.samples]


def test_large_product_draws_128_distinct_assignments(scripted_client):
    big = [(f"factor {i}", [f"option {i}a", f"option {i}b", f"option {i}c"]) for i in range(5)]  # 3^5 = 243

    def label(f, v, r):
        return "statement 1" if v.endswith("a") else "statement 2" if v.endswith("b") else "both"

    model, _ = build(scripted_client, script(structure=big, extend=big, label=label,
                                             judge=lambda values: ("likely", "unlikely")
                                             if sum(v.endswith("a.") for v in values) >= 3 else ("unlikely", "likely")),
                     BirdConfig(max_factors=7))
    assert model.training.product_size == 243 and not model.training.cycled
    assert len({tuple(s.values) for s in model.samples}) == 128
    assert model.training.margin_configs == 243


# --------------------------------------------------------------------------- storage


def test_model_saves_and_loads_back_identically(scripted_client, tmp_path):
    model, _ = build(scripted_client)
    old = os.umask(0o027)
    try:
        path = save_model(model, tmp_path / "models" / "noodles.json")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # the umask decides, not a forced 0600
    loaded = load_model(path)
    assert loaded == model
    assert loaded.model_dump_json() == model.model_dump_json()
    again = save_model(loaded, tmp_path / "again.json")
    assert again.read_bytes() == path.read_bytes()
    assert [p.name for p in path.parent.iterdir()] == ["noodles.json"]  # no temp file left behind


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"schema_version": 99}', "schema version 99 is not supported"),
    ('{"schema_version": 1, "scenario": {"outcome1": "a", "outcome2": "b"}}', "not a valid BIRD model: config"),
])
def test_unusable_model_files_give_one_line_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(BirdModelFileError, match=message) as info:
        load_model(path)
    assert "\n" not in str(info.value)
    with pytest.raises(BirdModelFileError, match="no such file"):
        load_model(tmp_path / "missing.json")


# --------------------------------------------------------------------------- estimates


def expected_marginal(model: BirdModel, fixed: dict[int, int]) -> float:
    """The mean output over completions, written out with plain Python."""
    import itertools

    params = model.parameter_matrix()
    outs = []
    for combo in itertools.product(*(range(len(f.values)) for f in model.factors)):
        if any(combo[i] != j for i, j in fixed.items()):
            continue
        ps = [params[i][j] for i, j in enumerate(combo)]
        num = float(np.prod(ps))
        outs.append(num / (num + float(np.prod([1 - p for p in ps]))))
    return sum(outs) / len(outs)


def run_estimates(method: BirdMethod, conditions: list[str]) -> tuple[BirdModel, list[BirdEstimate]]:
    async def go():
        model = await method.prepare(NOODLES)
        return model, [await method.estimate(model, c) for c in conditions]

    return asyncio.run(go())


def test_strict_estimates(scripted_client):
    client = scripted_client(script())
    method = BirdMethod(client, CONFIG)
    model, (boil, covered, unrelated, misread) = run_estimates(method, [BOIL, COVERED_THICK, UNRELATED, MISREAD])

    assert boil.status == "ok" and boil.n_values == 1 and boil.n_assignments == 4
    assert boil.p_outcome1 == pytest.approx(expected_marginal(model, {0: 0}), abs=1e-12)
    assert boil.p_outcome1 > 0.8
    assert boil.trace.votes["water temperature"] == {"boiling water": 3, "lukewarm water": 0}
    assert boil.trace.reflection_ran and not boil.trace.relaxed_used
    # One call per factor per round, plus one reflection.
    assert {c.stage: c.llm_calls for c in boil.cost} == {"bird.mapping": 9, "bird.reflect": 1}

    assert covered.status == "ok" and covered.n_values == 2 and covered.n_assignments == 2
    assert covered.p_outcome1 == pytest.approx(expected_marginal(model, {1: 0, 2: 1}), abs=1e-12)
    assert [(m.factor, m.value) for m in covered.trace.mapped] == [("pot lid", "lid on"),
                                                                    ("noodle type", "thick wheat noodles")]

    assert unrelated.status == "abstained" and unrelated.p_outcome1 is None
    assert unrelated.reason == "no value of any factor reached 2 of 3 votes"
    assert not unrelated.trace.reflection_ran
    assert {c.stage: c.llm_calls for c in unrelated.cost} == {"bird.mapping": 9}

    # Two rounds name 'lid on', one names a value that is not listed (discarded and counted);
    # reflection then answers with a string that matches no mapped value, so nothing stays.
    assert misread.trace.invalid_answers == 1 and misread.trace.rounds[2].invalid == ["pot lid"]
    assert misread.trace.voted == [MappedValue(factor="pot lid", value="lid on")]
    assert misread.trace.reflection_invalid == 1
    assert misread.status == "abstained"
    assert misread.reason == "reflection removed every mapped value; 1 reflection answer(s) named no mapped value"
    assert "1 mapping answer(s) named no listed value and were discarded" in misread.notes
    json.dumps(misread.model_dump(mode="json"))  # the audit trail is JSON-able


def test_relaxed_estimates_fall_back_to_the_closest_value(scripted_client):
    client = scripted_client(script())
    method = BirdMethod(client, CONFIG, relaxed=True)
    model, (boil, unrelated, misread) = run_estimates(method, [BOIL, UNRELATED, MISREAD])
    assert method.name == "bird-relaxed"
    assert not boil.trace.relaxed_used and boil.status == "ok"
    for est in (unrelated, misread):
        assert est.trace.relaxed_used and est.trace.relaxed_answer == "pot lid: no lid"
        assert est.trace.mapped == [MappedValue(factor="pot lid", value="no lid")]
        assert est.status == "ok" and est.n_values == 1
        assert est.p_outcome1 == pytest.approx(expected_marginal(model, {1: 1}), abs=1e-12)
    assert {c.stage: c.llm_calls for c in unrelated.cost} == {"bird.mapping": 9, "bird.mapping.relaxed": 1}


def test_relaxed_fallback_reasks_until_a_listed_value(scripted_client):
    answers = iter([("pot lid", "a saucepan"), ("kitchen", "no lid")])
    client = scripted_client(script(closest=lambda condition, options: next(answers)))
    method = BirdMethod(client, CONFIG, relaxed=True)
    _, (est,) = run_estimates(method, [UNRELATED])
    # The first answer names no listed value and is asked again; the second names a value that
    # only one factor has, so the wrong factor name does not matter.
    assert est.status == "ok" and est.trace.mapped == [MappedValue(factor="pot lid", value="no lid")]
    relaxed = next(c for c in est.cost if c.stage == "bird.mapping.relaxed")
    assert (relaxed.llm_calls, relaxed.failed_attempts) == (2, 1)


def test_relaxed_fallback_that_never_names_a_value_fails_clearly(scripted_client):
    client = scripted_client(script(closest=lambda condition, options: ("pot lid", "a saucepan")))
    method = BirdMethod(client, CONFIG, relaxed=True)
    _, (est,) = run_estimates(method, [UNRELATED])
    assert est.status == "failed" and est.p_outcome1 is None
    assert est.reason.startswith("the relaxed fallback gave no listed value")
    assert est.trace is not None and est.trace.relaxed_used


def test_prepare_reuses_models_and_builds_once(scripted_client, tmp_path):
    saved: list[BirdModel] = []
    client = scripted_client(script())
    method = BirdMethod(client, CONFIG, save=saved.append)

    async def go():
        return await asyncio.gather(*(method.prepare(NOODLES) for _ in range(3)))

    models = asyncio.run(go())
    assert models[0] is models[1] is models[2] and len(saved) == 1
    assert client.ledger.total().llm_calls == 148

    # A stored model is reused through ``load`` (no LLM call); one built with other settings is not.
    path = save_model(saved[0], tmp_path / "m.json")
    fresh = scripted_client(script())
    reuse = BirdMethod(fresh, BirdConfig(max_factors=4, mapping_rounds=5), load=lambda s: load_model(path))
    assert asyncio.run(reuse.prepare(NOODLES)) == saved[0] and fresh.ledger.total().llm_calls == 0
    other = BirdMethod(fresh, BirdConfig(max_factors=4, epochs=5), load=lambda s: load_model(path))
    assert asyncio.run(other.prepare(NOODLES)).training.epochs == 5
    assert fresh.ledger.total().llm_calls == 148


# --------------------------------------------------------------------------- hand-computed inference


def hand_model(params: list[list[float]], names=("A", "B", "C")) -> BirdModel:
    factors = []
    trained = []
    for name, ps in zip(names, params, strict=False):
        values = [BirdValue(text=f"{name.lower()}{i + 1}", label=FactorLabel.OUTCOME1 if p > 0.5 else
                            FactorLabel.OUTCOME2 if p < 0.5 else FactorLabel.NEUTRAL) for i, p in enumerate(ps)]
        factors.append(BirdFactor(name=name, values=values))
        trained += [TrainedValue(factor=name, value=v.text, label=v.label, init=0.5, p=p) for v, p in zip(values, ps,
                                                                                                          strict=True)]
    training = TrainingRecord(trained=True, seed=0, seeded=True, epochs=20, lr=0.01, batch_size=4, margin_weight=10,
                              constrained=True, param_eps=1e-3, reconciliation="balanced",
                              case_sensitive_labels=False, product_size=0, cycled=False, n_samples=0, n_used=0,
                              n_dropped=0, margin_configs=0, margin_sampled=False, steps=0)
    return BirdModel(scenario=NOODLES, config=BirdConfig(), factors=factors, parameters=trained, training=training,
                     llm=LLMIdentity(backend="scripted", model="hand"))


def test_inference_averages_over_completions_by_hand():
    model = hand_model([[0.8, 0.3], [0.6, 0.4]])
    # Mapped a1: (a1,b1) = .48/(.48+.08) = 6/7 and (a1,b2) = .32/(.32+.12) = 8/11; mean 61/77.
    m = marginal_probability(model, [MappedValue(factor="A", value="a1")])
    assert m.p_outcome1 == pytest.approx(61 / 77, abs=1e-12) and m.n_assignments == 2
    # Both mapped: a single assignment, (a2,b2) = .12/(.12+.42) = 2/9.
    m = marginal_probability(model, [MappedValue(factor="A", value="a2"), MappedValue(factor="B", value="b2")])
    assert m.p_outcome1 == pytest.approx(2 / 9, abs=1e-12) and m.n_assignments == 1


def test_inference_over_three_factors_by_hand():
    model = hand_model([[0.75, 0.25], [0.6, 0.5, 0.2], [0.9, 0.1]])
    # Mapped b3 (p=0.2): completions over A x C, four of them.
    outs = []
    for a in (0.75, 0.25):
        for c in (0.9, 0.1):
            num = a * 0.2 * c
            outs.append(num / (num + (1 - a) * 0.8 * (1 - c)))
    m = marginal_probability(model, [MappedValue(factor="B", value="b3")])
    assert m.p_outcome1 == pytest.approx(sum(outs) / 4, abs=1e-12) and m.n_assignments == 4
    # (.75*.2*.9)/(...+.25*.8*.1) = .135/.155 for (a1, c1); check the first term to pin the formula.
    assert outs[0] == pytest.approx(0.135 / 0.155)


def test_exact_half_is_an_abstention_that_keeps_its_probability(scripted_client):
    model = hand_model([[0.5, 0.5], [0.75, 0.25]])
    client = scripted_client(BirdScript(choose=lambda condition, factor, values, r: "a1" if factor == "A" else "none"))
    est = asyncio.run(BirdMethod(client, BirdConfig()).estimate(model, "Anything at all."))
    # (a1,b1) = .375/.5 = .75 and (a1,b2) = .125/.5 = .25: exactly 0.5 on average.
    assert est.status == "abstained" and est.p_outcome1 == 0.5
    assert "exactly 0.5" in est.reason and "decision rule" in est.reason


def test_unconstrained_parameters_outside_the_unit_interval(scripted_client, tmp_path):
    pick_a1 = BirdScript(choose=lambda condition, factor, values, r: "a1" if factor == "A" else "none")
    # p(a1) = 1.5: (a1,b1) = .9/(.9 - .5*.4) = 9/7 and (a1,b2) = .6/(.6 - .5*.6) = 2; the mean 23/14 is clipped.
    model = hand_model([[1.5, 0.3], [0.6, 0.4]])
    est = asyncio.run(BirdMethod(scripted_client(pick_a1), BirdConfig()).estimate(model, "Anything."))
    assert est.status == "ok" and est.p_outcome1 == 1.0
    assert f"model output {23 / 14:.4f} lies outside [0, 1] (unconstrained parameters); clipped" in est.notes
    diverged = hand_model([[float("nan"), 0.3], [0.6, 0.4]])
    est = asyncio.run(BirdMethod(scripted_client(pick_a1), BirdConfig()).estimate(diverged, "Anything."))
    assert est.status == "failed" and "no finite probability" in est.reason
    # Such parameters survive a save and load.
    loaded = load_model(save_model(diverged, tmp_path / "nan.json"))
    assert loaded.model_dump_json() == diverged.model_dump_json() and np.isnan(loaded.parameters[0].p)


# --------------------------------------------------------------------------- bad input


def test_every_factor_pruned_is_an_unknown_with_its_reason(scripted_client):
    model, _ = build(scripted_client, script(label=lambda f, v, r: "both"))
    assert model.factors == [] and model.training is None and not model.samples
    assert any(n.startswith("no usable factor: every factor was pruned") for n in model.notes)
    client = scripted_client(script())
    est = asyncio.run(BirdMethod(client, CONFIG).estimate(model, BOIL))
    # The method's answer (unknown, open to the CoT fallback), not a failed run to retry.
    assert est.status == "abstained" and est.p_outcome1 is None and "every factor was pruned" in est.reason
    assert client.backend.requests == []  # nothing to map onto, so no call


def test_unusable_factor_structure_answers_give_no_usable_factor(scripted_client):
    def responder(req: ScriptedRequest):
        if req.schema_name == "BirdFactorStructure":
            return "I would rather not say."
        return script()(req)

    model, _ = build(scripted_client, responder)  # type: ignore[arg-type]
    assert model.factors == []
    assert model.notes == ["no usable factor: the factor-structure call gave no factor with values"]
    assert model.abduction.failures and "initial" in model.abduction.failures[0]
    est = asyncio.run(BirdMethod(scripted_client(script()), CONFIG).estimate(model, BOIL))
    assert est.status == "failed" and "gave no factor with values" in est.reason


def test_one_class_training_set_is_noted_in_every_estimate(scripted_client):
    model, _ = build(scripted_client, script(judge=lambda values: ("likely", "unlikely")))
    assert model.warnings and model.warnings[0].startswith("one-class training set")
    client = scripted_client(script())
    est = asyncio.run(BirdMethod(client, CONFIG).estimate(model, BOIL))
    assert est.status == "ok" and est.notes[0].startswith("one-class training set")


def test_out_of_scale_judgements_are_dropped_with_a_note(scripted_client):
    def judge(values):
        return ("probable", "improbable") if "lid on." in values else truthful_judge(values)

    model, _ = build(scripted_client, script(judge=judge))
    assert (model.training.n_used, model.training.n_dropped) == (64, 64)
    dropped = [s for s in model.samples if not s.used]
    assert all(s.values[1] == 0 and s.target is None for s in dropped)
    assert dropped[0].note == "dropped: answer 'probable' names no level of the verbal scale"
    assert model.notes[0].startswith("64 of 128 judgements named no level of the verbal scale and were dropped")


def test_no_usable_judgement_means_no_training_and_failed_estimates(scripted_client):
    model, _ = build(scripted_client, script(judge=lambda values: ("perhaps", "perhaps")))
    assert model.training is not None and not model.training.trained and model.training.n_used == 0
    assert [p.p for p in model.parameters] == [p.init for p in model.parameters]
    est = asyncio.run(BirdMethod(scripted_client(script()), CONFIG).estimate(model, BOIL))
    assert est.status == "failed" and "could not be trained" in est.reason


def test_empty_condition_is_a_one_line_error(scripted_client):
    model = hand_model([[0.8, 0.3], [0.6, 0.4]])
    with pytest.raises(ValueError, match="condition text is empty") as info:
        asyncio.run(BirdMethod(scripted_client(BirdScript()), BirdConfig()).estimate(model, "   "))
    assert "\n" not in str(info.value)


def test_strict_replication_reads_lowercase_levels_as_neutral(scripted_client):
    config = BirdConfig.strict_replication(max_factors=4, seed=0)
    model, _ = build(scripted_client, script(), config)
    # Every judgement is lowercase, which the reference parser does not see: all neutral, 0.5.
    assert {s.target for s in model.samples} == {0.5} and {s.level1 for s in model.samples} == {SCALE[3]}
    assert not model.training.seeded and not model.training.constrained and model.training.param_eps is None
    assert any("all 128 usable judgements are neutral" in w for w in model.warnings)


def test_strict_replication_flips_very_likely_likely(scripted_client):
    def judge(values):
        return ("Very likely", "Likely") if "boiling water." in values else ("Unlikely", "Likely")

    fixed, _ = build(scripted_client, script(judge=judge))
    original, _ = build(scripted_client, script(judge=judge),
                        BirdConfig(max_factors=4, reconciliation="original", case_sensitive_labels=True))
    assert {s.target for s in fixed.samples if s.values[0] == 0} == {0.8}
    assert {s.target for s in original.samples if s.values[0] == 0} == {0.2}


# --------------------------------------------------------------------------- real HTTP


def test_end_to_end_against_an_openai_compatible_server(tmp_path):
    s = script()

    def respond(body) -> str:
        fmt = body["response_format"]
        req = ScriptedRequest(messages=body["messages"], schema_name=fmt["json_schema"]["name"],
                              json_schema=fmt["json_schema"]["schema"], temperature=body.get("temperature", 0),
                              max_tokens=body.get("max_tokens", 0), seed=body.get("seed"), top_logprobs=None)
        return json.dumps(s(req))

    async def go(server: FakeOpenAIServer):
        client = LLMClient(OpenAICompatibleBackend(server.base_url, None, timeout=120.0), ledger=CostLedger())
        try:
            method = BirdMethod(client, CONFIG, relaxed=True, save=lambda m: save_model(m, tmp_path / "m.json"))
            model = await method.prepare(NOODLES)
            return client, model, [await method.estimate(model, c) for c in (BOIL, UNRELATED)]
        finally:
            await client.aclose()

    with FakeOpenAIServer(responder=respond) as server:
        client, model, (boil, unrelated) = asyncio.run(go(server))
        served = server.completions
    assert [f.name for f in model.factors] == ["water temperature", "pot lid", "noodle type"]
    assert model.llm.model == "fake-model" and load_model(tmp_path / "m.json") == model
    assert boil.status == "ok" and boil.p_outcome1 == pytest.approx(expected_marginal(model, {0: 0}), abs=1e-12)
    assert unrelated.status == "ok" and unrelated.trace.relaxed_used
    # The ledger counts exactly the requests the server saw: 148 to build, 10 + 10 to estimate.
    assert served == client.ledger.total().llm_calls == 148 + 10 + 10
    assert sum(c.llm_calls for c in model.cost) == 148
