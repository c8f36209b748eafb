"""An embedder keeps at most ``memory_limit`` vectors in memory (the most recently used), so a service or a
long run that embeds a new condition per request does not grow with the requests, and a text that comes
back after its vector was let go gets the same vector again."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from anchor.embedding.embed import MEMORY_LIMIT, MiniLMEmbedder, VectorMemory
from anchor.embedding.server import ServerEmbedder
from tests.fakeserver import FakeOpenAIServer, made_up_embed

pytestmark = pytest.mark.usefixtures("clean_anchor_env")


class CountingModel:
    """Stands in for MiniLM where only the cache is under test: a vector made from the text's hash."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        self.texts.extend(texts)
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest() * 48, dtype=np.uint8)[:384] for t in texts]
        vectors = np.asarray(rows, dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture
def counting(monkeypatch) -> CountingModel:
    model = CountingModel()
    monkeypatch.setattr(MiniLMEmbedder, "model", property(lambda self: model))
    return model


def test_the_least_recently_used_vector_goes_first():
    memory = VectorMemory(3)
    for text in "abc":
        memory.put(text, np.full(2, ord(text), dtype=np.float32))
    assert memory.get("a") is not None  # a is now the most recent: b is the oldest
    memory.put("d", np.zeros(2, dtype=np.float32))
    assert len(memory) == 3 and memory.get("b") is None
    assert all(memory.get(t) is not None for t in "acd")
    with pytest.raises(ValueError, match="memory_limit"):
        VectorMemory(0)


def test_by_default_the_memory_stops_at_its_limit(counting):
    embedder = MiniLMEmbedder()
    for start in range(0, MEMORY_LIMIT + 500, 250):
        embedder.encode([f"condition {i}" for i in range(start, start + 250)])
    assert embedder.encoded_count == MEMORY_LIMIT + 500
    assert len(embedder.memory) == MEMORY_LIMIT


def test_a_text_let_go_is_embedded_again_with_the_same_vector(counting):
    embedder = MiniLMEmbedder(memory_limit=4)
    first = embedder.encode(["rain", "a strike"])
    embedder.encode([f"filler {i}" for i in range(4)])
    assert len(embedder.memory) == 4
    again = embedder.encode(["a strike", "rain"])
    assert np.array_equal(again, first[[1, 0]])
    assert counting.texts.count("rain") == 2  # it had been let go: asked of the model a second time


def test_a_call_with_more_texts_than_the_limit_gets_every_vector(counting):
    embedder = MiniLMEmbedder(memory_limit=3)
    texts = [f"factor {i}" for i in range(10)] + ["factor 0"]
    vectors = embedder.encode(texts)
    assert vectors.shape == (11, 384) and np.array_equal(vectors[0], vectors[10])
    assert np.array_equal(vectors, CountingModel().encode(texts))
    assert len(embedder.memory) == 3


def test_the_on_disk_cache_answers_for_a_vector_let_go(counting, tmp_path):
    embedder = MiniLMEmbedder(memory_limit=2, cache_path=tmp_path / "v.sqlite")
    first = embedder.encode(["rain", "sun", "fog"])
    assert np.array_equal(embedder.encode(["rain"])[0], first[0])
    assert counting.texts == ["rain", "sun", "fog"]  # read back from the cache, not embedded again


def test_the_real_model_gives_a_text_let_go_the_same_bits(embedder):
    small = MiniLMEmbedder(memory_limit=1)
    first = small.encode(["the bus is late"])
    small.encode(["it rains hard"])
    assert small.encoded_count == 2 and len(small.memory) == 1
    assert np.array_equal(small.encode(["the bus is late"]), first) and small.encoded_count == 3


def test_a_server_embedder_keeps_at_most_its_limit(tmp_path):
    with FakeOpenAIServer(embed=made_up_embed(384)) as server:
        embedder = ServerEmbedder(server.base_url, memory_limit=5, batch_size=4)
        first = embedder.encode([f"text {i}" for i in range(12)])
        assert first.shape == (12, 384) and len(embedder.memory) == 5
        again = embedder.encode(["text 0"])
        assert np.array_equal(again[0], first[0]) and embedder.requests == 4  # text 0 was let go: asked again
