"""Helpers for tests that run ``anchor eval`` (or another command) against tests/fakeserver.py and
read back what it wrote: the command line, the run directory's files, and a responder that
answers the server's requests like a scripted LLM.

Only for tests: nothing here produces results.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from anchor.llm.scripted import ScriptedRequest
from anchor.rundir.records import MetricsReport, Prediction
from tests.fakeserver import FakeOpenAIServer


def like_a_terminal() -> None:
    """``preexec_fn`` for a command that a test stops with Ctrl-C (SIGINT): SIGINT's default handling, as
    in a terminal. A suite started in the background by a non-interactive shell (``make test &``,
    ``nohup``) has SIGINT ignored, every process it starts inherits that, and Python then leaves it
    ignored: the test's Ctrl-C would never arrive, and the command would wait for held requests forever."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def eval_args(server: FakeOpenAIServer, cache: Path, out: Path, *extra: str) -> list[str]:
    """``anchor eval`` against ``server``, with its own cache, output directory and JSON output."""
    return ["eval", "--base-url", server.base_url, "--cache-dir", str(cache), "--out", str(out), "--json", *extra]


def metrics_of(out: Path) -> MetricsReport:
    return MetricsReport.model_validate_json((out / "metrics.json").read_text())


def predictions_of(out: Path) -> list[Prediction]:
    return [Prediction.model_validate_json(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


def server_responder(script: Callable[[ScriptedRequest], Any]) -> Callable[[dict], str]:
    """A FakeOpenAIServer responder answering like ``script``: the wire request is turned back into
    the scripted-request shape the helpers in tests/helpers.py read."""

    def respond(body: dict) -> str:
        fmt = body.get("response_format") or {}
        name = (fmt.get("json_schema") or {}).get("name", "")
        request = ScriptedRequest(body["messages"], name, None, body.get("temperature", 0.0),
                                  body.get("max_tokens", 0), body.get("seed"), None)
        return json.dumps(script(request))

    return respond
