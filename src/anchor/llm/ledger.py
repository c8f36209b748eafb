"""Cost ledger: one record per attempt at an LLM call, summable per stage and per run.

Scopes (``with ledger.scope() as records``) collect the records made inside a block, including
from tasks it starts, so a caller can attribute cost to one condition while others run
concurrently.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Literal

from pydantic import BaseModel

from anchor.types import StageCost

Outcome = Literal["ok", "cache_hit", "transient_error", "invalid_output", "truncated", "fatal_error"]


class CallRecord(BaseModel):
    stage: str
    outcome: Outcome
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    detail: str = ""

    @property
    def reached_backend(self) -> bool:
        return self.outcome != "cache_hit"


_active_scopes: contextvars.ContextVar[tuple[list[CallRecord], ...]] = contextvars.ContextVar(
    "anchor_ledger_scopes", default=()
)


class CostLedger:
    def __init__(self) -> None:
        self._records: list[CallRecord] = []
        self._lock = threading.Lock()

    def record(self, record: CallRecord) -> None:
        with self._lock:
            self._records.append(record)
            for scope in _active_scopes.get():
                scope.append(record)

    @property
    def records(self) -> list[CallRecord]:
        with self._lock:
            return list(self._records)

    @contextmanager
    def scope(self) -> Iterator[list[CallRecord]]:
        """Collect every record made inside this block (and tasks started from it)."""
        bucket: list[CallRecord] = []
        token = _active_scopes.set(_active_scopes.get() + (bucket,))
        try:
            yield bucket
        finally:
            _active_scopes.reset(token)

    def summary(self) -> list[StageCost]:
        return summarize(self.records)

    def total(self) -> StageCost:
        return total(self.records)


def summarize(records: Iterable[CallRecord]) -> list[StageCost]:
    """Per-stage totals in first-seen stage order."""
    by_stage: dict[str, StageCost] = {}
    for rec in records:
        cost = by_stage.setdefault(rec.stage, StageCost(stage=rec.stage))
        _add(cost, rec)
    return list(by_stage.values())


def total(records: Iterable[CallRecord], label: str = "total") -> StageCost:
    cost = StageCost(stage=label)
    for rec in records:
        _add(cost, rec)
    return cost


def merge_costs(costs: Iterable[StageCost], label: str | None = None) -> list[StageCost]:
    """Add up StageCost rows stage by stage (or into one row called ``label``)."""
    out: dict[str, StageCost] = {}
    for c in costs:
        key = label or c.stage
        acc = out.setdefault(key, StageCost(stage=key))
        acc.llm_calls += c.llm_calls
        acc.failed_attempts += c.failed_attempts
        acc.cache_hits += c.cache_hits
        acc.prompt_tokens += c.prompt_tokens
        acc.completion_tokens += c.completion_tokens
        acc.llm_seconds = round(acc.llm_seconds + c.llm_seconds, 6)
    return list(out.values())


def _add(cost: StageCost, rec: CallRecord) -> None:
    if rec.outcome == "cache_hit":
        cost.cache_hits += 1
        return
    cost.llm_calls += 1
    if rec.outcome != "ok":
        cost.failed_attempts += 1
    cost.prompt_tokens += rec.prompt_tokens
    cost.completion_tokens += rec.completion_tokens
    cost.llm_seconds = round(cost.llm_seconds + rec.seconds, 6)
