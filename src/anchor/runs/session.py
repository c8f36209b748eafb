"""``RunSession``: one run of one method over the work it is fed, into one run directory.

The session owns what every run has: the LLM clients, the directory's lock and logs, the ledger, the
workers (here, in helper processes or on Ray), the bounded loop that hands them work
(:func:`~anchor.answering.answered`), the progress line and the run directory's one consistent
view. It knows nothing of where the work comes from: ``anchor eval`` feeds it a benchmark's instances
(:mod:`anchor.evaluation.driver`), ``anchor predict`` a user's table read as a stream
(:mod:`anchor.predict.runner`), and a service can feed it work as it arrives. A driver uses it in
three steps::

    session = RunSession(config, out_dir, RunOptions(settings))
    async with session.opened():                 # clients ready; lock held; config.json written
        ...                                      # the driver's own records (sample.json, ...)
        async with session.started(session.worker_setup(), groups=n):  # the workers
            async for answered in session.answer(work):  # or answer_source(source): see there
                ...                              # each answer's status, as it finishes
        ...                                      # the driver scores the run (metrics.json)

Every record a run makes reaches ``calls.jsonl``, ``predictions.jsonl`` and ``traces.jsonl``: written
there by this process for the work it answers itself, or copied there from the workers' own shards
(:mod:`anchor.rundir.shards`) while the run goes and at its end. Starting the same command again
resumes: a driver skips the work already answered (an instance whose prediction failed is tried
again, its new line counting), and the costs come from ``calls.jsonl``, every request once however
often the run was interrupted. A start refused before its first piece of work and before anything
was recorded leaves the folder as it found it (:class:`~anchor.rundir.RunStart`).

Sessions can share one client (``client=``, and so one limit on the requests in flight); a session's
``priority`` puts its requests before those of sessions with a higher number.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import warnings
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anchor.answering import answered
from anchor.artefacts import ArtefactStore
from anchor.calibration.contract import CalibratorMismatchWarning, method_label
from anchor.calibration.registry import FileCalibrator
from anchor.compute import offload
from anchor.config import AnchorConfig
from anchor.embedding.embed import Embedder, embedder_identity
from anchor.embedding.server import make_embedder
from anchor.extras import require_extra
from anchor.llm.client import LLMClient
from anchor.llm.ledger import CallRecord, CostLedger
from anchor.llm.settings import BackendFactory, LLMSettings, make_client
from anchor.methods.registry import METHODS
from anchor.progress import Reporter, silent
from anchor.rundir import RunDirectory, RunStart
from anchor.rundir.records import RunConfig
from anchor.runs.errors import RunError, WorkersCapped
from anchor.runs.identity import check_resumable
from anchor.runs.pool import LedgerTally, LocalPool, SourceReader, Tally, WorkerPool
from anchor.runs.processes import ProcessPool
from anchor.runs.progress import RunProgress
from anchor.runs.worker import Answered, DecisionRule, InstanceWorker, Work, WorkerSetup, WorkSource

#: How often the workers' shards are copied into the run directory's logs while a run goes.
MERGE_SECONDS = 0.25
#: Ranks of one priority level: a session's requests rank after every request of a lower level.
PRIORITY_LEVEL = 1 << 40


def instance_slots(concurrency: int) -> int:
    """Instances answered at once when the client allows ``concurrency`` requests in flight.

    An instance mostly waits on one request at a time (abduction rounds depend on each other), and
    now and then computes instead (embedding, clustering), so it takes about two instances per
    request slot to keep the server busy. More would only make every instance finish later.
    """
    return max(2, 2 * concurrency)


def record_model(config: RunConfig, client: LLMClient, *, harness: bool) -> None:
    """Record in ``config`` the model the ready ``client``'s server answers with; ``harness``: its backend was
    made by a harness's factory, whose kind is recorded (not the one the settings would name)."""
    config.llm["model"] = client.backend.model
    if harness:
        config.llm["backend"] = client.backend.kind


