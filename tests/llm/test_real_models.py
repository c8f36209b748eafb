"""The real components: the embedded SmolLM2 model (llama.cpp) and MiniLM embeddings."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from pydantic import BaseModel, Field

from anchor.embedding.embed import MiniLMEmbedder, cosine_similarity_matrix
from anchor.llm import CostLedger, LLMClient, PromptSpec, ResponseCache
from anchor.llm.local_backend import LocalLlamaBackend

pytestmark = pytest.mark.slow


class Factors(BaseModel):
    factors: list[str] = Field(min_length=1, max_length=4)


PROMPT = PromptSpec(
    stage="real-model-test",
    system="You list short factors. Answer in JSON.",
    user="List up to 4 short factors that affect how quickly noodles cook.",
    schema=Factors,
    max_tokens=96,
)


def test_embedded_model_structured_call(tmp_path):
    client = LLMClient(LocalLlamaBackend(), cache=ResponseCache(tmp_path / "c.sqlite"), ledger=CostLedger())
    result = asyncio.run(client.ask(PROMPT))
    assert isinstance(result, Factors)
    assert 1 <= len(result.factors) <= 4
    assert all(isinstance(f, str) for f in result.factors)
    cost = client.ledger.total()
    assert cost.llm_calls >= 1 and cost.prompt_tokens > 0 and cost.completion_tokens > 0
    # Same call again: served from the cache, identical.
    again = asyncio.run(client.ask(PROMPT))
    assert again == result
    assert client.ledger.total().cache_hits == 1


def test_embedded_model_logprobs():
    client = LLMClient(LocalLlamaBackend(), ledger=CostLedger())
    answer = asyncio.run(client.complete("logits", [{"role": "user", "content": "Say yes."}], max_tokens=2,
                                         top_logprobs=3))
    assert answer.logprobs
    assert all(lp.logprob <= 0 for lp in answer.logprobs)


def test_minilm_ranks_paraphrase_above_unrelated(tmp_path):
    embedder = MiniLMEmbedder(cache_path=tmp_path / "vectors.sqlite")
    anchor_text = "Hot water makes noodles cook faster."
    paraphrase = "Noodles are done sooner when the water is hotter."
    unrelated = "The stock market closed lower on Friday."
    vecs = embedder.encode([anchor_text, paraphrase, unrelated])
    assert vecs.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    sims = cosine_similarity_matrix(vecs[:1], vecs[1:])[0]
    assert sims[0] > sims[1] + 0.3
    # Vectors come back from the persistent cache without running the model again.
    fresh = MiniLMEmbedder(cache_path=tmp_path / "vectors.sqlite")
    again = fresh.encode([paraphrase, anchor_text])
    assert fresh.encoded_count == 0
    assert np.allclose(again[0], vecs[1]) and np.allclose(again[1], vecs[0])


def test_embedded_model_answer_does_not_depend_on_previous_calls():
    """Same request, same seed -> same answer, whatever ran before (no KV-prefix carry-over).

    Without a context reset, repeating this grammar-constrained request right after itself gave
    a different answer (the last prompt token's logits are then computed in another batch).
    """
    from anchor import prompts
    from anchor.llm.structured import inline_schema

    backend = LocalLlamaBackend()
    phi = prompts.ELICIT_PHI.render(
        scenario="Cooking noodles", outcome1="hot water is better", outcome2="warm water is better",
        factors=prompts.numbered(["heat (rough: 0.75)", "time (rough: 0.5)"], keys=True))
    phi_schema = inline_schema(prompts.keyed_schema("P", 2, "prob"))
    other = prompts.SELECT_FACTORS.render(scenario="x", condition="y", candidates="- a\n- b")
    other_schema = inline_schema(prompts.choice_list_schema("S", "selected", ("a", "b")))

    async def ask(messages, schema) -> str:
        raw = await backend.complete(messages, json_schema=schema, schema_name="t", temperature=0.5, max_tokens=60,
                                     seed=7, top_logprobs=None)
        return raw.text

    async def sequence():
        return [await ask(phi, phi_schema), await ask(phi, phi_schema), await ask(other, other_schema),
                await ask(phi, phi_schema)]

    first, second, _, fourth = asyncio.run(sequence())
    assert first == second == fourth
