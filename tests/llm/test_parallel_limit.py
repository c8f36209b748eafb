"""The adaptive concurrency limit (anchor.llm.parallel), driven by simulated servers on a virtual clock:
no test here sleeps or reads the time."""

from __future__ import annotations

import asyncio
import heapq
from collections import deque
from collections.abc import Callable

import pytest

from anchor.llm.parallel import ParallelLimit, RequestSlots, priority
from anchor.llm.scripted import ScriptedBackend
from anchor.llm.transport import Transport


def queueing_server(limit: ParallelLimit, slots: int, requests: int, service: Callable[[int], float],
                    stage: Callable[[int], str] = lambda i: "s") -> list[int]:
    """A server that works on ``slots`` requests at once, first come first served, the rest waiting in
    its queue; the client keeps ``limit.limit`` requests in flight. Returns the limit after each answer."""
    now, sent, in_flight = 0.0, 0, 0
    queue: deque[tuple[int, float]] = deque()  # (request, sent at)
    running: list[tuple[float, int, float]] = []  # (finishes at, request, sent at)
    limits = []
    while True:
        while in_flight < limit.limit and sent < requests:
            queue.append((sent, now))
            sent, in_flight = sent + 1, in_flight + 1
        while queue and len(running) < slots:
            i, at = queue.popleft()
            heapq.heappush(running, (now + service(i), i, at))
        if not running:
            return limits
        now, i, at = heapq.heappop(running)
        limit.observe(stage(i), now - at, in_flight)
        in_flight -= 1
        limits.append(limit.limit)


def batching_server(limit: ParallelLimit, requests: int, service: Callable[[int], float],
                    per_request: float) -> list[int]:
    """A server that works on every request at once, each slower by ``per_request`` of its own time for
    every other request in flight when it was sent (vLLM-like: more in flight, more done per second)."""
    now, sent, in_flight = 0.0, 0, 0
    running: list[tuple[float, int, float]] = []
    limits = []
    while True:
        while in_flight < limit.limit and sent < requests:
            heapq.heappush(running, (now + service(sent) * (1 + per_request * in_flight), sent, now))
            sent, in_flight = sent + 1, in_flight + 1
        if not running:
            return limits
        now, i, at = heapq.heappop(running)
        limit.observe("s", now - at, in_flight)
        in_flight -= 1
        limits.append(limit.limit)


def test_a_server_that_queues_gets_as_many_requests_as_it_serves_at_once():
    # llama.cpp's server with --parallel 4, 10 s per answer, and --concurrency 16: answers took 40 s.
    limit = ParallelLimit(16)
    limits = queueing_server(limit, slots=4, requests=400, service=lambda i: 10.0)
    # The first round (16 answers) is left out, the next window (32 answers) shows it, the one after
    # confirms it (the server serves as many with 4 in flight as with 16).
    assert limits[:48] == [16] * 47 + [4] and set(limits[48:]) == {4}
    assert limit.changes == ["the server: it serves about 4.0 requests at once and queues the rest (median answer "
                             "4.0x slower than its fastest); now at most 4 request(s) in flight (--concurrency 16)"]


@pytest.mark.parametrize(("slots", "ceiling", "settles_at"), [(1, 16, 1), (2, 8, 2), (6, 16, 6), (3, 32, 3)])
def test_the_limit_settles_at_the_servers_slots(slots, ceiling, settles_at):
    # Answers of three lengths, in every stage: the slowdown is measured against the stage's fastest.
    limit = ParallelLimit(ceiling)
    limits = queueing_server(limit, slots=slots, requests=600, service=lambda i: (8.0, 12.0, 10.0)[i % 3],
                             stage=lambda i: ("abduction", "mapping")[i % 2])
    assert limits[-1] == settles_at


def test_no_cut_when_the_server_keeps_up():
    # 16 slots for 16 requests: every answer takes its own time.
    limit = ParallelLimit(16)
    assert set(queueing_server(limit, slots=16, requests=400, service=lambda i: (8.0, 12.0, 10.0)[i % 3])) == {16}
    assert limit.changes == []


