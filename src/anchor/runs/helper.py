"""A helper process of ``--workers N`` (``python -m anchor.runs.helper``; the runner's side is
:mod:`anchor.runs.processes`).

It reads its :class:`~anchor.runs.worker.WorkerSetup` first, then batches of work, or a source of
work to read its own share of (:class:`~anchor.runs.worker.WorkSource`: a predict run's cases file,
which then never passes through the runner), and answers many instances at once in its event loop.
It writes everything it makes into its own shard of the run directory
(:class:`~anchor.rundir.shards.ShardWriter`): the record of each request before the
request leaves, and each prediction with its traces before saying it is done. What it sends back is
the status of each finished answer, a few milliseconds' worth at a time, with its running tally. When
its input ends (the runner stopped it, or died) it cancels what it was answering and ends.
"""

from __future__ import annotations

import asyncio
import pickle
import threading
from collections.abc import Awaitable
from typing import IO, Any

from anchor.answering import answered
from anchor.compute.workerproc import child_streams, read_frame, write_frame
from anchor.rundir.names import CALLS
from anchor.rundir.shards import ShardWriter
from anchor.runs.pool import LedgerTally
from anchor.runs.worker import Answered, InstanceWorker, Work, WorkerSetup, WorkSource

#: How long finished answers wait to go back together.
FLUSH_SECONDS = 0.005


class _Outbox:
    """The helper's messages to the runner: finished answers go together, at most ``FLUSH_SECONDS`` after
    the first of them."""

    def __init__(self, out: IO[bytes], loop: asyncio.AbstractEventLoop, tally: Any) -> None:
        self.out = out
        self.loop = loop
        self.tally = tally
        self.answers: list[tuple[int | None, Answered]] = []
        self.timer: asyncio.TimerHandle | None = None

    def send(self, message: tuple[Any, ...]) -> None:
        write_frame(self.out, pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    def done(self, item: int | None, answered: Answered) -> None:
        self.answers.append((item, answered))
        if self.timer is None:
            self.timer = self.loop.call_later(FLUSH_SECONDS, self.flush)

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.answers:
            batch, self.answers = self.answers, []
            self.send(("done", batch, self.tally()))


async def serve(inp: IO[bytes], out: IO[bytes], setup: WorkerSetup, shard_name: str) -> None:
    loop = asyncio.get_running_loop()
    shard = ShardWriter(setup.artefacts, shard_name)
    worker = InstanceWorker(setup)
    watch = LedgerTally()
    outbox = _Outbox(out, loop, lambda: watch.of(worker.client.ledger, worker.stores))  # type: ignore[union-attr]
    try:
        # Every record, from the very first request (format negotiation included), into the shard.
        await worker.start(subscribers=[lambda record: shard.write(CALLS, record.model_dump_json()), watch.watch])
    except BaseException as exc:  # noqa: BLE001 - said to the runner, which stops the run
        outbox.send(("failed", f"{type(exc).__name__}: {exc}"))
        shard.close()
        return
    inbox: asyncio.Queue[Any] = asyncio.Queue()

    def receive() -> None:
        while (frame := read_frame(inp)) is not None:
            loop.call_soon_threadsafe(inbox.put_nowait, pickle.loads(frame))
        loop.call_soon_threadsafe(inbox.put_nowait, None)

    threading.Thread(target=receive, name="anchor-helper-inbox", daemon=True).start()
    tasks: set[asyncio.Task[None]] = set()

    async def one(item: int, work: Work, rank: int) -> None:
        try:
            outbox.done(item, await worker.record(work, shard, rank))
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - reported to the runner, which stops the run
            outbox.flush()
            outbox.send(("error", item, f"{type(exc).__name__}: {exc}"))

    async def share(source: WorkSource, index: int, shares: int, slots: int, base_rank: int) -> None:
        ranks: dict[tuple[int, str], int] = {}

        def record(work: Work) -> Awaitable[Answered]:
            # Scenarios ranked in the order this helper starts them, as the session ranks its own.
            rank = base_rank + ranks.setdefault((work.run, work.group), len(ranks))
            return worker.record(work, shard, rank)

        try:
            with source.share(index, shares) as work:
                async for _, result in answered(work, record, slots=slots):
                    outbox.done(None, result)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - reported to the runner, which stops the run
            outbox.flush()
            outbox.send(("error", None, f"{type(exc).__name__}: {exc}"))
            return
        outbox.flush()
        outbox.send(("share-end",))

    try:
        while (message := await inbox.get()) is not None:
            if message[0] == "source":
                jobs = [share(*message[1:])]
            else:
                jobs = [one(item, Work.unwire(wire), rank) for item, wire, rank in message[1]]
            for job in jobs:
                task = asyncio.create_task(job)
                tasks.add(task)
                task.add_done_callback(tasks.discard)
    finally:
        # The input ended: the runner is done with this helper, or gone. Nothing more is asked.
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        try:
            outbox.flush()
        except OSError:
            pass  # the runner is gone
        await worker.close()
        shard.close()


def main() -> None:
    inp, out = child_streams(ignore_interrupt=True)
    frame = read_frame(inp)
    if frame is None:
        return
    _, setup, shard_name = pickle.loads(frame)
    asyncio.run(serve(inp, out, setup, shard_name))


if __name__ == "__main__":
    main()
