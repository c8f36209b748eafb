"""Answering on a Ray cluster (``--ray ADDRESS``, the ``anchor-infer[ray]`` extra).

Each of ``workers`` Ray actors holds an :class:`~anchor.runs.worker.InstanceWorker` (its own client,
embedder and methods) on some node of the cluster, and answers many instances at once in its event
loop. The runner sends each scenario's instances to one actor (by the scenario's key).

* With ``--ray local`` the actors run on the runner's machine: each writes its records into a shard of
  the run directory (:mod:`anchor.rundir.shards`) and uses the run's artefact folders, as a helper
  process does; an answer brings back only its status and the actor's tally. The actors go with the
  runner (:mod:`anchor.runs.ray_local`).
* On a cluster the nodes need no shared file system, only the same LLM endpoint: an actor's request
  records come back on a stream of their own, in batches, as JSON lines the runner appends to
  ``calls.jsonl`` without reading them; an answer brings its prediction and traces the same way, with
  any artefact the actor built (the artefacts it needs are sent with its scenario's first instance).

An actor that dies (its node lost, its process killed) is started again by Ray; the instances it was
answering are sent again, with their scenario's artefacts, and only the first answer of an instance
is ever written. Requests the lost actor had made stay in the call log: they were sent.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from anchor.artefacts import ArtefactStore
from anchor.rundir import RunDirectory
from anchor.rundir.names import CALLS, PREDICTIONS, TRACES
from anchor.rundir.shards import ShardWriter
from anchor.runs import ray_watchdog
from anchor.runs.errors import RunError
from anchor.runs.pool import (
    ArtefactCourier,
    Artefacts,
    LedgerTally,
    RemoteWorker,
    Tally,
    concurrency_share,
    run_stores,
    worker_of,
)
from anchor.runs.ray_local import LocalHome, RunnerWatch, tagged_environment
from anchor.runs.worker import Answered, InstanceWorker, Work, WorkerSetup

RAY_EXTRA_HINT = "running on Ray needs the ray package: pip install 'anchor-infer[ray]'"
#: How often an instance is sent again after the actor answering it was lost.
MAX_RESENDS = 3
#: How long a lost actor may take to come back before the run gives up on it (Ray restarts it; a
#: loaded machine can take many seconds to start its process and load its models).
RESTART_WAIT_SECONDS = 600.0
#: Instances one actor answers at once (its client bounds the requests in flight).
ACTOR_CONCURRENCY = 256


def _ray() -> Any:
    try:
        import ray  # an optional extra: imported only when a run asks for Ray
    except ImportError:
        raise RunError(f"--ray: {RAY_EXTRA_HINT}") from None
    return ray


#: The watchdog of the local Ray instance this process started, kept for as long as this process
#: lives (its pipe's end is the signal).
_watchdogs: list[Any] = []


def connect(address: str) -> Any:
    """Ray, connected: to a running instance already in this process, to the cluster at ``address``
    ('auto': the one ``ray start`` began on this machine), or to a new local one ('local')."""
    ray = _ray()
    if ray.is_initialized():
        return ray
    try:
        if address == "local":
            with tagged_environment() as tag:  # every process of the instance carries it
                _watchdogs.append(ray_watchdog.start(tag))  # ends them all when this process ends
                started = ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
            ray_watchdog.tell(_watchdogs[-1], (getattr(started, "address_info", None) or {}).get("session_dir"))
        else:
            ray.init(address=address, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RunError(f"--ray {address}: cannot connect to a Ray cluster ({str(exc).splitlines()[0]}); start "
                        "one with `ray start --head`, or give --ray local for one in this process") from None
    return ray


class _Lines:
    """A remote actor's record sink: the lines of each log, kept until the runner takes them."""

    def __init__(self) -> None:
        self.calls: asyncio.Queue[str] | None = None
        self.made = 0
        self.answer: dict[str, list[str]] = {}

    def write(self, log: str, line: str) -> None:
        self.answer.setdefault(log, []).append(line)


