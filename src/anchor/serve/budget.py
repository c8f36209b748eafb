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

With ``--workers N`` the service is N processes, each with a budget of its own that orders its requests
as above, and the N must still hold at most ``limit`` requests in flight between them. :class:`SlotFiles`
is that limit: ``limit`` lock files in the state folder (``budget/K.lock``), and a request in flight holds
one of them (an ``flock``) beside its process's slot. File locks rather than a shared-memory semaphore
because the kernel lets go of a dead process's locks: a process killed with requests in flight
(``kill -9``) gives their slots back, where a semaphore would lose them for good. A process whose request
found every file held tries again every few milliseconds (only then: when the LLM is that busy, a slot
frees after one of its answers, which takes far longer); while it has an online request waiting so, it
holds ``budget/online.lock`` shared, and no process lets a batch request take a free file meanwhile
(online first, across the processes as within one).

:class:`GatedBackend` wraps a backend so that each request waits for a slot; :meth:`SharedBudget.factory`
gives the ``backends=`` hook that the predict engine's clients are made with.
"""

from __future__ import annotations

import asyncio
import fcntl
import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from anchor.llm import parallel
from anchor.llm.base import Backend, RawCompletion
from anchor.llm.settings import LLMSettings, make_backend

#: Request classes, best first.
ONLINE = 0
BATCH = 1
CLASS_NAMES = {ONLINE: "online", BATCH: "batch"}
#: How soon a process whose requests wait for a slot file tries the files again.
RETRY_SECONDS = 0.005


class SlotFiles:
    """The LLM budget of the service's processes together: ``limit`` lock files in ``folder``, one held by
    each request in flight (see the module docstring). Used under :class:`SharedBudget`'s lock."""

    def __init__(self, folder: Path, limit: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.files: list[IO[bytes]] = [open(folder / f"{k}.lock", "ab") for k in range(limit)]  # noqa: SIM115
        self._online = open(folder / "online.lock", "ab")  # noqa: SIM115 - held shared while online requests wait
        self._probe = open(folder / "online.lock", "ab")  # noqa: SIM115 - a second description, to test it
        self._free = list(range(limit))
        """Files this process does not hold, in the order it tries them (each process from its own start)."""
        start = os.getpid() % limit
        self._free = self._free[start:] + self._free[:start]
        self._held: list[int] = []
        self._spare: list[int] = []
        """Held files whose request has ended: handed to the next request here, else let go."""
        self._online_waiting = False

    def take(self, batch: bool) -> bool:
        """One file for a request, without waiting; False when every file is held (or, for a batch request,
        when a process has online requests waiting for one)."""
        if self._spare:
            self._held.append(self._spare.pop())
            return True
        if batch and not self._online_waiting and self._online_elsewhere():
            return False
        for i, k in enumerate(self._free):
            try:
                fcntl.flock(self.files[k].fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue
            del self._free[i]
            self._held.append(k)
            return True
        return False

    def release(self) -> None:
        """A request ended: its file becomes spare (the caller lets go of the spare ones after handing on)."""
        self._spare.append(self._held.pop())

    def drop_spare(self) -> None:
        while self._spare:
            k = self._spare.pop()
            fcntl.flock(self.files[k].fileno(), fcntl.LOCK_UN)
            self._free.append(k)

    def online_waiting(self, waiting: bool) -> None:
        """Say to the other processes whether online requests here wait for a file."""
        if waiting != self._online_waiting:
            fcntl.flock(self._online.fileno(), fcntl.LOCK_SH if waiting else fcntl.LOCK_UN)
            self._online_waiting = waiting

    def _online_elsewhere(self) -> bool:
        try:
            fcntl.flock(self._probe.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(self._probe.fileno(), fcntl.LOCK_UN)
        return False

    def close(self) -> None:
        for fh in (*self.files, self._online, self._probe):
            fh.close()


@dataclass(order=True)
class _Waiter:
    key: tuple[int, int, int]
    loop: asyncio.AbstractEventLoop = field(compare=False)
    future: asyncio.Future[None] = field(compare=False)


class SharedBudget:
    """At most ``limit`` LLM requests in flight across the process (see the module docstring)."""

    def __init__(self, limit: int, batch_share: float = 1.0, slots: SlotFiles | None = None) -> None:
        if limit < 1:
            raise ValueError(f"the LLM concurrency budget must be at least 1, got {limit}")
        if not 0 < batch_share <= 1:
            raise ValueError(f"the batch share must be in (0, 1], got {batch_share}")
        self.limit = limit
        self.slots = slots
        """The other processes' share of the budget (``--workers``), None when this process is the service."""
        self._retry: threading.Timer | None = None
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

    def _slot_file(self, cls: int) -> bool:
        return self.slots is None or self.slots.take(batch=cls == BATCH)

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
            if (self._room(cls) and (not self._live_waiters() or key < self._waiters[0].key)
                    and self._slot_file(cls)):
                self._take(cls)
                return
            waiter = _Waiter(key, loop, loop.create_future())
            heapq.heappush(self._waiters, waiter)
            self.waited[cls] += 1
            if self.slots is not None:
                self._blocked_on_files()
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
            if self.slots is not None:
                self.slots.release()
            self._hand_on()

    def _live_waiters(self) -> bool:
        while self._waiters and self._waiters[0].future.done():
            heapq.heappop(self._waiters)  # cancelled while waiting
        return bool(self._waiters)

    def _hand_on(self) -> None:
        """Give free slots to the best waiters (called with the lock held)."""
        while (self._live_waiters() and self._room(self._waiters[0].key[0])
               and self._slot_file(self._waiters[0].key[0])):
            waiter = heapq.heappop(self._waiters)
            cls = waiter.key[0]
            self._take(cls)
            try:
                waiter.loop.call_soon_threadsafe(self._grant, waiter.future, cls)
            except RuntimeError:  # its loop has closed: the slot goes to the next one
                self.in_flight -= 1
                self.batch_in_flight -= cls == BATCH
                if self.slots is not None:
                    self.slots.release()
        if self.slots is not None:
            self.slots.drop_spare()
            self._blocked_on_files()

    def _blocked_on_files(self) -> None:
        """(With the lock held.) Whether the best waiter here waits for another process's slot file: if so,
        try again shortly, and while it is online, keep the other processes' batch requests back."""
        assert self.slots is not None
        blocked = self._live_waiters() and self._room(self._waiters[0].key[0])
        self.slots.online_waiting(blocked and self._waiters[0].key[0] == ONLINE)
        if blocked and self._retry is None:
            self._retry = threading.Timer(RETRY_SECONDS, self._try_again)
            self._retry.daemon = True
            self._retry.start()

    def _try_again(self) -> None:
        with self._lock:
            self._retry = None
            self._hand_on()

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
