"""Where instances are answered: in the runner's own process, in helper processes (``--workers N``),
or on a Ray cluster (:mod:`anchor.evaluation.runner.ray_pool`).

Every pool takes (run, instance, scenario key) and gives back the prediction and its trace records;
the runner alone writes the run directory. A pool of several workers sends all the instances of a
scenario to the same worker (by its key), so that the scenario's factor space is built once, by one
worker, and stays in its memory for the scenario's other instances.

A remote worker (another process or machine) does not write the run directory either:

* its LLM requests are sent back as they happen and recorded in the runner's ledger, so
  ``calls.jsonl``, the progress line and the cost see them as they would in one process;
* the artefacts it needs (a space built before a kill, or found in the ``--spaces`` store) are sent
  with the first instance of their scenario, and the artefacts it builds come back with the instance
  that built them; the runner saves them (and publishes them to the store, for content-named ones).
"""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Protocol

from anchor.artefacts import ArtefactStore
from anchor.evaluation.methods.registry import METHODS
from anchor.evaluation.results import Prediction, TraceRecord
from anchor.evaluation.runner.errors import EvalError
from anchor.evaluation.runner.worker import Instance, InstanceWorker, WorkerSetup
from anchor.files import write_atomic
from anchor.llm.ledger import CallRecord, CostLedger

Answer = tuple[Prediction, list[TraceRecord]]
#: Artefact files by kind, then by file name: what travels with an instance, both ways.
Artefacts = dict[str, dict[str, str]]


class WorkerPool(Protocol):
    """What the runner asks of a pool."""

    workers: int

    async def start(self) -> None: ...

    async def answer(self, run: int, inst: Instance, group: str, rank: int = 0) -> Answer:
        """The answer of ``inst`` in repetition ``run``; its scenario is ``group``, whose requests go
        before those of scenarios with a higher ``rank`` (the order the runner started them in)."""
        ...

    async def settle(self) -> None:
        """Return once every request record made so far is in the runner's ledger."""
        ...

    def stores(self) -> dict[str, ArtefactStore[Any]]: ...

    async def close(self) -> None: ...


def worker_of(group: str, workers: int) -> int:
    """The worker that answers every instance of scenario ``group`` (a hex key)."""
    return int(group[:8], 16) % workers


class LocalPool:
    """One worker in the runner's own process, with the runner's client (the default, ``--workers 1``)."""

    workers = 1

    def __init__(self, worker: InstanceWorker) -> None:
        self.worker = worker

    async def start(self) -> None:
        await self.worker.start()

    async def answer(self, run: int, inst: Instance, group: str, rank: int = 0) -> Answer:
        return await self.worker.evaluate(run, inst, rank)

    async def settle(self) -> None:
        return None  # the worker records into the runner's own ledger

    def stores(self) -> dict[str, ArtefactStore[Any]]:
        return self.worker.all_stores()

    async def close(self) -> None:
        await self.worker.close()


# --------------------------------------------------------------------------- artefacts across processes


@dataclass
class ArtefactCourier:
    """The runner's side of artefacts answered elsewhere: what to send with a scenario's first
    instance, and where to save what comes back. Its stores (one per kind) are the runner's view, used
    to count builds and to cost reused artefacts, exactly as in one process."""

    setup: WorkerSetup
    stores_by_kind: dict[str, ArtefactStore[Any]] = field(default_factory=dict)
    _sent: set[tuple[int, str]] = field(default_factory=set)

    def __post_init__(self) -> None:
        s = self.setup
        for kind in METHODS[s.config.method].artefacts():
            self.stores_by_kind[kind.name] = ArtefactStore(
                s.artefacts / kind.name, load=kind.load, save=kind.save, uses=kind.uses,
                reuse_from=s.reuse / kind.name if s.reuse is not None else None, publish=s.publish)

    def outgoing(self, worker: int, group: str) -> Artefacts | None:
        """The stored artefacts of scenario ``group``, the first time ``worker`` gets one of its instances."""
        if (worker, group) in self._sent:
            return None
        self._sent.add((worker, group))
        out: Artefacts = {}
        for kind, store in self.stores_by_kind.items():
            for prefix, folder in (("own", store.folder), ("reuse", store.reuse_from)):
                if folder is None or not folder.is_dir():
                    continue
                for path in folder.glob(f"{group}*.json"):
                    out.setdefault(f"{prefix}:{kind}", {})[path.name] = path.read_text(encoding="utf-8")
        return out

    def forget(self, worker: int) -> None:
        """A worker that was lost and started again has none of what it was sent."""
        self._sent = {(w, g) for w, g in self._sent if w != worker}

    def incoming(self, built: Artefacts) -> None:
        """Save the artefacts a worker built (and add content-named ones to the shared store)."""
        for kind, files in built.items():
            store = self.stores_by_kind[kind]
            for name, text in files.items():
                write_atomic(store.folder / name, text)
                if store.publish and store.reuse_from is not None:
                    write_atomic(store.reuse_from / name, text)
                key = name.removesuffix(".json")
                if key not in store.built:
                    store.built.append(key)


