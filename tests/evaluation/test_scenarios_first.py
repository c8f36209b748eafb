"""The evaluation runner numbers scenarios in the order they start, and every request of a scenario
waits for a request slot with its scenario's number (``anchor.llm.parallel.priority``)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from anchor.evaluation.datasets import load_pairwise
from anchor.evaluation.driver import EvalRunner
from anchor.evaluation.run_config import make_run_config
from anchor.llm import parallel
from anchor.llm.client import LLMClient
from anchor.llm.scripted import ScriptedBackend, ScriptedRequest
from anchor.llm.settings import LLMSettings
from anchor.runs import session as runner_loop
from anchor.runs.session import RunOptions
from anchor.types import scenario_key

CONDITION = re.compile(r"^Condition: (.*)$", re.MULTILINE)


class RecordingBackend(ScriptedBackend):
    """Notes the priority each request was sent with (the backend runs in the request's context)."""

    def __init__(self) -> None:
        super().__init__(self.answer, max_parallel=2)
        self.seen: list[tuple[int, str]] = []

    def answer(self, req: ScriptedRequest) -> dict:
        return {"probability": 0.6}

    async def complete(self, messages, **kwargs):  # noqa: ANN001, ANN003, ANN201
        self.seen.append((parallel.current_priority(), CONDITION.search(messages[-1]["content"]).group(1)))
        return await super().complete(messages, **kwargs)


def test_each_scenario_sends_with_one_priority_numbered_in_the_order_scenarios_start(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch):
    backend = RecordingBackend()
    monkeypatch.setattr(runner_loop, "make_client", lambda settings, **kw: LLMClient(backend, max_concurrency=2))
    settings = LLMSettings(use_cache=False)
    limit = 20
    config = make_run_config(dataset="common2sense-pairwise", method="vanilla", data_path=None, ablations=[],
                             limit=limit, runs=1, seed=0, settings=settings, anchor_config=None)
    runner = EvalRunner(config, tmp_path / "out", RunOptions(settings))
    asyncio.run(runner.run())

    pairs = load_pairwise()[:limit]
    scenario_of = {c: scenario_key(p.scenario) for p in pairs for c in (p.condition1, p.condition2)}
    order = list(dict.fromkeys(scenario_key(p.scenario) for p in pairs))  # the order scenarios start in
    assert len(order) < limit  # some pairs share a scenario
    ranks: dict[str, set] = {}
    for rank, condition in backend.seen:
        ranks.setdefault(scenario_of[condition], set()).add(rank)
    assert len(backend.seen) == 2 * limit
    assert all(len(r) == 1 for r in ranks.values())  # both sides and every pair of a scenario alike
    assert {key: r.pop() for key, r in ranks.items()} == {key: parallel_rank(i) for i, key in enumerate(order)}


def parallel_rank(i: int) -> int:
    """What ``parallel.priority(i)`` sets inside no other priority."""
    with parallel.priority(i):
        return parallel.current_priority()
