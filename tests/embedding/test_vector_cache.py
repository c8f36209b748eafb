"""The vector cache cannot be poisoned: a server's vectors are checked (finite, one width, the model's
known width) before they are used or cached, cached per server, re-embedded when a cached one is of
the wrong width, and ``anchor cache clear`` removes them. Made-up vectors (tests/fakeserver.py) stand
for servers that serve another model than their name says."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.embedding.embed import MINILM_ID, EmbedderIdentity, MiniLMEmbedder, VectorStore, embedder_identity
from anchor.embedding.server import PROBE_TEXT, ServerEmbedder
from anchor.errors import ConfigurationError, FatalBackendError
from anchor.mapping.mapper import ConditionMapper
from tests.fakeserver import FakeOpenAIServer, made_up_embed

pytestmark = pytest.mark.usefixtures("clean_anchor_env")


def test_vectors_of_another_width_under_minilms_name_are_refused_and_never_cached(tmp_path):
    cache = tmp_path / "vectors.sqlite"
    with FakeOpenAIServer(embed=made_up_embed(7)) as wrong, FakeOpenAIServer(embed=made_up_embed(384)) as right:
        with pytest.raises(FatalBackendError) as caught:
            ServerEmbedder(wrong.base_url, cache_path=cache).encode(["gas price", "noodle texture"])
        assert str(caught.value) == (
            f"embeddings server {wrong.base_url} answered 7-dimensional vectors for model '{MINILM_ID}', which "
            f"should be 384-dimensional (the width this model's vectors have); nothing of this answer was cached in "
            f"{cache}. Check --embed-base-url and --embed-model; if the server's model really changed, `anchor "
            "cache clear` forgets the old vectors")
        assert len(VectorStore(cache)) == 0
        # A correct server afterwards, same cache: it works, and only its vectors are there.
        vectors = ServerEmbedder(right.base_url, cache_path=cache).encode(["gas price", "noodle texture"])
        assert vectors.shape == (2, 384) and len(VectorStore(cache)) == 2


def test_a_cached_vector_of_the_wrong_width_is_embedded_again(tmp_path):
    cache = tmp_path / "vectors.sqlite"
    with FakeOpenAIServer(embed=made_up_embed(384)) as server:
        embedder = ServerEmbedder(server.base_url, cache_path=cache)
        # An entry an earlier version stored from a bad answer, under the very key this embedder reads.
        VectorStore(cache).put_many([(embedder._key("gas price"), np.ones(7, dtype="<f4").tobytes()),
                                     (embedder._key("salt"), np.full(384, np.nan, dtype="<f4").tobytes())])
        vectors = embedder.encode(["gas price", "salt"])
        assert vectors.shape == (2, 384) and np.isfinite(vectors).all()
        assert len(server.embedding_requests) == 1 and server.embedding_requests[0]["input"] == ["gas price", "salt"]
        # ... and replaced: the next process reads the good ones.
        again = ServerEmbedder(server.base_url, cache_path=cache)
        assert np.array_equal(again.encode(["gas price", "salt"]), vectors) and again.requests == 0


def test_bundled_minilm_skips_a_damaged_cached_vector(tmp_path, embedder):
    cache = tmp_path / "vectors.sqlite"
    minilm = MiniLMEmbedder(cache_path=cache)
    VectorStore(cache).put_many([(minilm._key("gas price"), np.ones(7, dtype="<f4").tobytes())])
    assert np.array_equal(minilm.encode(["gas price"]), embedder.encode(["gas price"]))
    assert minilm.encoded_count == 1


def test_two_servers_under_one_model_name_do_not_share_vectors(tmp_path):
    cache = tmp_path / "vectors.sqlite"
    with FakeOpenAIServer(embed=made_up_embed(7)) as a, FakeOpenAIServer(embed=made_up_embed(5)) as b:
        assert ServerEmbedder(a.base_url, "my-embed", cache_path=cache).encode(["x"]).shape == (1, 7)
        from_b = ServerEmbedder(b.base_url, "my-embed", cache_path=cache)
        assert from_b.encode(["x"]).shape == (1, 5) and from_b.requests == 1


def test_a_server_whose_vectors_change_width_is_refused_naming_server_and_cache(tmp_path):
    cache = tmp_path / "vectors.sqlite"
    with FakeOpenAIServer(embed=made_up_embed(7)) as server:
        ServerEmbedder(server.base_url, "my-embed", cache_path=cache).encode(["x"])
        server.embed = made_up_embed(5)  # another model behind the same name and address
        with pytest.raises(FatalBackendError) as caught:
            ServerEmbedder(server.base_url, "my-embed", cache_path=cache).encode(["x", "y"])
    message = str(caught.value)
    assert message.startswith(f"embeddings server {server.base_url} answered 5-dimensional vectors for model "
                              f"'my-embed', which should be 7-dimensional (as wide as the vectors cached for it in "
                              f"{cache})")
    assert "`anchor cache clear` forgets the old vectors" in message
    assert len(VectorStore(cache)) == 1


def test_one_answer_of_uneven_or_infinite_vectors_is_refused(tmp_path):
    cache = tmp_path / "vectors.sqlite"
    with FakeOpenAIServer(embed=lambda texts: [[1.0, float("inf"), 0.0] for _ in texts]) as server:
        with pytest.raises(FatalBackendError, match="NaN/inf values; nothing of its answer was cached"):
            ServerEmbedder(server.base_url, "my-embed", cache_path=cache).encode(["x"])
    assert len(VectorStore(cache)) == 0


def test_the_identity_of_a_server_embedder_costs_one_request_once(tmp_path):
    cache = tmp_path / "vectors.sqlite"
    with FakeOpenAIServer(embed=made_up_embed(5)) as server:
        first = ServerEmbedder(server.base_url, "my-embed", cache_path=cache)
        assert embedder_identity(first, learn=False) == EmbedderIdentity(model="my-embed", where=server.base_url)
        assert embedder_identity(first) == EmbedderIdentity(model="my-embed", dimension=5, where=server.base_url)
        assert [r["input"] for r in server.embedding_requests] == [[PROBE_TEXT]]
        second = ServerEmbedder(server.base_url, "my-embed", cache_path=cache)
        assert embedder_identity(second).dimension == 5 and second.requests == 0
        # MiniLM's name: known without asking.
        assert embedder_identity(ServerEmbedder(server.base_url), learn=False).dimension == 384
    assert embedder_identity(MiniLMEmbedder()) == EmbedderIdentity(model=MINILM_ID, dimension=384, where="bundled")


def test_a_space_is_not_searched_with_vectors_of_another_width(make_space, scripted_client, tmp_path):
    space = make_space([("Energy Cost", ["gas price", "electricity bill"])])
    space = space.model_copy(update={"embedding_model": "my-embed"})  # its stored vectors are 384 wide
    with FakeOpenAIServer(embed=made_up_embed(7)) as server:
        embedder = ServerEmbedder(server.base_url, "my-embed", cache_path=tmp_path / "v.sqlite")
        embedder.encode(["anything"])  # its width is known from now on
        with pytest.raises(ConfigurationError) as caught:
            ConditionMapper(scripted_client(lambda req: {}), embedder, space)
    assert str(caught.value).startswith(
        f"the factor space holds 384-dimensional vectors of 'my-embed' but this run's embedder ({server.base_url}) "
        "makes 7-dimensional ones under that name")


def test_cache_clear_removes_the_vectors_and_info_counts_them(tmp_path):
    with FakeOpenAIServer(embed=made_up_embed(384)) as server:
        ServerEmbedder(server.base_url, cache_path=tmp_path / "vectors.sqlite").encode(["a", "b", "c"])
    runner = CliRunner()
    info = runner.invoke(app, ["cache", "info", "--cache-dir", str(tmp_path)])
    # (the terminal may fold a long path anywhere: compared without white space)
    assert info.exit_code == 0 and f"{tmp_path / 'vectors.sqlite'}:3cachedvectors" in "".join(info.stdout.split())
    cleared = runner.invoke(app, ["cache", "clear", "--yes", "--cache-dir", str(tmp_path)])
    assert cleared.exit_code == 0, cleared.output
    assert "removed 0 cached answers and 3 cached vectors" in " ".join(cleared.stdout.split())
    assert len(VectorStore(tmp_path / "vectors.sqlite")) == 0
