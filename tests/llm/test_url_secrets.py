"""Credentials in a base URL (``http://user:password@host/v1``, ``?key=...``) are treated like the API
key: the SDK gets them, nothing anchor writes or prints shows them - artefacts, HTML pages, the
ping line, the "cannot reach" error, and the traceback under ANCHOR_DEBUG."""

from __future__ import annotations

import base64

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.llm.openai_backend import OpenAICompatibleBackend
from anchor.llm.settings import LLMSettings
from anchor.secrets import display_url, register_url, scrub
from tests.fakeserver import FakeOpenAIServer, made_up_embed

runner = CliRunner()
PASSWORD = "pw-SECRET-4711"
KEY = "sk-test-SECRET-key-0815"
TINY = ["--n-target", "4", "--batch-size", "2", "--max-rounds", "1", "--vote-samples", "1"]


#: The tests pass every setting as a flag: variables of the user's shell must not leak in.
pytestmark = pytest.mark.usefixtures("clean_anchor_env")


def with_password(url: str) -> str:
    return url.replace("http://", f"http://user:{PASSWORD}@", 1)


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        assert "SECRET" not in text, text


@pytest.mark.parametrize(("url", "shown"), [
    ("http://user:pw-x@127.0.0.1:8000/v1", "http://***@127.0.0.1:8000/v1"),
    ("https://tok3n-abcdef@api.example.com/v1", "https://***@api.example.com/v1"),
    ("https://api.example.com/v1?key=abc123&api-version=2024-06-01",
     "https://api.example.com/v1?key=***&api-version=2024-06-01"),
    ("https://h/v1?access_token=t0k&API_KEY=k3y", "https://h/v1?access_token=***&API_KEY=***"),
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
])
def test_display_url_removes_credentials_and_secret_query_values(url, shown):
    assert display_url(url) == shown


def test_registered_url_secrets_are_scrubbed_in_every_form_a_server_may_quote():
    register_url("http://alice:p%40ss-SECRET-1@h:1/v1?key=qk-SECRET-2")
    basic = base64.b64encode(b"alice:p@ss-SECRET-1").decode()
    text = scrub(f"denied p@ss-SECRET-1 / p%40ss-SECRET-1 / Basic {basic} / qk-SECRET-2")
    assert text == "denied *** / *** / Basic *** / ***"
    # The safety net for URLs that were never registered.
    assert scrub("see http://bob:hunter2@x.org/v1?token=abc&x=1") == "see http://***@x.org/v1?token=***&x=1"


def test_backend_name_identity_and_settings_show_no_credentials():
    url = with_password("http://127.0.0.1:9/v1") + "?key=qk-SECRET-3"
    backend = OpenAICompatibleBackend(url, "m")
    assert backend.name == "openai-compatible:http://***@127.0.0.1:9/v1?key=***"
    assert backend._base_url == url  # what the SDK is given
    assert LLMSettings(base_url=url).describe()["base_url"] == "http://***@127.0.0.1:9/v1?key=***"


def test_password_in_base_url_leaves_no_trace(tmp_path):
    """eval (spaces, predictions, calls, config), report (HTML pages), explain and ping: the
    password reaches the server (as Basic auth) but no file or output."""
    with FakeOpenAIServer(deterministic=True) as server:
        url = with_password(server.base_url)
        out, cache = tmp_path / "run", tmp_path / "cache"
        outputs = []
        for args in (
            ["eval", "--base-url", url, "--cache-dir", str(cache), "--out", str(out), "--dataset",
             "common2sense-pairwise", "--method", "anchor", "--limit", "1", "--vote-ratio", "0.3", *TINY],
            ["report", str(out)],
            ["llm", "ping", "--base-url", url],
            ["llm", "ping", "--base-url", url, "--json"],
        ):
            result = runner.invoke(app, args)
            assert result.exit_code == 0, (args, result.stderr, result.exception)
            outputs += [result.stdout, result.stderr]
        basic = base64.b64encode(f"user:{PASSWORD}".encode()).decode()
        # Header names are case-insensitive (the aiohttp client sends them in lower case).
        sent = [{k.lower(): v for k, v in h.items()}.get("authorization") for h in server.headers]
        assert sent and all(a == f"Basic {basic}" for a in sent)
    assert "ok  backend: openai-compatible:http://***@127.0.0.1:" in outputs[4]
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.parent.name == "spaces" for p in written) and any(p.suffix == ".html" for p in written)
    for path in written:
        assert PASSWORD.encode() not in path.read_bytes(), f"the password leaked into {path}"
    assert_no_secret(*outputs)


