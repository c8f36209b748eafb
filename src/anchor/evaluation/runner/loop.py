"""Evaluation runs: resumable, repeatable over seeds, with metrics and exact costs on disk.

A run directory (:class:`~anchor.evaluation.rundir.RunDirectory`, which writes and reads it) holds
``config.json`` (written first), ``predictions.jsonl`` (one line appended and flushed per finished
instance), ``traces.jsonl`` (the audit trail of each answered condition, for methods that have one),
``calls.jsonl`` (every LLM request and cache hit as it happens), per-scenario artefacts such as
``spaces/`` (ANCHOR's factor spaces) and finally ``metrics.json``.

Starting the same command again skips every (run, instance) already answered; an instance whose
prediction *failed* (the model could not answer in schema, the server could not be reached) is
tried again, and its new record replaces the old one. A partly written last line, left by a killed
process, is dropped. Metrics are computed from the predictions sorted by (run, id), so an
interrupted-and-resumed run ends with the same numbers as an uninterrupted one given the same LLM
answers (which the response cache provides). Costs come from ``calls.jsonl``, so every request is
counted exactly once however often the run was interrupted.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from anchor.calibration.contract import CalibratorMismatchWarning, method_label
from anchor.calibration.registry import FileCalibrator
from anchor.compute import offload
from anchor.config import AnchorConfig
from anchor.embedding.embed import Embedder, embedder_identity
from anchor.embedding.server import make_embedder
from anchor.evaluation.datasets.factcheck import FactcheckData
from anchor.evaluation.datasets.instances import DecisionInstance, PairwiseInstance, scenario_key
from anchor.evaluation.datasets.negation import negate_with_llm
from anchor.evaluation.datasets.sampling import SampleRecord
from anchor.evaluation.datasets.selection import select_instances
from anchor.evaluation.methods.registry import METHODS
from anchor.evaluation.results import MetricsReport, Prediction, RunConfig
from anchor.evaluation.rundir import RunDirectory, RunStart
from anchor.evaluation.runner.errors import EvalError, WorkersCapped
from anchor.evaluation.runner.identity import check_resumable
from anchor.evaluation.runner.pool import LocalPool, ProcessPool, WorkerPool
from anchor.evaluation.runner.ray_pool import RayPool
from anchor.evaluation.runner.scoring import RunScorer
from anchor.evaluation.runner.worker import InstanceWorker, WorkerSetup
from anchor.extras import require_extra
from anchor.llm import chain
from anchor.llm.client import LLMClient
from anchor.llm.ledger import CallRecord, empty_cost
from anchor.llm.settings import BackendFactory, LLMSettings, make_client
from anchor.progress import ProgressEvent, Reporter, silent

Instance = DecisionInstance | PairwiseInstance


def instance_slots(concurrency: int) -> int:
    """Instances evaluated at once when the client allows ``concurrency`` requests in flight.

    An instance mostly waits on one request at a time (abduction rounds depend on each other), and
    now and then computes instead (embedding, clustering), so it takes about two instances per
    request slot to keep the server busy. More would only make every instance finish later.
    """
    return max(2, 2 * concurrency)


class EvalRunner:
    def __init__(
        self,
        config: RunConfig,
        out_dir: Path,
        *,
        settings: LLMSettings,
        anchor_config: AnchorConfig | None = None,
        report: Reporter = silent,
        retry_failed: bool = True,
        estimator_settings: LLMSettings | None = None,
        calibrator: FileCalibrator | None = None,
        workers: int = 1,
        ray: str | None = None,
        backends: BackendFactory | None = None,
    ) -> None:
        spec = METHODS.get(config.method)
        if spec is None:
            raise EvalError(f"unknown method {config.method!r}; choose from {', '.join(METHODS)}")
        if spec.pairwise_only and config.kind != "pairwise":
            raise EvalError(f"method {config.method!r} compares two conditions and only applies to "
                            "common2sense-pairwise")
        if config.ablations and not spec.uses_anchor_config:
            raise EvalError(f"ablations apply to ANCHOR's methods only, not to {config.method!r}")
        if config.runs < 1:
            raise EvalError("--runs must be at least 1")
        if (config.max_factors is not None or estimator_settings is not None) and not spec.uses_anchor_config:
            raise EvalError(f"truncated factor spaces and a second estimator LLM apply to ANCHOR's methods only, "
                            f"not to {config.method!r}")
        self.spec = spec
        self.config = config
        self.out_dir = Path(out_dir)
        self.directory = RunDirectory(self.out_dir, error=EvalError,
                                      hint="move the file away to start the run afresh")
        self.settings = settings
        self.anchor_config = anchor_config
        self.report = report
        self.retry_failed = retry_failed
        self.estimator_settings = estimator_settings
        self.calibrator = calibrator
        """Applied to every P(O1) the method gives (the raw one is kept beside it); see ``_side``."""
        if calibrator is not None and config.calibrator is None:
            config.calibrator = calibrator.describe()
        if workers < 1 and ray is None:
            raise EvalError(f"--workers must be at least 1, got {workers}")
        self.workers = workers
        """Processes that answer instances (``--workers``); on a Ray cluster (``ray``: its address), actors."""
        self.ray = ray
        self.backends = backends
        """Makes each client's backend from its settings (the main LLM's, the estimator's) in place of
        ``make_backend`` (a server or the embedded model): a harness's own, such as the simulated LLM
        answering in process. Handed to the workers too, so with helper processes or Ray it must pickle."""
        self.client: LLMClient | None = None
        self.estimator: LLMClient | None = None
        self.pool: WorkerPool | None = None
        self.answering = False
        """Set once the first instance is handed to the pool: from then on a failed start is a run that began."""
        self._counts: Counter[str] = Counter()
        self._retry = ""
        self._last_tick = 0.0
        self._scenario_conditions: dict[str, list[str]] = {}
        self.data: FactcheckData | None = None
        """The data file as read, for formats that skip bad rows (set by load_instances)."""
        self.sample_record: SampleRecord | None = None
        """The seeded sample drawn by load_instances (None when the run scores the whole file)."""

    # ------------------------------------------------------------------ setup

    def load_instances(self) -> list[Instance]:
        # The sample is drawn before --limit, which then takes its first N (see datasets/selection.py).
        instances, self.data, self.sample_record = select_instances(self.config)
        return instances

    def check_dir(self) -> None:
        """Refuse a run directory that holds a run with other settings, or other files and no run (it is
        left as it is)."""
        self.directory.check_target()
        check_resumable(self.out_dir, self.config.model_dump(mode="json"))

    def prepare_dir(self) -> None:
        """Create the run directory and its config.json, or check that it holds this same run."""
        self.check_dir()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        # Rewritten on every start (of this same run) so the recorded command and connection details are the latest.
        self.directory.write_config(self.config)

    async def _identify_embedder(self) -> None:
        """Record the embedder's identity in the run's configuration, the width of its vectors included.

        A server's width may cost one request (then cached), so a directory holding a run by another
        embedder is refused before that, on what is known without asking.
        """
        self.config.embedder = embedder_identity(self._embedder, learn=False).model_dump(mode="json")
        self.check_dir()
        if self.config.embedder["dimension"] is None:
            identity = await asyncio.to_thread(embedder_identity, self._embedder)
            self.config.embedder = identity.model_dump(mode="json")

    @functools.cached_property
    def _embedder(self) -> Embedder:
        """One embedder (and vector cache) for every space and run: a server's, or MiniLM (loaded on
        first use)."""
        return make_embedder(self.settings)

    # ------------------------------------------------------------------ main loop

    async def run(self, instances: list[Instance] | None = None) -> MetricsReport:
        """Evaluate ``instances`` (default: ``load_instances()``) and write the run directory."""
        if self.spec.extra is not None:
            require_extra(self.spec.extra, f"--method {self.config.method}")  # before the first request
        if instances is None:
            instances = self.load_instances()
        if self.spec.uses_anchor_config and self.workers == 1 and self.ray is None:
            # ANCHOR's methods embed from their first request on: start loading the model now, in its
            # helper process, while this one sets up the client (the SDK alone takes half a second).
            offload.warm_up(self._embedder)
        self.client = make_client(self.settings, backends=self.backends)
        try:
            await self.client.ensure_ready()
            self.config.llm["model"] = self.client.backend.model
            if self.backends is not None:
                self.config.llm["backend"] = self.client.backend.kind  # not the one the settings would name
            if self.calibrator is not None:
                c = self.config
                mismatch = self.calibrator.mismatch(model=c.llm["model"],
                                                    method=method_label(c.method, c.stage, c.ablations), kind=c.kind)
                if mismatch:
                    warnings.warn(CalibratorMismatchWarning(mismatch), stacklevel=2)
            if self.estimator_settings is not None:
                # The estimator's requests go to the same ledger, so calls.jsonl and the cost count them.
                self.estimator = make_client(self.estimator_settings, ledger=self.client.ledger, backends=self.backends)
                await self.estimator.ensure_ready()
                self.config.estimator = {**(self.config.estimator or {}), "model": self.estimator.backend.model}
                if self.backends is not None:
                    self.config.estimator["backend"] = self.estimator.backend.kind
            if self.spec.uses_anchor_config:
                await self._identify_embedder()
            return await self._start(instances)
        finally:
            # Also when the run is refused before it starts (a resume with other settings): the
            # connections opened to ask the server for its model belong to this event loop.
            await self.client.aclose()
            if self.estimator is not None:
                await self.estimator.aclose()

    async def _start(self, instances: list[Instance]) -> MetricsReport:
        """Take the directory's lock, write config.json and run. A start refused before its first instance
        and before anything was recorded (other settings, a pool that cannot start, a lock held by another
        process) leaves the folder as it found it (:class:`~anchor.evaluation.rundir.RunStart`)."""
        start = RunStart(self.directory)
        try:
            start.make_folder()
            with self.directory.lock():
                try:
                    # Under the lock: a start refused because another process runs here leaves config.json as
                    # it is.
                    self.prepare_dir()
                    if self.sample_record is not None:
                        self.directory.record_sample(self.sample_record)
                    self.record_instances(instances)
                    self.pool = self._make_pool(instances)
                    try:
                        await self.pool.start()
                        return await self._run_locked(instances)
                    finally:
                        await self.pool.close()
                except BaseException:
                    if not self.answering:  # a helper may have asked before its records reached calls.jsonl
                        start.take_back()
                    raise
        except BaseException:
            start.remove_folders()  # those this start created, when empty (never the lock holder's)
            raise

    def record_instances(self, instances: list[Instance]) -> None:
        """Keep the instances the run scores in its directory (``instances.jsonl``), for its readers."""
        self.directory.write_instances(instances)

    async def _run_locked(self, instances: list[Instance]) -> MetricsReport:
        assert self.client is not None
        c = self.config
        predictions, traces, calls = self.directory.logs()
        for log in (predictions, traces, calls):
            log.repair()  # the line a killed run left unfinished, before appending
        done = self.directory.latest_predictions()
        traces.read()  # every line checked before the run adds to the file
        calls.read()
        stop_logging = self.client.ledger.subscribe(calls.append)
        stop_watching = self.client.ledger.subscribe(self._watch)
        try:
            if c.negation == "llm" and c.kind == "factcheck":
                instances = await negate_with_llm(self.client, instances)  # type: ignore[arg-type]
            pending = [(r, inst) for r in range(c.runs) for inst in instances
                       if (r, inst.id) not in done or (self.retry_failed and done[(r, inst.id)].status == "failed")]
            self._counts.update(total=len(instances) * c.runs, done=len(instances) * c.runs - len(pending))
            again = {(r, inst.id) for r, inst in pending}
            wanted = {(r, inst.id) for r in range(c.runs) for inst in instances}
            for key, p in done.items():
                if key in wanted and key not in again:
                    self._counts["unknown"] += int(p.unknown)
                    self._counts["failed"] += int(p.status == "failed")
            self._tick(force=True)
            assert self.pool is not None
            pool = self.pool
            limit = asyncio.Semaphore(instance_slots(self.client.concurrency))
            ranks: dict[tuple[int, str], int] = {}

            async def one(r: int, inst: Instance) -> None:
                async with limit:
                    # Scenarios numbered in the order they start: the requests of an earlier one (its
                    # build included, which runs in a copy of this context) get a free slot first.
                    rank = ranks.setdefault((r, scenario_key(inst.scenario)), len(ranks))
                    pred, trace_records = await pool.answer(r, inst, scenario_key(inst.scenario), rank)
                for t in trace_records:
                    traces.append(t)
                predictions.append(pred)
                done[(r, inst.id)] = pred
                self._counts.update(done=1, unknown=int(pred.unknown), failed=int(pred.status == "failed"))
                self._tick(force=True)

            self.answering = bool(pending)
            await chain.gather(*(one(r, inst) for r, inst in pending))
            await pool.settle()
            report = self.compute_metrics(instances, done, self.directory.call_log())
            self.directory.write_metrics(report)
            return report
        finally:
            stop_logging()
            stop_watching()
            predictions.close()
            traces.close()
            calls.close()

    def worker_setup(self, instances: Sequence[Instance] = ()) -> WorkerSetup:
        """What a worker needs to answer this run's instances (the run's configuration as resolved)."""
        c = self.config
        source = c.spaces_source(self.out_dir)
        cal = self.calibrator
        return WorkerSetup(
            config=c, settings=self.settings, artefacts=self.out_dir, anchor_config=self.anchor_config,
            estimator_settings=self.estimator_settings, calibrator=cal.file if cal else None,
            calibrator_path=cal.path if cal else None, calibrator_sha256=cal.sha256 if cal else None,
            reuse=source, publish=c.artefact_keys == "content", backends=self.backends,
            conditions=_conditions_by_scenario(instances) if self.spec.trains_on_conditions else {})

    def scenario_groups(self, instances: Sequence[Instance]) -> int:
        """Scenarios among ``instances``: the most helpers that can have work (a scenario's instances go to one)."""
        return len({scenario_key(inst.scenario) for inst in instances})

    def _helpers(self, instances: Sequence[Instance]) -> int:
        """``--workers``, capped at the scenario groups and, for processes, the cores: a helper more would sit
        idle (or wait for a core) and only cost its start-up. A cap is said in one line (``WorkersCapped``)."""
        asked = self.workers
        if asked <= 1:
            return asked  # one process, or (0, with Ray) one actor per CPU of the cluster
        limits = [(self.scenario_groups(instances), "scenario group(s) in the run, each answered by one helper")]
        if self.ray is None:
            limits.append((os.cpu_count() or 1, "core(s) on this machine"))
        bound, why = min(limits, key=lambda limit: limit[0])
        if asked <= bound:
            return asked
        used = max(1, bound)
        kind = "Ray actor(s)" if self.ray is not None else "helper process(es)" if used > 1 else "process"
        warnings.warn(WorkersCapped(f"--workers {asked}: {used} {kind} started, as there are {bound} {why}"),
                      stacklevel=2)
        return used

    def _make_pool(self, instances: Sequence[Instance]) -> WorkerPool:
        """Where the instances are answered: here (one worker), in helper processes, or on Ray."""
        setup = self.worker_setup(instances)
        assert self.client is not None
        helpers = self._helpers(instances)
        if self.ray is not None:
            return RayPool(setup, helpers, self.client.ledger, self.ray)
        if helpers > 1:
            return ProcessPool(setup, helpers, self.client.ledger)
        # The embedder is made when a method first embeds: a run of a method that embeds nothing needs no MiniLM.
        return LocalPool(InstanceWorker(setup, client=self.client, estimator=self.estimator,
                                        embedder=lambda: self._embedder))

    def _watch(self, record: CallRecord) -> None:
        """Keep the progress line alive while requests fail and back off (nothing else moves then)."""
        if record.outcome == "transient_error":
            self._counts["retries"] += 1
            self._retry = f"retrying: {self._counts['retries']} failed attempt(s), last: {record.detail[:80]}"
            self._tick(force=True)  # rare, and the only sign of life during an outage: always shown
            return
        if record.outcome == "ok" and self._retry:
            self._retry = ""
            self._tick(force=True)
            return
        self._tick()

    def _tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_tick < 0.2:
            return
        self._last_tick = now
        total = self.client.ledger.tally() if self.client else empty_cost("total")
        # The failed predictions are among the unknown ones (as in metrics.json's runs[].unknown).
        info: dict[str, object] = {"unknown": f"{self._counts['unknown']} ({self._counts['failed']} failed)",
                                   "requests": total.logical_requests, "cached": total.cache_hits,
                                   "tokens": total.prompt_tokens + total.completion_tokens}
        if self._retry:
            info["retry"] = self._retry
        self.report(ProgressEvent("instances", self._counts["done"], self._counts["total"], "", info))

    def compute_metrics(self, instances: Sequence[Instance], done: dict[tuple[int, str], Prediction],
                        calls: Iterable[CallRecord] = ()) -> MetricsReport:
        """The run's ``MetricsReport`` (see :mod:`anchor.evaluation.runner.scoring`)."""
        stores = self.pool.stores() if self.pool is not None else {}
        scorer = RunScorer(self.config, self.spec, self.anchor_config, stores, self.data, self.sample_record)
        return scorer.report(instances, done, calls)


def _conditions_by_scenario(instances: Sequence[Instance]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for inst in instances:
        conds = (inst.condition1, inst.condition2) if isinstance(inst, PairwiseInstance) else (inst.condition,)
        bucket = out.setdefault(scenario_key(inst.scenario), [])
        bucket.extend(c for c in conds if c not in bucket)
    return out
