"""The LLM client against a real local HTTP server (tests/fakeserver.py) through the openai SDK."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time

import pytest
from pydantic import BaseModel, Field

from anchor.errors import FatalBackendError, LLMOutputError, LogprobsUnavailable, RetryBudgetExhausted
from anchor.llm import CostLedger, LLMClient, PromptSpec, ResponseCache
from anchor.llm.openai_backend import OpenAICompatibleBackend
from anchor.llm.settings import LLMSettings, make_client
from anchor.llm.structured import inline_schema
from tests.fakeserver import FakeOpenAIServer


class Verdict(BaseModel):
    answer: str = Field(min_length=1, max_length=40)
    confidence: float = Field(ge=0, le=1)


PROMPT = PromptSpec(stage="unit-test", system="Answer briefly.", user="Question: {q}", schema=Verdict, max_tokens=64)


def make(server: FakeOpenAIServer, tmp_path, *, cache: bool = True, sleeps: list[float] | None = None,
         api_key: str | None = None, timeout: float = 120.0, **kw) -> LLMClient:
    async def fake_sleep(seconds: float) -> None:
        if sleeps is not None:
            sleeps.append(seconds)

    backend = OpenAICompatibleBackend(server.base_url, None, api_key=api_key, timeout=timeout)
    client = LLMClient(
        backend,
        cache=ResponseCache(tmp_path / "cache.sqlite") if cache else None,
        ledger=CostLedger(),
        sleep=fake_sleep,
        **kw,
    )
    _CLIENTS.append(client)
    return client


async def gather(*aws):
    return await asyncio.gather(*aws)


def run(coro):
    """Run one coroutine and close the connections it opened (they belong to its event loop)."""

    async def wrapped():
        try:
            return await coro
        finally:
            for client in list(_CLIENTS):
                await client.aclose()

    return asyncio.run(wrapped())


_CLIENTS: list[LLMClient] = []


def test_structured_call_round_trip(tmp_path):
    with FakeOpenAIServer() as server:
        client = make(server, tmp_path)
        result = run(client.ask(PROMPT, q="hot or warm water?"))
        assert isinstance(result, Verdict)
        assert 0 <= result.confidence <= 1
        body = server.requests[0]
        # The schema travels as OpenAI structured output.
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema"
        assert fmt["json_schema"]["schema"]["properties"]["confidence"]["maximum"] == 1
        assert body["model"] == "fake-model"  # resolved from /v1/models
        assert client.ledger.total().llm_calls == 1


def test_faults_are_retried_and_counted(tmp_path):
    faults = ["500", "429", "malformed", "garbage", "truncated", "violation", "drop"]
    with FakeOpenAIServer(faults=list(faults), retry_after=0.25) as server:
        sleeps: list[float] = []
        client = make(server, tmp_path, sleeps=sleeps)
        result = run(client.ask(PROMPT, q="x"))
        assert isinstance(result, Verdict)
        total = client.ledger.total()
        # Every injected fault is one failed attempt, then one success.
        assert total.failed_attempts == len(faults)
        assert total.llm_calls == len(faults) + 1
        assert server.completions == len(faults) + 1
        # Requests: the first, then a re-ask after each unusable answer (garbage, truncated, violation);
        # the attempts the transport retried (500, 429, malformed body, dropped connection) are not.
        assert total.logical_requests == 4
        # The 429 carried Retry-After: 0.25 and the client waited exactly that long once.
        assert 0.25 in sleeps
        outcomes = [r.outcome for r in client.ledger.records]
        assert outcomes.count("transient_error") == 4  # 500, 429, malformed body, dropped connection
        assert outcomes.count("invalid_output") == 2  # garbage, violation
        assert outcomes.count("truncated") == 1
        assert outcomes[-1] == "ok"


def test_random_fault_rates_still_succeed(tmp_path):
    rates = {"500": 0.15, "429": 0.1, "garbage": 0.1, "truncated": 0.05}
    with FakeOpenAIServer(fault_rates=rates, seed=7) as server:
        client = make(server, tmp_path, cache=False)

        async def many():
            return await asyncio.gather(*[client.ask(PROMPT, q=f"q{i}") for i in range(30)])

        results = run(many())
        assert len(results) == 30
        total = client.ledger.total()
        assert total.llm_calls == server.completions
        assert total.failed_attempts == server.completions - 30
        assert total.failed_attempts > 0


def test_backoff_is_exponential_with_jitter(tmp_path):
    with FakeOpenAIServer(faults=["500"] * 4) as server:
        sleeps: list[float] = []
        client = make(server, tmp_path, sleeps=sleeps, backoff_base=1.0, backoff_max=100.0)
        run(client.ask(PROMPT, q="x"))
        assert len(sleeps) == 4
        for i, s in enumerate(sleeps):
            cap = 1.0 * 2**i
            assert cap / 2 <= s <= cap


def test_transport_budget_exhausted_names_stage(tmp_path):
    with FakeOpenAIServer(fault_rates={"500": 1.0}) as server:
        client = make(server, tmp_path, transport_retries=3)
        with pytest.raises(RetryBudgetExhausted, match="unit-test"):
            run(client.ask(PROMPT, q="x"))
        assert server.completions == 4
        assert client.ledger.total().failed_attempts == 4
        # One request, given up on at its last attempt.
        assert client.ledger.total().logical_requests == 1
        assert [r.gave_up for r in client.ledger.records] == [False, False, False, True]


def test_parse_budget_exhausted_names_stage_and_last_answer(tmp_path):
    with FakeOpenAIServer(fault_rates={"garbage": 1.0}) as server:
        client = make(server, tmp_path, parse_retries=2)
        with pytest.raises(LLMOutputError) as info:
            run(client.ask(PROMPT, q="x"))
        assert info.value.stage == "unit-test"
        assert info.value.attempts == 3
        assert "depends on many things" in str(info.value)
        assert server.completions == 3


def test_timeout_is_transient(tmp_path):
    # The server answers the first request only once the client is done: it has timed out on it, however
    # slowly the machine runs, and asked again.
    done = threading.Event()
    seen: list[dict] = []

    def respond(body: dict) -> str:
        seen.append(body)
        if len(seen) == 1:
            done.wait(timeout=120)
        return json.dumps({"answer": "yes", "confidence": 0.5})

    with FakeOpenAIServer(responder=respond) as server:
        client = make(server, tmp_path, timeout=0.5)
        try:
            result = run(client.ask(PROMPT, q="x"))
        finally:
            done.set()
        assert isinstance(result, Verdict)
        records = client.ledger.records
        assert records[0].outcome == "transient_error" and "timed out" in records[0].detail
        assert server.completions == 2


def test_fatal_http_error_is_not_retried(tmp_path):
    with FakeOpenAIServer() as server:
        backend = OpenAICompatibleBackend(server.base_url.replace("/v1", "/nope"), "fake-model")
        client = LLMClient(backend, ledger=CostLedger())
        with pytest.raises(FatalBackendError, match="404"):
            run(client.ask(PROMPT, q="x"))
        assert len(client.ledger.records) == 1


def test_second_identical_run_is_served_from_cache(tmp_path):
    with FakeOpenAIServer(seed=1) as server:
        first = make(server, tmp_path)
        a = run(gather(*[first.ask(PROMPT, q=f"q{i}", sample_index=s) for i in range(3) for s in range(2)]))
        calls_after_first = server.completions
        assert calls_after_first == 6
        second = make(server, tmp_path)  # new client, same cache file
        b = run(gather(*[second.ask(PROMPT, q=f"q{i}", sample_index=s) for i in range(3) for s in range(2)]))
        assert server.completions == calls_after_first  # zero calls reached the server
        assert a == b
        total = second.ledger.total()
        assert total.cache_hits == 6 and total.llm_calls == 0


def test_sample_index_and_seed_keep_cache_entries_apart(tmp_path):
    with FakeOpenAIServer() as server:
        client = make(server, tmp_path)
        run(client.ask(PROMPT, q="same", sample_index=0))
        run(client.ask(PROMPT, q="same", sample_index=1))
        run(client.with_seed(5).ask(PROMPT, q="same", sample_index=0))
        assert server.completions == 3
        seeds = {body.get("seed") for body in server.requests}
        assert len(seeds) == 3


def test_no_cache_bypasses_store(tmp_path):
    with FakeOpenAIServer() as server:
        client = make(server, tmp_path, cache=False)
        run(client.ask(PROMPT, q="x"))
        run(client.ask(PROMPT, q="x"))
        assert server.completions == 2


def test_api_key_never_stored(tmp_path, monkeypatch):
    secret = "sk-test-SECRET-123456"
    with FakeOpenAIServer() as server:
        monkeypatch.setenv("ANCHOR_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("ANCHOR_LLM_API_KEY", secret)
        settings = LLMSettings.from_env(cache_dir=tmp_path)
        assert secret not in repr(settings) and secret not in json.dumps(settings.describe())
        client = make_client(settings)
        run(client.ask(PROMPT, q="x"))
        client.cache.close()
        blob = (tmp_path / "responses.sqlite").read_bytes()
        wal = tmp_path / "responses.sqlite-wal"
        if wal.exists():
            blob += wal.read_bytes()
        assert secret.encode() not in blob
        assert all(secret not in r.model_dump_json() for r in client.ledger.records)


def test_concurrency_is_bounded(tmp_path):
    # After a first request (the client learns from it, alone, what the server accepts), each request
    # waits at the server until two more have arrived: nine pass three at a time only if the client
    # keeps three in flight at once (fewer would break the barrier after its time-out, failing them).
    # Each then stays a moment longer, for a fourth sent beside them to be seen: a machine too slow
    # for that could let an unbounded client pass, but never fail a bounded one. Requests are counted
    # while the answer is made, before it is sent: the server's own in_flight also covers the moment
    # after, when the client may already have sent the next request, so it can read 4 on a loaded machine.
    three = threading.Barrier(3, timeout=60)
    lock = threading.Lock()
    inside = [0, 0]  # now, most

    def respond(body: dict) -> str:
        if body["messages"][-1]["content"] != "Question: first":
            with lock:
                inside[0] += 1
                inside[1] = max(inside)
            try:
                three.wait()
                time.sleep(0.1)
            finally:
                with lock:
                    inside[0] -= 1
        return json.dumps({"answer": "yes", "confidence": 0.5})

    async def work(client: LLMClient) -> None:
        await client.ask(PROMPT, q="first")
        await gather(*[client.ask(PROMPT, q=f"{i}") for i in range(9)])

    with FakeOpenAIServer(responder=respond) as server:
        client = make(server, tmp_path, cache=False, max_concurrency=3)
        run(work(client))
        assert inside == [0, 3] and server.completions == 10


def test_logprobs_returned_when_available(tmp_path):
    with FakeOpenAIServer() as server:
        client = make(server, tmp_path)
        answer = run(client.complete("logits", [{"role": "user", "content": "Yes or no?"}], top_logprobs=3))
        assert answer.logprobs and answer.logprobs[0].top
        assert server.requests[0]["top_logprobs"] == 3


def test_logprobs_missing_gives_clear_error(tmp_path):
    with FakeOpenAIServer(logprobs=False) as server:
        client = make(server, tmp_path)
        with pytest.raises(LogprobsUnavailable, match="log-probabilities"):
            run(client.complete("logits", [{"role": "user", "content": "Yes or no?"}], top_logprobs=3))


def test_semantic_check_triggers_reask(tmp_path):
    answers = iter([{"answer": "bad", "confidence": 0.5}, {"answer": "good", "confidence": 0.5}])
    with FakeOpenAIServer(responder=lambda body: json.dumps(next(answers))) as server:
        client = make(server, tmp_path, cache=False)

        def check(v: Verdict) -> None:
            if v.answer != "good":
                raise ValueError("answer must be good")

        result = run(client.ask(PROMPT, q="x", check=check))
        assert result.answer == "good"
        assert server.completions == 2
        assert client.ledger.records[0].outcome == "invalid_output"


def test_cache_survives_corrupt_file(tmp_path):
    path = tmp_path / "responses.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.warns(UserWarning, match="unreadable"):
        cache = ResponseCache(path)
    assert len(cache) == 0
    assert any(p.name.startswith("responses.sqlite.corrupt-") for p in tmp_path.iterdir())


def test_cache_integrity_after_concurrent_writers_and_sigkill(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    path = tmp_path / "shared.sqlite"
    writer = (
        "import sys\n"
        "from anchor.llm.cache import ResponseCache, CachedResponse\n"
        "c = ResponseCache(sys.argv[1])\n"
        "tag = sys.argv[2]\n"
        "i = 0\n"
        "while True:\n"
        "    c.put(f'{tag}-{i}', 's', CachedResponse(text='x' * 2000, prompt_tokens=1, completion_tokens=1))\n"
        "    i += 1\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", writer, str(path), f"w{n}"]) for n in range(3)]

    def rows_by_writer() -> dict[str, int]:
        seen = sqlite3.connect(path, timeout=5)
        try:
            return dict(seen.execute("SELECT substr(key, 1, 2), count(*) FROM responses GROUP BY 1").fetchall())
        except sqlite3.OperationalError:  # no table yet: no writer has started
            return {}
        finally:
            seen.close()

    # Kill them while all three are writing: each has written rows, and written more since all three were
    # seen, so each is in its write loop (a loaded machine takes seconds to start a Python).
    deadline = time.monotonic() + 120  # only so that a writer that never starts cannot hang the suite
    first: dict[str, int] = {}
    try:
        while True:
            counts = rows_by_writer()
            if not first and set(counts) == {"w0", "w1", "w2"}:
                first = counts
            elif first and all(counts[w] > first[w] for w in first):
                break
            assert time.monotonic() < deadline, f"the three writers were not all writing after 120 s: {counts}"
            time.sleep(0.05)
    finally:
        for p in procs:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    counts = dict(conn.execute("SELECT substr(key, 1, 2), count(*) FROM responses GROUP BY 1").fetchall())
    conn.close()
    assert set(counts) == {"w0", "w1", "w2"} and min(counts.values()) > 0
    cache = ResponseCache(path)
    assert cache.get("w0-0").text == "x" * 2000


def test_identical_requests_in_flight_share_one_answer(tmp_path):
    with FakeOpenAIServer(fault_rates={"slow": 1.0}, slow_seconds=0.3) as server:
        client = make(server, tmp_path)
        answers = run(gather(*[client.ask(PROMPT, q="same question") for _ in range(4)]))
        assert server.completions == 1
        assert all(a == answers[0] for a in answers)
        total = client.ledger.total()
        assert total.llm_calls == 1 and total.cache_hits == 3


def test_cache_keeps_the_first_answer(tmp_path):
    from anchor.llm.cache import CachedResponse

    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put("k", "s", CachedResponse(text="first", prompt_tokens=1, completion_tokens=1))
    cache.put("k", "s", CachedResponse(text="second", prompt_tokens=1, completion_tokens=1))
    assert cache.get("k").text == "first"


@pytest.mark.parametrize("formats, expected", [(("json_object",), "json_object"), ((), "prompt")])
def test_structured_output_falls_back_when_server_rejects_json_schema(tmp_path, formats, expected):
    with FakeOpenAIServer(formats=formats) as server:
        client = make(server, tmp_path, cache=False)
        first = run(client.ask(PROMPT, q="x"))
        second = run(client.ask(PROMPT, q="y"))
        assert isinstance(first, Verdict) and isinstance(second, Verdict)
        assert client.backend.format_mode == expected
        last = server.requests[-1]
        if expected == "json_object":
            assert last["response_format"]["type"] == "json_object" and "schema" in last["response_format"]
        else:
            assert "response_format" not in last
            assert '"confidence"' in last["messages"][0]["content"]  # the schema is spelled out instead
        # The negotiation happens once; later calls go straight to the working mode. The refused
        # requests are counted as failed attempts, so the ledger agrees with the server.
        refused = 1 if expected == "json_object" else 2
        assert server.completions == 2 + refused
        total = client.ledger.total()
        assert total.llm_calls == server.completions and total.failed_attempts == refused
        assert total.logical_requests == 2  # the refused formats are attempts, not requests
        assert [r.outcome for r in client.ledger.records].count("format_rejected") == refused


def test_the_server_receives_the_request_exactly_as_built(tmp_path):
    # The body goes through the SDK untouched (extra_body): the rendered messages, the sampling
    # parameters and the inlined schema, nothing dropped or added.
    with FakeOpenAIServer() as server:
        client = make(server, tmp_path)
        run(client.ask(PROMPT, q="hot or warm water?"))
        run(client.ask(PROMPT, q="cold water?", sample_index=1))
        first, second = server.requests
    assert first["messages"] == PROMPT.render(q="hot or warm water?")
    assert second["messages"] == PROMPT.render(q="cold water?")
    assert first["model"] == "fake-model"
    assert (first["temperature"], first["max_tokens"]) == (PROMPT.temperature, PROMPT.max_tokens)
    assert isinstance(first["seed"], int) and second["seed"] == first["seed"] + 1
    assert first["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "Verdict", "schema": inline_schema(Verdict), "strict": False}}
    assert set(first) == {"model", "messages", "temperature", "max_tokens", "seed", "response_format"}


def test_an_answer_is_cached_before_its_request_is_recorded_as_answered(tmp_path):
    """A process killed between the two must never find, on resuming, a request counted as answered whose
    answer it has to ask for again (the server would see it twice, and a resumed run would differ from an
    uninterrupted one). Cached first, a kill in between leaves a request recorded as sent, whose answer the
    resumed run takes from the cache: the server saw it once, and it is counted once."""
    with FakeOpenAIServer(seed=1) as server:
        client = make(server, tmp_path)
        cached_when_recorded: list[int] = []
        client.ledger.subscribe(lambda record: cached_when_recorded.append(len(client.cache))
                                if record.outcome == "ok" else None)
        run(gather(client.ask(PROMPT, q="one"), client.ask(PROMPT, q="two", sample_index=1)))
        run(client.ask_samples(PROMPT, samples=3, q="three"))
        assert len(cached_when_recorded) >= 3
        # Each "ok" record found its own answer (and every one before it) in the cache already.
        assert all(n >= i + 1 for i, n in enumerate(cached_when_recorded)), cached_when_recorded