class _ActorWorker:
    """The Ray actor: an instance worker kept alive between instances (Ray makes it remote). Given
    ``home`` (``--ray local``), it writes a shard of the run directory and ends with its runner; else its
    records leave through :meth:`calls`, a stream the runner reads for the actor's whole life."""

    def __init__(self, setup: WorkerSetup, home: LocalHome | None = None) -> None:
        self.watch = RunnerWatch(home) if home is not None else None
        self.shard = ShardWriter(home.run_dir) if home is not None else None  # a new name after a restart
        self.remote = None if home is not None else RemoteWorker(setup, Path(tempfile.mkdtemp(prefix="anchor-ray-")))
        self.worker = self.remote.worker if self.remote is not None else InstanceWorker(setup)
        self.lines = _Lines()
        self.tally = LedgerTally()
        self._starting: asyncio.Task[None] | None = None

    async def _start(self) -> None:
        if self._starting is None:
            self.lines.calls = asyncio.Queue()
            self._starting = asyncio.ensure_future(self.worker.start(subscribers=[self._made, self.tally.watch]))
        await self._starting

    def _made(self, record: Any) -> None:
        if self.watch is not None and record.outcome == "sent":
            self.watch.check()  # the request is about to leave: not once the runner is gone
        line = record.model_dump_json()
        if self.shard is not None:
            self.shard.write(CALLS, line)  # before the request leaves: a killed runner still counts it
            return
        assert self.lines.calls is not None
        self.lines.made += 1
        self.lines.calls.put_nowait(line)

    async def calls(self) -> Any:
        """Every request record of this actor, as it is made (until the actor ends); a stream of batches."""
        await self._start()
        assert self.lines.calls is not None
        while True:
            batch = [await self.lines.calls.get()]
            while not self.lines.calls.empty():
                batch.append(self.lines.calls.get_nowait())
            yield batch

    async def count(self) -> int:
        """How many request records this actor has put on its stream so far."""
        await self._start()
        return self.lines.made

    async def folder(self) -> str:
        """Where this actor writes: its shard (``--ray local``) or its scratch folder."""
        if self.shard is not None:
            return str(self.shard.folder)
        assert self.remote is not None
        return str(self.remote.scratch)

    async def close(self) -> None:
        """Close the worker's clients, and the shard or the scratch folder (Ray's kill would leave it)."""
        await self.worker.close()
        if self.shard is not None:
            self.shard.close()
        elif self.remote is not None:
            shutil.rmtree(self.remote.scratch, ignore_errors=True)

    async def answer(self, work: Work, rank: int, artefacts: Artefacts | None) -> Any:
        await self._start()
        if self.shard is not None:
            answered = await self.worker.record(work, self.shard, rank)
            return answered, self.tally.of(self.worker.client.ledger, self.worker.stores), None, None  # type: ignore[union-attr]
        assert self.remote is not None
        self.remote.unpack(artefacts)
        sink = _Lines()
        answered = await self.worker.record(work, sink, rank)
        tally = self.tally.of(self.worker.client.ledger, self.worker.stores)  # type: ignore[union-attr]
        return answered, tally, sink.answer, self.remote.built()


