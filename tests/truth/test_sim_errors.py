"""Each error parameter of the simulated LLM does what its documentation says, and its randomness is
deterministic: the same request gets the same answer, another seed another draw.

Rates are checked over many requests (different request seeds) against a binomial bound computed
here: |count - n p| <= 5 sqrt(n p (1 - p)) + 1. The draws are seeded, so each check gives the same
count on every run; the bound only says the count is what the rate means, not a lucky one.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from anchor import prompts
from anchor.llm.structured import inline_schema
from anchor.truth.simulate import Miscalibration, SimErrors, SimulatedLLM
from anchor.truth.simulate.errors import OPEN_EDGE
from tests.truth.sim_worlds import LATENT_FACTORS, NB_FACTORS, latent_world, nb_world, world_file

NB = nb_world()
LAT = latent_world()
NB_TEXT = {fid: spec[0] for fid, spec in NB_FACTORS.items()}
NB_PHI = {"f1": 2 / 3, "f2": 1 / 3, "f3": 10 / 19, "f4": 0.7, "f5": 2 / 7, "f6": 0.6875, "f7": 6 / 17, "f8": 1 / 3}


def sim(seed: int = 0, **errors: Any) -> SimulatedLLM:
    """The simulated LLM with no error but ``errors``."""
    return SimulatedLLM(world_file(), SimErrors.zero().model_copy(update=errors), seed=seed)


def ask(llm: SimulatedLLM, spec: Any, schema: Any, seed: int, **values: Any) -> Any:
    raw = llm.answer(spec.render(**values), json_schema=inline_schema(schema or spec.schema), seed=seed)
    return json.loads(raw.text)


def within_binomial(count: int, n: int, p: float) -> bool:
    return abs(count - n * p) <= 5 * math.sqrt(n * p * (1 - p)) + 1


def logit(p: float) -> float:
    return math.log(p / (1 - p))


# --------------------------------------------------------------------------- the curve


def test_the_exact_curve_passes_values_unchanged() -> None:
    exact = Miscalibration(slope=1, bias=0, noise=0, step=0)
    assert exact.exact
    for p in (0.1234567891234, 2 / 3, 0.5):
        assert exact.apply(p, None) == p
    assert exact.apply(1.0, None) == 1 - OPEN_EDGE and exact.apply(0.0, None) == OPEN_EDGE


def test_slope_and_bias_bend_the_log_odds() -> None:
    sharp = Miscalibration(slope=2, bias=0, noise=0, step=0)
    assert sharp.apply(0.75, None) == pytest.approx(0.9, abs=1e-12)  # odds 3 -> 9
    flat = Miscalibration(slope=0.5, bias=0, noise=0, step=0)
    assert flat.apply(0.8, None) == pytest.approx(2 / 3, abs=1e-12)  # odds 4 -> 2
    leaning = Miscalibration(slope=1, bias=math.log(2), noise=0, step=0)
    assert leaning.apply(0.5, None) == pytest.approx(2 / 3, abs=1e-12)  # odds 1 -> 2
    assert Miscalibration(slope=0, bias=0, noise=0, step=0).apply(0.97, None) == 0.5


def test_step_rounds_and_near_the_edges_keeps_one_significant_digit() -> None:
    curve = Miscalibration(slope=1, bias=0, noise=0, step=0.05)
    assert curve.apply(0.6931, None) == 0.7 and curve.apply(0.26, None) == 0.25 and curve.apply(0.051, None) == 0.05
    # a rare event is stated as one, not as the step: 0.0137 -> 0.01, 0.0021 -> 0.002, 0.999 -> 0.999
    assert curve.apply(0.0137, None) == 0.01 and curve.apply(0.0021, None) == 0.002
    assert curve.apply(0.999, None) == 0.999 and curve.apply(0.9713, None) == 0.97
    assert curve.apply(0.0, None) == 1e-6 and curve.apply(1.0, None) == 1 - 1e-6  # never 0 or 1
    assert curve.apply(0.048, None) == 0.05


def test_noise_is_gaussian_on_the_log_odds_and_needs_a_random_source() -> None:
    import random

    curve = Miscalibration(slope=1, bias=0, noise=0.5, step=0)
    with pytest.raises(ValueError):
        curve.apply(0.3, None)
    rng = random.Random(7)
    shifts = [logit(curve.apply(0.3, rng)) - logit(0.3) for _ in range(2000)]
    mean = sum(shifts) / len(shifts)
    sd = math.sqrt(sum((s - mean) ** 2 for s in shifts) / (len(shifts) - 1))
    assert abs(mean) < 5 * 0.5 / math.sqrt(2000)
    assert 0.45 < sd < 0.55


def test_zero_is_the_oracle_and_defaults_are_a_decent_llm() -> None:
    zero = SimErrors.zero()
    assert zero.factor_curve.exact and zero.direct_curve.exact and zero.base_rate_curve.exact
    assert (zero.factor_recall, zero.hallucination_rate, zero.vote_flip_rate) == (1.0, 0.0, 0.0)
    assert (zero.map_recall, zero.map_false_rate, zero.reflect_catch, zero.grouping_error) == (1.0, 0.0, 1.0, 0.0)
    assert (zero.direct_miss_rate, zero.direct_invent_rate) == (0.0, 0.0)
    decent = SimErrors()
    assert decent.factor_recall == 0.9 and decent.factor_curve.noise == 0.3
    # symmetric: the direct side is given the factor-level curve, and misreads as one selection round does
    assert decent.direct_curve == decent.factor_curve == decent.base_rate_curve
    assert decent.direct_miss_rate == pytest.approx(1 - decent.map_recall) and decent.direct_invent_rate == decent.map_false_rate
    for name, field in SimErrors.model_fields.items():
        assert field.description, f"{name} is not documented"


# --------------------------------------------------------------------------- abduction


def named_factors(llm: SimulatedLLM, requests: int) -> set[str]:
    found: set[str] = set()
    schema = prompts.text_list_schema("Sentences", "sentences", 10, 240)
    for seed in range(requests):
        answer = ask(llm, prompts.GENERATE_SENTENCES, schema, seed, scenario=NB.scenario, outcome1=NB.outcome1,
                     outcome2=NB.outcome2, known="none yet", n=10)
        for sentence in answer["sentences"]:
            found.update(fid for fid, text in NB_TEXT.items() if text in sentence.casefold())
    return found


def test_factor_recall_fixes_which_factors_can_ever_be_named() -> None:
    subsets = set()
    for world_seed in range(6):
        llm = sim(world_seed, factor_recall=0.5)
        named = named_factors(llm, 40)
        assert len(named) == 4  # round(0.5 * 8), however many requests
        subsets.add(frozenset(named))
    assert len(subsets) > 1  # which ones depends on the simulator's seed
    assert len(named_factors(sim(), 10)) == 8


def test_hallucinated_factors_are_named_believed_and_neutral() -> None:
    llm = sim(hallucination_rate=0.25)
    schema = prompts.text_list_schema("Sentences", "sentences", 10, 240)
    sentences = ask(llm, prompts.GENERATE_SENTENCES, schema, 0, scenario=NB.scenario, outcome1=NB.outcome1,
                    outcome2=NB.outcome2, known="none yet", n=10)["sentences"]
    extracted = ask(llm, prompts.EXTRACT_FACTORS, prompts.text_list_schema("Factors", "factors", 30, 80), 0,
                    scenario=NB.scenario, outcome1=NB.outcome1, outcome2=NB.outcome2,
                    sentences=prompts.numbered(sentences))["factors"]
    invented = [t for t in extracted if t not in NB_TEXT.values()]
    assert len(invented) == 2 and len(extracted) == 10  # round(0.25 * 8) inventions beside the 8 real factors
    verdicts = ask(llm, prompts.VALIDATE_FACTORS, prompts.keyed_schema("Validation", 2, "verdict"), 0,
                   scenario=NB.scenario, outcome1=NB.outcome1, outcome2=NB.outcome2,
                   candidates=prompts.numbered(invented, keys=True))
    assert set(verdicts.values()) == {"keep"}
    votes = ask(llm, prompts.VOTE_LABELS, prompts.keyed_schema("Votes", 2, "label"), 0, scenario=NB.scenario,
                outcome1=NB.outcome1, outcome2=NB.outcome2, factors=prompts.numbered(invented, keys=True))
    assert set(votes.values()) == {"neutral"}
    phis = ask(llm, prompts.ELICIT_PHI, prompts.keyed_schema("P", 2, "prob"), 0, scenario=NB.scenario,
               outcome1=NB.outcome1, outcome2=NB.outcome2,
               factors=prompts.numbered([f"{t} (rough: 0.50)" for t in invented], keys=True))
    assert set(phis.values()) == {0.5}


# --------------------------------------------------------------------------- voting


def test_vote_flips_happen_at_their_rate_and_go_to_either_other_label() -> None:
    llm = sim(vote_flip_rate=0.2)
    truth = {"f1": "outcome1", "f2": "outcome2", "f3": "neutral", "f4": "outcome1", "f5": "outcome2",
             "f6": "outcome1", "f7": "outcome2", "f8": "outcome2"}
    flips, to = 0, set()
    for seed in range(150):
        votes = ask(llm, prompts.VOTE_LABELS, prompts.keyed_schema("Votes", 8, "label"), seed, scenario=NB.scenario,
                    outcome1=NB.outcome1, outcome2=NB.outcome2, factors=prompts.numbered(list(NB_TEXT.values()), keys=True))
        for key, fid in zip(prompts.item_keys(8), NB_TEXT, strict=True):
            if votes[key] != truth[fid]:
                flips += 1
                to.add((truth[fid], votes[key]))
    assert within_binomial(flips, 150 * 8, 0.2)
    assert {("outcome1", "outcome2"), ("outcome1", "neutral"), ("neutral", "outcome1"),
            ("neutral", "outcome2")} <= to


# --------------------------------------------------------------------------- mapping


def condition(world: Any, cid: str) -> str:
    return next(c.text for c in world.conditions if c.id == cid)


def test_selection_recall_and_false_selections_happen_at_their_rates() -> None:
    llm = sim(map_recall=0.7, map_false_rate=0.2)
    candidates = [NB_TEXT[f] for f in ("f5", "f1", "f6", "f3", "f7")]  # c3 makes f5, f6, f7 present
    schema = prompts.choice_list_schema("Selection", "selected", tuple(candidates))
    true_hits = false_hits = 0
    for seed in range(300):
        picked = ask(llm, prompts.SELECT_FACTORS, schema, seed, scenario=NB.scenario, condition=condition(NB, "c3"),
                     candidates="\n".join(f"- {t}" for t in candidates))["selected"]
        true_hits += sum(t in picked for t in (NB_TEXT["f5"], NB_TEXT["f6"], NB_TEXT["f7"]))
        false_hits += sum(t in picked for t in (NB_TEXT["f1"], NB_TEXT["f3"]))
    assert within_binomial(true_hits, 900, 0.7)
    assert within_binomial(false_hits, 600, 0.2)


def test_reflection_keeps_true_factors_and_catches_wrong_ones_at_its_rate() -> None:
    llm = sim(reflect_catch=0.6)
    shown = [NB_TEXT[f] for f in ("f5", "f1", "f7", "f8")]  # f1 and f8 are wrong for c3
    schema = prompts.choice_list_schema("Reflection", "keep", tuple(shown))
    removed = 0
    for seed in range(300):
        kept = ask(llm, prompts.REFLECT_FACTORS, schema, seed, condition=condition(NB, "c3"),
                   factors="\n".join(f"- {t}" for t in shown))["keep"]
        assert NB_TEXT["f5"] in kept and NB_TEXT["f7"] in kept
        removed += (NB_TEXT["f1"] not in kept) + (NB_TEXT["f8"] not in kept)
    assert within_binomial(removed, 600, 0.6)


# --------------------------------------------------------------------------- elicitation and grouping


def elicited(llm: SimulatedLLM, seed: int) -> list[float]:
    lines = [f"{t} (rough: 0.50)" for t in NB_TEXT.values()]
    answer = ask(llm, prompts.ELICIT_PHI, prompts.keyed_schema("P", 8, "prob"), seed, scenario=NB.scenario,
                 outcome1=NB.outcome1, outcome2=NB.outcome2, factors=prompts.numbered(lines, keys=True))
    return [answer[k] for k in prompts.item_keys(8)]


def test_factor_curve_bends_elicited_phi() -> None:
    sharp = sim(factor_curve=Miscalibration(slope=2, bias=0, noise=0, step=0))
    expected = [p * p / (p * p + (1 - p) ** 2) for p in NB_PHI.values()]  # odds squared
    assert elicited(sharp, 0) == pytest.approx(expected, abs=1e-12)
    rounded = sim(factor_curve=Miscalibration(slope=1, bias=0, noise=0, step=0.1))
    assert elicited(rounded, 0) == [0.7, 0.3, 0.5, 0.7, 0.3, 0.7, 0.4, 0.3]
    noisy = sim(factor_curve=Miscalibration(slope=1, bias=0, noise=0.4, step=0))
    shifts = [logit(v) - logit(p) for seed in range(100) for v, p in zip(elicited(noisy, seed), NB_PHI.values(), strict=True)]
    mean = sum(shifts) / len(shifts)
    sd = math.sqrt(sum((s - mean) ** 2 for s in shifts) / (len(shifts) - 1))
    assert abs(mean) < 5 * 0.4 / math.sqrt(len(shifts)) and 0.36 < sd < 0.44


def test_direct_curve_bends_holistic_estimates_but_not_phi() -> None:
    llm = sim(direct_curve=Miscalibration(slope=0.5, bias=0, noise=0, step=0))
    answer = ask(llm, prompts.VANILLA, None, 0, scenario=NB.scenario, condition=condition(NB, "c7"),
                 outcome1=NB.outcome1, outcome2=NB.outcome2)
    odds = math.sqrt(4.4)  # c7's true odds 4.4, flattened to its square root
    assert answer["probability"] == pytest.approx(odds / (1 + odds), abs=1e-12)
    assert elicited(llm, 0) == pytest.approx(list(NB_PHI.values()), abs=1e-12)


def test_grouping_error_misplaces_factors_at_its_rate() -> None:
    llm = sim(grouping_error=0.3)
    texts = [spec[0] for spec in LATENT_FACTORS.values()]
    home = {spec[0]: spec[1] for spec in LATENT_FACTORS.values()}
    schema = prompts.latent_partition_schema(tuple(texts), 5)
    wrong = 0
    for seed in range(100):
        groups = ask(llm, prompts.DISCOVER_LATENTS, schema, seed, scenario=LAT.scenario,
                     factors="\n".join(f"- {t}" for t in texts), max_latents=5)["latents"]
        for group in groups:
            names = {"Staff Readiness": "L1", "Technical Reliability": "L2", "Workload Pressure": "L3"}
            wrong += sum(home[t] != names[group["name"]] for t in group["factors"])
    assert within_binomial(wrong, 900, 0.3)


# --------------------------------------------------------------------------- determinism


def test_the_same_request_gets_the_same_answer_and_another_seed_another_draw() -> None:
    llm = SimulatedLLM(world_file(), SimErrors(), seed=0)  # the defaults: noisy
    assert elicited(llm, 3) == elicited(llm, 3)
    assert elicited(SimulatedLLM(world_file(), SimErrors(), seed=0), 3) == elicited(llm, 3)
    assert len({tuple(elicited(llm, s)) for s in range(5)}) == 5
    assert elicited(SimulatedLLM(world_file(), SimErrors(), seed=1), 3) != elicited(llm, 3)


def test_samples_of_one_prompt_differ_and_match_lone_requests() -> None:
    llm = SimulatedLLM(world_file(), SimErrors().model_copy(update={"vote_flip_rate": 0.5}), seed=0)
    messages = prompts.VOTE_LABELS.render(scenario=NB.scenario, outcome1=NB.outcome1, outcome2=NB.outcome2,
                                          factors=prompts.numbered(list(NB_TEXT.values()), keys=True))
    schema = inline_schema(prompts.keyed_schema("Votes", 8, "label"))
    many = llm.answers(messages, n=4, json_schema=schema, seed=100)
    assert [c.text for c in many] == [llm.answer(messages, json_schema=schema, seed=100 + j).text for j in range(4)]
    assert len({c.text for c in many}) > 1


def test_errors_from_settings_and_files(tmp_path: Any) -> None:
    from anchor.truth.simulate.errors import SimErrorsInvalid, errors_with_settings, load_errors

    got = errors_with_settings(SimErrors(), ["factor_recall=0.5", "direct_curve.noise=0.8", "phi-reading=latent-link"])
    assert got.factor_recall == 0.5 and got.direct_curve.noise == 0.8 and got.direct_curve.slope == 1.0
    assert got.phi_reading == "latent-link"
    for bad, says in (("factor_recall=1.5", "factor_recall"), ("recall=0.5", "unknown error parameter 'recall'"),
                      ("direct_curve.nois=1", "direct_curve.nois"), ("factor_recall", "NAME=VALUE")):
        with pytest.raises(SimErrorsInvalid, match=says):
            errors_with_settings(SimErrors(), [bad])
    path = tmp_path / "errors.json"
    path.write_text(json.dumps({"schema_version": 1, "vote_flip_rate": 0.3, "factor_curve": {"slope": 1.5}}))
    loaded = load_errors(str(path), SimErrors.zero())
    assert loaded.vote_flip_rate == 0.3 and loaded.factor_curve.slope == 1.5 and loaded.factor_curve.noise == 0
    path.write_text(json.dumps({"schema_version": 9}))
    with pytest.raises(SimErrorsInvalid, match="schema_version 9"):
        load_errors(str(path))


def test_a_generated_worlds_inventions_are_its_own_domains_factors_it_does_not_use() -> None:
    from anchor.truth.generate import generate_worlds
    from anchor.truth.simulate.invented import INVENTED
    from anchor.truth.simulate.knowledge import WorldKnowledge, invention_pool
    from anchor.truth.vocabulary import DOMAINS

    file = generate_worlds("all", 2, seed=3, n_conditions=6)
    for world in file.worlds:
        domain = next(d for d in DOMAINS if d.outcome1 == world.outcome1 and d.outcome2 == world.outcome2)
        bank = {w.text: th.name for th in domain.themes for w in th.factors}
        used = {f.text for f in world.factors}
        pool = invention_pool(world)
        # plausible but absent: every unused factor of the world's domain, with its theme, and nothing else
        assert {(e.text, e.theme) for e in pool} == {(t, th) for t, th in bank.items() if t not in used}
        knows = WorldKnowledge(world, SimErrors(hallucination_rate=0.4), seed=1)
        invented = [e for e in knows.known if e.invented]
        assert len(invented) == min(len(pool), round(0.4 * len(world.factors))) > 0
        assert all(e.text in bank and e.text not in used for e in invented)
        # the same seed invents the same ones; another seed may not
        again = WorldKnowledge(world, SimErrors(hallucination_rate=0.4), seed=1)
        assert [e.text for e in again.known] == [e.text for e in knows.known]
    seeds = {tuple(e.text for e in WorldKnowledge(file.worlds[0], SimErrors(hallucination_rate=0.4), seed=s).known
                   if e.invented) for s in range(6)}
    assert len(seeds) > 1
    # a hand-made world, from no domain of the bank, invents from the unrelated phrases
    assert {(e.theme, e.text) for e in invention_pool(NB)} <= set(INVENTED)


def test_an_invented_factor_is_grouped_with_the_real_ones_of_its_theme() -> None:
    from anchor.truth.generate import generate_worlds
    from anchor.truth.world import WorldFile

    world = next(w for w in generate_worlds("latent", 1, seed=5, n_conditions=6).worlds)
    llm = SimulatedLLM(WorldFile(generator={}, worlds=[world]), SimErrors.zero().model_copy(
        update={"hallucination_rate": 0.5}), seed=0)
    knows = llm._sim.knowledge(world)
    invented = [e for e in knows.known if e.invented and e.theme in knows.theme_latent]
    assert invented  # some inventions come from a theme the world uses
    texts = [e.text for e in knows.known]
    answer = ask(llm, prompts.DISCOVER_LATENTS, prompts.latent_partition_schema(tuple(texts), 4), 0,
                 scenario=world.scenario, factors="\n".join(f"- {t}" for t in texts), max_latents=4)
    group_of = {t: g["name"] for g in answer["latents"] for t in g["factors"]}
    for e in invented:
        real = next(r for r in knows.real if r.theme == e.theme and r.text in group_of)
        assert group_of[e.text] == group_of[real.text]
