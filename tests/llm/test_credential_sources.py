"""Credentials in a base URL and an API key from different places: the flag wins over the variable (the
rule every setting follows), and two from the same place are refused naming the two (issue 34, item 11)."""

from __future__ import annotations

import base64

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.errors import ConfigurationError
from anchor.llm.settings import LLMSettings
from tests.fakeserver import FakeOpenAIServer
from tests.llm.test_url_secrets import KEY, PASSWORD, assert_no_secret, with_password

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("clean_anchor_env")
BASIC = "Basic " + base64.b64encode(f"user:{PASSWORD}".encode()).decode()


def authorization(headers: dict[str, str]) -> str | None:
    return {k.lower(): v for k, v in headers.items()}.get("authorization")


def test_credentials_in_the_base_url_flag_win_over_the_key_variable(monkeypatch):
    monkeypatch.setenv("ANCHOR_LLM_API_KEY", KEY)
    with FakeOpenAIServer(deterministic=True) as server:
        result = runner.invoke(app, ["llm", "ping", "--base-url", with_password(server.base_url)])
        assert result.exit_code == 0, result.output
        assert server.headers and all(authorization(h) == BASIC for h in server.headers)
    assert_no_secret(result.stdout, result.stderr)


def test_the_key_flag_wins_over_credentials_in_the_base_url_variable(monkeypatch):
    with FakeOpenAIServer(deterministic=True) as server:
        monkeypatch.setenv("ANCHOR_LLM_BASE_URL", with_password(server.base_url))
        result = runner.invoke(app, ["llm", "ping", "--api-key", KEY])
        assert result.exit_code == 0, result.output
        assert server.headers and all(authorization(h) == f"Bearer {KEY}" for h in server.headers)
    assert_no_secret(result.stdout, result.stderr)


def test_both_from_the_environment_are_refused_naming_the_two_variables(monkeypatch):
    monkeypatch.setenv("ANCHOR_LLM_BASE_URL", with_password("http://127.0.0.1:9/v1"))
    monkeypatch.setenv("ANCHOR_LLM_API_KEY", KEY)
    result = runner.invoke(app, ["llm", "ping"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: ANCHOR_LLM_BASE_URL http://***@127.0.0.1:9/v1 carries credentials (user:password@) and "
        "ANCHOR_LLM_API_KEY is set too; a request has one Authorization header, so one of them would never be "
        "sent: give only one"]
    assert_no_secret(result.stdout, result.stderr)


def test_the_settings_keep_what_the_flag_gives_for_each_pair(monkeypatch):
    monkeypatch.setenv("ANCHOR_EMBED_API_KEY", KEY)
    monkeypatch.setenv("ANCHOR_LLM_BASE_URL", "http://user:pw@llm:8000/v1")
    settings = LLMSettings.from_env(embed_base_url="http://user:pw@emb:8001/v1", api_key="sk-flag")
    assert settings.embed_base_url == "http://user:pw@emb:8001/v1" and settings.embed_api_key is None
    assert settings.base_url == "http://llm:8000/v1" and settings.api_key.get_secret_value() == "sk-flag"
    with pytest.raises(ConfigurationError, match="--base-url .* and --api-key is set too"):
        LLMSettings.from_env(base_url="http://user:pw@llm:8000/v1", api_key="sk-flag")


def test_cache_info_does_not_create_the_cache_folder(tmp_path):
    new = tmp_path / "new" / "cache"
    result = runner.invoke(app, ["cache", "info", "--cache-dir", str(new)])
    assert result.exit_code == 0, result.output
    assert "0 cached answers" in result.stdout and "does not exist yet" in result.stdout
    assert not (tmp_path / "new").exists()


def test_credentials_leave_the_url_the_sdk_is_given_and_travel_as_basic_auth():
    from anchor.llm.endpoint import sdk_endpoint

    end = sdk_endpoint("http://al%40ice:p%3Ass@127.0.0.1:9/v1/?key=k", None, url_flag="--base-url",
                       key_flag="--api-key")
    assert end.base_url == "http://127.0.0.1:9/v1" and end.query == {"key": "k"}
    assert end.headers == {"Authorization": "Basic " + base64.b64encode(b"al@ice:p:ss").decode()}
    assert "p%3Ass" not in repr(end) and "Basic" not in repr(end)
    lone = sdk_endpoint("https://tok-123@example.org/v1", None, url_flag="--base-url", key_flag="--api-key")
    assert lone.base_url == "https://example.org/v1"
    assert lone.headers == {"Authorization": "Basic " + base64.b64encode(b"tok-123:").decode()}
    assert sdk_endpoint("http://h/v1", "k", url_flag="--base-url", key_flag="--api-key").headers == {}
