"""The SDK's two HTTP clients (aiohttp, the default, and httpx): the same answers, and failures named for
what they are: a refused or dropped connection is a connection error, a slow answer a time-out."""

from __future__ import annotations

import asyncio
import socket
import threading

import openai
import pytest

from anchor.errors import ConfigurationError, TransientBackendError
from anchor.llm.openai_backend import OpenAICompatibleBackend
from anchor.llm.settings import LLMSettings, make_backend
from tests.fakeserver import FakeOpenAIServer

MESSAGES = [{"role": "user", "content": "Is it raining?"}]


def ask(backend: OpenAICompatibleBackend) -> str:
    """One plain request (no schema, no retry), its answer's text."""

    async def one() -> str:
        try:
            response, _ = await backend._send_structured(MESSAGES, None, "x", 0.0, 16, 0, None, 1)
            return response.choices[0].message.content
        finally:
            await backend.aclose()

    return asyncio.run(one())


def failure(backend: OpenAICompatibleBackend) -> TransientBackendError:
    with pytest.raises(TransientBackendError) as caught:
        ask(backend)
    return caught.value


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


def test_aiohttp_is_the_default():
    assert LLMSettings().http_client == "aiohttp"
    assert make_backend(LLMSettings(base_url="http://127.0.0.1:9/v1")).http_client == "aiohttp"
    assert make_backend(LLMSettings(base_url="http://127.0.0.1:9/v1", http_client="httpx")).http_client == "httpx"


def test_both_clients_send_the_same_request_and_get_the_same_answer():
    with FakeOpenAIServer(deterministic=True) as server:
        answers = [ask(OpenAICompatibleBackend(server.base_url, "fake-model", http_client=how))
                   for how in ("aiohttp", "httpx")]
        assert answers[0] == answers[1] and answers[0]
        assert server.completions == 2 and server.requests[0] == server.requests[1]


@pytest.mark.parametrize("http_client", ["aiohttp", "httpx"])
def test_a_dropped_connection_is_a_connection_error(http_client):
    with FakeOpenAIServer(faults=["drop"]) as server:
        error = failure(OpenAICompatibleBackend(server.base_url, "fake-model", http_client=http_client))
    assert error.kind == "connection" and error.args[0].startswith("connection error: ")
    assert "timed out" not in str(error)


@pytest.mark.parametrize("http_client", ["aiohttp", "httpx"])
def test_a_refused_connection_is_a_connection_error(http_client):
    error = failure(OpenAICompatibleBackend(f"http://127.0.0.1:{closed_port()}/v1", "m", http_client=http_client))
    assert error.kind == "connection" and "timed out" not in str(error)
    assert "refused" in str(error).lower() or "connect" in str(error).lower()


@pytest.mark.parametrize("http_client", ["aiohttp", "httpx"])
def test_a_server_that_cannot_be_reached_is_not_said_to_have_timed_out(http_client):
    # `anchor llm ping` and a run with no --model ask the server for its models first.
    backend = OpenAICompatibleBackend(f"http://127.0.0.1:{closed_port()}/v1", None, http_client=http_client)

    async def resolve() -> str:
        try:
            return await backend.resolve_model()
        finally:
            await backend.aclose()

    reached = r"cannot reach http://127\.0\.0\.1:\d+/v1: connection error: "
    with pytest.raises(ConfigurationError, match=reached) as caught:
        asyncio.run(resolve())
    assert "timed out" not in str(caught.value)


@pytest.mark.parametrize("http_client", ["aiohttp", "httpx"])
def test_a_slow_answer_is_a_time_out(http_client):
    release = threading.Event()

    def respond(body: dict) -> str:
        release.wait(timeout=60)  # until the client has given up on it
        return "yes"

    with FakeOpenAIServer(responder=respond) as server:
        try:
            error = failure(OpenAICompatibleBackend(server.base_url, "fake-model", timeout=0.5,
                                                    http_client=http_client))
        finally:
            release.set()
    assert error.kind == "timeout" and "timed out" in str(error)


def test_an_unknown_http_client_is_refused_in_one_line(monkeypatch):
    with pytest.raises(ConfigurationError, match="http_client must be one of aiohttp, httpx"):
        OpenAICompatibleBackend("http://127.0.0.1:9/v1", "m", http_client="requests")
    monkeypatch.setenv("ANCHOR_LLM_HTTP_CLIENT", "curl")
    with pytest.raises(ConfigurationError) as caught:
        LLMSettings.from_env()
    assert str(caught.value) == "environment variable ANCHOR_LLM_HTTP_CLIENT='curl' must be 'aiohttp' or 'httpx'"
    monkeypatch.setenv("ANCHOR_LLM_HTTP_CLIENT", "httpx")
    assert LLMSettings.from_env().http_client == "httpx"


def test_without_aiohttp_the_error_says_what_to_install(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "aiohttp" else real(name, *a))
    with pytest.raises(ConfigurationError, match=r"pip install 'openai\[aiohttp\]', or set ANCHOR_LLM_HTTP_CLIENT=httpx"):
        OpenAICompatibleBackend("http://127.0.0.1:9/v1", "m")
    assert OpenAICompatibleBackend("http://127.0.0.1:9/v1", "m", http_client="httpx").http_client == "httpx"


def test_a_broken_aiohttp_install_is_named_when_the_client_is_made(monkeypatch):
    class Missing:
        def __init__(self, **kwargs: object) -> None:
            raise RuntimeError("To use the aiohttp client you must have installed the package with the `aiohttp` extra")

    monkeypatch.setattr(openai, "DefaultAioHttpClient", Missing)
    with pytest.raises(ConfigurationError, match="aiohttp client is not available"):
        ask(OpenAICompatibleBackend("http://127.0.0.1:9/v1", "m"))


@pytest.mark.parametrize("http_client", ["aiohttp", "httpx"])
def test_a_request_is_the_one_the_sdks_create_sends(http_client):
    """The backend posts its body past ``chat.completions.create`` (whose walk of its typed parameters cost a
    tenth of the service's event loop): the server must get the same body, keys in the same order, and the
    same headers but the SDK's per-request ones, and the answer must parse the same."""
    schema = {"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"]}
    with FakeOpenAIServer(deterministic=True) as server:
        backend = OpenAICompatibleBackend(server.base_url, "fake-model", api_key="sk-test-body", http_client=http_client)

        async def both() -> tuple[object, object]:
            try:
                ours, _ = await backend._create(MESSAGES, schema, "pick", 0.3, 16, 7, 2, n=3)
                body = backend._request(MESSAGES, schema, "pick", 0.3, 16, 7, 2)
                body["n"] = 3
                sdk = await backend._client.chat.completions.create(model=body["model"], messages=[], extra_body=body)
                return ours, sdk
            finally:
                await backend.aclose()

        ours, sdk = asyncio.run(both())
        assert list(server.requests[0].items()) == list(server.requests[1].items())
        assert server.requests[0]["n"] == 3 and server.requests[0]["seed"] == 7
        per_request = {"x-stainless-retry-count", "x-stainless-read-timeout"}
        same = [{k.lower(): v for k, v in h.items() if k.lower() not in per_request} for h in server.headers]
        assert same[0] == same[1] and same[0]["authorization"] == "Bearer sk-test-body"
        assert type(ours) is type(sdk) and len(ours.choices) == 3
        assert ours.model_dump(exclude={"id", "created"}) == sdk.model_dump(exclude={"id", "created"})
