"""Running one of the library's coroutines from synchronous code."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Iterator
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from anchor.llm.client import LLMClient

T = TypeVar("T")


def _refuse_inside_a_loop(what: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(
        f"this synchronous anchor call cannot run inside a running event loop (async code or Jupyter); {what}")


def iterate_sync(agen: AsyncIterator[T], client: LLMClient) -> Iterator[T]:
    """The items of ``agen`` for synchronous code, each as it comes, from an event loop of their own;
    the client's connections for that loop are released when the iteration ends (or is abandoned)."""
    _refuse_inside_a_loop("iterate its async twin instead, e.g. `async for r in engine.apredict(...)`")

    def items() -> Iterator[T]:
        loop = asyncio.new_event_loop()
        try:
            while True:
                try:
                    yield loop.run_until_complete(agen.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            try:
                loop.run_until_complete(agen.aclose())  # type: ignore[attr-defined]
                loop.run_until_complete(client.aclose())
            finally:
                loop.close()

    return items()


def run_sync(coro: Awaitable[T], client: LLMClient) -> T:
    """Run ``coro`` in a fresh event loop, then release the client's connections for that loop.

    Called from inside a running event loop (async code, Jupyter) it refuses with a clear error and
    closes ``coro`` unstarted: blocking that loop would deadlock it.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        close = getattr(coro, "close", None)
        if close is not None:
            close()
        raise RuntimeError(
            "this synchronous anchor call cannot run inside a running event loop (async code or Jupyter); "
            "await its coroutine twin instead, e.g. `await engine.abuild(...)` / `await engine.ainfer(...)`"
        )

    async def main() -> T:
        try:
            return await coro
        finally:
            await client.aclose()

    return asyncio.run(main())

