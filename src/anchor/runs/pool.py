"""Where work is answered: in the runner's own process (:class:`LocalPool`), in helper processes
(``--workers N``, :mod:`anchor.runs.processes`) or on Ray actors (:mod:`anchor.runs.ray_pool`).

Every pool takes a piece of :class:`~anchor.runs.worker.Work` and gives back what the session needs to
know of its answer (:class:`~anchor.runs.worker.Answered`: its status); the prediction, its traces and
the records of its requests are written by the worker itself, where the pool told it to
(:class:`~anchor.runs.worker.RecordSink`): the run directory's logs in the runner's process, a shard of
its own (:mod:`anchor.rundir.shards`) in a helper process or a Ray actor on this machine, or, for
a Ray actor on another machine, lines carried back to the runner in batches. A pool of several
workers sends all the instances of a scenario to the same worker (by its key), so that the scenario's
factor space is built once, by one worker, and stays in its memory for the scenario's other instances.

A worker on this machine reads and writes the run directory's artefact folders (and the store of
``--spaces``) itself. A worker on another machine has them carried (:class:`ArtefactCourier`): the
artefacts it needs are sent with the first instance of their scenario, and those it builds come back
with the instance that built them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from anchor.artefacts import ArtefactStore
from anchor.files import write_atomic
from anchor.llm.ledger import CallRecord, CostLedger
from anchor.methods.registry import METHODS
from anchor.rundir import RunDirectory
from anchor.runs.worker import Answered, InstanceWorker, Work, WorkerSetup, WorkSource

#: Artefact files by kind, then by file name: what travels with an instance, both ways.
Artefacts = dict[str, dict[str, str]]


@dataclass
class Tally:
    """What the progress line shows of the workers' requests so far."""

    requests: int = 0
    """Logical requests (each once, however many attempts it took)."""
    cache_hits: int = 0
    tokens: int = 0
    built: int = 0
    """Per-scenario artefacts built."""
    retry: str = ""
    """The last transient failure, while requests keep failing ("" once one succeeds again)."""

    def add(self, other: Tally) -> Tally:
        return Tally(self.requests + other.requests, self.cache_hits + other.cache_hits, self.tokens + other.tokens,
                     self.built + other.built, self.retry or other.retry)

    @staticmethod
    def total(tallies: Iterable[Tally]) -> Tally:
        """The sum of several workers' tallies (the first retry message that is set)."""
        out = Tally()
        for tally in tallies:
            out = out.add(tally)
        return out


class LedgerTally:
    """A worker's :class:`Tally`, kept from its client's ledger (O(1) a record)."""

    def __init__(self) -> None:
        self.retries = 0
        self.retry = ""

    def watch(self, record: CallRecord) -> bool:
        """Note a record; True when it starts or ends a run of failures (the progress line says so at once)."""
        if record.outcome == "transient_error":
            self.retries += 1
            self.retry = f"retrying: {self.retries} failed attempt(s), last: {record.detail[:80]}"
            return True
        if record.outcome == "ok" and self.retry:
            self.retry = ""
            return True
        return False

    def of(self, ledger: CostLedger, stores: dict[str, ArtefactStore[Any]]) -> Tally:
        requests, hits, tokens = ledger.running()
        return Tally(requests=requests, cache_hits=hits, tokens=tokens,
                     built=sum(len(store.built) for store in stores.values()), retry=self.retry)


class WorkerPool(Protocol):
    """What the session asks of a pool."""

    workers: int

    async def start(self) -> None: ...

    def answer(self, work: Work, rank: int = 0) -> Awaitable[Answered]:
        """Answer ``work``; its requests go before those of scenarios with a higher ``rank`` (the order the
        session started them in)."""
        ...

    def tally(self) -> Tally:
        """The workers' requests, tokens and built artefacts so far (for the progress line)."""
        ...

    def stores(self) -> dict[str, ArtefactStore[Any]]:
        """The run's artefact stores, as the runner sees them (to cost the artefacts reused)."""
        ...

    async def settle(self) -> None:
        """Return once everything the workers wrote so far is in the run directory's logs."""
        ...

    async def close(self, *, abort: bool = False) -> None:
        """Stop the workers: at once, cancelling what they answer, when ``abort`` (the run failed or was
        interrupted); else once they are idle."""
        ...


@runtime_checkable
class SourceReader(Protocol):
    """A pool whose workers read a :class:`~anchor.runs.worker.WorkSource` themselves, each its own share."""

    def answer_source(self, source: WorkSource, *, slots: int, base_rank: int = 0) -> AsyncIterator[Answered]:
        """Every answer's status as it finishes, ``slots`` instances answered at once in all; requests rank
        from ``base_rank`` on (a session's priority)."""
        ...


