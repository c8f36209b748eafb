"""A run is made by one embedder: its identity (model, vector width, where it runs) is part of the run's
identity, a resume with another is refused in one line, and a refused start leaves config.json as it was."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.embedding.embed import MINILM_ID
from anchor.rundir import DirectoryLock
from anchor.runs.errors import RunError
from anchor.runs.identity import check_resumable
from tests.fakeserver import FakeOpenAIServer, made_up_embed

pytestmark = pytest.mark.usefixtures("clean_anchor_env")
runner = CliRunner()


def anchor_eval(llm: FakeOpenAIServer, tmp_path: Path, *extra: str) -> tuple[int, str]:
    result = runner.invoke(app, ["eval", "--base-url", llm.base_url, "--cache-dir", str(tmp_path / "cache"),
                                 "--out", str(tmp_path / "run"), "--dataset", "today", "--limit", "1",
                                 "--sizes", "quick", *extra])
    return result.exit_code, " ".join(result.stderr.split())


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_run_is_refused_with_another_embedder_and_its_config_is_left_as_it_is(tmp_path):
    config = tmp_path / "run" / "config.json"
    with FakeOpenAIServer(deterministic=True, embed=made_up_embed(384)) as first, \
            FakeOpenAIServer(embed=made_up_embed(384)) as second:
        code, err = anchor_eval(first, tmp_path, "--embed-base-url", first.base_url)
        assert code == 0, err
        recorded = json.loads(config.read_text())["embedder"]
        assert recorded == {"model": MINILM_ID, "dimension": 384, "where": first.base_url}
        before = sha(config)

        # Another server under the same model name, and the bundled MiniLM: both refused in one line.
        code, err = anchor_eval(first, tmp_path, "--embed-base-url", second.base_url)
        assert code == 2
        assert err == (f"error: {tmp_path / 'run'} holds a run with other settings: embedder.where was "
                       f"'{first.base_url}', now '{second.base_url}'; use another --out, or the same settings to "
                       "resume it")
        code, err = anchor_eval(first, tmp_path)
        assert code == 2 and f"embedder.where was '{first.base_url}', now 'bundled'" in err
        assert sha(config) == before and second.embedding_requests == []

        # The same embedder resumes.
        code, err = anchor_eval(first, tmp_path, "--embed-base-url", first.base_url, "--json")
        assert code == 0, err


def test_a_start_refused_because_another_process_runs_there_leaves_config_json(tmp_path):
    config = tmp_path / "run" / "config.json"
    with FakeOpenAIServer(deterministic=True) as llm:
        assert anchor_eval(llm, tmp_path, "--method", "vanilla")[0] == 0
        before = sha(config)
        with DirectoryLock(tmp_path / "run"):
            code, err = anchor_eval(llm, tmp_path, "--method", "vanilla", "--json")  # another command line
    assert code == 2 and "is in use by another anchor process" in err
    assert sha(config) == before


def test_the_embedder_does_not_define_a_run_that_embeds_nothing(tmp_path):
    with FakeOpenAIServer(deterministic=True, embed=made_up_embed(384)) as llm:
        assert anchor_eval(llm, tmp_path, "--method", "vanilla")[0] == 0
        assert json.loads((tmp_path / "run" / "config.json").read_text())["embedder"] is None
        assert anchor_eval(llm, tmp_path, "--method", "vanilla", "--embed-base-url", llm.base_url)[0] == 0


def _old_config(config: dict, embeddings: object) -> dict:
    """The same configuration as a version that did not record the embedder wrote it."""
    old = {k: v for k, v in config.items() if k != "embedder"}
    return {**old, "llm": {**old["llm"], "embeddings": embeddings}}


def test_runs_written_before_the_embedder_was_recorded_stay_resumable(tmp_path):
    with FakeOpenAIServer(deterministic=True, embed=made_up_embed(384)) as llm:
        assert anchor_eval(llm, tmp_path)[0] == 0  # the bundled MiniLM
    path = tmp_path / "run" / "config.json"
    new = json.loads(path.read_text())
    path.write_text(json.dumps(_old_config(new, "bundled MiniLM")))
    check_resumable(tmp_path / "run", new)
    server = {**new, "embedder": {"model": "my-embed", "dimension": 5, "where": "http://127.0.0.1:9/v1"}}
    with pytest.raises(RunError, match="embedder.dimension was 384, now 5"):
        check_resumable(tmp_path / "run", server)
    # An older run on a server: its width was never written, so only the model and the server count.
    path.write_text(json.dumps(_old_config(new, {"base_url": "http://127.0.0.1:9/v1", "model": "my-embed",
                                                 "api_key": None})))
    check_resumable(tmp_path / "run", server)
    with pytest.raises(RunError, match="embedder.where was 'http://127.0.0.1:9/v1', now 'http://127.0.0.1:8/v1'"):
        check_resumable(tmp_path / "run", {**server, "embedder": {**server["embedder"],
                                                                   "where": "http://127.0.0.1:8/v1"}})
