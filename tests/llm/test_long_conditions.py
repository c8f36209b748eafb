"""Long conditions: embedded whole for retrieval, and fitted into every prompt's context window."""

from __future__ import annotations

import json
import random
import re
import time

import numpy as np
import pytest

from anchor import prompts
from anchor.embedding.embed import embed_condition
from anchor.errors import ConfigurationError, FatalBackendError
from anchor.llm.base import RawCompletion, TokenLogprob
from anchor.llm.client import LLMClient
from anchor.llm.context import (
    ContextLimits,
    context_limits,
    estimate_prompt_tokens,
    fit_prompt,
    omission_marker,
)
from anchor.llm.openai_backend import OpenAICompatibleBackend
from anchor.llm.scripted import ScriptedBackend, ScriptedRequest
from anchor.llm.settings import LLMSettings, make_backend
from anchor.mapping.mapper import ConditionMapper, MappingConfig
from anchor.methods import baselines
from anchor.types import Scenario
from tests.fakeserver import FakeOpenAIServer
from tests.helpers import section

SUBJECTS = ("The harbour authority", "A city council spokesperson", "Local fishermen", "The ferry operator",
            "Residents of the old quarter", "An independent engineer", "The regional weather office",
            "Shop owners near the pier", "The coast guard", "A university study")
VERBS = ("said", "reported", "warned", "confirmed", "estimated", "argued", "noted", "announced")
OBJECTS = ("that repairs to the sea wall would take another {n} weeks",
           "that {n} boats had been moved to the northern basin",
           "that the storm surge reached {n} centimetres above the usual high tide",
           "that ticket sales fell by {n} percent during the closure",
           "that insurance claims had passed {n} thousand euros",
           "that the night ferry would resume after {n} days",
           "that {n} volunteers helped to clear the promenade")
CLAIM = Scenario(text="", outcome1="The night ferry resumed within a week of the storm.",
                 outcome2="It is not true that the night ferry resumed within a week of the storm.")


def synthetic_document(chars: int, seed: int = 0) -> str:
    """News-like prose of about ``chars`` characters (whole sentences, single spaces)."""
    rng = random.Random(seed)
    sentences: list[str] = []
    size = 0
    while size < chars:
        sentence = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS).format(n=rng.randint(2, 90))}."
        sentences.append(sentence)
        size += len(sentence) + 1
    text = " ".join(sentences)[:chars]
    return text.rsplit(" ", 1)[0].rstrip(".") + "."


DOC = synthetic_document(20_000)


def _word_pieces(embedder, text: str) -> int:
    return len(embedder.model.word_pieces(text)[0])


def _condition_in(user: str, after: str = "Condition: ", before: str = "\n") -> str:
    start = user.index(after) + len(after)
    return user[start:user.index(before, start)]


def _fits(limits: ContextLimits, request: ScriptedRequest) -> bool:
    return limits.count(request.messages) <= limits.prompt_budget(request.max_tokens)


# --------------------------------------------------------------------------- embedding


def test_synthetic_document_is_20000_characters() -> None:
    assert 19_900 <= len(DOC) <= 20_000 and DOC.endswith(".") and "  " not in DOC


def test_minilm_chunks_cover_the_whole_text_within_the_model_limit(embedder) -> None:
    pieces = embedder.chunk(DOC)
    counts = [_word_pieces(embedder, p) for p in pieces]
    assert embedder.chunk_tokens == 254  # all-MiniLM-L6-v2 reads 256 word pieces with [CLS] and [SEP]
    assert len(pieces) > 10 and max(counts) <= 254
    assert " ".join(pieces) == DOC  # nothing dropped, nothing repeated
    assert sum(counts) == _word_pieces(embedder, DOC)
    assert all(p.endswith(".") for p in pieces)  # every cut falls after a sentence end here


