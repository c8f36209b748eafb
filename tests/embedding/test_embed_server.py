"""Embeddings from a server (anchor.embedding.server) against the test server running the real
all-MiniLM-L6-v2 (sentence-transformers), through the openai SDK."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.embedding.embed import MiniLMEmbedder
from anchor.embedding.server import DEFAULT_SERVER_MODEL, ServerEmbedder, make_embedder
from anchor.errors import ConfigurationError, FatalBackendError, RetryBudgetExhausted
from anchor.llm.settings import LLMSettings
from anchor.mapping.mapper import ConditionMapper
from anchor.space.io import save_space
from tests.fakeserver import FakeOpenAIServer, minilm_embed

ROOT = Path(__file__).resolve().parents[2]

#: Largest difference of one component between the server's vectors (sentence-transformers, torch)
#: and the bundled model's (numpy). Measured on TEXTS: 2.8e-7 (and cosine >= 0.9999999).
TOLERANCE = 1e-5

TEXTS = ["", "water temperature", "Hot water cooks noodles faster than warm water does.",
         "Ünïcödé café naïve 東京", "The boiling point drops at high altitude. " * 30,
         *[f"factor {i}: {'salt ' * (i % 7)}and starch release in the pot" for i in range(40)]]


@pytest.fixture(scope="module")
def real_minilm():
    return minilm_embed()


@pytest.fixture(scope="module")
def emb_server(real_minilm):
    with FakeOpenAIServer(embed=real_minilm, seed=1) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _clean(emb_server, monkeypatch):
    emb_server.faults.clear()
    emb_server.embedding_requests.clear()
    for name in list(os.environ):
        if name.startswith("ANCHOR_"):
            monkeypatch.delenv(name)


@pytest.mark.slow
def test_server_vectors_agree_with_the_bundled_model(emb_server, embedder):
    remote = ServerEmbedder(emb_server.base_url, batch_size=16).encode(TEXTS)
    local = embedder.encode(TEXTS)
    assert remote.dtype == np.float32 and remote.shape == local.shape == (len(TEXTS), 384)
    assert np.abs(remote - local).max() <= TOLERANCE
    assert (remote * local).sum(axis=1).min() >= 1 - TOLERANCE
    # Distinct texts only, 16 at a time, asking for the bundled model's name.
    sent = emb_server.embedding_requests
    assert [len(r["input"]) for r in sent] == [16, 16, 13]
    assert {r["model"] for r in sent} == {DEFAULT_SERVER_MODEL} and {r["encoding_format"] for r in sent} == {"float"}


def test_vectors_are_cached_by_text_and_server(emb_server, tmp_path):
    first = ServerEmbedder(emb_server.base_url, cache_path=tmp_path / "v.sqlite")
    a = first.encode(["gas price", "gas price", "noodle texture"])
    assert np.array_equal(a[0], a[1]) and len(emb_server.embedding_requests) == 1
    again = ServerEmbedder(emb_server.base_url, cache_path=tmp_path / "v.sqlite")
    assert np.array_equal(again.encode(["noodle texture", "gas price"]), a[[2, 0]])
    assert again.requests == 0 and len(emb_server.embedding_requests) == 1
    # The bundled model's entries are apart from the server's (their vectors differ in the last bits).
    MiniLMEmbedder(cache_path=tmp_path / "v.sqlite").encode(["gas price"])
    assert again.requests == 0


def test_transient_failures_are_retried(emb_server):
    emb_server.faults.extend(["500", "429", "drop"])
    embedder = ServerEmbedder(emb_server.base_url, retries=3, backoff_base=0.01)
    vectors = embedder.encode(["water temperature"])
    assert embedder.requests == 4 and len(emb_server.embedding_requests) == 4
    assert np.isclose(np.linalg.norm(vectors[0]), 1.0)


def test_the_api_key_never_shows_in_an_error(emb_server):
    key = "sk-embed-secret-123456"
    emb_server.faults.extend(["echo_auth"] * 2)  # HTTP 500 quoting the Authorization header
    embedder = ServerEmbedder(emb_server.base_url, api_key=key, retries=1, backoff_base=0.01)
    with pytest.raises(RetryBudgetExhausted) as caught:
        embedder.encode(["x"])
    assert "2 attempts" in str(caught.value) and key not in str(caught.value) and key not in repr(embedder)


def test_a_server_without_embeddings_is_a_clear_error():
    with FakeOpenAIServer() as chat_only:
        with pytest.raises(FatalBackendError, match="HTTP 404 .*--embed-base-url.*--embed-model"):
            ServerEmbedder(chat_only.base_url, retries=3).encode(["x"])
        assert chat_only.completions == 0


def test_settings_pick_the_embedder(monkeypatch, tmp_path):
    assert type(make_embedder(LLMSettings(cache_dir=tmp_path))) is MiniLMEmbedder
    monkeypatch.setenv("ANCHOR_EMBED_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("ANCHOR_EMBED_MODEL", "all-minilm")
    monkeypatch.setenv("ANCHOR_EMBED_API_KEY", "sk-abcdef")
    settings = LLMSettings.from_env(cache_dir=tmp_path)
    chosen = make_embedder(settings)
    assert isinstance(chosen, ServerEmbedder) and chosen.model_id == "all-minilm"
    assert "sk-abcdef" not in json.dumps(settings.describe())
    assert settings.describe()["embeddings"] == {"base_url": "http://127.0.0.1:9/v1", "model": "all-minilm",
                                                 "api_key": "set"}
    with pytest.raises(ConfigurationError, match="--embed-model 'all-minilm' needs --embed-base-url"):
        make_embedder(LLMSettings(embed_model="all-minilm"))


def test_a_space_is_mapped_by_its_own_embedder_only(make_space, scripted_client, emb_server):
    space = make_space([("Energy Cost", ["gas price", "electricity bill"])], ["noodle texture"])
    client = scripted_client(lambda req: {})
    ConditionMapper(client, ServerEmbedder(emb_server.base_url), space)  # the same model's name: accepted
    with pytest.raises(ConfigurationError) as caught:
        ConditionMapper(client, ServerEmbedder(emb_server.base_url, "all-minilm"), space)
    assert str(caught.value).startswith(
        "the factor space was embedded with 'sentence-transformers/all-MiniLM-L6-v2' but this run embeds "
        "with 'all-minilm'")


def test_infer_refuses_another_embedder_in_one_line(make_space, tmp_path, emb_server):
    path = save_space(make_space([("Energy Cost", ["gas price", "electricity bill"])]), tmp_path / "s.json")
    result = CliRunner().invoke(app, ["infer", "--space", str(path), "-c", "Gas is expensive.", "--base-url",
                                      emb_server.base_url, "--embed-base-url", emb_server.base_url, "--embed-model",
                                      "all-minilm", "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("error: the factor space was embedded with 'sentence-transformers/all-MiniLM-L6-v2'"
                                " but this run embeds with 'all-minilm'")
    assert emb_server.completions == 0


@pytest.mark.slow
def test_infer_with_server_embeddings_loads_no_model(make_space, tmp_path, emb_server):
    """The client embeds nothing itself: no MiniLM, no torch, no helper process for embedding."""
    path = save_space(make_space([("Energy Cost", ["gas price", "electricity bill"])], ["noodle texture"]),
                      tmp_path / "s.json")
    snippet = textwrap.dedent(f"""
        import json, sys
        sys.argv = ["anchor", "infer", "--space", {str(path)!r}, "-c", "Gas is expensive this winter.", "--json",
                    "--base-url", {emb_server.base_url!r}, "--embed-base-url", {emb_server.base_url!r},
                    "--cache-dir", {str(tmp_path / "cache")!r}]
        from anchor.cli import main
        try:
            main()
        except SystemExit as exc:
            assert exc.code in (0, None), exc.code
        import anchor.embedding.minilm, anchor.compute.offload
        print(json.dumps({{"loaded": sorted(m for m in ("torch", "sentence_transformers", "tokenizers")
                                              if m in sys.modules),
                           "minilm": len(anchor.embedding.minilm._LOADED),
                           "embed_process": anchor.compute.offload._EMBED_PROCESS.started}}))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANCHOR_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", snippet], env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    *results, report = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert report == {"loaded": [], "minilm": 0, "embed_process": False}
    (result,) = results
    assert result["condition"] == "Gas is expensive this winter."
    assert [r["input"] for r in emb_server.embedding_requests] == [["Gas is expensive this winter."]]


def test_bad_embed_url_is_one_line_naming_the_flag(make_space, tmp_path):
    path = save_space(make_space([("Energy Cost", ["gas price", "electricity bill"])]), tmp_path / "s.json")
    result = CliRunner().invoke(app, ["infer", "--space", str(path), "-c", "Gas is expensive.",
                                      "--embed-base-url", "localhost:8080", "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: --embed-base-url must start with http:// or https://, got 'localhost:8080'")


def test_embed_api_key_is_hidden_in_a_recorded_command_line():
    from anchor.secrets import redact_argv

    assert redact_argv(["eval", "--embed-api-key", "sk-embed-1234", "--embed-api-key=sk-embed-5678"]) == [
        "eval", "--embed-api-key", "***", "--embed-api-key=***"]
