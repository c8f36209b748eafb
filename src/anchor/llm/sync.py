"""Running one of the library's coroutines from synchronous code."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from anchor.llm.client import LLMClient

T = TypeVar("T")


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