def test_long_vector_is_the_token_weighted_mean_of_chunk_vectors(embedder) -> None:
    short = "The ferry runs again."
    out = embedder.encode_long([DOC, short])
    pieces = embedder.chunk(DOC)
    weights = np.array([_word_pieces(embedder, p) for p in pieces], dtype=np.float64)
    mean = (embedder.encode(pieces).astype(np.float64) * weights[:, None]).sum(axis=0) / weights.sum()
    np.testing.assert_allclose(out.vectors[0], mean / np.linalg.norm(mean), atol=1e-6)
    assert abs(float(np.linalg.norm(out.vectors[0])) - 1.0) < 1e-5
    assert out.chunks == [len(pieces), 1] and out.tokens == [int(weights.sum()), None]
    np.testing.assert_array_equal(out.vectors[1], embedder.encode([short])[0])  # a text that fits: unchanged


def test_the_end_of_a_long_condition_still_counts_for_retrieval(embedder) -> None:
    baking = " ".join(f"Step {i}: knead the bread dough, let it rise and bake it in a hot oven." for i in range(40))
    football = " ".join(f"In minute {i} the striker shot at goal and the football crowd cheered."
                        for i in range(40))
    doc = f"{baking} {football}"
    plain = embedder.encode([doc])[0]
    # MiniLM on its own reads only the first 256 word pieces: the football half is silently lost.
    np.testing.assert_allclose(plain, embedder.encode([baking])[0], atol=1e-5)
    vector, how = embed_condition(embedder, doc)
    query = embedder.encode(["a football match and its goals"])[0]
    assert float(query @ vector) > float(query @ plain) + 0.15
    assert how.method == "chunk-mean" and how.chunks == len(embedder.chunk(doc)) >= 4
    assert how.tokens == _word_pieces(embedder, doc) and how.chunk_tokens == 254


def test_an_embedder_without_chunking_is_used_as_is(embedder) -> None:
    class Plain:
        model_id = embedder.model_id

        def encode(self, texts):  # noqa: ANN001, ANN202
            return embedder.encode(texts)

    vector, how = embed_condition(Plain(), DOC)
    np.testing.assert_array_equal(vector, embedder.encode([DOC])[0])
    assert how.method == "embedder" and how.chunks == 1 and how.tokens is None


# --------------------------------------------------------------------------- fitting a prompt


def _backend(context: int | None = 2048) -> ScriptedBackend:
    return ScriptedBackend(lambda r: {}, context_tokens=context)


def _vanilla_values(condition: str) -> dict[str, str]:
    return {"scenario": "(none)", "condition": condition, "outcome1": CLAIM.outcome1, "outcome2": CLAIM.outcome2}


def test_a_condition_that_fits_or_a_backend_without_a_window_is_left_alone() -> None:
    short = fit_prompt(_backend(), prompts.VANILLA, **_vanilla_values("The ferry runs again."))
    assert short.values == _vanilla_values("The ferry runs again.") and short.truncated == {}
    assert short.note() is None
    assert context_limits(_backend(None)) is None
    untouched = fit_prompt(_backend(None), prompts.VANILLA, **_vanilla_values(DOC))
    assert untouched.values["condition"] == DOC and untouched.truncated == {}


def test_a_long_condition_keeps_the_longest_beginning_that_fits() -> None:
    backend = _backend(2048)
    limits = context_limits(backend)
    assert limits is not None and not limits.exact
    budget = limits.prompt_budget(prompts.VANILLA.max_tokens)
    assert budget == 2048 - 40 - 204  # max_tokens plus a tenth of the window for the estimate

    fitted = fit_prompt(backend, prompts.VANILLA, **_vanilla_values(DOC))
    cut = fitted.truncated["condition"]
    kept = cut.kept_chars
    assert fitted.values["condition"] == f"{DOC[:kept]} [... {len(DOC) - kept:,} characters omitted ...]"
    assert DOC[kept] == " "  # cut between words
    assert estimate_prompt_tokens(prompts.VANILLA.render(**fitted.values)) <= budget
    # One more word would not fit: the kept beginning is the longest possible.
    longer = DOC[:DOC.index(" ", kept + 1)]
    bigger = prompts.VANILLA.render(**_vanilla_values(f"{longer} {omission_marker(len(DOC) - len(longer))}"))
    assert estimate_prompt_tokens(bigger) > budget
    assert (cut.original_chars, cut.context_tokens, cut.counted, cut.stages) == (
        len(DOC), 2048, "estimate", ["baseline.vanilla"])
    assert fitted.note() == (f"condition truncated to fit the 2,048-token context: kept {kept:,} of "
                             f"{len(DOC):,} characters")


