"""Concurrent embedding calls gathered into one model call (``anchor.compute.offload``): each caller gets
its own rows, errors reach every caller of a batch, a caller that gives up disturbs no other, batches
stop at the largest batch, a window gathers calls that keep coming but never holds a lone one, and the
vectors are the bits of one-at-a-time calls, for the bundled MiniLM and for an embeddings server."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from anchor.compute import offload
from anchor.embedding.embed import DEFAULT_MAX_BATCH, MiniLMEmbedder
from anchor.embedding.server import ServerEmbedder, make_embedder
from anchor.errors import ConfigurationError
from anchor.llm.settings import LLMSettings
from tests.fakeserver import FakeOpenAIServer

DEADLINE = 60.0  # only so that a broken batcher fails instead of hanging the suite


def row(text: str) -> list[float]:
    return [float(len(text)), float(sum(map(ord, text)))]


class GatedEmbedder:
    """Counts its calls; the first waits until the test opens the gate, so calls pile up behind it."""

    model_id = "gated"

    def __init__(self, *, max_batch: int = DEFAULT_MAX_BATCH, fail_on: str | None = None) -> None:
        self.max_batch = max_batch
        self.batch_window_ms = 0.0
        self.fail_on = fail_on
        self.calls: list[list[str]] = []
        self.started = threading.Event()
        self.gate = threading.Event()

    def encode(self, texts):
        self.started.set()
        self.gate.wait(timeout=DEADLINE)
        self.calls.append(list(texts))
        if self.fail_on is not None and self.fail_on in texts:
            raise RuntimeError(f"cannot embed {self.fail_on!r}")
        return np.array([row(t) for t in texts], dtype=np.float32)


async def queued(batcher: offload._Batcher, n: int) -> None:  # noqa: SLF001
    deadline = time.monotonic() + DEADLINE
    while sum(1 for _, f in batcher.pending if not f.done()) < n:
        assert time.monotonic() < deadline, "calls were not queued"
        await asyncio.sleep(0.005)


async def busy_then(emb: GatedEmbedder, later: list[list[str]]) -> tuple[asyncio.Future, list[asyncio.Future]]:
    """A first call that holds the embedder, then ``later`` calls queued behind it."""
    first = asyncio.ensure_future(offload.encode(emb, ["a"]))
    assert await asyncio.to_thread(emb.started.wait, DEADLINE)
    rest = [asyncio.ensure_future(offload.encode(emb, texts)) for texts in later]
    await queued(offload._batcher(emb), len(later))  # noqa: SLF001
    return first, rest


async def test_a_batch_stops_at_the_largest_batch_and_each_caller_gets_its_rows():
    emb = GatedEmbedder(max_batch=3)
    later = [["b"], ["cc", "ddd"], ["eeee"], ["b", "fffff"], ["g" * 7, "h", "ii", "jjj"]]
    first, rest = await busy_then(emb, later)
    emb.gate.set()
    results = await asyncio.gather(first, *rest)
    for texts, vectors in zip([["a"], *later], results, strict=True):
        assert vectors.tolist() == [row(t) for t in texts]
    # Whole calls in arrival order, at most 3 texts a batch, except a call larger than that, which goes alone.
    assert emb.calls == [["a"], ["b", "cc", "ddd"], ["eeee", "b", "fffff"], ["g" * 7, "h", "ii", "jjj"]]


async def test_an_error_reaches_every_caller_of_its_batch_and_no_other():
    emb = GatedEmbedder(max_batch=2, fail_on="bad")
    later = [["x"], ["bad"], ["y"], ["z"]]
    first, rest = await busy_then(emb, later)
    emb.gate.set()
    results = await asyncio.gather(first, *rest, return_exceptions=True)
    assert results[0].tolist() == [row("a")]
    assert [str(r) for r in results[1:3]] == ["cannot embed 'bad'"] * 2  # the batch ["x", "bad"]
    assert results[3].tolist() == [row("y")] and results[4].tolist() == [row("z")]
    assert emb.calls == [["a"], ["x", "bad"], ["y", "z"]]


async def test_a_caller_that_gives_up_is_left_out_and_the_others_are_answered():
    emb = GatedEmbedder()
    later = [["keep"], ["gone"], ["also kept"]]
    first, rest = await busy_then(emb, later)
    rest[1].cancel()
    emb.gate.set()
    results = await asyncio.gather(first, *rest, return_exceptions=True)
    assert isinstance(results[2], asyncio.CancelledError)
    assert results[1].tolist() == [row("keep")] and results[3].tolist() == [row("also kept")]
    assert emb.calls == [["a"], ["keep", "also kept"]]
    # The batcher still works afterwards.
    assert (await offload.encode(emb, ["later"])).tolist() == [row("later")]


async def test_a_lone_call_does_not_wait_for_the_window():
    emb = GatedEmbedder()
    emb.gate.set()
    batcher = offload._batcher(emb)  # noqa: SLF001
    batcher.window = 3600.0  # an hour: a call that waited for it would miss the deadline
    vectors = await asyncio.wait_for(offload.encode(emb, ["alone"]), DEADLINE)
    assert vectors.tolist() == [row("alone")]


async def test_calls_that_keep_coming_are_gathered_for_the_window_until_the_batch_is_full():
    emb = GatedEmbedder(max_batch=3)
    emb.gate.set()
    batcher = offload._batcher(emb)  # noqa: SLF001
    batcher.window = 3600.0  # only a full batch ends the wait before the deadline
    await asyncio.wait_for(offload.encode(emb, ["first"]), DEADLINE)  # alone: at once
    calls = []
    for text in ("p", "q", "r"):  # each a loop turn after the other, the model free
        calls.append(asyncio.ensure_future(offload.encode(emb, [text])))
        await asyncio.sleep(0)
    results = await asyncio.wait_for(asyncio.gather(*calls), DEADLINE)
    assert [r.tolist() for r in results] == [[row("p")], [row("q")], [row("r")]]
    assert emb.calls == [["first"], ["p", "q", "r"]]


@pytest.fixture()
def threads(monkeypatch):
    monkeypatch.setenv(offload.ENV_COMPUTE, "threads")


async def test_minilm_vectors_gathered_with_others_are_the_bits_of_one_at_a_time(threads):
    texts = ["Case a-1: there is rain and a strike this time.", "Case b-2: there is a cold and guests this time.",
             "water", "", "the pot is much larger than the amount of water it needs to boil"]
    alone = [MiniLMEmbedder().encode([t])[0].tobytes() for t in texts]
    emb = MiniLMEmbedder()  # fresh: nothing cached, every vector is computed in the gathered call
    others = [["Case c-3: there is a deadline and a discount this time.", "risk"], ["an unrelated sentence"]]
    results = await asyncio.gather(*(offload.encode(emb, [t]) for t in texts), *(offload.encode(emb, o) for o in others))
    assert offload._batcher(emb).batches == 1  # noqa: SLF001 - all of them in one model call
    assert [r[0].tobytes() for r in results[:len(texts)]] == alone


def test_batching_settings_reach_the_embedders_and_bad_values_name_the_flag():
    minilm = make_embedder(LLMSettings(embed_max_batch=8, embed_batch_window_ms=2.5))
    assert (minilm.max_batch, minilm.batch_window_ms) == (8, 2.5)
    assert offload.batching_of(minilm) == (0.0025, 8)
    assert MiniLMEmbedder().max_batch == DEFAULT_MAX_BATCH
    server = ServerEmbedder("http://127.0.0.1:9/v1", batch_size=40)
    assert (server.max_batch, server.batch_window_ms) == (40, 0.0)  # a request's worth by default
    with pytest.raises(ConfigurationError, match="--embed-max-batch"):
        MiniLMEmbedder(max_batch=0)
    with pytest.raises(ConfigurationError, match="--embed-window-ms"):
        ServerEmbedder("http://127.0.0.1:9/v1", batch_window_ms=-1)


async def test_an_embeddings_server_gets_one_request_for_the_gathered_texts(threads):
    gate = threading.Event()
    entered = threading.Event()

    def embed(texts: list[str]) -> list[list[float]]:
        entered.set()
        gate.wait(timeout=DEADLINE)
        return [[float(len(t)) + 1.0, float(sum(map(ord, t))) % 97 + 1.0, 1.0] for t in texts]

    with FakeOpenAIServer(embed=embed) as srv:
        emb = ServerEmbedder(srv.base_url, model="made-up", retries=0)
        first = asyncio.ensure_future(offload.encode(emb, ["one"]))
        assert await asyncio.to_thread(entered.wait, DEADLINE)
        later = [["two", "three"], ["four"], ["two", "five"]]
        rest = [asyncio.ensure_future(offload.encode(emb, t)) for t in later]
        await queued(offload._batcher(emb), len(later))  # noqa: SLF001
        gate.set()
        results = await asyncio.gather(first, *rest)
        assert [b["input"] for b in srv.embedding_requests] == [["one"], ["two", "three", "four", "five"]]
        alone = ServerEmbedder(srv.base_url, model="made-up", retries=0)
        for texts, vectors in zip([["one"], *later], results, strict=True):
            assert vectors.tobytes() == np.stack([alone.encode([t])[0] for t in texts]).tobytes()
