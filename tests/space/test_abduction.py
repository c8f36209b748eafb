"""Stage 1 abduction: candidate validation (exact/near duplicates, LLM verdicts, example echoes)
and the stopping rules, driven by a scripted LLM and the real MiniLM embedder."""

from __future__ import annotations

import numpy as np
import pytest

from anchor.settings.space import BuildParams
from anchor.space.abduction import Abductor
from anchor.space.validation import MAX_FACTOR_CHARS, normalize_factor
from anchor.types import StopReason
from tests.helpers import ScriptedLLM, requests_of, section, validation_items

# Pairs whose real MiniLM similarity is asserted before use (see ``cos``).
PARAPHRASE = ("boiling water temperature", "temperature of boiling water")  # ~0.98: near duplicate
BORDERLINE = ("cooking time", "cooking duration")  # ~0.81: between 0.75 and 0.9


def cos(embedder, a: str, b: str) -> float:
    va, vb = embedder.encode([a, b])
    return float(va @ vb)


def params(**kw) -> BuildParams:
    """Small sizes, one round at a time unless a test says otherwise."""
    base = dict(n_target=100, batch_size=3, max_rounds=2, patience=5, abduction_window=1, check_relevance=True)
    base.update(kw)
    return BuildParams(**base)


async def run(scripted_client, embedder, scenario, script: ScriptedLLM, p: BuildParams):
    client = scripted_client(script)
    outcome = await Abductor(client, embedder, p).run(scenario)
    return outcome, client.backend


def rejected(outcome, reason: str | None = None):
    out = [r for rnd in outcome.rounds for r in rnd.rejected]
    return [r for r in out if reason is None or r.reason == reason]


def validation_candidates(backend) -> list[list[tuple[str, str | None]]]:
    """Per validation call: the (candidate, similar) pairs it was asked about."""
    return [[(text, sim) for _, text, sim in validation_items(r.user)] for r in requests_of(backend, "Validation")]


# --------------------------------------------------------------------------- normalize_factor


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("- water temperature", "water temperature"),
        ("* water temperature", "water temperature"),
        ("\u2022 water temperature", "water temperature"),
        ("3. cooking time", "cooking time"),
        ("(2) cooking time", "cooking time"),
        ("4) cooking time", "cooking time"),
        ("F12: salt content", "salt content"),
        ('  "pot   size".  ', "pot size"),
        ("energy cost;", "energy cost"),
        ("`gas price`", "gas price"),
        ("heat\n\tloss", "heat loss"),
        ("state-of-the-art stove", "state-of-the-art stove"),
        ("", None),
        ("   ", None),
        ("123", None),
        ("- 42.", None),
        ("...", None),
        ("x" * (MAX_FACTOR_CHARS + 1), None),
    ],
)
def test_normalize_factor(raw, expected):
    assert normalize_factor(raw) == expected


def test_normalize_factor_keeps_text_at_the_length_limit():
    text = "a" * MAX_FACTOR_CHARS
    assert normalize_factor(text) == text


# --------------------------------------------------------------------------- duplicates


async def test_exact_duplicates_are_rejected_as_duplicate(scripted_client, embedder, noodles):
    script = ScriptedLLM(rounds=[
        ["water temperature", "cooking duration"],
        ["Water Temperature", "  water   temperature ", "COOKING duration.", "amount of salt", "Amount of  salt"],
    ])
    outcome, backend = await run(scripted_client, embedder, noodles, script, params())

    assert outcome.factors == ["water temperature", "cooking duration", "amount of salt"]
    assert outcome.found_in_round == [1, 1, 2]
    r2 = outcome.rounds[1]
    assert r2.added == ["amount of salt"]
    dups = [r for r in r2.rejected if r.reason == "duplicate"]
    assert [(r.text, r.similar_to) for r in dups] == [
        ("Water Temperature", "water temperature"),
        ("water temperature", "water temperature"),
        ("COOKING duration", "cooking duration"),
        ("Amount of salt", "amount of salt"),  # repeats a candidate of the same round
    ]
    assert all(r.similarity == 1.0 for r in dups)
    # Exact duplicates never reach the LLM.
    asked = [text for call in validation_candidates(backend) for text, _ in call]
    assert sorted(asked) == sorted(["water temperature", "cooking duration", "amount of salt"])


