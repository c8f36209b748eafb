"""Helpers for the service's tests: the real service (FastAPI under uvicorn) on a free port, in a thread of
this process or as an ``anchor serve`` process, talked to over HTTP with httpx2; a scripted vanilla LLM.

Only for tests: nothing here produces results.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx

from anchor.config import AnchorConfig
from anchor.llm.settings import LLMSettings
from anchor.serve.server import ServiceRunner
from anchor.serve.service import Service
from anchor.serve.settings import ServeSettings
from anchor.settings.inference import USER_RULE, InferenceConfig
from anchor.settings.space import default_build_params
from tests.fakeserver import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
CONDITION = re.compile(r"^Condition: (.*)$", re.MULTILINE)
SCENARIO = {"scenario": "Mia plans how to get to work on Monday.", "outcome1": "Mia cycles.",
            "outcome2": "Mia takes the bus."}


def vanilla_p(condition: str) -> float:
    """A made-up P(O1) that depends only on the condition's text (the same for every request about it)."""
    return round((sum(map(ord, condition)) % 97) / 100 + 0.01, 2)


def vanilla(body: dict[str, Any]) -> str:
    """The vanilla baseline's answer: a probability read off the condition."""
    messages = body.get("messages") or [{"content": ""}]
    match = CONDITION.search(messages[-1]["content"])
    return json.dumps({"probability": vanilla_p(match.group(1)) if match else 0.5})


def llm_settings(server: FakeOpenAIServer, cache: Path, **extra: Any) -> LLMSettings:
    return LLMSettings(base_url=server.base_url, cache_dir=cache, **extra)


def quick_config(seed: int = 0) -> AnchorConfig:
    """What `anchor serve --sizes quick` answers with (the rule of the commands that answer a user's cases)."""
    return AnchorConfig(build=default_build_params("cases", seed, "quick"), inference=InferenceConfig(rule=USER_RULE))


class RunningService:
    """The service of ``settings`` served from a thread of this process (its own event loop)."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.url = ""
        self._ready = threading.Event()
        self.runner = ServiceRunner(service, self._started)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name="serve-test", daemon=True)

    def _started(self, url: str) -> None:
        self.url = url
        self._ready.set()

    def _main(self) -> None:
        try:
            asyncio.run(self.runner.run())
        except BaseException as exc:  # noqa: BLE001 - kept for the test to see
            self.error = exc
        finally:
            self._ready.set()

    def __enter__(self) -> RunningService:
        self.thread.start()
        self._ready.wait(120)
        if self.error is not None or not self.url:
            raise RuntimeError(f"the service did not start: {self.error!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        self.runner.stop()
        self.thread.join(60)

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=120, **kwargs)


def make_service(state: Path, server: FakeOpenAIServer, *, cache: Path | None = None,
                 anchor_config: AnchorConfig | None = None, llm: dict[str, Any] | None = None,
                 **settings: Any) -> Service:
    serve = ServeSettings(state=state, port=0, **settings)
    return Service(serve, llm_settings(server, cache or state.parent / "cache", **(llm or {})),
                   anchor_config or quick_config())


@contextmanager
def running(state: Path, server: FakeOpenAIServer, **kwargs: Any) -> Iterator[RunningService]:
    with RunningService(make_service(state, server, **kwargs)) as live:
        yield live


class ServeProcess:
    """``anchor serve`` as a process of its own (for kill -9 and SIGTERM)."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("ANCHOR_")}
        full_env.update({"HF_HUB_OFFLINE": "1", **(env or {})})
        self.proc = subprocess.Popen([sys.executable, "-c", "from anchor.cli.app import main; main()", "serve",
                                      "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env,
                                     cwd=ROOT)
        self.url = ""
        self.stderr: list[str] = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def wait_ready(self, timeout: float = 120) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"anchor serve exited ({self.proc.wait()}): {''.join(self.stderr)[-2000:]}")
            found = re.search(r"listening at (http://\S+)", line)
            if found:
                self.url = found.group(1)
                return self.url
        raise AssertionError("anchor serve did not start")

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=120)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)


def wait_for(condition: Callable[[], bool], timeout: float = 120.0, what: str = "a condition") -> None:
    """Poll until ``condition()`` holds; the timeout only keeps a broken test from hanging."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:.0f} s for {what}")
        time.sleep(0.05)


def cases_csv(path: Path, conditions: list[str], *, bad: bool = False) -> Path:
    lines = ["id,scenario,outcome1,outcome2,condition"]
    lines += [f"c{i},{SCENARIO['scenario']},{SCENARIO['outcome1']},{SCENARIO['outcome2']},{cond}"
              for i, cond in enumerate(conditions)]
    if bad:
        lines.append(f"bad,{SCENARIO['scenario']},,{SCENARIO['outcome2']},no outcome1 here")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
