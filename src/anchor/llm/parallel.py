"""How many requests to keep in flight: ``--concurrency`` at most, fewer when the server shows that
it queues them.

A server that works on S requests at once and queues the rest (llama.cpp's server with
``--parallel S``, Ollama) answers each of c > S requests in flight after about c / S times its own
service time: the extra requests only wait, and with long answers they wait into the client's
time-out (against llama.cpp at 16 in flight: median 42 s, slowest 90 s, time-out 120 s). A
batching server (vLLM) slows down too as its batch grows, but gets more done per second, so sending
fewer would cost throughput.

:class:`ParallelLimit` tells the two apart from latencies and counts alone. It has no clock of its
own (tests feed it the latencies a simulated server gives). Each answered request brings its stage,
its latency and how many requests were in flight; its *slowdown* is its latency over the fastest
answer seen for its stage (requests of one stage are alike). Answers faster than ``min_seconds`` are
not counted: at that speed client-side delays dominate and nothing is near a time-out. Requests are
judged in windows of ``max(16, 2 x limit)`` answers (the first round, sent all at once, and the
requests in flight when the limit changes are left out: they queue behind each other). In a window, ``load`` is the mean number in
flight and ``served = load / mean slowdown`` the server's throughput in requests per fastest answer
time (Little's law, so it does not depend on how the stages mix): a server with S slots serves about
S, however many wait in its queue, while a batching server serves more the more it is sent.

- A window that used the limit (``load`` at least 3/4 of it) with a median slowdown of 2 or more
  shows queueing: the limit goes down to ``served`` (rounded, at least 1).
- The next window (of answers to requests sent after the change) checks the cut. If ``served`` held
  (at least 85 % of before), the cut stands. If not, the cut went below the server's slots (the
  fastest answer understates the typical one), and the limit goes up in proportion to what was lost;
  if that does not win the throughput back either, the server was batching, not queueing, and the
  limit goes back to where it was.
- After that the limit stays as it is for the client's lifetime (a server's slots do not change
  during a run), and it is never above ``--concurrency``.

:class:`RequestSlots` holds requests back while the limit is reached (one per event loop, like the
semaphore it replaces), and reads the limit afresh whenever a slot frees up. A freed slot goes to the
waiting request with the lowest *priority* (:func:`priority`, a context variable, so that every
request of a piece of work, and of the tasks it starts, carries it), the earliest among equals; a
new request never takes a slot ahead of one already waiting. The run engine numbers scenarios
in the order they start, so the requests of an earlier scenario go first and it finishes close to
its own critical path instead of sharing the server with every later scenario in flight; work
without a priority (0) is served in arrival order.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import itertools
import logging
import math
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger("anchor.llm")

#: Answers of one window: (stage, seconds, requests in flight).
Window = list[tuple[str, float, int]]

MIN_WINDOW = 16
QUEUE_SLOWDOWN = 2.0  # a median answer this many times slower than the fastest: requests wait in a queue
FULL = 0.75  # a window whose mean load is below this share of the limit says nothing about the limit
UNDO = 0.85  # a cut after which the server serves less than this share of before was a mistake


class ParallelLimit:
    """The most requests worth having in flight, learnt from answered requests (see the module docstring)."""

    def __init__(self, ceiling: int, *, min_seconds: float = 1.0, name: str = "the server") -> None:
        self.ceiling = max(1, ceiling)
        self.limit = self.ceiling
        self.min_seconds = min_seconds
        self.name = name
        self.changes: list[str] = []
        """One line per change of the limit, saying why."""
        self._fastest: dict[str, float] = {}
        self._window: Window = []
        self._before_cut: tuple[int, Window] | None = None  # the limit before the cut, and its last window
        self._stepped_up = False
        self._settled = False
        self._skip = self.ceiling  # the first round goes out at once: its answers wait behind each other

    def observe(self, stage: str, seconds: float, in_flight: int) -> int | None:
        """Count one answered request of ``stage`` that took ``seconds`` while ``in_flight`` requests
        (itself included) were in flight; the new limit when this answer closes a window that changes it."""
        if not math.isfinite(seconds) or seconds < self.min_seconds:
            return None
        self._fastest[stage] = min(self._fastest.get(stage, seconds), seconds)
        if self._skip > 0:
            self._skip -= 1  # sent before the last change (or in the first round): not at the limit's pace
            return None
        self._window.append((stage, seconds, max(1, in_flight)))
        if len(self._window) < max(MIN_WINDOW, 2 * self.limit):
            return None
        window, self._window = self._window, []
        changed = self._judge(window)
        if changed is not None:
            # The requests in flight now, and the first round sent after the change (queued behind
            # them), say nothing about the new limit.
            self._skip = in_flight - 1 + changed
        return changed

    def _slowdowns(self, window: Window) -> list[float]:
        return [seconds / self._fastest[stage] for stage, seconds, _ in window]

    def _served(self, window: Window) -> float:
        """Requests served at once, in fastest-answer times (both windows of a comparison are measured
        against today's fastest answers, which a cut may have lowered)."""
        return statistics.fmean(n for _, _, n in window) / statistics.fmean(self._slowdowns(window))

    def _judge(self, window: Window) -> int | None:
        if self._before_cut is not None:
            return self._check_cut(window)
        load = statistics.fmean(n for _, _, n in window)
        if self._settled or self.limit == 1 or load < FULL * self.limit:
            return None
        served, slowdown = self._served(window), statistics.median(self._slowdowns(window))
        target = max(1, int(served + 0.5))
        if target < self.limit and slowdown >= QUEUE_SLOWDOWN:
            self._before_cut = (self.limit, window)
            return self._change(target, f"it serves about {served:.1f} requests at once and queues the rest "
                                        f"(median answer {slowdown:.1f}x slower than its fastest)")
        return None

    def _check_cut(self, window: Window) -> int | None:
        assert self._before_cut is not None
        before, reference = self._before_cut
        served, served_before = self._served(window), self._served(reference)
        if served >= UNDO * served_before:
            self._before_cut, self._settled = None, True
            return None
        up = min(before, max(self.limit + 1, int(self.limit * served_before / served + 0.5)))
        if not self._stepped_up and up < before:
            self._stepped_up = True
            return self._change(up, f"with {self.limit} in flight it served {served:.1f} at once instead of "
                                    f"{served_before:.1f}")
        self._before_cut, self._settled = None, True
        return self._change(before, f"with fewer requests in flight it served {served:.1f} at once instead of "
                                    f"{served_before:.1f}: it batches them")

    def _change(self, limit: int, why: str) -> int:
        line = f"{self.name}: {why}; now at most {limit} request(s) in flight (--concurrency {self.ceiling})"
        self.changes.append(line)
        log.warning("%s", line)
        self.limit = limit
        return limit


_priority: contextvars.ContextVar[int] = contextvars.ContextVar("anchor_request_priority", default=0)


@contextmanager
def priority(rank: int) -> Iterator[None]:
    """Requests made inside this block (and by tasks started from it) wait for a slot with ``rank``:
    lower goes first (see the module docstring)."""
    token = _priority.set(rank)
    try:
        yield
    finally:
        _priority.reset(token)


def current_priority() -> int:
    return _priority.get()


class RequestSlots:
    """At most ``limit.limit`` requests in flight at once, in one event loop; an async context manager.

    A slot that frees up is handed to the waiting request with the lowest (priority, arrival); the
    request counts as in flight from that moment, so nothing that arrives meanwhile can take it.
    """

    def __init__(self, limit: ParallelLimit) -> None:
        self.limit = limit
        self.in_flight = 0
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []  # a heap
        self._arrivals = itertools.count()
        self._wake_soon = False

    async def __aenter__(self) -> RequestSlots:
        while self._waiters and self._waiters[0][2].done():
            heapq.heappop(self._waiters)  # cancelled while waiting
        if self.in_flight < self.limit.limit and not self._waiters:
            self.in_flight += 1
            return self
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (_priority.get(), next(self._arrivals), waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                # Handed a slot, then cancelled before it ran: pass the slot on.
                self.in_flight -= 1
                self._wake()
            raise  # a waiter cancelled before that stays in the heap, done, and is skipped
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.in_flight -= 1
        if self._waiters and not self._wake_soon:
            # Handed out once the running task has gone as far as it can without waiting: a chain that
            # sends its next request straight away then waits for this slot with everyone else, by
            # priority, instead of behind whoever happened to be waiting.
            self._wake_soon = True
            asyncio.get_running_loop().call_soon(self._wake)

    @property
    def waiting(self) -> int:
        """Requests waiting for a slot."""
        return sum(1 for *_, waiter in self._waiters if not waiter.done())

    def observe(self, stage: str, seconds: float) -> None:
        """An answer to a request that holds a slot (so it counts among those in flight)."""
        if self.limit.observe(stage, seconds, self.in_flight) is not None:
            self._wake()  # the limit may have gone back up

    def _wake(self) -> None:
        self._wake_soon = False
        while self._waiters and self.in_flight < self.limit.limit:
            *_, waiter = heapq.heappop(self._waiters)
            if not waiter.done():  # not cancelled meanwhile
                waiter.set_result(None)
                self.in_flight += 1