def test_two_conditions_share_the_room() -> None:
    backend = _backend(2048)
    values = {"scenario": "(none)", "outcome": CLAIM.outcome1}
    one = fit_prompt(backend, prompts.COMPARE, fields=("condition1", "condition2"), **values,
                     condition1="The ferry runs again.", condition2=DOC)
    assert one.values["condition1"] == "The ferry runs again." and set(one.truncated) == {"condition2"}
    other = synthetic_document(20_000, seed=1)
    both = fit_prompt(backend, prompts.COMPARE, fields=("condition1", "condition2"), **values,
                      condition1=DOC, condition2=other)
    first, second = both.truncated["condition1"].kept_chars, both.truncated["condition2"].kept_chars
    assert abs(first - second) < 40 and first < one.truncated["condition2"].kept_chars * 0.6
    assert estimate_prompt_tokens(prompts.COMPARE.render(**both.values)) <= context_limits(backend).prompt_budget(20)


# --------------------------------------------------------------------------- the mapping stage


async def test_mapping_a_20000_character_condition_fits_and_is_recorded(make_space, embedder, scripted_client) -> None:
    space = make_space([("Repairs", ["sea wall repairs", "harbour maintenance"]),
                        ("Travel", ["night ferry schedule", "ticket sales"])], ["storm surge height"])

    def answer(request: ScriptedRequest) -> dict:
        if request.schema_name == "Selection":
            offered = section(request.user, "Candidate factors:")
            return {"selected": [t for t in offered if t in ("night ferry schedule", "sea wall repairs")]}
        assert request.schema_name == "Reflection"
        return {"keep": ["night ferry schedule"]}

    client = scripted_client(answer)
    client.backend.context_tokens = 2048
    trace = await ConditionMapper(client, embedder, space).map(DOC)
    limits = context_limits(client.backend)
    requests = client.backend.requests
    assert [r.schema_name for r in requests] == ["Selection"] * 3 + ["Reflection"]
    assert all(_fits(limits, r) for r in requests)

    shown_select = _condition_in(requests[0].user)
    shown_reflect = _condition_in(requests[3].user)
    assert len({_condition_in(r.user) for r in requests[:3]}) == 1  # one fitted condition for all rounds
    kept_select = int(re.search(r"\[\.\.\. ([\d,]+) characters omitted", shown_select).group(1).replace(",", ""))
    kept_select = len(DOC) - kept_select
    assert shown_select == f"{DOC[:kept_select]} {omission_marker(len(DOC) - kept_select)}"
    assert len(shown_reflect) > len(shown_select)  # the reflection prompt has more room left for it

    cut = trace.condition_truncated
    assert cut is not None
    assert (cut.original_chars, cut.kept_chars, cut.stages) == (len(DOC), kept_select,
                                                                ["mapping.select", "mapping.reflect"])
    assert trace.condition == DOC  # the trace keeps the whole condition
    fid = {f.text: f.id for f in space.factors}
    assert trace.mapped == [fid["night ferry schedule"]]
    assert trace.condition_embedding.method == "chunk-mean"
    assert trace.condition_embedding.chunks == len(embedder.chunk(DOC))


async def test_a_short_condition_is_mapped_as_before(make_space, embedder, scripted_client) -> None:
    space = make_space([("Travel", ["night ferry schedule", "ticket sales"])])
    client = scripted_client(lambda r: {"selected": []})
    client.backend.context_tokens = 2048
    trace = await ConditionMapper(client, embedder, space).map("The night ferry is back.")
    assert trace.condition_truncated is None
    assert trace.condition_embedding.method == "single" and trace.condition_embedding.chunks == 1
    assert _condition_in(client.backend.requests[0].user) == "The night ferry is back."


