"""Answering instances on a Ray cluster (``--ray ADDRESS``, the ``anchor-infer[ray]`` extra).

Each of ``workers`` Ray actors holds an :class:`~anchor.evaluation.runner.worker.InstanceWorker`
(its own client, embedder and methods) on some node of the cluster, and answers many instances at
once in its event loop. The runner sends each scenario's instances to one actor (by the scenario's
key) and reads back, the answer with any artefact it built; each actor's requests come back on a stream of their
own as they are made; the runner alone writes the run directory, so the cluster's nodes need
no shared file system, only the same LLM endpoint.

An actor that dies (its node lost, its process killed) is started again by Ray; the instances it
was answering are sent again, with their scenario's artefacts, and only the first answer of an
instance is ever written. Requests the lost actor had made stay in the call log: they were sent.

With ``--ray local`` the actors go with the runner, keep their scratch folders in the run directory
and journal their requests there (:mod:`anchor.evaluation.runner.ray_local`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from anchor.artefacts import ArtefactStore
from anchor.evaluation.results import Prediction, TraceRecord
from anchor.evaluation.rundir import RunDirectory
from anchor.evaluation.runner import ray_watchdog
from anchor.evaluation.runner.errors import EvalError
from anchor.evaluation.runner.pool import (
    Answer,
    ArtefactCourier,
    RemoteWorker,
    concurrency_share,
    replay,
    worker_of,
)
from anchor.evaluation.runner.ray_local import (
    Journal,
    LocalHome,
    RunnerWatch,
    merge_journals,
    tagged_environment,
)
from anchor.evaluation.runner.worker import Instance, WorkerSetup
from anchor.llm.ledger import CallRecord, CostLedger

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
        raise EvalError(f"--ray: {RAY_EXTRA_HINT}") from None
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
        raise EvalError(f"--ray {address}: cannot connect to a Ray cluster ({str(exc).splitlines()[0]}); start "
                        "one with `ray start --head`, or give --ray local for one in this process") from None
    return ray


class _ActorWorker:
    """The Ray actor: an instance worker kept alive between instances (Ray makes it remote). Its
    requests leave through :meth:`calls`, a stream the runner reads for the actor's whole life.
    Given ``home`` (``--ray local``), it ends with its runner and journals its requests."""

    def __init__(self, setup: WorkerSetup, home: LocalHome | None = None) -> None:
        self.watch = RunnerWatch(home) if home is not None else None
        self.journal = Journal(home.folder) if home is not None else None
        if self.journal is not None:
            scratch = self.journal.scratch  # in the run directory, not in /tmp
        else:
            scratch = Path(tempfile.mkdtemp(prefix="anchor-ray-worker-"))  # a node of a cluster
        self.remote = RemoteWorker(setup, scratch)
        self.records: asyncio.Queue[str] | None = None
        self.made = 0
        self._starting: asyncio.Task[None] | None = None

    async def _start(self) -> None:
        if self._starting is None:
            self.records = asyncio.Queue()
            self._starting = asyncio.ensure_future(self.remote.start(self._made))
        await self._starting

    def _made(self, record: CallRecord) -> None:
        assert self.records is not None
        if self.watch is not None and record.outcome == "sent":
            self.watch.check()  # the request is about to leave: not once the runner is gone
        if self.journal is not None:
            self.journal.write(record)  # before the request leaves: a killed runner still counts it
        self.made += 1
        self.records.put_nowait(record.model_dump_json())

    async def calls(self) -> Any:
        """Every request record of this actor, as it is made (until the actor ends)."""
        await self._start()
        assert self.records is not None
        while True:
            batch = [await self.records.get()]
            while not self.records.empty():
                batch.append(self.records.get_nowait())
            yield batch

    async def count(self) -> int:
        """How many request records this actor has made so far."""
        await self._start()
        return self.made

    async def folder(self) -> str:
        """Where this actor keeps the artefacts it builds and is sent."""
        return str(self.remote.scratch)

    async def close(self) -> None:
        """Close the worker's clients and remove the scratch folder (Ray's kill would leave it behind)."""
        await self.remote.close()
        if self.journal is not None:
            self.journal.remove()  # the runner has every record (it settled first)
        else:
            shutil.rmtree(self.remote.scratch, ignore_errors=True)

    async def answer(self, run: int, inst: Instance, rank: int, artefacts: dict[str, dict[str, str]] | None) -> Any:
        await self._start()
        pred, traces, built = await self.remote.answer(run, inst, rank, artefacts)
        return pred.model_dump_json(), [t.model_dump_json() for t in traces], built


class RayPool:
    """``workers`` Ray actors answering the run's instances, the runner writing what they send back."""

    def __init__(self, setup: WorkerSetup, workers: int, ledger: CostLedger, address: str) -> None:
        self.ray = connect(address)
        # 0: one actor for every CPU of the cluster.
        self.workers = workers or max(1, int(self.ray.cluster_resources().get("CPU", 1)))
        self.ledger = ledger
        self.courier = ArtefactCourier(setup)
        self.setup = concurrency_share(setup, self.workers)
        # On this machine: the actors watch this process and use the run directory for scratch.
        self.home = LocalHome.here(setup.artefacts) if address == "local" else None
        self.run_dir = RunDirectory(setup.artefacts, error=EvalError)
        self._actors: list[Any] = []
        self._readers: list[asyncio.Task[None]] = []
        self._received: list[int] = []

    async def start(self) -> None:
        self._merge_journals()  # those of a killed runner's actors
        actor = self.ray.remote(max_restarts=-1, max_task_retries=0, max_concurrency=ACTOR_CONCURRENCY,
                                num_cpus=1)(_ActorWorker)
        self._actors = [actor.remote(self.setup, self.home) for _ in range(self.workers)]
        self._received = [0] * self.workers
        self._readers = [asyncio.ensure_future(self._read_calls(i)) for i in range(self.workers)]

    async def _read_calls(self, index: int) -> None:
        """Replay an actor's request records into the runner's ledger, again after a restart."""
        lost = self.ray.exceptions.RayActorError
        while True:
            try:
                async for ref in self._actors[index].calls.options(num_returns="streaming").remote():
                    for text in await ref:
                        replay(self.ledger, CallRecord.model_validate_json(text))
                        self._received[index] += 1
            except lost:
                self._received[index] = 0  # a restarted actor counts from zero
                await asyncio.sleep(0.5)

    async def answer(self, run: int, inst: Instance, group: str, rank: int = 0) -> Answer:
        index = worker_of(group, self.workers)
        lost = self.ray.exceptions.RayActorError
        for attempt in range(MAX_RESENDS + 1):
            try:
                pred, traces, built = await self._actors[index].answer.remote(
                    run, inst, rank, self.courier.outgoing(index, group))
            except lost as exc:
                self.courier.forget(index)  # restarted: its scratch folders and memory are gone
                if attempt == MAX_RESENDS:
                    raise EvalError(f"Ray worker {index} was lost {attempt + 1} times answering {inst.id} "
                                    f"({str(exc).splitlines()[0]}); run the same command again to resume") from None
                await self._restarted(index, inst)
                continue
            self.courier.incoming(built)
            return Prediction.model_validate_json(pred), [TraceRecord.model_validate_json(t) for t in traces]
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    async def _restarted(self, index: int, inst: Instance) -> None:
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
                    raise EvalError(f"Ray worker {index} did not come back within {RESTART_WAIT_SECONDS:.0f} s "
                                    f"after it was lost answering {inst.id}; run the same command again to "
                                    "resume") from None
                await asyncio.sleep(0.2)
            except self.ray.exceptions.RayActorError:
                return  # lost again (or for good): the resend says which, and counts it

    def stores(self) -> dict[str, ArtefactStore[Any]]:
        return self.courier.stores_by_kind

    async def settle(self) -> None:
        """Wait until every request record the actors have made has reached the runner's ledger (they
        come on a stream of their own, so an answer can arrive before its last requests' records), and
        add those of actors lost on the way from their journals."""
        await self._received_all()
        self._merge_journals()

    def _merge_journals(self) -> None:
        if self.home is not None:
            try:
                merge_journals(self.home.folder, self.run_dir.calls)
            finally:
                self.run_dir.calls.close()

    async def _received_all(self) -> None:
        for index, actor in enumerate(self._actors):
            try:
                made = await actor.count.remote()
            except self.ray.exceptions.RayActorError:
                continue
            while self._received[index] < made:
                await asyncio.sleep(0.05)

    async def close(self) -> None:
        await self._received_all()
        for reader in self._readers:
            reader.cancel()
        for actor in self._actors:
            try:
                await actor.close.remote()
            except self.ray.exceptions.RayActorError:
                pass  # lost, with its folder: nothing to tidy
            self.ray.kill(actor)
        self._actors, self._readers = [], []
        if self.home is not None:
            with contextlib.suppress(OSError):
                self.home.folder.rmdir()  # the actors removed their own folders and journals