async def test_near_duplicate_paraphrase_is_rejected_without_an_llm_call(scripted_client, embedder, noodles):
    p = params()
    sim = cos(embedder, *PARAPHRASE)
    assert sim >= p.dedup_threshold, f"test premise: {PARAPHRASE} should be near duplicates (cos={sim:.3f})"
    script = ScriptedLLM(rounds=[[PARAPHRASE[0]], [PARAPHRASE[1]]])
    outcome, backend = await run(scripted_client, embedder, noodles, script, p)

    assert outcome.factors == [PARAPHRASE[0]]
    (rej,) = outcome.rounds[1].rejected
    assert rej.reason == "near_duplicate"
    assert rej.text == PARAPHRASE[1] and rej.similar_to == PARAPHRASE[0]
    assert rej.similarity == pytest.approx(sim, abs=1e-3)
    # Round 2 had nothing left to validate, so only round 1 asked the LLM.
    calls = validation_candidates(backend)
    assert calls == [[(PARAPHRASE[0], None)]]


async def test_near_duplicates_within_one_round_keep_only_the_first(scripted_client, embedder, noodles):
    script = ScriptedLLM(rounds=[[PARAPHRASE[0], "gas price", PARAPHRASE[1]]])
    outcome, backend = await run(scripted_client, embedder, noodles, script, params(max_rounds=1))
    assert outcome.factors == [PARAPHRASE[0], "gas price"]
    (rej,) = rejected(outcome)
    assert (rej.reason, rej.text, rej.similar_to) == ("near_duplicate", PARAPHRASE[1], PARAPHRASE[0])
    assert all(text != PARAPHRASE[1] for call in validation_candidates(backend) for text, _ in call)


async def test_lower_dedup_threshold_turns_a_borderline_pair_into_a_near_duplicate(scripted_client, embedder,
                                                                                      noodles):
    sim = cos(embedder, *BORDERLINE)
    p = params(dedup_threshold=sim - 0.05, borderline_threshold=sim - 0.1)
    script = ScriptedLLM(rounds=[[BORDERLINE[0]], [BORDERLINE[1]]])
    outcome, _ = await run(scripted_client, embedder, noodles, script, p)
    assert outcome.factors == [BORDERLINE[0]]
    assert [r.reason for r in rejected(outcome)] == ["near_duplicate"]


@pytest.mark.parametrize("verdict", ["keep", "duplicate", "irrelevant"])
async def test_borderline_pair_goes_to_the_llm_and_its_verdict_is_honoured(scripted_client, embedder, noodles,
                                                                           verdict):
    p = params()
    sim = cos(embedder, *BORDERLINE)
    assert p.borderline_threshold <= sim < p.dedup_threshold, f"test premise: borderline pair (cos={sim:.3f})"
    script = ScriptedLLM(rounds=[[BORDERLINE[0]], [BORDERLINE[1]]],
                         verdict=lambda text, similar: verdict if text == BORDERLINE[1] else "keep")
    outcome, backend = await run(scripted_client, embedder, noodles, script, p)

    # The second round's validation call showed the candidate next to its similar factor.
    assert validation_candidates(backend)[1] == [(BORDERLINE[1], BORDERLINE[0])]
    if verdict == "keep":
        assert outcome.factors == list(BORDERLINE)
        assert rejected(outcome) == []
    elif verdict == "duplicate":
        assert outcome.factors == [BORDERLINE[0]]
        (rej,) = rejected(outcome)
        assert (rej.reason, rej.text, rej.similar_to) == ("near_duplicate", BORDERLINE[1], BORDERLINE[0])
        assert rej.similarity == pytest.approx(sim, abs=1e-3)
    else:
        assert outcome.factors == [BORDERLINE[0]]
        assert [(r.reason, r.text) for r in rejected(outcome)] == [("irrelevant", BORDERLINE[1])]


