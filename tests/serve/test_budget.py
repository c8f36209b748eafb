"""The service's one LLM budget: never more requests in flight than its limit, across event loops and threads;
a freed slot goes to an online request before a batch one, then by priority and arrival; a waiter that gives
up passes its slot on."""

from __future__ import annotations

import asyncio
import threading

import pytest

from anchor.llm import parallel
from anchor.serve.budget import BATCH, ONLINE, GatedBackend, SharedBudget, SlotFiles


async def test_a_freed_slot_goes_to_online_before_batch_then_by_priority_then_arrival():
    budget = SharedBudget(1)
    await budget.acquire(BATCH)  # the one slot is taken
    order: list[str] = []

    async def ask(name: str, cls: int, rank: int = 0) -> None:
        with parallel.priority(rank):
            await budget.acquire(cls)
        order.append(name)
        budget.release(cls)

    tasks = [asyncio.create_task(ask("batch-early", BATCH, 0))]
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(ask("batch-late-rank0", BATCH, 0)))
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(ask("batch-rank-minus1", BATCH, -1)))
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(ask("online", ONLINE, 5)))
    await asyncio.sleep(0)
    assert budget.waiting() == 4 and budget.waiting(ONLINE) == 1
    budget.release(BATCH)
    await asyncio.gather(*tasks)
    assert order == ["online", "batch-rank-minus1", "batch-early", "batch-late-rank0"]
    assert budget.in_flight == 0 and budget.waited == {ONLINE: 1, BATCH: 3}


async def test_a_waiter_cancelled_before_it_runs_passes_its_slot_on():
    budget = SharedBudget(1)
    await budget.acquire(BATCH)
    first = asyncio.create_task(budget.acquire(ONLINE))
    second = asyncio.create_task(budget.acquire(BATCH))
    await asyncio.sleep(0)
    budget.release(BATCH)  # handed to `first`, which is cancelled before it gets to run
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    await asyncio.wait_for(second, 5)  # the slot reached the next waiter
    assert budget.in_flight == 1 and budget.batch_in_flight == 1
    budget.release(BATCH)
    assert budget.in_flight == budget.batch_in_flight == 0


def test_event_loops_in_other_threads_share_the_limit():
    budget = SharedBudget(3)
    peak = 0
    lock = threading.Lock()
    now = total = 0

    async def worker(cls: int) -> None:
        nonlocal peak, now, total
        for _ in range(20):
            await budget.acquire(cls)
            with lock:
                now += 1
                total += 1
                peak = max(peak, now)
            await asyncio.sleep(0.001)
            with lock:
                now -= 1
            budget.release(cls)

    async def four(cls: int) -> None:
        await asyncio.wait_for(asyncio.gather(*(worker(cls) for _ in range(4))), 60)

    def loop_main(cls: int) -> None:
        asyncio.run(four(cls))

    threads = [threading.Thread(target=loop_main, args=(cls,)) for cls in (ONLINE, BATCH, BATCH)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not any(t.is_alive() for t in threads)
    assert total == 240 and 1 <= peak <= 3 and budget.in_flight == 0 and budget.waiting() == 0


class _Backend:
    name, kind, model, max_parallel = "fake", "openai-compatible", "m", 8
    supports_logprobs = False
    context_tokens = 4096

    def __init__(self, budget: SharedBudget) -> None:
        self.budget = budget
        self.seen: list[int] = []

    async def complete(self, messages, **kwargs):  # noqa: ANN001, ANN003, ANN201
        self.seen.append(self.budget.in_flight)
        return "answer"

    async def aclose(self) -> None:
        pass


async def test_a_gated_backend_holds_a_slot_for_each_request_and_shows_the_inner_backend():
    budget = SharedBudget(2)
    inner = _Backend(budget)
    gated = GatedBackend(inner, budget, ONLINE)
    assert await gated.complete([{"role": "user", "content": "x"}]) == "answer"
    assert inner.seen == [1] and budget.in_flight == 0
    assert (gated.name, gated.kind, gated.model, gated.context_tokens) == ("fake", "openai-compatible", "m", 4096)
    gated.model = "resolved"
    assert inner.model == "resolved"
    with pytest.raises(ValueError, match="at least 1"):
        SharedBudget(0)


async def test_while_online_answers_are_in_progress_batch_keeps_to_its_share_of_the_slots():
    budget = SharedBudget(8, batch_share=0.25)
    assert budget.batch_cap == 2
    budget.online_started()
    for _ in range(2):
        await budget.acquire(BATCH)
    third = asyncio.create_task(budget.acquire(BATCH))
    await asyncio.sleep(0)
    assert not third.done() and budget.in_flight == 2  # six slots free, but not for batch
    await budget.acquire(ONLINE)  # online still gets one at once
    assert budget.in_flight == 3
    budget.online_finished()  # no online answer in progress: batch may have every slot again
    await asyncio.wait_for(third, 5)
    assert budget.batch_in_flight == 3
    with pytest.raises(ValueError, match="batch share"):
        SharedBudget(4, batch_share=0)


def slot_budgets(folder, n: int, limit: int) -> list[SharedBudget]:
    """``n`` budgets sharing ``limit`` slot files, as the processes of ``--workers n`` do. Two open
    descriptions of a file conflict under ``flock`` as two processes do, so budgets of this one process
    stand for them."""
    return [SharedBudget(limit, slots=SlotFiles(folder, limit)) for _ in range(n)]


async def test_the_processes_of_a_service_share_one_limit_through_slot_files(tmp_path):
    a, b = slot_budgets(tmp_path, 2, 2)
    await a.acquire(ONLINE)
    await a.acquire(BATCH)
    elsewhere = asyncio.create_task(b.acquire(ONLINE))
    await asyncio.sleep(0)
    assert not elsewhere.done() and b.waiting(ONLINE) == 1  # a holds both files: b waits, though its own is free
    a.release(BATCH)
    await asyncio.wait_for(elsewhere, 5)
    here = asyncio.create_task(a.acquire(BATCH))  # a has room of its own, but no file is free
    await asyncio.sleep(0)
    assert not here.done() and a.in_flight + b.in_flight == 2
    b.release(ONLINE)
    await asyncio.wait_for(here, 5)
    a.release(BATCH)
    a.release(ONLINE)
    assert a.in_flight == b.in_flight == 0


async def test_a_freed_slot_file_goes_to_an_online_request_of_another_process_before_a_batch_one(tmp_path):
    a, b, c = slot_budgets(tmp_path, 3, 1)
    await a.acquire(BATCH)
    batch = asyncio.create_task(b.acquire(BATCH))
    await asyncio.sleep(0)
    online = asyncio.create_task(c.acquire(ONLINE))
    await asyncio.sleep(0)
    a.release(BATCH)
    await asyncio.wait_for(online, 5)  # b retried meanwhile, and kept back while c's online request waited
    assert not batch.done()
    c.release(ONLINE)
    await asyncio.wait_for(batch, 5)
    b.release(BATCH)
