"""One LLM concurrency budget for the whole service, shared by every event loop in the process.

Online predictions are answered on the server's event loop; each batch job runs its predict run on
an event loop of its own, in its own thread (a job's reading, scoring and writing would otherwise
hold up every online request). Each of those makes its own LLM clients, and each client limits only
its own requests. :class:`SharedBudget` is the limit over all of them: every request to the LLM
takes one of its slots first, wherever it comes from.

A freed slot goes to the waiting request of the best *class* (online before batch), then of the
lowest priority of :mod:`anchor.llm.parallel` (a predict run numbers its scenarios so that an earlier
one finishes first), then the earliest. While online answers are in progress, batch requests hold at
most ``batch_share`` of the slots: a job's work is CPU too (parsing answers, embedding, scoring), and on
a small machine a job that filled the budget slowed every online answer down with its share of the
cores, however early the online requests got their slots. The budget is thread-safe: a waiter is a
future of its own event loop, resolved from whichever thread frees the slot.

:class:`GatedBackend` wraps a backend so that each request waits for a slot; :meth:`SharedBudget.factory`
gives the ``backends=`` hook that the predict engine's clients are made with.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from anchor.llm import parallel
from anchor.llm.base import Backend, RawCompletion
from anchor.llm.settings import LLMSettings, make_backend

#: Request classes, best first.
ONLINE = 0
BATCH = 1
CLASS_NAMES = {ONLINE: "online", BATCH: "batch"}


@dataclass(order=True)
class _Waiter:
    key: tuple[int, int, int]
    loop: asyncio.AbstractEventLoop = field(compare=False)
    future: asyncio.Future[None] = field(compare=False)


class SharedBudget:
    """At most ``limit`` LLM requests in flight across the process (see the module docstring)."""

    def __init__(self, limit: int, batch_share: float = 1.0) -> None:
        if limit < 1:
            raise ValueError(f"the LLM concurrency budget must be at least 1, got {limit}")
        if not 0 < batch_share <= 1:
            raise ValueError(f"the batch share must be in (0, 1], got {batch_share}")
        self.limit = limit
        self.batch_cap = max(1, int(limit * batch_share))
        """Slots batch requests may hold while online answers are in progress."""
        self.in_flight = 0
        self.batch_in_flight = 0
        self.online_active = 0
        self._lock = threading.Lock()
        self._waiters: list[_Waiter] = []
        self._arrivals = itertools.count()
        self.waited = {ONLINE: 0, BATCH: 0}
        """Requests of each class that had to wait for a slot."""
        self.wait_seconds = {ONLINE: 0.0, BATCH: 0.0}
        """Their waits added up."""

    def waiting(self, cls: int | None = None) -> int:
        """Requests waiting for a slot (of class ``cls``, or all)."""
        with self._lock:
            return sum(1 for w in self._waiters if not w.future.done() and (cls is None or w.key[0] == cls))

    def _room(self, cls: int) -> bool:
        if self.in_flight >= self.limit:
            return False
        return cls == ONLINE or not self.online_active or self.batch_in_flight < self.batch_cap

    def _take(self, cls: int) -> None:
        self.in_flight += 1
        self.batch_in_flight += cls == BATCH

    def online_started(self) -> None:
        """An online answer is in progress: batch requests keep to their share of the slots."""
        with self._lock:
            self.online_active += 1

    def online_finished(self) -> None:
        with self._lock:
            self.online_active -= 1
            self._hand_on()  # the last one lets waiting batch requests have every slot again

    async def acquire(self, cls: int) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            key = (cls, parallel.current_priority(), next(self._arrivals))
            # At once when there is room and no waiter comes first (a batch request held back by its share
            # does not hold back an online one).
            if self._room(cls) and (not self._live_waiters() or key < self._waiters[0].key):
                self._take(cls)
                return
            waiter = _Waiter(key, loop, loop.create_future())
            heapq.heappush(self._waiters, waiter)
            self.waited[cls] += 1
        started = time.monotonic()
        try:
            await waiter.future
        except asyncio.CancelledError:
            if waiter.future.done() and not waiter.future.cancelled():
                self.release(cls)  # handed a slot, then cancelled before using it: pass it on
            raise
        finally:
            with self._lock:
                self.wait_seconds[cls] += time.monotonic() - started

    def release(self, cls: int) -> None:
        with self._lock:
            self.in_flight -= 1
            self.batch_in_flight -= cls == BATCH
            self._hand_on()

    def _live_waiters(self) -> bool:
        while self._waiters and self._waiters[0].future.done():
            heapq.heappop(self._waiters)  # cancelled while waiting
        return bool(self._waiters)

    def _hand_on(self) -> None:
        """Give free slots to the best waiters (called with the lock held)."""
        while self._live_waiters() and self._room(self._waiters[0].key[0]):
            waiter = heapq.heappop(self._waiters)
            cls = waiter.key[0]
            self._take(cls)
            try:
                waiter.loop.call_soon_threadsafe(self._grant, waiter.future, cls)
            except RuntimeError:  # its loop has closed: the slot goes to the next one
                self.in_flight -= 1
                self.batch_in_flight -= cls == BATCH

    def _grant(self, future: asyncio.Future[None], cls: int) -> None:
        """On the waiter's own loop: wake it, or pass the slot on when it gave up meanwhile."""
        if future.done():
            self.release(cls)
        else:
            future.set_result(None)

    def factory(self, cls: int, make: Callable[[LLMSettings], Backend] = make_backend
                ) -> Callable[[LLMSettings], Backend]:
        """A ``BackendFactory``: the backend ``make`` gives for the settings, behind this budget in class ``cls``."""

        def gated(settings: LLMSettings) -> Backend:
            return GatedBackend(make(settings), self, cls)

        return gated


class GatedBackend:
    """A backend whose every request first takes a slot of a :class:`SharedBudget`."""

    def __init__(self, inner: Backend, budget: SharedBudget, cls: int) -> None:
        self.inner = inner
        self.budget = budget
        self.cls = cls
        self.name = inner.name
        self.kind = inner.kind

    @property
    def model(self) -> str:
        return self.inner.model

    @model.setter
    def model(self, value: str) -> None:
        self.inner.model = value

    @property
    def max_parallel(self) -> int:
        return self.inner.max_parallel

    @property
    def supports_logprobs(self) -> bool:
        return self.inner.supports_logprobs

    def __getattr__(self, name: str) -> Any:
        # What a particular backend offers beyond the protocol (context size, n-sampling, model
        # discovery, ...) is the inner backend's.
        return getattr(self.inner, name)

    async def complete(self, messages: list[dict[str, str]], **kwargs: Any) -> RawCompletion:
        await self.budget.acquire(self.cls)
        try:
            return await self.inner.complete(messages, **kwargs)
        finally:
            self.budget.release(self.cls)

    async def complete_choices(self, messages: list[dict[str, str]], **kwargs: Any) -> Any:
        await self.budget.acquire(self.cls)
        try:
            return await self.inner.complete_choices(messages, **kwargs)  # type: ignore[attr-defined]
        finally:
            self.budget.release(self.cls)

    async def aclose(self) -> None:
        await self.inner.aclose()
