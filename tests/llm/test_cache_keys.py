"""Cached answers are keyed by what determines them (backend kind, model, request, sample, seed),
not by where the server listens: another port or host name reuses them, caches written by earlier
versions (whose keys held the full base URL) keep working, and a server never shares answers with
the embedded model."""

from __future__ import annotations

import hashlib
import json

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.llm.cache import CachedResponse, ResponseCache
from anchor.llm.client import LLMClient
from anchor.llm.ledger import CostLedger
from anchor.llm.openai_backend import OpenAICompatibleBackend
from anchor.llm.prompt import PromptSpec
from anchor.llm.scripted import ScriptedBackend
from anchor.llm.structured import inline_schema
from anchor.llm.sync import run_sync
from anchor.prompts import VerbalProbability
from tests.fakeserver import FakeOpenAIServer
from tests.run_helpers import eval_args, predictions_of

runner = CliRunner()
QUESTION = PromptSpec(stage="test.question", system="Answer in JSON.", schema=VerbalProbability, max_tokens=24,
                      user="How likely is {what}?")


#: The tests pass every setting as a flag: variables of the user's shell must not leak in.
pytestmark = pytest.mark.usefixtures("clean_anchor_env")


def old_cache_key(base_url: str, messages: list, schema: dict | None, params: dict, sample: int) -> str:
    """The key as anchor computed it before keys left the address out (a copy of that code)."""
    payload = {"v": 1, "backend": f"openai-compatible:{base_url}", "model": "fake-model", "messages": messages,
               "schema": schema, "params": params, "sample": sample}
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def server_client(url: str, cache: ResponseCache) -> LLMClient:
    return LLMClient(OpenAICompatibleBackend(url, "fake-model"), cache=cache, ledger=CostLedger())


def test_cache_written_with_the_old_keys_is_read_without_requests(tmp_path):
    cache = ResponseCache(tmp_path / "responses.sqlite")
    schema = inline_schema(VerbalProbability)
    with FakeOpenAIServer(deterministic=True) as first, FakeOpenAIServer(deterministic=True) as second:
        url = first.base_url.replace("http://", "http://user:pw-1234@")  # old keys held the URL as given
        one = QUESTION.render(what="rain")
        cache.put(old_cache_key(url, one, schema, {"temperature": 0.0, "max_tokens": 24, "seed": 0,
                                                   "top_logprobs": None}, 0),
                  "test.question", CachedResponse(text='{"probability": 0.125}', prompt_tokens=9, completion_tokens=3))
        three = QUESTION.render(what="snow")
        for i in range(3):
            cache.put(old_cache_key(url, three, schema, {"temperature": 0.7, "max_tokens": 24, "seed": 0,
                                                         "top_logprobs": None}, i),
                      "test.question", CachedResponse(text=json.dumps({"probability": i / 10}), prompt_tokens=9,
                                                      completion_tokens=3))

        client = server_client(url, cache)
        assert run_sync(client.ask(QUESTION, what="rain"), client).probability == 0.125
        samples = run_sync(client.ask_samples(QUESTION, samples=3, temperature=0.7, what="snow"), client)
        assert [s.probability for s in samples] == [0.0, 0.1, 0.2]
        assert first.completions == 0 and client.ledger.total().cache_hits == 4

        # Found under the old key, the answers were stored under the new one: a server at another
        # port, reached by another host name, gets no request either.
        moved = server_client(second.base_url.replace("127.0.0.1", "localhost"), cache)
        assert run_sync(moved.ask(QUESTION, what="rain"), moved).probability == 0.125
        samples = run_sync(moved.ask_samples(QUESTION, samples=3, temperature=0.7, what="snow"), moved)
        assert [s.probability for s in samples] == [0.0, 0.1, 0.2]
        assert second.completions == 0

        # A request that was never cached still goes to the server.
        run_sync(moved.ask(QUESTION, what="hail"), moved)
        assert second.completions == 1


def test_the_embedded_model_and_a_server_do_not_share_answers(tmp_path):
    cache = ResponseCache(tmp_path / "responses.sqlite")
    with FakeOpenAIServer(deterministic=True) as server:
        client = server_client(server.base_url, cache)
        run_sync(client.ask(QUESTION, what="rain"), client)
    embedded = ScriptedBackend(lambda request: {"probability": 0.5}, name="embedded-llama.cpp",
                               kind="embedded-llama.cpp", model="fake-model")
    local = LLMClient(embedded, cache=cache, ledger=CostLedger())
    assert run_sync(local.ask(QUESTION, what="rain"), local).probability == 0.5
    assert len(embedded.requests) == 1