def test_a_cut_that_costs_throughput_is_undone_for_good():
    # A batching server whose answers differ in length (1 to 4 units): the median answer is slower
    # than the fastest, which looks like queueing; after the cut it serves fewer at once, so the cut
    # is undone, and never tried again.
    limit = ParallelLimit(16)
    limits = batching_server(limit, requests=800, service=lambda i: 4.0 * (1 + i % 4), per_request=0.05)
    back = max(i for i, n in enumerate(limits) if n < 16) + 1
    assert min(limits) == 4 and set(limits[back:]) == {16} and len(limits) - back > 500
    # Cut to 4, up to 11 when 4 served less, back to 16 when 11 did too.
    assert [line.split("now at most ")[1].split(" ")[0] for line in limit.changes] == ["4", "11", "16"]
    assert limit.changes[2].startswith("the server: with fewer requests in flight it served 2.9 at once instead "
                                       "of 3.7: it batches them")


def test_fast_answers_say_nothing():
    limit = ParallelLimit(16)  # min_seconds=1: client-side delays dominate below that
    assert set(queueing_server(limit, slots=2, requests=300, service=lambda i: 0.1)) == {16}


def test_a_window_that_did_not_use_the_limit_says_nothing_about_it():
    # Only 8 requests are ever in flight (the client had no more to send): whatever the latencies,
    # they say nothing about 16.
    limit = ParallelLimit(16)
    for i in range(200):
        limit.observe("s", 10.0 if i % 2 else 40.0, in_flight=8)
    assert limit.limit == 16


def test_request_slots_follow_the_limit():
    """Lowering the limit holds new requests back until fewer are in flight; raising it lets them go."""
    async def main() -> list[int]:
        limit = ParallelLimit(4)
        slots = RequestSlots(limit)
        release = asyncio.Event()
        seen: list[int] = []

        async def request() -> None:
            async with slots:
                seen.append(slots.in_flight)
                await release.wait()

        first = [asyncio.create_task(request()) for _ in range(4)]
        await asyncio.sleep(0)
        limit.limit = 2
        later = [asyncio.create_task(request()) for _ in range(4)]
        await asyncio.sleep(0)
        assert seen == [1, 2, 3, 4] and slots.in_flight == 4  # the later ones wait
        release.set()
        await asyncio.gather(*first, *later)
        return seen

    seen = asyncio.run(main())
    assert len(seen) == 8 and max(seen[4:]) <= 2  # every later request went in with at most one other


def test_a_cancelled_waiter_passes_its_slot_on():
    async def main() -> int:
        limit = ParallelLimit(1)
        slots = RequestSlots(limit)
        gate = asyncio.Event()
        entered: list[str] = []

        async def request(name: str) -> None:
            async with slots:
                entered.append(name)
                await gate.wait()

        a = asyncio.create_task(request("a"))
        await asyncio.sleep(0)
        b = asyncio.create_task(request("b"))
        c = asyncio.create_task(request("c"))
        await asyncio.sleep(0)
        gate.set()
        await a  # a leaves: b is woken ...
        b.cancel()  # ... but cancelled before it runs: c must get the slot
        await asyncio.gather(b, return_exceptions=True)
        await asyncio.wait_for(c, 60)  # a bound only against a hang: c gets the slot within a few loop turns
        return entered.count("c")

    assert asyncio.run(main()) == 1


def test_clients_with_other_seeds_share_one_limit():
    from anchor.llm.client import LLMClient

    client = LLMClient(ScriptedBackend(lambda req: "{}"), max_concurrency=8)
    clone = client.with_seed(3)
    assert clone.parallel is client.parallel and clone.concurrency == client.concurrency
    assert isinstance(client, Transport)


# --------------------------------------------------------------------------- priority


def test_a_freed_slot_goes_to_the_lowest_priority_then_the_earliest():
    async def main() -> list[str]:
        slots = RequestSlots(ParallelLimit(1))
        gate = asyncio.Event()
        order: list[str] = []

        async def request(name: str, rank: int) -> None:
            with priority(rank):
                async with slots:
                    order.append(name)
                    await gate.wait()

        first = asyncio.create_task(request("holder", 9))
        await asyncio.sleep(0)
        waiting = [asyncio.create_task(request(name, rank))
                   for name, rank in (("c1", 3), ("a1", 1), ("b", 2), ("a2", 1), ("none", 0))]
        await asyncio.sleep(0)
        assert slots.waiting == 5
        gate.set()
        await asyncio.gather(first, *waiting)
        return order

    # Work outside any priority (0) first, then rank 1 in arrival order, then 2 and 3.
    assert asyncio.run(main()) == ["holder", "none", "a1", "a2", "b", "c1"]