# --------------------------------------------------------------------------- the direct baselines


def _baseline_answer(request: ScriptedRequest) -> dict | RawCompletion:
    if request.top_logprobs:  # Logits: P('1') = e^-1 / (e^-1 + e^-2)
        return RawCompletion(text="1", finish_reason="stop", logprobs=[
            TokenLogprob(token="1", logprob=-1.0, top={"1": -1.0, "2": -2.0, "x": -5.0})])
    return {
        "VerbalProbability": {"probability": 0.25},
        "DirectChoice": {"choice": "2"},
        "ReasonedProbability": {"reasoning": "The document says so.", "probability": 0.75},
        "ReasonedChoice": {"reasoning": "The document says so.", "choice": "1"},
        "OracleFactors": {"factors": ["ferry timetable", "storm damage"]},
    }[request.schema_name]


@pytest.mark.parametrize(("method", "expected"), [
    ("vanilla", 0.25), ("vanilla-direct", 0.0), ("cot", 0.75), ("cot-direct", 1.0),
    ("logits", 1 / (1 + np.exp(-1.0))), ("factor-based", 0.25),
])
async def test_every_baseline_fits_a_20000_character_condition(method: str, expected: float) -> None:
    backend = ScriptedBackend(_baseline_answer, context_tokens=2048)
    client = LLMClient(backend, parse_retries=0)
    estimate = await baselines.ESTIMATORS[method](client, CLAIM, DOC, 1)
    assert estimate.p_outcome1 == pytest.approx(expected)
    limits = context_limits(backend)
    with_condition = [r for r in backend.requests if "Condition: " in r.user]
    assert with_condition and all(_fits(limits, r) for r in backend.requests)
    kept = [len(_condition_in(r.user).split(" [... ")[0]) for r in with_condition]
    assert all(0 < k < len(DOC) for k in kept)
    assert estimate.note == "; ".join(dict.fromkeys(
        f"condition truncated to fit the 2,048-token context: kept {k:,} of {len(DOC):,} characters" for k in kept))


async def test_compare_shares_the_room_between_its_two_conditions() -> None:
    backend = ScriptedBackend(lambda r: {"choice": "same"}, context_tokens=2048)
    client = LLMClient(backend, parse_retries=0)
    choice, note = await baselines.compare_with_note(client, CLAIM, CLAIM.outcome1, "The ferry runs again.", DOC)
    assert choice == 3 and await baselines.compare(client, CLAIM, CLAIM.outcome1, "Short.", "Also short.") == 3
    user = backend.requests[0].user
    assert "Condition 1: The ferry runs again.\n" in user
    kept = len(_condition_in(user, "Condition 2: ").split(" [... ")[0])
    assert note == f"condition2 truncated to fit the 2,048-token context: kept {kept:,} of {len(DOC):,} characters"
    assert backend.requests[1].user.count("Short.") == 1 and "omitted" not in backend.requests[1].user


def test_without_fitting_the_server_refuses_and_with_it_answers(tmp_path) -> None:
    with FakeOpenAIServer(context_tokens=2048, responder=lambda body: json.dumps({"probability": 0.35})) as server:
        fitted = LLMClient(OpenAICompatibleBackend(server.base_url, "fake-model", context_tokens=2048),
                           transport_retries=0, parse_retries=0)
        blind = LLMClient(OpenAICompatibleBackend(server.base_url, "fake-model", context_tokens=1_000_000),
                          transport_retries=0, parse_retries=0)

        async def both() -> tuple[baselines.Estimate, Exception | None]:
            try:
                estimate = await baselines.vanilla(fitted, CLAIM, DOC)
                try:
                    await baselines.vanilla(blind, CLAIM, DOC)
                except FatalBackendError as exc:
                    return estimate, exc
                return estimate, None
            finally:
                await fitted.aclose()
                await blind.aclose()

        import asyncio

        estimate, error = asyncio.run(both())
        sent = server.requests[0]["messages"]
    assert error is not None and "maximum context length is 2048 tokens" in str(error)
    assert estimate.p_outcome1 == 0.35 and "kept" in (estimate.note or "")
    assert "characters omitted ...]" in sent[-1]["content"]