async def identify_embedder(config: RunConfig, embedder: Embedder, *, check: Callable[[], None] | None = None) -> None:
    """Record the embedder's identity in ``config``, the width of its vectors included.

    A server's width may cost one request (then cached), so ``check`` (a run's: is its directory free for
    this embedder?) is called before that, on what is known without asking.
    """
    config.embedder = embedder_identity(embedder, learn=False).model_dump(mode="json")
    if check is not None:
        check()
    if config.embedder["dimension"] is None:
        identity = await asyncio.to_thread(embedder_identity, embedder)
        config.embedder = identity.model_dump(mode="json")


async def resolve_config(config: RunConfig, client: LLMClient, embedder: Callable[[], Embedder], *,
                         harness: bool) -> RunConfig:
    """``config`` as a run records it once its client is ready: the server's model and, for ANCHOR's methods,
    the embedder's identity (which names their artefacts). For work answered outside a run (the service's
    online answers); a session does the same in :meth:`RunSession.opened`, checking its directory between."""
    record_model(config, client, harness=harness)
    if METHODS[config.method].uses_anchor_config:
        await identify_embedder(config, embedder())
    return config


def worker_setup(
    config: RunConfig, *, settings: LLMSettings, artefacts: Path, anchor_config: AnchorConfig | None = None,
    estimator_settings: LLMSettings | None = None, calibrator: FileCalibrator | None = None,
    conditions: Mapping[str, list[str]] | None = None, decide: DecisionRule | None = None,
    backends: BackendFactory | None = None,
) -> WorkerSetup:
    """What a worker needs to answer work under ``config`` (resolved), keeping its artefacts in the folder
    ``artefacts`` (a run directory, or a store of artefacts named by their content): looked for first in the
    run's ``--spaces``/``--spaces-from`` folder, and added there when they are named by content."""
    cal = calibrator
    return WorkerSetup(
        config=config, settings=settings, artefacts=artefacts, anchor_config=anchor_config,
        estimator_settings=estimator_settings, calibrator=cal.file if cal else None,
        calibrator_path=cal.path if cal else None, calibrator_sha256=cal.sha256 if cal else None,
        reuse=config.spaces_source(artefacts), publish=config.artefact_keys == "content",
        conditions=dict(conditions or {}), decide=decide or DecisionRule(), backends=backends)


def local_worker(setup: WorkerSetup, *, client: LLMClient, embedder: Callable[[], Embedder],
                 estimator: LLMClient | None = None,
                 stores: dict[str, ArtefactStore[Any]] | None = None) -> InstanceWorker:
    """A worker in this process on its owner's client and embedder (made when a method first embeds: a
    method that embeds nothing needs no MiniLM). ``stores``: artefact stores shared with other workers, by
    kind, so that what one method's worker built is found by the others' (the service's)."""
    return InstanceWorker(setup, client=client, estimator=estimator, embedder=embedder, stores=stores)


@dataclass(frozen=True)
class RunOptions:
    """How a run answers, whatever drives it (``anchor eval``, ``anchor predict``, a service's job): the
    LLM, the method's settings, a calibrator and where the work is answered. A driver takes one and hands it
    to its :class:`RunSession` as it is."""

    settings: LLMSettings
    anchor_config: AnchorConfig | None = None
    estimator_settings: LLMSettings | None = None
    """A second LLM for the probability estimates (ANCHOR's methods only)."""
    calibrator: FileCalibrator | None = None
    workers: int = 1
    """Processes that answer work (``--workers``); on a Ray cluster (``ray``: its address), actors."""
    ray: str | None = None
    backends: BackendFactory | None = None
    """Makes each client's backend from its settings in place of ``make_backend`` (a server or the
    embedded model): a harness's own, such as a simulated LLM answering in process. Handed to the
    workers too, so with helper processes or Ray it must pickle."""


