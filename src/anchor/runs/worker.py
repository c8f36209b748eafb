"""``InstanceWorker``: what answers instances, apart from what decides which to answer.

A worker holds an LLM client, the embedder, the run's methods (one per repetition) and their
per-scenario artefact stores, and turns one piece of :class:`Work` (a repetition and an instance) into
its ``Prediction`` and trace records, which it writes where it is told (:meth:`InstanceWorker.record`:
the run directory's logs, or a shard of its own). The run session decides what to answer; it asks a
worker in its own process (``--workers 1``), in helper processes or on a Ray cluster
(:mod:`anchor.runs.pool`). Everything a worker needs to be built elsewhere is in its picklable
:class:`WorkerSetup`; nothing in it depends on the kind of input (a benchmark's instances or a user's
table): how a probability becomes a decision is its :class:`DecisionRule`, what a prediction carries of
its input is the work's ``stamp``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from anchor.artefacts import INSTANCE_FAILURES, ArtefactFailed, ArtefactStore
from anchor.calibration.contract import CalibratorFile
from anchor.calibration.registry import FileCalibrator
from anchor.compute import offload
from anchor.config import AnchorConfig
from anchor.embedding.embed import Embedder
from anchor.embedding.server import make_embedder
from anchor.llm import chain, parallel
from anchor.llm.client import LLMClient
from anchor.llm.ledger import CostLedger, Subscriber, summarize
from anchor.llm.settings import BackendFactory, LLMSettings, make_client
from anchor.methods.contract import ArtefactKind, Estimate, Method, MethodContext, PairJudge
from anchor.methods.registry import METHODS, build_method
from anchor.rundir.instances import DecisionInstance, Instance, PairwiseInstance
from anchor.rundir.names import PREDICTIONS, TRACES
from anchor.rundir.records import Prediction, RunConfig, SideRecord, TraceRecord
from anchor.types import CalibratedProbability, Scenario, scenario_key


@dataclass(frozen=True)
class DecisionRule:
    """How a P(outcome 1) becomes a decision: outcome 1 above ``threshold``, outcome 2 below it; exactly at
    it, no decision (``tie_unknown``) or outcome 2 (a fact check supports a claim only above its threshold)."""

    threshold: float = 0.5
    tie_unknown: bool = True

    def decide(self, p: float) -> int | None:
        if p > self.threshold:
            return 1
        if p < self.threshold or not self.tie_unknown:
            return 2
        return None

    @staticmethod
    def pair(p_gold_1: float | None, p_gold_2: float | None) -> int | None:
        """Which condition of a pair supports the gold outcome more: 1 or 2, 3 when exactly equally; None
        when a side has no probability (the scores compare them the same way:
        ``anchor.metrics.pairwise_prediction``)."""
        if p_gold_1 is None or p_gold_2 is None:
            return None
        return 1 if p_gold_1 > p_gold_2 else 2 if p_gold_2 > p_gold_1 else 3


@dataclass(frozen=True)
class Work:
    """One thing to answer: repetition ``run`` of ``instance``, whose scenario group is ``group`` (its
    scenario's key); ``stamp`` holds what the prediction carries of its input beyond the instance (a
    predict run's line in the cases file)."""

    run: int
    instance: Instance
    group: str
    stamp: dict[str, Any] | None = None
    text: str | None = None
    """The instance's JSON, when the driver made it already (a predict run writes it to instances.jsonl):
    what travels to a helper process in its place."""

    def wire(self) -> tuple[Any, ...]:
        """This work as it travels to a helper process: the instance as its JSON text, which pickles in a
        fraction of the time a model does (the runner pickles every row it hands out)."""
        text = self.text if self.text is not None else self.instance.model_dump_json()
        return (self.run, isinstance(self.instance, PairwiseInstance), text, self.group, self.stamp)

    @classmethod
    def unwire(cls, wire: tuple[Any, ...]) -> Work:
        run, pairwise, text, group, stamp = wire
        model = PairwiseInstance if pairwise else DecisionInstance
        return cls(run, model.model_validate_json(text), group, stamp)


class WorkSource(Protocol):
    """Work that workers can read for themselves, dealt into shares: every piece of work is in one share,
    and all the work of a scenario group in the same one. A helper process is sent the source (so it
    pickles, holding where to read, never the work) and reads its own share, so that none of the work
    passes through the runner."""

    def share(self, index: int, shares: int) -> AbstractContextManager[Iterable[Work]]:
        """The work of share ``index`` of ``shares``, read as it is taken."""
        ...


@dataclass(frozen=True)
class Answered:
    """What the session learns of an answer (the prediction itself went to the run directory)."""

    run: int
    id: str
    status: str
    unknown: bool


class RecordSink(Protocol):
    """Where a worker's records go, one JSON line each, by the name of their log (``calls.jsonl``, ...)."""

    def write(self, log: str, line: str) -> None: ...


@dataclass(frozen=True)
class WorkerSetup:
    """Everything a worker is built from; picklable, so a worker can be built in another process.

    ``artefacts`` is the folder holding a folder per kind of artefact (a run directory), ``reuse``
    another such folder looked in before building (``--spaces-from``, a predict store), and
    ``publish`` says whether what is built is also added there (artefacts named by content).
    """

    config: RunConfig
    settings: LLMSettings
    artefacts: Path
    anchor_config: AnchorConfig | None = None
    estimator_settings: LLMSettings | None = None
    calibrator: CalibratorFile | None = None
    calibrator_path: Path | None = None
    calibrator_sha256: str | None = None
    reuse: Path | None = None
    publish: bool = False
    conditions: dict[str, list[str]] = field(default_factory=dict)
    """Every condition of each scenario (by key), for methods that learn from them all first."""
    decide: DecisionRule = DecisionRule()
    """How each P(outcome 1) becomes a decision (the driver's: a fact check's threshold, ...)."""
    backends: BackendFactory | None = None
    """Makes the clients' backends from their settings in place of ``make_backend`` (the runner's
    ``backends``); None = the server or embedded model the settings name."""

    def store(self, kind: ArtefactKind) -> ArtefactStore[Any]:
        """A store of ``kind``'s artefacts in ``artefacts`` (looked for in ``reuse`` too)."""
        return ArtefactStore(
            ArtefactStore.kind_folder(self.artefacts, kind.name), load=kind.load, save=kind.save, uses=kind.uses,
            reuse_from=ArtefactStore.kind_folder(self.reuse, kind.name) if self.reuse is not None else None,
            publish=self.publish)

    def file_calibrator(self) -> FileCalibrator | None:
        if self.calibrator is None:
            return None
        return FileCalibrator(self.calibrator, path=self.calibrator_path, sha256=self.calibrator_sha256)


class InstanceWorker:
    """Answers (run, instance) pairs with the run's method. ``client``, ``estimator`` and ``embedder``
    may be handed in (the runner's own, when it answers in its own process); otherwise they are made
    from the setup by :meth:`start`. ``embedder`` is a function that gives it, called the first time a
    method embeds: a method that embeds nothing (vanilla, CoT, ...) never needs the bundled MiniLM.
    ``stores`` are artefact stores (by kind) shared with other workers in this process."""

    def __init__(self, setup: WorkerSetup, *, client: LLMClient | None = None, estimator: LLMClient | None = None,
                 embedder: Callable[[], Embedder] | None = None,
                 stores: dict[str, ArtefactStore[Any]] | None = None) -> None:
        self.setup = setup
        self.config = setup.config
        self.spec = METHODS[setup.config.method]
        self.client = client
        self.estimator = estimator
        self._given_embedder = embedder
        self.calibrator = setup.file_calibrator()
        self.conditions: dict[str, list[str]] = dict(setup.conditions)
        self.stores: dict[str, ArtefactStore[Any]] = stores if stores is not None else {}
        """The artefact stores, by kind; handed in to share them with other workers of the same folder."""
        self._methods: dict[int, Method | PairJudge] = {}
        self._owns_clients = client is None

    async def start(self, subscribers: Sequence[Subscriber] = ()) -> None:
        """Make and ready the clients this worker was not handed (the model is the run's, as resolved);
        ``subscribers`` see every record of their ledger from the first request on."""
        if self.client is None:
            model = self.config.llm.get("model") or self.setup.settings.model
            # Its records go to the worker's shard or stream, not kept here (see CostLedger).
            self.client = make_client(self.setup.settings.model_copy(update={"model": model}),
                                      backends=self.setup.backends, ledger=CostLedger(keep=False))
            for fn in subscribers:
                self.client.ledger.subscribe(fn)
            await self.client.ensure_ready()
            if self.setup.estimator_settings is not None:
                chosen = (self.config.estimator or {}).get("model") or self.setup.estimator_settings.model
                self.estimator = make_client(self.setup.estimator_settings.model_copy(update={"model": chosen}),
                                             ledger=self.client.ledger, backends=self.setup.backends)
                await self.estimator.ensure_ready()
        if self.spec.uses_anchor_config:
            offload.warm_up(self.embedder)

    async def close(self) -> None:
        if self._owns_clients:
            if self.client is not None:
                await self.client.aclose()
            if self.estimator is not None:
                await self.estimator.aclose()

    @functools.cached_property
    def embedder(self) -> Embedder:
        """One embedder (and vector cache) for every space and run: a server's, or MiniLM (loaded on first use)."""
        return self._given_embedder() if self._given_embedder is not None else make_embedder(self.setup.settings)

    # ------------------------------------------------------------------ artefacts and methods

    def store(self, kind: ArtefactKind) -> ArtefactStore[Any]:
        found = self.stores.get(kind.name)
        if found is None:
            found = self.stores[kind.name] = self.setup.store(kind)
        return found

    def all_stores(self) -> dict[str, ArtefactStore[Any]]:
        """A store for every kind of artefact the method keeps, made now if no instance has asked for one yet
        (as the helper processes' courier makes them): a resumed run with nothing left to answer must still
        find the artefacts its predictions name, to cost those it took from a shared store."""
        for kind in self.spec.artefacts():
            self.store(kind)
        return self.stores

    def method(self, run: int) -> Method | PairJudge:
        found = self._methods.get(run)
        if found is None:
            assert self.client is not None, "start() the worker first"
            ctx = MethodContext(
                client=self.client.with_seed(self.config.seed + run), base_client=self.client, run=run,
                config=self.config, anchor_config=self.setup.anchor_config, embedder=lambda: self.embedder,
                store=self.store, conditions=self._conditions_of,
                estimator=None if self.estimator is None else self.estimator.with_seed(self.estimator.seed + run))
            found = self._methods[run] = build_method(self.spec, ctx)
        return found

    def _conditions_of(self, scenario: Scenario) -> list[str]:
        return list(self.conditions.get(scenario_key(scenario), []))

    def built(self) -> dict[str, list[str]]:
        """The keys of the artefacts built so far, by kind."""
        return {kind: list(store.built) for kind, store in self.stores.items() if store.built}

    # ------------------------------------------------------------------ one instance

    async def evaluate(self, work: Work, rank: int = 0) -> tuple[Prediction, list[TraceRecord]]:
        """The prediction of ``work``, with the trace of each answered condition; its requests wait for a
        free slot with priority ``rank`` (see :mod:`anchor.llm.parallel`)."""
        with parallel.priority(rank):
            return await self._evaluate(work)

    async def record(self, work: Work, sink: RecordSink, rank: int = 0) -> Answered:
        """Answer ``work`` and write its traces, then its prediction, to ``sink``."""
        pred, traces = await self.evaluate(work, rank)
        for trace in traces:
            sink.write(TRACES, trace.model_dump_json())
        sink.write(PREDICTIONS, pred.model_dump_json())
        return Answered(run=pred.run, id=pred.id, status=pred.status, unknown=pred.unknown)

    async def _evaluate(self, work: Work) -> tuple[Prediction, list[TraceRecord]]:
        c, run, inst = self.config, work.run, work.instance
        method = self.method(run)
        assert self.client is not None
        started = time.perf_counter()
        chain.reset()  # the instance's chain of dependent requests starts here (plus the builds it waits for)
        pred = Prediction(run=run, id=inst.id, seed=c.seed + run, kind=c.kind, **(work.stamp or {}))
        traces: list[TraceRecord] = []
        with self.client.ledger.scope(f"instance:{run}:{inst.id}") as records:
            if isinstance(inst, PairwiseInstance):
                traces = await self._pair(pred, method, inst)
            else:
                assert isinstance(method, Method)
                pred.label = inst.label
                estimate = await self._side(method, inst.scenario, inst.condition, inst.label)
                pred.p_outcome1, pred.p_outcome1_raw = estimate.p_outcome1, estimate.p_outcome1_raw
                pred.p_outcome2 = None if estimate.p_outcome1 is None else 1.0 - estimate.p_outcome1
                if estimate.p_outcome1 is not None:
                    pred.prediction = self.setup.decide.decide(estimate.p_outcome1)
                fill(pred, [estimate])
                traces = trace_records(run, inst.id, (inst.condition,), [estimate], self.calibrator)
        pred.unknown = pred.prediction is None
        pred.cost = [c_.model_dump() for c_ in summarize(records)]
        pred.seconds = round(time.perf_counter() - started, 4)
        return pred, traces

    async def _pair(self, pred: Prediction, method: Method | PairJudge, inst: PairwiseInstance) -> list[TraceRecord]:
        """A pair's answer: a judge's choice, or each condition's P(gold outcome) compared."""
        pred.human, pred.gold = inst.human, inst.gold
        if isinstance(method, PairJudge):
            try:
                pred.choice = await method.compare(inst.scenario, inst.gold_outcome, inst.condition1, inst.condition2)
                pred.prediction = pred.choice
            except INSTANCE_FAILURES as exc:
                fill(pred, [Estimate.failed(exc)])
            return []
        conditions = (inst.condition1, inst.condition2)
        estimates = await chain.gather(*(self._side(method, inst.scenario, cond, inst.gold) for cond in conditions))
        p_gold = [None if e.p_outcome1 is None else (e.p_outcome1 if inst.gold == 1 else 1.0 - e.p_outcome1)
                  for e in estimates]
        pred.p_gold_1, pred.p_gold_2 = p_gold
        pred.prediction = DecisionRule.pair(pred.p_gold_1, pred.p_gold_2)
        fill(pred, estimates)
        return trace_records(pred.run, inst.id, conditions, estimates, self.calibrator)

    async def _side(self, method: Method, scenario: Scenario, condition: str, gold: int | None) -> Estimate:
        try:
            estimate = await method.estimate(scenario, condition, gold)
        except (ArtefactFailed, *INSTANCE_FAILURES) as exc:
            return Estimate.failed(exc)
        if self.calibrator is None or estimate.p_outcome1 is None:
            # An unknown stays unknown: the calibrator maps answers, it never makes or removes one.
            return estimate
        return estimate.model_copy(update={"p_outcome1": self.calibrator.calibrate(estimate.p_outcome1),
                                           "p_outcome1_raw": estimate.p_outcome1})


def fill(pred: Prediction, estimates: Sequence[Estimate]) -> None:
    """Per-side records, the instance's status and its error line (which side, and why)."""
    pred.sides = [SideRecord(condition=k, p_outcome1=e.p_outcome1, p_outcome1_raw=e.p_outcome1_raw,
                             status=e.status, reason=e.reason,
                             n_factors=e.n_factors, artefact=e.artefact, fallback=e.fallback,
                             truncated=e.truncated, factors=e.factors)
                  for k, e in enumerate(estimates, 1)]
    pred.truncated = any(e.truncated is not None for e in estimates)
    statuses = {e.status for e in estimates}
    pred.status = "failed" if "failed" in statuses else "abstained" if "abstained" in statuses else "ok"
    counts = [e.n_factors for e in estimates]
    if any(n is not None for n in counts):
        pred.n_factors = [n or 0 for n in counts]
    problems = [(k, e) for k, e in enumerate(estimates, 1) if e.status != "ok" and e.reason]
    if len(estimates) == 1:
        pred.error = problems[0][1].reason if problems else None
    else:
        pred.error = "; ".join(f"condition {k} {e.status}: {e.reason}" for k, e in problems) or None


def trace_records(run: int, iid: str, conditions: Sequence[str], estimates: Sequence[Estimate],
                  calibrator: FileCalibrator | None = None) -> list[TraceRecord]:
    """The trace record of each condition the method left an audit trail for."""
    def calibration(e: Estimate) -> CalibratedProbability | None:
        if calibrator is None or e.p_outcome1_raw is None or e.p_outcome1 is None:
            return None
        return CalibratedProbability(p_raw=e.p_outcome1_raw, p_calibrated=e.p_outcome1, kind=calibrator.kind,
                                     fitted_on=calibrator.file.fitted_on.summary())

    return [TraceRecord(run=run, id=iid, side=k, condition=cond, space=e.artefact, result=e.trace,
                        calibration=calibration(e))
            for k, (cond, e) in enumerate(zip(conditions, estimates, strict=True)) if e.trace is not None]