# --------------------------------------------------------------------------- settings


def test_context_size_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANCHOR_LLM_CONTEXT_TOKENS", raising=False)
    server = LLMSettings(base_url="http://127.0.0.1:9/v1", model="m")
    assert server.effective_context_tokens == 8192 and make_backend(server).context_tokens == 8192
    assert LLMSettings().effective_context_tokens == 8192
    monkeypatch.setenv("ANCHOR_LLM_CONTEXT_TOKENS", "32768")
    configured = LLMSettings.from_env(base_url="http://127.0.0.1:9/v1")
    assert configured.context_tokens == 32768 and make_backend(configured).context_tokens == 32768
    assert configured.describe()["context_tokens"] == 32768
    assert make_backend(LLMSettings.from_env()).n_ctx == 32768  # the embedded model's n_ctx follows it
    monkeypatch.setenv("ANCHOR_LLM_CONTEXT_TOKENS", "lots")
    with pytest.raises(ConfigurationError, match="ANCHOR_LLM_CONTEXT_TOKENS=.lots. is not a whole number"):
        LLMSettings.from_env()
    with pytest.raises(ValueError, match="context_tokens"):
        LLMSettings(context_tokens=100)


# --------------------------------------------------------------------------- the embedded model


@pytest.mark.slow
async def test_embedded_model_maps_a_20000_character_condition_in_a_small_context(make_space, embedder) -> None:
    """SmolLM2-135M with a 2,048-token window, far below the ~4,200 tokens of the whole prompt."""
    from anchor.llm.local_backend import LocalLlamaBackend

    backend = LocalLlamaBackend(n_ctx=2048, n_threads=2)
    client = LLMClient(backend, seed=0)
    space = make_space([("Repairs", ["sea wall repairs", "harbour maintenance"]),
                        ("Travel", ["night ferry schedule", "ticket sales"])], ["storm surge height"])
    candidates = "\n".join(f"- {f.text}" for f in space.factors)
    whole = prompts.SELECT_FACTORS.render(scenario="(none)", condition=DOC, candidates=candidates)
    assert backend.count_prompt_tokens(whole) > 4000  # unfitted, it would overflow the window
    started = time.perf_counter()
    # One selection round and the reflection: every round gets the same fitted prompt, so more
    # rounds would only add minutes (benchmarks/bench_long_condition.py times the default R=3).
    trace = await ConditionMapper(client, embedder, space, MappingConfig(rounds=1)).map(DOC)
    seconds = time.perf_counter() - started
    cut = trace.condition_truncated
    assert cut is not None and cut.counted == "exact" and cut.context_tokens == 2048
    assert "mapping.select" in cut.stages and 0 < cut.kept_chars < len(DOC)
    assert len(trace.selection_rounds) == 1
    calls = [r for r in client.ledger.records if r.stage.startswith("mapping.")]
    assert calls and all(r.outcome == "ok" for r in calls)
    # The exact count is the model's own: what the ledger recorded for the selection prompt.
    fitted = fit_prompt(backend, prompts.SELECT_FACTORS, scenario="(none)", condition=DOC,
                        candidates="\n".join(f"- {c.text}" for c in trace.candidates))
    select = next(r for r in calls if r.stage == "mapping.select")
    assert select.prompt_tokens == backend.count_prompt_tokens(prompts.SELECT_FACTORS.render(**fitted.values))
    assert all(r.prompt_tokens + 300 <= 2048 for r in calls)
    print(f"\nembedded mapping of a {len(DOC):,}-character condition in a 2,048-token context: {seconds:.1f} s, "
          f"kept {cut.kept_chars:,} characters; calls: {json.dumps([(r.stage, r.prompt_tokens) for r in calls])}")
