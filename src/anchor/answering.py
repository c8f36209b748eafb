"""The one bounded answer loop: items taken from a source only as answers finish, at most ``slots`` in
flight, each answer handed back as soon as it is known.

Every way of answering many things goes through :func:`answered`: a run session over a benchmark's
instances or a user's table (:mod:`anchor.runs.session`), and ``Anchor.apredict``. The source is read
one item at a time, and only when a slot is free, so memory holds the answers in flight, never the
whole input; a source can be a list, a generator over a file, or an async iterator fed by a service.
The loop's own cost does not grow with ``slots``: a finished answer is handed over by its done
callback, not found by looking at every answer in flight.

It imports nothing of anchor, so that the pipeline (which sits below the run engine) can use it too.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


async def answered(source: Iterable[T] | AsyncIterable[T], answer: Callable[[T], Awaitable[R]], *,
                   slots: int) -> AsyncIterator[tuple[T, R]]:
    """``(item, answer(item))`` for every item of ``source``, in the order the answers finish, with at most
    ``slots`` answers in flight (the next item is taken only when one finishes). ``answer`` may return a
    coroutine or a future.

    When an answer fails, no further item is taken; the answers already in flight still finish and
    are handed back, and then the first failure is raised. Leaving the loop early (``break``, an
    error in the caller, cancellation) cancels the answers in flight and waits for them to end.
    """
    if slots < 1:
        raise ValueError(f"slots must be at least 1, got {slots}")
    finished: asyncio.Queue[tuple[Any, asyncio.Future[R]]] = asyncio.Queue()
    running: set[asyncio.Future[R]] = set()
    sync_items = iter(source) if not isinstance(source, AsyncIterable) else None
    async_items = source.__aiter__() if isinstance(source, AsyncIterable) else None
    failure: BaseException | None = None
    exhausted = False

    def done(item: T, future: asyncio.Future[R]) -> None:
        finished.put_nowait((item, future))

    try:
        while True:
            while not exhausted and failure is None and len(running) < slots:
                try:
                    item = next(sync_items) if sync_items is not None else await async_items.__anext__()  # type: ignore[union-attr]
                except (StopIteration, StopAsyncIteration):
                    exhausted = True
                    break
                future = asyncio.ensure_future(answer(item))
                running.add(future)
                future.add_done_callback(functools.partial(done, item))
            if not running:
                break
            item, future = await finished.get()
            while True:
                running.discard(future)
                if future.cancelled():
                    failure = failure or asyncio.CancelledError()
                elif future.exception() is not None:
                    failure = failure or future.exception()
                else:
                    yield item, future.result()
                if finished.empty():
                    break
                item, future = finished.get_nowait()
        if failure is not None:
            raise failure
    finally:
        for future in running:
            future.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        if async_items is not None and hasattr(async_items, "aclose"):
            await async_items.aclose()