async def test_irrelevant_verdict_rejects_the_candidate(scripted_client, embedder, noodles):
    script = ScriptedLLM(rounds=[["water temperature", "stock market trends", "noodle thickness"]],
                         verdict=lambda text, similar: "irrelevant" if text == "stock market trends" else "keep")
    outcome, backend = await run(scripted_client, embedder, noodles, script, params(max_rounds=1))
    assert outcome.factors == ["water temperature", "noodle thickness"]
    assert [(r.reason, r.text) for r in rejected(outcome)] == [("irrelevant", "stock market trends")]
    # Relevance is checked for every new candidate in one call.
    assert [t for t, _ in validation_candidates(backend)[0]] == ["water temperature", "stock market trends",
                                                                  "noodle thickness"]


async def test_without_relevance_check_no_call_is_made_and_irrelevant_is_ignored(scripted_client, embedder,
                                                                                  noodles):
    script = ScriptedLLM(rounds=[["water temperature", "stock market trends"], [BORDERLINE[0]], [BORDERLINE[1]]],
                         verdict=lambda text, similar: "irrelevant")
    outcome, backend = await run(scripted_client, embedder, noodles, script,
                                 params(check_relevance=False, max_rounds=3))
    # Rounds 1 and 2 had no borderline candidate: no validation call at all. Round 3's borderline
    # candidate was asked about (as a possible duplicate) and "irrelevant" does not count.
    assert validation_candidates(backend) == [[(BORDERLINE[1], BORDERLINE[0])]]
    assert outcome.factors == ["water temperature", "stock market trends", *BORDERLINE]
    assert rejected(outcome) == []


async def test_by_default_extraction_judges_relevance_and_may_find_nothing(scripted_client, embedder, noodles):
    """The extraction prompt carries the scenario and its outcomes and may answer an empty list (nothing
    in the sentences bears on the scenario): that round adds nothing, asked once; no round sends a
    validation request unless a candidate has a borderline neighbour."""
    assert BuildParams().check_relevance is False
    script = ScriptedLLM(rounds=[["water temperature"], [], ["gas price"]])
    p = params(check_relevance=BuildParams().check_relevance, max_rounds=3)
    outcome, backend = await run(scripted_client, embedder, noodles, script, p)
    extractions = requests_of(backend, "Factors")
    assert len(extractions) == 3
    for request in extractions:
        assert f"Scenario: {noodles.text}" in request.user
        assert f"Outcome 1: {noodles.outcome1}" in request.user and f"Outcome 2: {noodles.outcome2}" in request.user
    assert [r.extracted for r in outcome.rounds] == [["water temperature"], [], ["gas price"]]
    assert outcome.factors == ["water temperature", "gas price"]
    assert requests_of(backend, "Validation") == []


async def test_llm_duplicate_verdict_without_a_similar_factor_is_overridden(scripted_client, embedder, noodles):
    script = ScriptedLLM(rounds=[["water temperature"], ["household budget"]],
                         verdict=lambda text, similar: "duplicate")
    outcome, backend = await run(scripted_client, embedder, noodles, script, params())
    # Nothing similar existed for either candidate, so "duplicate" is meaningless: both kept.
    assert all(sim is None for call in validation_candidates(backend) for _, sim in call)
    assert outcome.factors == ["water temperature", "household budget"]
    assert rejected(outcome) == []


async def test_few_shot_example_echo_is_rejected(scripted_client, embedder, noodles):
    script = ScriptedLLM(rounds=[["guests with dogs", "Evening  Temperatures", "- patio heater gas cost.",
                                  "water temperature", "nearby competing cafes"]])
    outcome, backend = await run(scripted_client, embedder, noodles, script, params(max_rounds=1))
    assert outcome.factors == ["water temperature"]
    echoes = rejected(outcome, "example_echo")
    assert [r.text for r in echoes] == ["guests with dogs", "Evening Temperatures", "patio heater gas cost",
                                        "nearby competing cafes"]
    assert [t for call in validation_candidates(backend) for t, _ in call] == ["water temperature"]


async def test_invalid_items_are_recorded_as_invalid(scripted_client, embedder, noodles):
    script = ScriptedLLM(rounds=[["1.", "water temperature", "  ---  "]])
    outcome, _ = await run(scripted_client, embedder, noodles, script, params(max_rounds=1))
    assert outcome.factors == ["water temperature"]
    assert [r.reason for r in rejected(outcome)] == ["invalid", "invalid"]


