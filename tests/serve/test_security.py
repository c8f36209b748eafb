"""Security: API keys when listening beyond loopback (refused at start without them), a request without a key
gets 401, the key is in no log and no file, texts are escaped on the pages; and without the serve extra the
command stops in one line."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from anchor.cli import app
from anchor.errors import ConfigurationError
from anchor.serve.settings import ServeSettings, is_loopback, read_api_keys
from tests.fakeserver import FakeOpenAIServer
from tests.serve.helpers import ROOT, SCENARIO, running, vanilla

pytestmark = pytest.mark.usefixtures("clean_anchor_env")
runner = CliRunner()
KEY = "k3y-for-the-tests-0123456789abcdef"


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("::1", True), ("localhost", True),
                                                ("0.0.0.0", False), ("192.168.1.20", False), ("example.org", False)])
def test_only_loopback_addresses_count_as_this_machine(host, loopback):
    assert is_loopback(host) is loopback


def test_listening_beyond_loopback_without_keys_is_refused_unless_insecure(tmp_path):
    with pytest.raises(ConfigurationError, match="--host 0.0.0.0 listens beyond this machine"):
        ServeSettings(state=tmp_path, host="0.0.0.0").check_exposure()
    ServeSettings(state=tmp_path, host="0.0.0.0", insecure=True).check_exposure()
    ServeSettings(state=tmp_path, host="0.0.0.0", api_keys=(SecretStr(KEY),)).check_exposure()
    result = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--state", str(tmp_path / "s")])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --host 0.0.0.0 listens beyond this machine")
    assert not (tmp_path / "s").exists()  # refused before anything was made


def test_keys_come_from_a_file_or_the_environment_and_short_ones_are_refused(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text(f"# the service's keys\n{KEY}\n\n{KEY}-second\n")
    assert [k.get_secret_value() for k in read_api_keys(keys)] == [KEY, f"{KEY}-second"]
    assert [k.get_secret_value() for k in read_api_keys(None, {"ANCHOR_SERVE_API_KEYS": f"{KEY}, {KEY}x"})] == \
        [KEY, f"{KEY}x"]
    with pytest.raises(ConfigurationError, match="at least 16"):
        read_api_keys(None, {"ANCHOR_SERVE_API_KEYS": "short"})
    (tmp_path / "empty").write_text("# nothing\n")
    with pytest.raises(ConfigurationError, match="holds no key"):
        read_api_keys(tmp_path / "empty")


def test_with_keys_a_request_without_one_gets_401_and_the_key_is_in_no_log_or_file(tmp_path, caplog):
    case = {**SCENARIO, "condition": "A key-protected question.", "method": "vanilla"}
    caplog.set_level(logging.DEBUG)
    with FakeOpenAIServer(responder=vanilla) as server, \
            running(tmp_path / "state", server, api_keys=(SecretStr(KEY),)) as live:
        access = logging.getLogger("anchor.serve.access")
        access.setLevel(logging.INFO)
        with live.client() as http:
            missing = http.post("/v1/predictions", json=case)
            wrong = http.post("/v1/predictions", json=case, headers={"Authorization": "Bearer not-the-key-000000"})
            page = http.get("/", headers={"Accept": "text/html"})
            health = http.get("/healthz")
            ok = http.post("/v1/predictions", json=case, headers={"Authorization": f"Bearer {KEY}"})
            browser = http.get("/", auth=("anyone", KEY))
            metrics = http.get("/metrics", headers={"Authorization": f"Bearer {KEY}"})
    assert missing.status_code == wrong.status_code == page.status_code == 401
    assert missing.json()["error"]["field"] == "Authorization"
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert page.headers["www-authenticate"].startswith("Basic")  # a browser asks for the key
    assert health.status_code == 200 and ok.status_code == 200 and browser.status_code == 200
    assert metrics.status_code == 200 and 'status="401"' in metrics.text
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert '"status": 401' in logged and KEY not in logged
    for path in (tmp_path / "state").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in missing.text + wrong.text


def test_texts_from_a_request_are_escaped_on_the_live_page(tmp_path):
    evil = "<script>alert('x')</script><img src=x onerror=alert(1)>"
    with FakeOpenAIServer(responder=vanilla) as server, running(tmp_path / "state", server) as live, \
            live.client() as http:
        answer = http.post("/v1/predictions", json={**SCENARIO, "condition": evil, "method": "vanilla"})
        assert answer.status_code == 200
        page = http.get("/")
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert evil not in page.text and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page.text
    assert "<img src=x" not in page.text


def test_without_the_serve_extra_the_command_stops_in_one_line_naming_it(tmp_path):
    code = ("import sys; sys.modules['fastapi'] = None; from anchor.cli.app import main; "
            f"sys.argv = ['anchor', 'serve', '--state', {str(tmp_path / 's')!r}]; main()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == ("error: anchor serve needs fastapi and uvicorn, which are not installed: "
                                   "pip install 'anchor-infer[serve]'")
