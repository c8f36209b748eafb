"""The chain of dependent requests as the client records it (against the local server through the
openai SDK), interrupted requests in the ledger, and the chain handed back by a shared artefact build."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel, Field

from anchor.artefacts import ArtefactStore
from anchor.llm import CostLedger, LLMClient, PromptSpec, ResponseCache, chain
from anchor.llm.chain import Chain
from anchor.llm.ledger import CallRecord, critical_path, summarize
from anchor.llm.openai_backend import OpenAICompatibleBackend
from anchor.scoring.attribution import critical_path_report, scope_scenarios
from tests.fakeserver import FakeOpenAIServer


class Verdict(BaseModel):
    answer: str = Field(min_length=1, max_length=40)
    confidence: float = Field(ge=0, le=1)


PROMPT = PromptSpec(stage="chain-test", system="Answer briefly.", user="Question: {q}", schema=Verdict, max_tokens=64)


def run(client: LLMClient, work):
    """Run ``work(client)`` from a fresh chain in a new event loop; returns (its result, the chain it ended on)."""

    async def main():
        chain.reset()
        try:
            return await work(client), chain.current()
        finally:
            await client.aclose()

    return asyncio.run(main())


def client_of(server: FakeOpenAIServer, tmp_path=None, **kw) -> LLMClient:
    async def no_sleep(_: float) -> None:
        return None

    cache = ResponseCache(tmp_path / "cache.sqlite") if tmp_path is not None else None
    return LLMClient(OpenAICompatibleBackend(server.base_url, None, timeout=120.0), cache=cache, ledger=CostLedger(),
                     sleep=no_sleep, **kw)


def requests(client: LLMClient) -> list[CallRecord]:
    return [r for r in client.ledger.records if r.outcome != "cache_hit"]


def test_requests_awaited_in_turn_lengthen_the_chain_and_stamp_their_records():
    with FakeOpenAIServer(deterministic=True, latency=0.01) as server:
        client = client_of(server)

        async def work(c: LLMClient) -> None:
            await c.ask(PROMPT, q="one")
            await c.ask(PROMPT, q="two")

        _, ended = run(client, work)
    first, second = requests(client)
    assert (first.chain_requests, second.chain_requests) == (1, 2)
    assert first.chain_seconds == round(first.seconds, 6)
    # Each link adds its seconds to the chain's (kept to the microsecond), so one rounding step apart.
    assert second.chain_seconds == pytest.approx(first.seconds + second.seconds, abs=2e-6)
    assert ended == Chain(2, second.chain_seconds)
    assert critical_path(client.ledger.records) == ended


def test_a_retried_attempt_is_a_link_of_the_chain():
    with FakeOpenAIServer(deterministic=True, faults=["500"]) as server:
        client = client_of(server)
        _, ended = run(client, lambda c: c.ask(PROMPT, q="again"))
    failed, ok = requests(client)
    assert (failed.outcome, failed.chain_requests) == ("transient_error", 1)
    assert (ok.outcome, ok.chain_requests) == ("ok", 2)
    assert ended.requests == 2 and server.completions == 2


def test_requests_sent_side_by_side_inside_the_client_count_once():
    # A server that ignores n answers one of three samples; the two missing ones are asked for
    # at the same time, so three requests make a chain of two.
    with FakeOpenAIServer(deterministic=True, honour_n=False) as server:
        client = client_of(server)
        answers, ended = run(client, lambda c: c.ask_samples(PROMPT, samples=3, q="three"))
    assert len(answers) == 3 and server.completions == 3
    assert ended.requests == 2
    assert sorted(r.chain_requests for r in requests(client)) == [1, 2, 2]


def test_cache_hits_add_nothing_and_a_shared_request_hands_its_chain_on(tmp_path):
    with FakeOpenAIServer(deterministic=True, latency=0.05) as server:
        client = client_of(server, tmp_path)

        async def twice_at_once(c: LLMClient) -> list[Chain]:
            async def one() -> Chain:
                chain.reset()
                await c.ask(PROMPT, q="same")
                return chain.current()

            return await chain.gather(one(), one())

        ends, _ = run(client, twice_at_once)
        assert server.completions == 1
        assert [e.requests for e in ends] == [1, 1]  # the one that waited continues from the request it shared
        cached_client = client_of(server, tmp_path)
        _, ended = run(cached_client, lambda c: c.ask(PROMPT, q="same"))
    assert ended == Chain(0, 0.0) and server.completions == 1
    (hit,) = cached_client.ledger.records
    assert hit.outcome == "cache_hit" and hit.chain_requests is None


def test_a_request_cut_off_by_a_kill_is_interrupted_not_failed():
    sent = CallRecord(stage="s", outcome="sent", request_id="a", estimated_prompt_tokens=120)
    answered = CallRecord(stage="s", outcome="ok", request_id="a", prompt_tokens=90, completion_tokens=5,
                          chain_requests=1, chain_seconds=0.5)
    cut = CallRecord(stage="s", outcome="sent", request_id="b", estimated_prompt_tokens=70)
    (cost,) = summarize([sent, answered, cut])
    assert (cost.llm_calls, cost.failed_attempts, cost.interrupted) == (1, 0, 1)
    assert (cost.prompt_tokens, cost.interrupted_prompt_tokens) == (90, 70)
    assert critical_path([sent, answered, cut]) == Chain(1, 0.5)


def test_a_sent_record_carries_the_clients_prompt_estimate():
    seen: list[CallRecord] = []
    with FakeOpenAIServer(deterministic=True) as server:
        client = client_of(server)
        client.ledger.subscribe(seen.append)
        run(client, lambda c: c.ask(PROMPT, q="how big?"))
    (announced,) = [r for r in seen if r.outcome == "sent"]
    # The server counts 4 characters a token; the client's estimate (3 a token, plus the template's
    # overhead) is an upper one.
    assert announced.estimated_prompt_tokens >= server.prompt_tokens_served > 0


def test_records_written_before_chains_load_and_leave_the_path_unknown():
    old = CallRecord.model_validate_json('{"stage": "s", "outcome": "ok", "prompt_tokens": 3, "scope": "instance:0:x"}')
    assert old.chain_requests is None and critical_path([old]) is None
    report = critical_path_report([old], {"instance:0:x": "k"}, ["k"])
    assert report.per_scenario == {"k": None} and report.mean_requests is None


def test_every_caller_of_a_shared_build_continues_from_its_chain(tmp_path):
    store: ArtefactStore[Verdict] = ArtefactStore(tmp_path, load=lambda p: Verdict.model_validate_json(p.read_text()),
                                                  save=lambda item, p: p.write_text(item.model_dump_json()))

    async def build() -> Verdict:
        for _ in range(3):
            await asyncio.sleep(0)
            chain.advance(1.0)
        return Verdict(answer="built", confidence=1.0)

    async def instance(own: Chain) -> Chain:
        chain.reset()
        if own.requests:
            chain.advance(own.seconds, own.requests)  # requests of its own, made before it needed the artefact
        await store.get("k", build)
        chain.advance(0.25)
        return chain.current()

    async def main() -> list[Chain]:
        return await chain.gather(instance(Chain()), instance(Chain()), instance(Chain(5, 4.0)))

    first, second, longer = asyncio.run(main())
    # The build started from the first caller's chain (nothing yet) and took 3 requests; every caller
    # that waited for it continues from there, and a longer chain of its own stays the longer.
    assert first == second == Chain(4, 3.25)
    assert longer == Chain(6, 4.25)


def test_scopes_of_an_instance_and_its_negation_point_at_its_scenario():
    from anchor.evaluation.datasets import load_factcheck_set, scenario_key

    inst = load_factcheck_set("factcheck").instances[0]
    scopes = scope_scenarios([inst], runs=2)
    key = scenario_key(inst.scenario)
    assert scopes == {f"negation:{inst.id}": key, f"instance:0:{inst.id}": key, f"instance:1:{inst.id}": key}