# --------------------------------------------------------------------------- stopping rules


async def test_target_reached_stops_at_the_start_of_the_next_round(scripted_client, embedder, noodles):
    script = ScriptedLLM(rounds=[["water temperature", "cooking duration"], ["gas price", "noodle thickness"],
                                 ["food hygiene"]])
    outcome, backend = await run(scripted_client, embedder, noodles, script,
                                 params(n_target=3, max_rounds=10))
    assert outcome.stop_reason == StopReason.TARGET_REACHED
    # Round 2 overshoots the target (4 >= 3); the factors are all kept, and round 3 never starts.
    assert outcome.factors == ["water temperature", "cooking duration", "gas price", "noodle thickness"]
    assert [r.round for r in outcome.rounds] == [1, 2]
    assert script.calls["Sentences"] == 2 and script.calls["Factors"] == 2


async def test_target_reached_in_the_last_allowed_round(scripted_client, embedder, noodles):
    script = ScriptedLLM(rounds=[["water temperature", "cooking duration"]])
    outcome, _ = await run(scripted_client, embedder, noodles, script, params(n_target=2, max_rounds=1))
    assert outcome.stop_reason == StopReason.TARGET_REACHED


async def test_max_rounds(scripted_client, embedder, noodles):
    script = ScriptedLLM(rounds=[["water temperature"], ["cooking duration"], ["gas price"], ["food hygiene"]])
    outcome, _ = await run(scripted_client, embedder, noodles, script, params(n_target=50, max_rounds=3))
    assert outcome.stop_reason == StopReason.MAX_ROUNDS
    assert [r.round for r in outcome.rounds] == [1, 2, 3]
    assert outcome.factors == ["water temperature", "cooking duration", "gas price"]
    assert script.calls["Sentences"] == 3


async def test_saturated_after_patience_consecutive_empty_rounds(scripted_client, embedder, noodles):
    script = ScriptedLLM(rounds=[
        ["water temperature"],
        ["Water temperature"],          # adds nothing (1)
        ["gas price"],                  # adds: the count restarts
        ["guests with dogs"],           # adds nothing (1): an example echo
        ["gas price", "GAS PRICE"],     # adds nothing (2) -> saturated
        ["food hygiene"],
    ])
    outcome, _ = await run(scripted_client, embedder, noodles, script, params(n_target=50, max_rounds=10, patience=2))
    assert outcome.stop_reason == StopReason.SATURATED
    assert [r.round for r in outcome.rounds] == [1, 2, 3, 4, 5]
    assert [r.added for r in outcome.rounds] == [["water temperature"], [], ["gas price"], [], []]
    assert outcome.factors == ["water temperature", "gas price"]
    assert outcome.found_in_round == [1, 3]


async def test_round_records_and_vectors(scripted_client, embedder, noodles):
    rounds = [["water temperature", "1.", "cooking duration"], ["gas price", "Water Temperature"]]
    script = ScriptedLLM(rounds=rounds)
    p = params(batch_size=4, max_rounds=2)
    outcome, backend = await run(scripted_client, embedder, noodles, script, p)

    for t, rec in enumerate(outcome.rounds, 1):
        assert rec.round == t
        assert len(rec.sentences) == p.batch_size
        assert rec.extracted == rounds[t - 1]
        # Every extracted item is accounted for exactly once: added or rejected.
        assert len(rec.added) + len(rec.rejected) == len(rec.extracted)
    # The extraction prompt carried the round's sentences.
    extract_calls = [r for r in backend.requests if r.schema_name == "Factors"]
    assert section(extract_calls[0].user, "Sentences:") == outcome.rounds[0].sentences
    # Rounds are independent (the paper's Algorithm 1): no generation prompt lists what another round found.
    generations = [r.user for r in backend.requests if r.schema_name == "Sentences"]
    assert len(generations) == 2
    assert all("Aspects already covered (find different ones): none yet" in g for g in generations)

    assert outcome.vectors.shape == (3, 384)
    expected = embedder.encode(outcome.factors)
    np.testing.assert_allclose(outcome.vectors, expected, atol=1e-5)