class RunSession:
    """One run of ``config``'s method into the run directory ``out_dir`` (see the module docstring)."""

    def __init__(
        self,
        config: RunConfig,
        out_dir: Path,
        options: RunOptions,
        *,
        report: Reporter = silent,
        client: LLMClient | None = None,
        priority: int = 0,
        progress: RunProgress | None = None,
    ) -> None:
        settings, anchor_config, estimator_settings = options.settings, options.anchor_config, options.estimator_settings
        calibrator, workers, ray, backends = options.calibrator, options.workers, options.ray, options.backends
        spec = METHODS.get(config.method)
        if spec is None:
            raise RunError(f"unknown method {config.method!r}; choose from {', '.join(METHODS)}")
        if config.ablations and not spec.uses_anchor_config:
            raise RunError(f"ablations apply to ANCHOR's methods only, not to {config.method!r}")
        if config.runs < 1:
            raise RunError("--runs must be at least 1")
        if (config.max_factors is not None or estimator_settings is not None) and not spec.uses_anchor_config:
            raise RunError(f"truncated factor spaces and a second estimator LLM apply to ANCHOR's methods only, "
                            f"not to {config.method!r}")
        if workers < 1 and ray is None:
            raise RunError(f"--workers must be at least 1, got {workers}")
        self.spec = spec
        self.config = config
        self.out_dir = Path(out_dir)
        self.directory = RunDirectory(self.out_dir, error=RunError, hint="move the file away to start the run afresh")
        self.settings = settings
        self.anchor_config = anchor_config
        self.estimator_settings = estimator_settings
        self.calibrator = calibrator
        """Applied to every P(O1) the method gives (the raw one is kept beside it)."""
        if calibrator is not None and config.calibrator is None:
            config.calibrator = calibrator.describe()
        self.options = options
        self.workers = workers
        self.ray = ray
        self.backends = backends
        self.client = client
        self._owns_client = client is None
        self.estimator: LLMClient | None = None
        self.priority = priority
        self.progress = progress or RunProgress(report)
        self.pool: WorkerPool | None = None
        self.answering = False
        """Set once the first piece of work is handed out: from then on a failed start is a run that began."""
        self._ranks: dict[tuple[int, str], int] = {}
        self._own_tally = LedgerTally()

    # ------------------------------------------------------------------ opening

    @functools.cached_property
    def embedder(self) -> Embedder:
        """One embedder (and vector cache) for every space and run: a server's, or MiniLM (loaded on
        first use)."""
        return make_embedder(self.settings)

    def check_dir(self) -> None:
        """Refuse a run directory that holds a run with other settings, or other files and no run (it is
        left as it is)."""
        self.directory.check_target()
        check_resumable(self.out_dir, self.config.model_dump(mode="json"))

    async def _ready_clients(self) -> None:
        if self.spec.extra is not None:
            require_extra(self.spec.extra, f"--method {self.config.method}")  # before the first request
        if self.spec.uses_anchor_config and self.workers == 1 and self.ray is None:
            # ANCHOR's methods embed from their first request on: start loading the model now, in its
            # helper process, while this one sets up the client (the SDK alone takes half a second).
            offload.warm_up(self.embedder)
        if self.client is None:
            # Its records go to calls.jsonl (and the tally): kept in memory too, a long run's would not fit.
            self.client = make_client(self.settings, backends=self.backends, ledger=CostLedger(keep=False))
        await self.client.ensure_ready()
        c = self.config
        record_model(c, self.client, harness=self.backends is not None)
        if self.calibrator is not None:
            mismatch = self.calibrator.mismatch(model=c.llm["model"], method=method_label(c.method, c.stage,
                                                                                          c.ablations), kind=c.kind)
            if mismatch:
                warnings.warn(CalibratorMismatchWarning(mismatch), stacklevel=3)
        if self.estimator_settings is not None:
            # The estimator's requests go to the same ledger, so calls.jsonl and the cost count them.
            self.estimator = make_client(self.estimator_settings, ledger=self.client.ledger, backends=self.backends)
            await self.estimator.ensure_ready()
            c.estimator = {**(c.estimator or {}), "model": self.estimator.backend.model}
            if self.backends is not None:
                c.estimator["backend"] = self.estimator.backend.kind
        if self.spec.uses_anchor_config:
            await self._identify_embedder()

    async def _identify_embedder(self) -> None:
        """Record the embedder's identity in the run's configuration, the width of its vectors included.

        A server's width may cost one request (then cached), so a directory holding a run by another
        embedder is refused before that, on what is known without asking.
        """
        await identify_embedder(self.config, self.embedder, check=self.check_dir)

    @contextlib.asynccontextmanager
    async def opened(self) -> AsyncIterator[RunSession]:
        """The clients ready, the directory locked, its ``config.json`` written (or checked to hold this same
        run), what a killed run left in the workers' shards copied into the logs, and the logs open for
        appending. A start refused inside the block before its first piece of work, having recorded
        nothing, takes back what it made."""
        try:
            await self._ready_clients()
            start = RunStart(self.directory)
            try:
                start.make_folder()
                with self.directory.lock():
                    try:
                        self.check_dir()  # under the lock: a start refused because another process runs here
                        self.out_dir.mkdir(parents=True, exist_ok=True)  # leaves config.json as it is
                        # Rewritten on every start (of this same run): the recorded command and connection
                        # details are the latest.
                        self.directory.write_config(self.config)
                        self._open_logs()
                        try:
                            yield self
                        finally:
                            self._close_logs()
                    except BaseException:
                        if not self.answering:  # a worker may have asked already: then it is a run to resume
                            start.take_back()
                        raise
            except BaseException:
                start.remove_folders()  # those this start created, when empty (never the lock holder's)
                raise
        finally:
            # Also when the run is refused before it starts (a resume with other settings): the
            # connections opened to ask the server for its model belong to this event loop.
            if self._owns_client and self.client is not None:
                await self.client.aclose()
            if self.estimator is not None:
                await self.estimator.aclose()

    def _open_logs(self) -> None:
        d = self.directory
        d.shards.recover()  # a copy a killed runner left half done is undone, then made again
        for log in d.logs():
            log.repair()  # the line a killed run left unfinished, before appending
        d.merge_shards()  # what the workers of a killed run wrote
        assert self.client is not None
        self._unsubscribe = [self.client.ledger.subscribe(d.calls.append), self.client.ledger.subscribe(self._watch)]

    def _watch(self, record: CallRecord) -> None:
        if self._own_tally.watch(record):
            self.progress.tick(self.tally())  # a failure, or the end of an outage: shown at once

    def _close_logs(self) -> None:
        for stop in self._unsubscribe:
            stop()
        for log in self.directory.logs():
            log.close()
        self.directory.shards.close()

    # ------------------------------------------------------------------ the workers

    def worker_setup(self, conditions: Mapping[str, list[str]] | None = None,
                     decide: DecisionRule | None = None) -> WorkerSetup:
        """What a worker needs to answer this run's work (the run's configuration as resolved)."""
        return worker_setup(self.config, settings=self.settings, artefacts=self.out_dir,
                            anchor_config=self.anchor_config, estimator_settings=self.estimator_settings,
                            calibrator=self.calibrator, conditions=conditions, decide=decide, backends=self.backends)

    def helpers(self, groups: int) -> int:
        """``--workers``, capped at the run's scenario ``groups`` and, for processes, the cores: a helper more
        would sit idle (or wait for a core) and only cost its start-up. A cap is said in one line
        (``WorkersCapped``)."""
        asked = self.workers
        if asked <= 1:
            return asked  # one process, or (0, with Ray) one actor per CPU of the cluster
        limits = [(groups, "scenario group(s) in the run, each answered by one helper")]
        if self.ray is None:
            limits.append((os.cpu_count() or 1, "core(s) on this machine"))
        bound, why = min(limits, key=lambda limit: limit[0])
        if asked <= bound:
            return asked
        used = max(1, bound)
        kind = "Ray actor(s)" if self.ray is not None else "helper process(es)" if used > 1 else "process"
        warnings.warn(WorkersCapped(f"--workers {asked}: {used} {kind} started, as there are {bound} {why}"),
                      stacklevel=4)
        return used

    def _make_pool(self, setup: WorkerSetup, groups: int) -> WorkerPool:
        helpers = self.helpers(groups)
        if self.ray is not None:
            from anchor.runs.ray_pool import RayPool  # Ray is an optional extra, imported when asked for

            return RayPool(setup, helpers, self.ray, self.directory)
        if helpers > 1:
            return ProcessPool(setup, helpers)
        # The embedder is made when a method first embeds: a run of a method that embeds nothing needs no MiniLM.
        assert self.client is not None
        return LocalPool(local_worker(setup, client=self.client, estimator=self.estimator,
                                      embedder=lambda: self.embedder), self.directory)

    @contextlib.asynccontextmanager
    async def started(self, setup: WorkerSetup, *, groups: int) -> AsyncIterator[WorkerPool]:
        """The workers started from ``setup`` (:meth:`worker_setup`), for a run of ``groups`` scenario
        groups. At the end of the block they are stopped (at once when it failed) and everything they
        wrote is in the run directory's logs."""
        self.pool = pool = self._make_pool(setup, groups)
        merging: asyncio.Task[None] | None = None
        failed = True
        try:
            await pool.start()
            merging = asyncio.ensure_future(self._merge_while_running())
            yield pool
            await pool.settle()
            failed = False
        finally:
            if merging is not None:
                merging.cancel()
                await asyncio.gather(merging, return_exceptions=True)
            try:
                await pool.close(abort=failed)
            finally:
                self.directory.merge_shards(final=True)

    async def _merge_while_running(self) -> None:
        while True:
            await asyncio.sleep(MERGE_SECONDS)
            self.directory.merge_shards()
            self.progress.tick(self.tally())  # alive while nothing finishes (an outage, a long build)

    # ------------------------------------------------------------------ answering

    def _rank(self, work: Work) -> int:
        # Scenarios numbered in the order they start: the requests of an earlier one (its build included)
        # get a free slot first (see anchor.llm.parallel).
        rank = self._ranks.setdefault((work.run, work.group), len(self._ranks))
        return self.priority * PRIORITY_LEVEL + rank

    async def answer(self, work: Iterable[Work] | AsyncIterable[Work]) -> AsyncIterator[Answered]:
        """Answer every piece of ``work`` (read one at a time, as slots free up), yielding each answer's
        status as it finishes; the prediction is in the run directory by then."""
        pool = self.pool
        assert pool is not None and self.client is not None, "answer inside started()"

        def hand_out(item: Work) -> Any:
            self.answering = True
            return pool.answer(item, self._rank(item))

        async for _, done in answered(work, hand_out, slots=instance_slots(self.client.concurrency)):
            self.progress.answered(done, self.tally)
            yield done
        self.progress.tick(self.tally(), force=True)

    async def answer_source(self, source: WorkSource) -> AsyncIterator[Answered]:
        """Answer all of ``source``'s work, yielding each answer's status as it finishes, as :meth:`answer`
        does. Workers that read a source themselves (helper processes) each read their own share, so
        none of the work passes through this process; otherwise this process reads it and hands it out."""
        pool = self.pool
        assert pool is not None and self.client is not None, "answer inside started()"
        if not isinstance(pool, SourceReader):
            with source.share(0, 1) as work:
                async for done in self.answer(work):
                    yield done
            return
        self.answering = True
        async for done in pool.answer_source(source, slots=instance_slots(self.client.concurrency),
                                             base_rank=self.priority * PRIORITY_LEVEL):
            self.progress.answered(done, self.tally)
            yield done
        self.progress.tick(self.tally(), force=True)

    def tally(self) -> Tally:
        """Requests and tokens so far: this process's own (its client's, the in-process worker's too) and
        the other workers'."""
        assert self.client is not None
        own = self._own_tally.of(self.client.ledger, {})
        return own.add(self.pool.tally()) if self.pool is not None else own
