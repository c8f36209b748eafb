"""The chain of dependent requests carried through awaits, gathers and tasks."""

from __future__ import annotations

import asyncio

import pytest

from anchor.llm import chain
from anchor.llm.chain import Chain


async def _request(seconds: float) -> None:
    await asyncio.sleep(0)
    chain.advance(seconds)


def test_requests_awaited_one_after_another_form_one_chain():
    async def work() -> Chain:
        chain.reset()
        await _request(1.0)
        await _request(2.0)
        return chain.current()

    assert asyncio.run(work()) == Chain(2, 3.0)


def test_gather_continues_from_the_longest_child():
    async def two_in_a_row() -> None:
        await _request(1.0)
        await _request(1.0)

    async def work() -> Chain:
        chain.reset()
        await _request(0.5)
        await chain.gather(_request(5.0), two_in_a_row(), _request(0.1))
        await _request(1.0)
        return chain.current()

    # 0.5, then the longest branch (5.0 in one request), then 1.0.
    assert asyncio.run(work()) == Chain(3, 6.5)


def test_plain_asyncio_gather_loses_the_children_chains():
    # Why chain.gather exists: a task's context is a copy, so its chain does not come back.
    async def work() -> Chain:
        chain.reset()
        await asyncio.gather(_request(5.0))
        return chain.current()

    assert asyncio.run(work()) == Chain(0, 0.0)


def test_gather_merges_chains_of_children_that_failed_when_exceptions_are_returned():
    async def fails() -> None:
        await _request(3.0)
        raise ValueError("no")

    async def work() -> tuple[list, Chain]:
        chain.reset()
        results = await chain.gather(fails(), _request(1.0), return_exceptions=True)
        return results, chain.current()

    results, end = asyncio.run(work())
    assert isinstance(results[0], ValueError)
    assert end == Chain(1, 3.0)


def test_gather_raises_like_asyncio_gather():
    async def fails() -> None:
        raise KeyError("x")

    with pytest.raises(KeyError):
        asyncio.run(chain.gather(fails()))


def test_a_task_hands_its_chain_back_with_traced_and_merge():
    async def build() -> str:
        await _request(2.0)
        await _request(2.0)
        return "space"

    async def work() -> tuple[str, Chain]:
        chain.reset()
        task = asyncio.get_running_loop().create_task(chain.traced(build()))
        await _request(1.0)  # meanwhile, in this task
        space, ended = await task
        chain.merge(ended)
        await _request(0.5)
        return space, chain.current()

    assert asyncio.run(work()) == ("space", Chain(3, 4.5))


def test_longer_prefers_seconds_then_requests():
    assert Chain(1, 5.0).longer(Chain(9, 4.0)) == Chain(1, 5.0)
    assert Chain(2, 1.0).longer(Chain(3, 1.0)) == Chain(3, 1.0)


def test_since_is_the_chain_added_after_a_point():
    async def two_in_a_row() -> None:
        await _request(0.5)
        await _request(0.5)

    async def work() -> Chain:
        chain.reset()
        await _request(1.0)
        start = chain.current()
        await chain.gather(_request(2.0), two_in_a_row())
        return chain.since(start)

    assert asyncio.run(work()) == Chain(1, 2.0)
