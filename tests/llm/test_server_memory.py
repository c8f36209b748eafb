"""What a server accepts is found out by one request and remembered for the next process
(anchor.llm.memory, OpenAICompatibleBackend), against a llama.cpp-like test server: it refuses
``response_format: json_schema`` with HTTP 500 and answers one choice whatever ``n`` asks."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from anchor.cli import app
from anchor.llm import LLMClient, PromptSpec
from anchor.llm.memory import SERVERS_FILE, ServerMemory
from anchor.llm.settings import LLMSettings, make_client
from tests.fakeserver import FakeOpenAIServer

pytestmark = pytest.mark.usefixtures("clean_anchor_env")


class Verdict(BaseModel):
    answer: str
    confidence: float


PROMPT = PromptSpec(stage="unit-test", system="Answer briefly.", user="Question: {q}", schema=Verdict, max_tokens=64)


def llama_cpp_like(**kw) -> FakeOpenAIServer:
    return FakeOpenAIServer(formats=("json_object",), honour_n=False, deterministic=True, **kw)


def client_for(server: FakeOpenAIServer, cache_dir, **kw) -> LLMClient:
    return make_client(LLMSettings(base_url=server.base_url, model="fake-model", cache_dir=cache_dir,
                                   max_concurrency=16, **kw))


def ask_many(client: LLMClient, questions: list[str]) -> None:
    async def main() -> None:
        try:
            await asyncio.gather(*(client.ask(PROMPT, q=q) for q in questions))
        finally:
            await client.aclose()

    asyncio.run(main())


def json_schema_requests(server: FakeOpenAIServer) -> int:
    return sum((r.get("response_format") or {}).get("type") == "json_schema" for r in server.requests)


def test_one_request_finds_the_format_and_the_next_process_knows_it(tmp_path):
    with llama_cpp_like() as server:
        first = client_for(server, tmp_path)
        ask_many(first, [f"first {i}" for i in range(16)])
        # 16 requests at once, but only one was sent in the refused format; the others waited for it.
        assert json_schema_requests(server) == 1
        assert [r.outcome for r in first.ledger.records].count("format_rejected") == 1
        assert server.completions == 17
        stored = json.loads((tmp_path / SERVERS_FILE).read_text())
        assert stored == {f"{server.base_url} fake-model": {"format_mode": "json_object"}}

        second = client_for(server, tmp_path)  # a new process: a new backend, the same cache directory
        ask_many(second, [f"second {i}" for i in range(16)])
        assert json_schema_requests(server) == 1 and server.completions == 33
        assert [r.outcome for r in second.ledger.records].count("format_rejected") == 0


def test_what_is_remembered_is_per_server_and_model(tmp_path):
    with llama_cpp_like() as llama, FakeOpenAIServer(deterministic=True) as vllm:
        ask_many(client_for(llama, tmp_path), ["q"])
        ask_many(client_for(vllm, tmp_path), ["another q"])  # (the same question would be a cache hit)
        assert json_schema_requests(vllm) == 1 and vllm.requests[0]["response_format"]["type"] == "json_schema"
        memory = ServerMemory(tmp_path / SERVERS_FILE)
        assert memory.recall(llama.base_url, "fake-model").format_mode == "json_object"
        assert memory.recall(vllm.base_url, "fake-model").format_mode == "json_schema"
        assert memory.recall(vllm.base_url, "another-model").format_mode is None


def test_one_request_finds_out_about_n_and_the_next_process_knows_it(tmp_path):
    with FakeOpenAIServer(refuse_n=True, deterministic=True) as server:
        async def samples(client: LLMClient, tag: str) -> None:
            try:
                await asyncio.gather(*(client.ask_samples(PROMPT, samples=4, q=f"{tag} {i}") for i in range(8)))
            finally:
                await client.aclose()

        first = client_for(server, tmp_path)
        asyncio.run(samples(first, "a"))
        asked_n = [r for r in server.requests if int(r.get("n") or 1) > 1]
        assert len(asked_n) == 1  # refused once (HTTP 400), not once per prompt in flight
        assert ServerMemory(tmp_path / SERVERS_FILE).recall(server.base_url, "fake-model").honours_n is False

        asyncio.run(samples(client_for(server, tmp_path), "b"))
        assert len([r for r in server.requests if int(r.get("n") or 1) > 1]) == 1


def test_no_cache_reads_and_writes_no_memory(tmp_path):
    ServerMemory(tmp_path / SERVERS_FILE).remember("http://elsewhere/v1", "m", format_mode="prompt")
    before = (tmp_path / SERVERS_FILE).read_text()
    with llama_cpp_like() as server:
        ask_many(client_for(server, tmp_path, use_cache=False), ["a", "b"])
        assert json_schema_requests(server) == 1
    assert (tmp_path / SERVERS_FILE).read_text() == before


def test_cache_clear_forgets_what_servers_accept(tmp_path):
    with llama_cpp_like() as server:
        ask_many(client_for(server, tmp_path), ["a"])
    result = CliRunner().invoke(app, ["cache", "clear", "--yes", "--cache-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "forgot what 1 server(s) accept" in " ".join(result.stdout.split())
    assert not (tmp_path / SERVERS_FILE).exists()


def test_an_unreadable_memory_is_learnt_again(tmp_path):
    (tmp_path / SERVERS_FILE).write_text("{not json")
    with llama_cpp_like() as server:
        ask_many(client_for(server, tmp_path), ["a", "b", "c"])
        assert json_schema_requests(server) == 1
    assert ServerMemory(tmp_path / SERVERS_FILE).recall(server.base_url, "fake-model").format_mode == "json_object"


def test_a_folder_that_cannot_be_written_costs_only_the_memory(tmp_path, caplog):
    (tmp_path / "ro").mkdir()
    memory = ServerMemory(tmp_path / "ro" / "sub" / SERVERS_FILE)
    (tmp_path / "ro" / "sub").write_text("a file where the folder should be")
    memory.remember("http://h/v1", "m", format_mode="prompt")
    assert "could not remember what http://h/v1 accepts" in caplog.text
    assert memory.recall("http://h/v1", "m").format_mode is None
