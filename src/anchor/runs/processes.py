"""``--workers N``: helper processes on this machine, each with its own LLM client and embedder.

Each helper (:mod:`anchor.runs.helper`, started through anchor's one helper-process mechanism,
:class:`~anchor.compute.workerproc.HelperProcess`) writes its own records into a shard of the run
directory as it makes them (:mod:`anchor.rundir.shards`), and reads and writes the run's artefact
folders itself. What travels is small and batched: the work, one message for all the instances handed
out in one turn of the event loop (or, for a source each helper reads itself, its share's number:
:meth:`ProcessPool.answer_source`), and back, the status of the answers that finished within a few
milliseconds, with the helper's running tally for the progress line. Nothing travels per request.

Each helper starts with its share of the cores for its libraries' thread pools (OpenMP, BLAS, numba:
:func:`~anchor.compute.workerproc.thread_budget`), unless the user set them: left alone, N helpers would
each start a thread a core.

A helper ignores Ctrl-C (it reaches the whole process group): the runner stops its helpers itself,
by closing their input, on which a helper cancels what it was answering and ends. A runner killed
outright closes that input too, so its helpers stop asking at once.
"""

from __future__ import annotations

import asyncio
import functools
import os
import secrets
from collections.abc import AsyncIterator, Awaitable
from typing import Any

from anchor.artefacts import ArtefactStore
from anchor.compute.workerproc import HelperProcess, thread_budget
from anchor.runs.errors import RunError
from anchor.runs.pool import Tally, concurrency_share, run_stores
from anchor.runs.worker import Answered, Work, WorkerSetup, WorkSource

#: The module a helper process runs.
HELPER_MODULE = "anchor.runs.helper"
#: How long a stopped helper may take to end before it is killed.
STOP_SECONDS = 60.0


