"""The runner's swappable backend: a factory handed to ``PredictRunner`` (``backends=``) makes the LLM
clients' backends in place of the server or embedded model the settings name, in the runner and in a
worker built elsewhere from its setup."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from anchor.llm.scripted import ScriptedBackend, ScriptedRequest
from anchor.llm.settings import LLMSettings
from anchor.predict.config import CasesInput, make_predict_config
from anchor.predict.runner import PredictRunner
from anchor.runs.session import RunOptions
from anchor.runs.worker import InstanceWorker

pytestmark = pytest.mark.usefixtures("clean_anchor_env")
CONDITION = re.compile(r"^Condition: (.*)$", re.MULTILINE)
P = {"it rains": 0.2, "it is sunny": 0.9, "a storm is coming": 0.05}


def answer(req: ScriptedRequest) -> dict:
    return {"probability": P[CONDITION.search(req.user).group(1)]}


class Factory:
    """Hands out one scripted backend and notes the settings it was asked for."""

    def __init__(self) -> None:
        self.backend = ScriptedBackend(answer, name="scripted-here", model="scripted-1")
        self.asked: list[LLMSettings] = []

    def __call__(self, settings: LLMSettings) -> ScriptedBackend:
        self.asked.append(settings)
        return self.backend


def cases_file(tmp_path: Path) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps({"id": f"r{i}", "scenario": "Ann plans a walk.", "outcome1": "She walks.",
                                        "outcome2": "She stays in.", "condition": cond, "label": 1}) + "\n"
                            for i, cond in enumerate(P)), encoding="utf-8")
    return path


def test_a_backend_factory_answers_the_run_in_place_of_the_settings_backend(tmp_path: Path) -> None:
    # No base_url: without the factory the settings name the embedded model, which is never loaded here.
    settings = LLMSettings(cache_dir=tmp_path / "cache", model="asked-for")
    source = CasesInput.of(cases_file(tmp_path))
    config = make_predict_config(cases=source, method="vanilla", settings=settings, anchor_config=None)
    factory = Factory()
    runner = PredictRunner(config, tmp_path / "run", RunOptions(settings, backends=factory), cases=source)
    asyncio.run(runner.run())

    assert [s.model for s in factory.asked] == ["asked-for"]  # made once, from the run's settings
    assert len(factory.backend.requests) == len(P)
    records = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert [r["p_outcome1"] for r in records] == list(P.values())
    llm = json.loads((tmp_path / "run" / "config.json").read_text())["llm"]
    # The run records the backend that answered, not the embedded model the settings alone would name.
    assert (llm["backend"], llm["model"]) == ("scripted", "scripted-1")


def test_a_worker_built_from_its_setup_makes_its_client_with_the_factory(tmp_path: Path) -> None:
    settings = LLMSettings(cache_dir=tmp_path / "cache", use_cache=False)
    source = CasesInput.of(cases_file(tmp_path))
    config = make_predict_config(cases=source, method="vanilla", settings=settings, anchor_config=None)
    factory = Factory()
    runner = PredictRunner(config, tmp_path / "run", RunOptions(settings, backends=factory), cases=source)
    worker = InstanceWorker(runner.worker_setup())  # as a helper process or a Ray actor builds it

    async def start() -> None:
        await worker.start()
        await worker.close()

    asyncio.run(start())
    assert worker.client is not None and worker.client.backend is factory.backend
