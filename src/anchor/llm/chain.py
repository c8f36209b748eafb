"""The chain of dependent requests behind a piece of work (its critical path).

A request that is sent only after another one has answered depends on it; a build takes at least
as long as its longest such chain, however many requests the server could serve at once. The
chain is carried in a context variable: the client lengthens it after each request it sends
(``advance``), code awaited in the same task sees the longer chain, and work run side by side
hands its chains back to whoever waits for it (``gather``, ``traced``, ``merge``), which keeps the
longest. Cache hits are not requests and do not lengthen a chain.

Only the code that starts concurrent work needs to know about this: use ``chain.gather`` where
``asyncio.gather`` would do, and ``traced``/``merge`` for a task whose result is awaited later.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable
from typing import Any, NamedTuple, TypeVar

R = TypeVar("R")


class Chain(NamedTuple):
    """The longest chain of dependent requests so far: how many, and their seconds added up."""

    requests: int = 0
    seconds: float = 0.0

    def longer(self, other: Chain) -> Chain:
        """The longer of two chains (by seconds, then by requests)."""
        return max(self, other, key=lambda c: (c.seconds, c.requests))


_START = Chain()  # immutable, so safe to share as the default
_current: contextvars.ContextVar[Chain] = contextvars.ContextVar("anchor_request_chain", default=_START)


def current() -> Chain:
    """The chain the running code stands at the end of."""
    return _current.get()


def advance(seconds: float, requests: int = 1) -> Chain:
    """Lengthen the current chain by ``requests`` sent one after the other, taking ``seconds``."""
    now = _current.get()
    longer = Chain(now.requests + requests, round(now.seconds + max(0.0, seconds), 6))
    _current.set(longer)
    return longer


def merge(*others: Chain) -> Chain:
    """Continue from the longest of the current chain and ``others`` (work just waited for)."""
    now = _current.get()
    for other in others:
        now = now.longer(other)
    _current.set(now)
    return now


def since(start: Chain) -> Chain:
    """The chain added since the running code stood at ``start`` (the longest chain of the requests
    made in between, when nothing else was merged in meanwhile)."""
    now = _current.get()
    return Chain(now.requests - start.requests, round(max(0.0, now.seconds - start.seconds), 6))


def reset() -> None:
    """Start a new chain here (a new unit of work that depends on nothing before it)."""
    _current.set(_START)


async def traced(awaitable: Awaitable[R]) -> tuple[R, Chain]:
    """Await ``awaitable`` and return its result with the chain it ended on; meant to be the body
    of a task, whose context (and so whose chain) is its own."""
    result = await awaitable
    return result, _current.get()


async def gather(*awaitables: Awaitable[Any], return_exceptions: bool = False) -> list[Any]:
    """``asyncio.gather`` that continues the caller's chain from the longest of its children's."""
    ends: list[Chain] = []

    async def one(aw: Awaitable[Any]) -> Any:
        try:
            return await aw
        finally:
            ends.append(_current.get())

    results = await asyncio.gather(*(one(aw) for aw in awaitables), return_exceptions=return_exceptions)
    merge(*ends)
    return list(results)