def test_a_request_arriving_as_a_slot_frees_waits_behind_a_better_one_already_waiting():
    async def main() -> list[str]:
        slots = RequestSlots(ParallelLimit(1))
        order: list[str] = []
        release = asyncio.Event()

        async def holder() -> None:
            async with slots:
                order.append("holder")
                await release.wait()
            # The holder's own next request, sent the moment it let go of its slot: it has rank 5,
            # the waiting request rank 1, so the slot goes to the waiting one.
            with priority(5):
                async with slots:
                    order.append("holder again")

        async def waiting() -> None:
            with priority(1):
                async with slots:
                    order.append("waiting")

        tasks = [asyncio.create_task(holder())]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(waiting()))
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(main()) == ["holder", "waiting", "holder again"]


def test_a_chain_that_asks_again_at_once_competes_for_its_freed_slot_by_priority():
    async def main() -> list[str]:
        slots = RequestSlots(ParallelLimit(1))
        order: list[str] = []
        release = asyncio.Event()

        async def chain_of_two() -> None:
            with priority(0):
                for step in ("first", "second"):
                    async with slots:
                        order.append(step)
                        if step == "first":
                            await release.wait()

        async def later() -> None:
            with priority(1):
                async with slots:
                    order.append("later")

        tasks = [asyncio.create_task(chain_of_two())]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(later()))
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(*tasks)
        return order

    # The slot the first request frees is handed out only once the chain has sent its next request.
    assert asyncio.run(main()) == ["first", "second", "later"]


def _busy(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def scenarios_on_a_virtual_clock(ranked: bool, *, scenarios: int = 8, chains: int = 6, length: int = 4,
                                 slots: int = 8, seed: int = 0) -> tuple[list[float], float]:
    """Scenarios that each run ``chains`` chains of ``length`` requests side by side, all started at
    once, through ``slots`` request slots; every request takes its own (seeded) time on a virtual
    clock, nothing else takes any. Returns each scenario's time with a request in flight over its
    critical path, and when the last request finished."""
    import random

    rng = random.Random(seed)
    took = {(s, c, k): rng.uniform(0.5, 2.0) for s in range(scenarios) for c in range(chains) for k in range(length)}
    critical = [max(sum(took[s, c, k] for k in range(length)) for c in range(chains)) for s in range(scenarios)]
    spans: list[list[tuple[float, float]]] = [[] for _ in range(scenarios)]
    clock = [0.0]

    async def main() -> None:
        limiter = RequestSlots(ParallelLimit(slots))
        loop = asyncio.get_running_loop()
        finishing: list[tuple[float, int, asyncio.Future[None]]] = []
        order = iter(range(10**9))

        async def request(s: int, seconds: float) -> None:
            async with limiter:
                start, done = clock[0], loop.create_future()
                heapq.heappush(finishing, (start + seconds, next(order), done))
                await done
                spans[s].append((start, clock[0]))

        async def one_chain(s: int, c: int) -> None:
            for k in range(length):
                await request(s, took[s, c, k])

        async def scenario(s: int) -> None:
            with priority(s if ranked else 0):
                await asyncio.gather(*(one_chain(s, c) for c in range(chains)))

        tasks = [loop.create_task(scenario(s)) for s in range(scenarios)]
        while True:
            for _ in range(100):  # let every task go as far as it can at this instant
                await asyncio.sleep(0)
            if not finishing:
                break
            clock[0], _, done = heapq.heappop(finishing)
            done.set_result(None)
        await asyncio.gather(*tasks)

    asyncio.run(main())
    return [_busy(spans[s]) / critical[s] for s in range(scenarios)], clock[0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scenarios_in_the_order_they_started_come_close_to_their_critical_paths(seed):
    fifo, fifo_end = scenarios_on_a_virtual_clock(False, seed=seed)
    ranked, ranked_end = scenarios_on_a_virtual_clock(True, seed=seed)
    # First come, first served: every scenario shares the slots with all the others for most of the
    # run, and is in flight about twice as long as its own longest chain.
    assert sum(fifo) / len(fifo) > 1.8
    # By priority: the first scenario never waits behind a later one, and every scenario is in flight
    # for less time than first come, first served gave it ...
    assert ranked[0] == pytest.approx(1.0)
    assert all(r < f for r, f in zip(ranked, fifo, strict=True))
    assert sum(ranked) / len(ranked) < 1.35
    # ... while the whole run takes about as long (the slots are never left idle).
    assert ranked_end <= 1.05 * fifo_end
