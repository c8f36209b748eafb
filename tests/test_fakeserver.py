"""The test server's latency model: time that grows with tokens, and a limited number of slots."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest

from tests.fakeserver import FakeOpenAIServer


def _post(base_url: str, content: str, reply: str | None = None) -> float:
    body = {"model": "fake-model", "messages": [{"role": "user", "content": content}]}
    req = urllib.request.Request(base_url + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=30) as resp:
        json.loads(resp.read())
    return time.monotonic() - t0


def test_latency_grows_with_prompt_and_answer_tokens():
    # 400 characters = 100 prompt tokens at 4 characters a token; the answer is 12 tokens long.
    with FakeOpenAIServer(responder=lambda body: "x" * 48, per_prompt_token=0.002,
                          per_completion_token=0.01) as server:
        short = _post(server.base_url, "a" * 4)
        long = _post(server.base_url, "a" * 400)
        stats = server.stats()
    assert stats["prompt_tokens"] == 101 and stats["completion_tokens"] == 24
    # What each request was made to take: 1 prompt token + 12 answer tokens, then 100 + 12.
    assert server.decode_seconds == [pytest.approx(0.002 + 0.12), pytest.approx(0.2 + 0.12)]
    # ... and at least that long it took (a loaded machine only adds; so no comparison of the two).
    assert short >= 0.122 and long >= 0.32


def test_requests_beyond_the_slots_wait_in_line():
    with FakeOpenAIServer(latency=0.2, slots=1) as server:
        threads = [threading.Thread(target=_post, args=(server.base_url, "hi")) for _ in range(3)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        stats = server.stats()
    # Served one at a time: three requests cannot finish sooner than three latencies (a lower bound:
    # a loaded machine only adds to it).
    assert elapsed >= 0.6
    assert stats["requests"] == 3