class ProcessPool:
    """``workers`` helper processes, each with its share of ``--concurrency`` (so the server sees at most
    as many requests in flight as with one process), sharing the response cache."""

    def __init__(self, setup: WorkerSetup, workers: int) -> None:
        self.workers = workers
        self.setup = concurrency_share(setup, workers)
        self._stores = run_stores(setup)
        self._helpers: list[HelperProcess] = []
        self._waiting: list[dict[int, asyncio.Future[Answered]]] = []
        self._outgoing: list[list[tuple[int, tuple[Any, ...], int]]] = []
        self._tallies: list[Tally] = []
        self._groups: dict[str, int] = {}
        self._next = 0
        self._flushing = False
        self._closing = False
        self._lost: set[int] = set()
        """Helpers whose process has ended (told by their reader thread)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._shared: asyncio.Queue[tuple[str, Any]] | None = None
        """What the helpers say of the shares they read themselves, while :meth:`answer_source` runs."""
        self._token = f"{os.getpid()}-{secrets.token_hex(4)}"

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        threads = thread_budget(self.workers)  # each helper (and its own compute processes) its share of the cores
        for index in range(self.workers):
            helper = HelperProcess(f"worker-{index}", HELPER_MODULE,
                                   on_message=functools.partial(self._received, index),
                                   on_exit=functools.partial(self._exited, index), env=threads)
            self._helpers.append(helper)
            self._waiting.append({})
            self._outgoing.append([])
            self._tallies.append(Tally())
            helper.start()
            helper.send(("setup", self.setup, f"{self._token}-{index}"))

    # ------------------------------------------------------------------ handing out work

    def worker_for(self, group: str) -> int:
        """The process that answers every instance of scenario ``group``: the groups are dealt out in the order
        they come, so that no process is left without one while there are as many groups as processes."""
        return self._groups.setdefault(group, len(self._groups) % self.workers)

    def answer(self, work: Work, rank: int = 0) -> Awaitable[Answered]:
        assert self._loop is not None
        index = self.worker_for(work.group)
        self._next += 1
        future: asyncio.Future[Answered] = self._loop.create_future()
        if self._closing or index in self._lost:  # (not asked of the process: a system call a row)
            future.set_exception(self._lost_error(index))
            return future
        self._waiting[index][self._next] = future
        self._outgoing[index].append((self._next, work.wire(), rank))
        if not self._flushing:
            self._flushing = True
            self._loop.call_soon(self._flush)  # everything handed out in this turn of the loop, together
        return future

    async def answer_source(self, source: WorkSource, *, slots: int, base_rank: int = 0) -> AsyncIterator[Answered]:
        """Every helper reads and answers its own share of ``source``'s work, ``slots`` instances at a time in
        all (each its part); the status of each answer as it finishes. None of the work passes through
        this process: it learns of each answer from the helpers' batches, as for :meth:`answer`."""
        assert self._loop is not None
        self._shared = shared = asyncio.Queue()
        each = max(2, slots // self.workers)
        for index, helper in enumerate(self._helpers):
            if index in self._lost:
                raise self._lost_error(index)
            helper.send(("source", source, index, self.workers, each, base_rank))
        ends = 0
        try:
            while ends < self.workers:
                kind, payload = await shared.get()
                if kind == "done":
                    for answer in payload:
                        yield answer
                elif kind == "end":
                    ends += 1
                else:
                    raise payload
        finally:
            self._shared = None

    def _flush(self) -> None:
        self._flushing = False
        for index, batch in enumerate(self._outgoing):
            if batch:
                self._outgoing[index] = []
                self._helpers[index].send(("work", batch))

    # ------------------------------------------------------------------ what comes back

    def _received(self, index: int, message: Any) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._handle, index, message)

    def _handle(self, index: int, message: tuple[Any, ...]) -> None:
        waiting = self._waiting[index]
        if message[0] == "done":
            _, answers, tally = message
            self._tallies[index] = tally
            shared: list[Answered] = []
            for item, answered in answers:
                if item is None:  # of a share the helper reads itself
                    shared.append(answered)
                    continue
                future = waiting.pop(item, None)
                if future is not None and not future.done():
                    future.set_result(answered)
            if shared and self._shared is not None:
                self._shared.put_nowait(("done", shared))
        elif message[0] == "share-end":
            if self._shared is not None:
                self._shared.put_nowait(("end", index))
        elif message[0] == "error":
            _, item, text = message
            error = RunError(f"a worker process failed: {text}")
            if item is None:
                if self._shared is not None:
                    self._shared.put_nowait(("error", error))
                return
            future = waiting.pop(item, None)
            if future is not None and not future.done():
                future.set_exception(error)
        elif message[0] == "failed":
            self._fail(index, RunError(f"worker process {index} could not start: {message[1]}"))

    def _exited(self, index: int, code: int) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._fail, index, self._lost_error(index, code))

    def _lost_error(self, index: int, code: int | None = None) -> RunError:
        code = code if code is not None else (self._helpers[index].proc.poll() if self._helpers[index].proc else None)
        return RunError(f"worker process {index} stopped (exit code {code}); run the same command again to resume")

    def _fail(self, index: int, error: RunError) -> None:
        self._lost.add(index)
        if self._closing:
            return
        if self._shared is not None:
            self._shared.put_nowait(("error", error))
        waiting, self._waiting[index] = self._waiting[index], {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(error)

    # ------------------------------------------------------------------ the rest

    def tally(self) -> Tally:
        return Tally.total(self._tallies)

    def stores(self) -> dict[str, ArtefactStore[Any]]:
        return self._stores

    async def settle(self) -> None:
        return None  # a helper writes its records before it says an answer is done

    async def close(self, *, abort: bool = False) -> None:
        """Close every helper's input: a helper cancels what it still answers (nothing, after a run that
        finished) and ends."""
        self._closing = True
        await asyncio.gather(*(asyncio.to_thread(helper.close, STOP_SECONDS) for helper in self._helpers))
        for waiting in self._waiting:
            for future in waiting.values():
                if not future.done():
                    future.cancel()