def test_eval_into_a_new_run_after_a_port_change_makes_no_request(tmp_path):
    cache = tmp_path / "cache"
    common = ["--dataset", "today", "--method", "vanilla", "--limit", "2"]
    with FakeOpenAIServer(deterministic=True) as first:
        result = runner.invoke(app, eval_args(first, cache, tmp_path / "a", *common))
        assert result.exit_code == 0, (result.stderr, result.exception)
        assert first.completions > 0
    for out, host in (("b", "127.0.0.1"), ("c", "localhost")):
        with FakeOpenAIServer(deterministic=True) as other:
            args = eval_args(other, cache, tmp_path / out, *common)
            args[args.index("--base-url") + 1] = other.base_url.replace("127.0.0.1", host)
            result = runner.invoke(app, args)
            assert result.exit_code == 0, (result.stderr, result.exception)
            assert other.completions == 0, host
    answers = [{p.id: p.p_outcome1 for p in predictions_of(tmp_path / out)} for out in "abc"]
    assert len(answers[0]) == 2 and None not in answers[0].values()
    assert answers[0] == answers[1] == answers[2]


def test_a_cache_hit_carries_the_recorded_cost_of_the_request_that_produced_it(tmp_path):
    """Each cached answer keeps its request's tokens, time and id, so a run answered from the cache can
    still say what those answers cost (``ledger.recorded_requests``): a request for three answers once,
    its prompt counted once; and a hit on an answer its own run asked for is not counted twice."""
    import sqlite3

    from anchor.llm.ledger import recorded_requests

    path = tmp_path / "responses.sqlite"
    with FakeOpenAIServer(deterministic=True) as server:
        first = server_client(server.base_url, ResponseCache(path))
        run_sync(first.ask(QUESTION, what="rain"), first)
        run_sync(first.ask_samples(QUESTION, samples=3, temperature=0.7, what="snow"), first)
        served = (server.stats()["prompt_tokens"], server.stats()["completion_tokens"])
        made = [r for r in first.ledger.records if r.outcome == "ok"]
        assert len(made) == 2 == server.completions  # the three samples came in one request

        second = server_client(server.base_url, ResponseCache(path))
        run_sync(second.ask(QUESTION, what="rain"), second)
        run_sync(second.ask_samples(QUESTION, samples=3, temperature=0.7, what="snow"), second)
        run_sync(second.ask(QUESTION, what="rain"), second)  # the same cached answer twice
        assert server.completions == 2
    hits = second.ledger.records
    assert [r.outcome for r in hits] == ["cache_hit"] * 5 and all(r.recorded is not None for r in hits)
    behind, unrecorded = recorded_requests(hits)
    assert unrecorded == 0 and len(behind) == 2
    assert (sum(r.prompt_tokens for r in behind), sum(r.completion_tokens for r in behind)) == served
    assert sorted((r.request_id, r.started, r.seconds) for r in behind) == sorted(
        (r.request_id, r.started, r.seconds) for r in made)
    # The first run's own requests, and hits on its own answers, are not counted again.
    assert recorded_requests([*made, *hits[:1]]) == ([], 0)

    # A cache written before costs were recorded: its answers read as before, with no recorded cost;
    # the table of answers keeps the shape earlier versions write to.
    old = tmp_path / "old.sqlite"
    with sqlite3.connect(old) as conn:
        conn.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, stage TEXT NOT NULL, text TEXT NOT NULL, "
                     "prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, logprobs TEXT, "
                     "created REAL NOT NULL)")
        conn.execute("INSERT INTO responses VALUES ('k', 's', '{}', 5, 2, NULL, 0)")
    cache = ResponseCache(old)
    hit = cache.get("k")
    assert hit is not None and hit.prompt_tokens == 5 and hit.request_id is None and hit.recorded_cost("k") is None
    with sqlite3.connect(old) as conn:
        conn.execute("INSERT INTO responses VALUES ('k2', 's', '{}', 5, 2, NULL, 0)")  # an earlier version's write
    assert cache.get("k2") is not None