@pytest.mark.parametrize("debug", [False, True])
def test_unreachable_server_error_hides_the_password(debug):
    env = {"ANCHOR_DEBUG": "1"} if debug else {}
    result = runner.invoke(app, ["llm", "ping", "--base-url", with_password("http://127.0.0.1:1/v1")], env=env)
    assert result.exit_code == (1 if debug else 2)
    assert "cannot reach http://***@127.0.0.1:1/v1" in result.stderr
    assert ("Traceback" in result.stderr) is debug
    assert_no_secret(result.stdout, result.stderr)


def test_debug_traceback_hides_a_key_the_server_quotes_back():
    """Under ANCHOR_DEBUG the whole chained traceback is printed: the SDK's own exception quotes the
    server's message, which quotes the key."""
    with FakeOpenAIServer(deterministic=True, faults=["reject_auth"]) as server:
        result = runner.invoke(app, ["llm", "ping", "--base-url", server.base_url, "--api-key", KEY,
                                     "--model", "fake-model"], env={"ANCHOR_DEBUG": "1"})
        assert server.served["reject_auth"] == 1
    assert result.exit_code == 1
    assert "openai.AuthenticationError: Error code: 401 - invalid key in Bearer ***" in result.stderr
    assert_no_secret(result.stdout, result.stderr)


def test_a_query_in_the_base_url_goes_with_every_request_as_parameters(tmp_path):
    """``?key=...&api-version=...`` (Azure-style) is sent as query parameters on every route (models,
    chat, embeddings), not glued into the path, and shows nowhere."""
    with FakeOpenAIServer(deterministic=True, embed=made_up_embed(384)) as server:
        url = f"{server.base_url}?key=qk-SECRET-5&api-version=2024-06-01"
        result = runner.invoke(app, ["infer", "--scenario", "Will the noodles be ready?", "--outcome1", "yes",
                                     "--outcome2", "no", "-c", "The water boils.", "--base-url", url,
                                     "--embed-base-url", url, "--cache-dir", str(tmp_path / "c"), *TINY])
        assert result.exit_code == 0, (result.stderr, result.exception)
        assert server.completions > 0 and server.embedding_requests
        assert set(server.queries) == {"key=qk-SECRET-5&api-version=2024-06-01"}
    assert_no_secret(result.stdout, result.stderr)


@pytest.mark.parametrize(("url_flag", "key_flag"), [("--base-url", "--api-key"),
                                                   ("--embed-base-url", "--embed-api-key")])
def test_credentials_in_the_url_and_an_api_key_are_refused_in_one_line(url_flag, key_flag):
    """httpx would replace the key's Authorization header by the URL's Basic auth: the key would never be sent."""
    with FakeOpenAIServer(deterministic=True) as server:
        # ping does not embed, build does
        command = ["llm", "ping"] if url_flag == "--base-url" else ["build", "--scenario", "Will it rain?",
                                                                    "--outcome1", "yes", "--outcome2", "no",
                                                                    "--no-cache", *TINY]
        result = runner.invoke(app, [*command, "--base-url", server.base_url, url_flag,
                                     with_password(server.base_url), key_flag, KEY])
        assert server.completions == 0
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {url_flag} http://***@{server.base_url[7:]} carries credentials (user:password@) and {key_flag} "
        "is set too; a request has one Authorization header, so one of them would never be sent: give only one")
    assert_no_secret(result.stdout, result.stderr)