class RemoteWorker:
    """An instance worker away from the runner (a helper process or a Ray actor): the artefacts it is
    sent and builds live in ``scratch``, and each artefact it builds goes back to the runner once,
    with the answer of the instance that built it."""

    def __init__(self, setup: WorkerSetup, scratch: Path) -> None:
        self.scratch = scratch
        # Its own artefacts in a scratch folder; the runner saves and publishes what comes back.
        self.setup = dataclasses.replace(setup, artefacts=scratch / "own", publish=False,
                                         reuse=scratch / "reuse" if setup.reuse is not None else None)
        self.worker = InstanceWorker(self.setup)
        self._shipped: set[tuple[str, str]] = set()

    async def start(self, on_request: Callable[[CallRecord], None]) -> None:
        """Start the worker; ``on_request`` gets the record of each request it makes, as it is made."""
        await self.worker.start()
        assert self.worker.client is not None
        self.worker.client.ledger.subscribe(on_request)

    async def answer(self, run: int, inst: Instance, rank: int,
                     artefacts: Artefacts | None) -> tuple[Prediction, list[TraceRecord], Artefacts]:
        """The answer of ``inst``, with the artefacts built for it; ``artefacts`` are those the runner
        sent with it (a scenario's stored ones, with its first instance)."""
        if artefacts:
            self._unpack(artefacts)
        pred, traces = await self.worker.evaluate(run, inst, rank)
        return pred, traces, self._built()

    async def close(self) -> None:
        await self.worker.close()

    def _unpack(self, artefacts: Artefacts) -> None:
        for where_kind, files in artefacts.items():
            where, _, kind = where_kind.partition(":")
            folder = (self.scratch / ("own" if where == "own" else "reuse")) / kind
            folder.mkdir(parents=True, exist_ok=True)
            for name, text in files.items():
                (folder / name).write_text(text, encoding="utf-8")

    def _built(self) -> Artefacts:
        """The artefacts built and not sent back yet, as file texts."""
        out: Artefacts = {}
        for kind, keys in self.worker.built().items():
            store = self.worker.stores[kind]
            for key in keys:
                if (kind, key) not in self._shipped:
                    self._shipped.add((kind, key))
                    out.setdefault(kind, {})[f"{key}.json"] = store.path(key).read_text(encoding="utf-8")
        return out