class RayPool:
    """``workers`` Ray actors answering the run's work."""

    def __init__(self, setup: WorkerSetup, workers: int, address: str, directory: RunDirectory) -> None:
        self.ray = connect(address)
        # 0: one actor for every CPU of the cluster.
        self.workers = workers or max(1, int(self.ray.cluster_resources().get("CPU", 1)))
        self.directory = directory
        self.setup = concurrency_share(setup, self.workers)
        # On this machine: the actors watch this process and write the run directory themselves.
        self.home = LocalHome.here(setup.artefacts) if address == "local" else None
        self.courier = ArtefactCourier(setup) if self.home is None else None
        self._stores = self.courier.stores_by_kind if self.courier is not None else run_stores(setup)
        self._actors: list[Any] = []
        self._readers: list[asyncio.Task[None]] = []
        self._received = [0] * self.workers
        self._tallies = [Tally() for _ in range(self.workers)]

    async def start(self) -> None:
        actor = self.ray.remote(max_restarts=-1, max_task_retries=0, max_concurrency=ACTOR_CONCURRENCY,
                                num_cpus=1)(_ActorWorker)
        self._actors = [actor.remote(self.setup, self.home) for _ in range(self.workers)]
        if self.home is None:
            self._readers = [asyncio.ensure_future(self._read_calls(i)) for i in range(self.workers)]

    async def _read_calls(self, index: int) -> None:
        """Append an actor's request records to calls.jsonl as they come, again after a restart."""
        lost = self.ray.exceptions.RayActorError
        calls = self.directory.calls
        while True:
            try:
                async for ref in self._actors[index].calls.options(num_returns="streaming").remote():
                    lines = await ref
                    calls.append_raw("".join(f"{line}\n" for line in lines).encode("utf-8"))
                    self._received[index] += len(lines)
            except lost:
                self._received[index] = 0  # a restarted actor counts from zero
                await asyncio.sleep(0.5)

    def answer(self, work: Work, rank: int = 0) -> Awaitable[Answered]:
        return self._answer(work, rank)

    async def _answer(self, work: Work, rank: int) -> Answered:
        index = worker_of(work.group, self.workers)
        lost = self.ray.exceptions.RayActorError
        for attempt in range(MAX_RESENDS + 1):
            outgoing = self.courier.outgoing(index, work.group) if self.courier is not None else None
            try:
                answered, tally, lines, built = await self._actors[index].answer.remote(work, rank, outgoing)
            except lost as exc:
                if self.courier is not None:
                    self.courier.forget(index)  # restarted: its scratch folders and memory are gone
                if attempt == MAX_RESENDS:
                    raise RunError(f"Ray worker {index} was lost {attempt + 1} times answering {work.instance.id} "
                                    f"({str(exc).splitlines()[0]}); run the same command again to resume") from None
                await self._restarted(index, work.instance.id)
                continue
            self._tallies[index] = tally
            if lines is not None:
                self._write(lines)
            if built and self.courier is not None:
                self.courier.incoming(built)
            return answered
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _write(self, lines: dict[str, list[str]]) -> None:
        """A remote answer's traces, then its prediction, as the worker wrote them."""
        for log, target in ((TRACES, self.directory.traces), (PREDICTIONS, self.directory.predictions)):
            if lines.get(log):
                target.append_raw("".join(f"{line}\n" for line in lines[log]).encode("utf-8"))

    async def _restarted(self, index: int, what: str) -> None:
        """Wait until Ray has started a lost actor again: an instance sent while it restarts would
        fail at once, and counting that as a loss would give up on an actor that is merely slow to
        come back."""
        restarting = self.ray.exceptions.ActorUnavailableError
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RESTART_WAIT_SECONDS
        while True:
            try:
                await self._actors[index].count.remote()
                return
            except restarting:
                if loop.time() > deadline:
                    raise RunError(f"Ray worker {index} did not come back within {RESTART_WAIT_SECONDS:.0f} s "
                                    f"after it was lost answering {what}; run the same command again to "
                                    "resume") from None
                await asyncio.sleep(0.2)
            except self.ray.exceptions.RayActorError:
                return  # lost again (or for good): the resend says which, and counts it

    def tally(self) -> Tally:
        return Tally.total(self._tallies)

    def stores(self) -> dict[str, ArtefactStore[Any]]:
        return self._stores

    async def settle(self) -> None:
        """Wait until every request record the actors have put on their streams has reached calls.jsonl
        (a stream is apart from the answers, so an answer can arrive before its last requests' records);
        the actors on this machine wrote theirs into their shards."""
        for index, actor in enumerate(self._actors if self.home is None else []):
            try:
                made = await actor.count.remote()
            except self.ray.exceptions.RayActorError:
                continue
            while self._received[index] < made:
                await asyncio.sleep(0.05)

    async def close(self, *, abort: bool = False) -> None:
        if not abort:
            await self.settle()
        for reader in self._readers:
            reader.cancel()
        for actor in self._actors:
            try:
                await actor.close.remote()
            except self.ray.exceptions.RayActorError:
                pass  # lost, with its folder: nothing to tidy
            self.ray.kill(actor)
        self._actors, self._readers = [], []