def run_stores(setup: WorkerSetup) -> dict[str, ArtefactStore[Any]]:
    """A store for every kind of artefact the method keeps, in the run directory (and its reuse folder)."""
    return {kind.name: setup.store(kind) for kind in METHODS[setup.config.method].artefacts()}


def worker_of(group: str, workers: int) -> int:
    """The worker that answers every instance of scenario ``group`` (a hex key), by the key alone."""
    return int(group[:8], 16) % workers


class DirectoryLogs:
    """A :class:`~anchor.runs.worker.RecordSink` writing straight into a run directory's logs."""

    def __init__(self, directory: RunDirectory) -> None:
        self.logs = {log.path.name: log for log in directory.logs()}

    def write(self, log: str, line: str) -> None:
        self.logs[log].append_raw((line + "\n").encode("utf-8"))


class LocalPool:
    """One worker in the runner's own process, with the runner's client (the default, ``--workers 1``); it
    writes into the run directory's logs (the calls through the client's ledger, which the session
    subscribed to them, and whose tally the session keeps)."""

    workers = 1

    def __init__(self, worker: InstanceWorker, directory: RunDirectory) -> None:
        self.worker = worker
        self.sink = DirectoryLogs(directory)

    async def start(self) -> None:
        await self.worker.start()

    def answer(self, work: Work, rank: int = 0) -> Awaitable[Answered]:
        return self.worker.record(work, self.sink, rank)

    def tally(self) -> Tally:
        return Tally(built=sum(len(store.built) for store in self.worker.stores.values()))

    def stores(self) -> dict[str, ArtefactStore[Any]]:
        # Every kind the method keeps, asked for or not: a rerun with nothing left to answer must still
        # find the artefacts its predictions name, to cost those it took from a shared store.
        for kind in self.worker.spec.artefacts():
            self.worker.store(kind)
        return self.worker.stores

    async def settle(self) -> None:
        return None  # written as it happened

    async def close(self, *, abort: bool = False) -> None:
        await self.worker.close()


def concurrency_share(setup: WorkerSetup, workers: int) -> WorkerSetup:
    """The setup of one of ``workers`` workers: its share of ``--concurrency``, so that the server sees
    at most as many requests in flight as with one process."""
    share = max(1, setup.settings.max_concurrency // workers)
    return dataclasses.replace(setup, settings=setup.settings.model_copy(update={"max_concurrency": share}))


# --------------------------------------------------------------------------- artefacts across machines


@dataclass
class ArtefactCourier:
    """The runner's side of artefacts answered on another machine: what to send with a scenario's first
    instance, and where to save what comes back. Its stores (one per kind) are the runner's view, used
    to count builds and to cost reused artefacts, exactly as in one process."""

    setup: WorkerSetup
    stores_by_kind: dict[str, ArtefactStore[Any]] = field(default_factory=dict)
    _sent: set[tuple[int, str]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.stores_by_kind = run_stores(self.setup)

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
    """An instance worker on a machine that does not see the run directory: the artefacts it is sent and
    builds live in ``scratch``, and each artefact it builds goes back to the runner once, with the answer
    of the instance that built it."""

    def __init__(self, setup: WorkerSetup, scratch: Path) -> None:
        self.scratch = scratch
        # Its own artefacts in a scratch folder; the runner saves and publishes what comes back.
        self.setup = dataclasses.replace(setup, artefacts=scratch / "own", publish=False,
                                         reuse=scratch / "reuse" if setup.reuse is not None else None)
        self.worker = InstanceWorker(self.setup)
        self._shipped: set[tuple[str, str]] = set()

    def unpack(self, artefacts: Artefacts | None) -> None:
        for where_kind, files in (artefacts or {}).items():
            where, _, kind = where_kind.partition(":")
            folder = (self.scratch / ("own" if where == "own" else "reuse")) / kind
            folder.mkdir(parents=True, exist_ok=True)
            for name, text in files.items():
                (folder / name).write_text(text, encoding="utf-8")

    def built(self) -> Artefacts:
        """The artefacts built and not sent back yet, as file texts."""
        out: Artefacts = {}
        for kind, keys in self.worker.built().items():
            store = self.worker.stores[kind]
            for key in keys:
                if (kind, key) not in self._shipped:
                    self._shipped.add((kind, key))
                    out.setdefault(kind, {})[f"{key}.json"] = store.path(key).read_text(encoding="utf-8")
        return out