def concurrency_share(setup: WorkerSetup, workers: int) -> WorkerSetup:
    """The setup of one of ``workers`` workers: its share of ``--concurrency``, so that the server sees
    at most as many requests in flight as with one process."""
    share = max(1, setup.settings.max_concurrency // workers)
    return dataclasses.replace(setup, settings=setup.settings.model_copy(update={"max_concurrency": share}))


def replay(ledger: CostLedger, record: CallRecord) -> None:
    """A request made by a remote worker, into the runner's ledger (and so its call log and progress)."""
    if record.outcome == "sent":
        ledger.announce(record)
    else:
        ledger.record(record)


# --------------------------------------------------------------------------- helper processes


def _process_main(conn: Connection, setup: WorkerSetup) -> None:
    """A helper process: answers the instances it is sent until told to stop."""
    asyncio.run(_serve(conn, setup))


class _Outbox:
    """A helper process's messages to the runner. The record of a request about to be sent leaves at
    once, so that a runner killed now still counts the request (as interrupted); the records of how
    requests ended wait for the next such message, an answer (which never overtakes its requests) or
    ``FLUSH_SECONDS``, whichever comes first: one message a record would cost the runner more than the
    request itself. Messages carry the models themselves (pickled): nothing is validated twice."""

    def __init__(self, conn: Connection, loop: asyncio.AbstractEventLoop) -> None:
        self.conn = conn
        self.loop = loop
        self.lock = threading.Lock()
        self.records: list[CallRecord] = []
        self.timer: asyncio.TimerHandle | None = None

    def record(self, record: CallRecord) -> None:
        self.records.append(record)
        if record.outcome == "sent":
            self.flush()
        elif self.timer is None:
            self.timer = self.loop.call_later(FLUSH_SECONDS, self.flush)

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.records:
            batch, self.records = self.records, []
            self.send(("calls", batch))

    def send(self, message: tuple[Any, ...]) -> None:
        with self.lock:
            self.conn.send(message)

    def answer(self, message: tuple[Any, ...]) -> None:
        self.flush()
        self.send(message)


#: How long a helper process holds request records before sending them together.
FLUSH_SECONDS = 0.05


async def _serve(conn: Connection, setup: WorkerSetup) -> None:
    loop = asyncio.get_running_loop()
    outbox = _Outbox(conn, loop)

    with tempfile.TemporaryDirectory(prefix="anchor-worker-") as scratch:
        remote = RemoteWorker(setup, Path(scratch))
        await remote.start(outbox.record)
        inbox: asyncio.Queue[Any] = asyncio.Queue()
        threading.Thread(target=lambda: [loop.call_soon_threadsafe(inbox.put_nowait, m) for m in _receive(conn)],
                         daemon=True).start()
        tasks: set[asyncio.Task[None]] = set()

        async def one(item: int, run: int, inst: Instance, rank: int, artefacts: Artefacts | None) -> None:
            try:
                pred, traces, built = await remote.answer(run, inst, rank, artefacts)
                outbox.answer(("answer", item, pred, traces, built))
            except BaseException as exc:  # noqa: BLE001 - reported to the runner, which stops the run
                outbox.answer(("error", item, f"{type(exc).__name__}: {exc}"))

        while True:
            message = await inbox.get()
            if message is None:
                # The runner is gone (killed): its answers have nowhere to go, so stop asking for them.
                for task in tasks:
                    task.cancel()
                break
            if message[0] == "stop":
                break
            _, item, run, inst, rank, artefacts = message
            task = asyncio.create_task(one(item, run, inst, rank, artefacts))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        outbox.flush()
        await remote.close()


def _receive(conn: Connection) -> Any:
    while True:
        try:
            yield conn.recv()
        except (EOFError, OSError):
            yield None
            return


class ProcessPool:
    """``workers`` helper processes on this machine, each with its own client and embedder, sharing the
    response cache. Each gets its share of ``--concurrency``, so the server sees at most as many
    requests in flight as with one process."""

    def __init__(self, setup: WorkerSetup, workers: int, ledger: CostLedger) -> None:
        self.workers = workers
        self.ledger = ledger
        self.courier = ArtefactCourier(setup)
        self.setup = concurrency_share(setup, workers)
        self._conns: list[Connection] = []
        self._procs: list[Any] = []
        self._waiting: dict[int, asyncio.Future[Answer]] = {}
        self._next = 0
        self._groups: dict[str, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listeners: list[threading.Thread] = []
        self._closing = False

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        context = multiprocessing.get_context("spawn")  # no fork: the runner holds threads and sockets
        for index in range(self.workers):
            mine, theirs = context.Pipe()
            proc = context.Process(target=_process_main, args=(theirs, self.setup), daemon=True,
                                   name=f"anchor-worker-{index}")
            proc.start()
            theirs.close()
            self._conns.append(mine)
            self._procs.append(proc)
            listener = threading.Thread(target=self._listen, args=(index, mine), daemon=True)
            listener.start()
            self._listeners.append(listener)

    def _listen(self, index: int, conn: Connection) -> None:
        assert self._loop is not None
        for message in _receive(conn):
            if self._closing:
                return  # the pipe closes as the pool does: nothing is waited for any more
            if message is None:
                self._loop.call_soon_threadsafe(self._lost, index)
                return
            self._loop.call_soon_threadsafe(self._handle, message)

    def _handle(self, message: tuple[Any, ...]) -> None:
        if message[0] == "calls":
            for record in message[1]:
                replay(self.ledger, record)
            return
        future = self._waiting.pop(message[1], None)
        if future is None or future.done():
            return
        if message[0] == "error":
            future.set_exception(EvalError(f"a worker process failed: {message[2]}"))
            return
        _, _, pred, traces, built = message
        self.courier.incoming(built)
        future.set_result((pred, traces))

    def _lost(self, index: int) -> None:
        if all(p.is_alive() for p in self._procs):
            return
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(EvalError(f"worker process {index} stopped (exit code "
                                               f"{self._procs[index].exitcode}); run the same command again to "
                                               "resume"))
        self._waiting.clear()

    def worker_for(self, group: str) -> int:
        """The process that answers every instance of scenario ``group``: the groups are dealt out in the order
        they come, so that no process is left without one while there are as many groups as processes."""
        return self._groups.setdefault(group, len(self._groups) % self.workers)

    async def answer(self, run: int, inst: Instance, group: str, rank: int = 0) -> Answer:
        assert self._loop is not None
        worker = self.worker_for(group)
        self._next += 1
        future: asyncio.Future[Answer] = self._loop.create_future()
        self._waiting[self._next] = future
        self._conns[worker].send(("answer", self._next, run, inst, rank, self.courier.outgoing(worker, group)))
        return await future

    async def settle(self) -> None:
        return None  # a process sends its requests' records before the answer they led to, on one pipe

    def stores(self) -> dict[str, ArtefactStore[Any]]:
        return self.courier.stores_by_kind

    async def close(self) -> None:
        self._closing = True
        for conn in self._conns:
            try:
                conn.send(("stop",))
            except OSError:
                pass
        for proc in self._procs:
            await asyncio.to_thread(proc.join, 60)
            if proc.is_alive():
                proc.kill()
        for listener in self._listeners:  # each ends at its pipe's end of file, now the process is gone
            await asyncio.to_thread(listener.join, 60)
        for conn in self._conns:
            conn.close()
