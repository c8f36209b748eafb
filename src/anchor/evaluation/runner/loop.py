"""Evaluation runs: resumable, repeatable over seeds, with metrics and exact costs on disk.

A run directory holds ``config.json`` (written first), ``predictions.jsonl`` (one line appended and
flushed per finished instance), ``traces.jsonl`` (the audit trail of each answered condition, for
methods that have one), ``calls.jsonl`` (every LLM request and cache hit as it happens), per-scenario
artefacts such as ``spaces/`` (ANCHOR's factor spaces) and finally ``metrics.json``.

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
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from anchor import offload, prompts
from anchor.calibration.contract import CalibratorMismatchWarning, method_label
from anchor.calibration.registry import FileCalibrator
from anchor.embed import Embedder, embedder_identity
from anchor.embed_server import make_embedder
from anchor.evaluation.datasets.factcheck import FactcheckData
from anchor.evaluation.datasets.instances import DecisionInstance, PairwiseInstance, scenario_key
from anchor.evaluation.datasets.sampling import SampleRecord
from anchor.evaluation.datasets.selection import record_sample, select_instances
from anchor.evaluation.methods.artefacts import INSTANCE_FAILURES, ArtefactFailed, ArtefactStore
from anchor.evaluation.methods.contract import Estimate, Method, MethodContext, PairJudge
from anchor.evaluation.methods.registry import METHODS, build_method
from anchor.evaluation.metrics import pairwise_prediction
from anchor.evaluation.results import MetricsReport, Prediction, RunConfig, SideRecord, TraceRecord
from anchor.evaluation.runner.errors import EvalError
from anchor.evaluation.runner.identity import check_resumable
from anchor.evaluation.runner.scoring import RunScorer
from anchor.evaluation.runner.store import DirectoryLock, JsonLines
from anchor.extras import require_extra
from anchor.files import write_atomic
from anchor.llm import chain
from anchor.llm.client import LLMClient
from anchor.llm.ledger import CallRecord, summarize
from anchor.llm.settings import LLMSettings, make_client
from anchor.pipeline import AnchorConfig
from anchor.progress import ProgressEvent, Reporter, silent
from anchor.types import CalibratedProbability, Scenario, StageCost

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
        self.settings = settings
        self.anchor_config = anchor_config
        self.report = report
        self.retry_failed = retry_failed
        self.estimator_settings = estimator_settings
        self.calibrator = calibrator
        """Applied to every P(O1) the method gives (the raw one is kept beside it); see ``_side``."""
        if calibrator is not None and config.calibrator is None:
            config.calibrator = calibrator.describe()
        self.client: LLMClient | None = None
        self.estimator: LLMClient | None = None
        self._stores: dict[str, ArtefactStore[Any]] = {}
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
        """Refuse a run directory that holds a run with other settings (it is left as it is)."""
        path = self.out_dir / "config.json"
        if path.exists():
            check_resumable(path, self.config.model_dump(mode="json"), self.out_dir)

    def prepare_dir(self) -> None:
        """Create the run directory and its config.json, or check that it holds this same run."""
        self.check_dir()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        # Rewritten on every start (of this same run) so the recorded command and connection details are the latest.
        write_atomic(self.out_dir / "config.json", self.config.model_dump_json(indent=2))

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

    def _store(self, kind: str, load: Callable[[Path], Any], save: Callable[[Any, Path], Any],
               uses: Callable[[Any], dict[str, str]] | None = None) -> ArtefactStore[Any]:
        store = self._stores.get(kind)
        if store is None:
            source = self.config.spaces_source(self.out_dir)
            reuse = source / kind if source is not None else None
            store = self._stores[kind] = ArtefactStore(self.out_dir / kind, load=load, save=save, reuse_from=reuse,
                                                       uses=uses)
        return store

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
        if self.spec.uses_anchor_config:
            # ANCHOR's methods embed from their first request on: start loading the model now, in its
            # helper process, while this one sets up the client (the SDK alone takes half a second).
            offload.warm_up(self._embedder)
        self.client = make_client(self.settings)
        try:
            await self.client.ensure_ready()
            self.config.llm["model"] = self.client.backend.model
            if self.calibrator is not None:
                c = self.config
                mismatch = self.calibrator.mismatch(model=c.llm["model"],
                                                    method=method_label(c.method, c.stage, c.ablations), kind=c.kind)
                if mismatch:
                    warnings.warn(CalibratorMismatchWarning(mismatch), stacklevel=2)
            if self.estimator_settings is not None:
                # The estimator's requests go to the same ledger, so calls.jsonl and the cost count them.
                self.estimator = make_client(self.estimator_settings, ledger=self.client.ledger)
                await self.estimator.ensure_ready()
                self.config.estimator = {**(self.config.estimator or {}), "model": self.estimator.backend.model}
            if self.spec.uses_anchor_config:
                await self._identify_embedder()
            self.out_dir.mkdir(parents=True, exist_ok=True)
            with DirectoryLock(self.out_dir):
                # Under the lock: a start refused because another process runs here leaves config.json as it is.
                self.prepare_dir()
                if self.sample_record is not None:
                    record_sample(self.out_dir, self.sample_record)
                return await self._run_locked(instances)
        finally:
            # Also when the run is refused before it starts (a resume with other settings): the
            # connections opened to ask the server for its model belong to this event loop.
            await self.client.aclose()
            if self.estimator is not None:
                await self.estimator.aclose()

    async def _run_locked(self, instances: list[Instance]) -> MetricsReport:
        assert self.client is not None
        c = self.config
        predictions = JsonLines(self.out_dir / "predictions.jsonl", Prediction, durable=True)
        traces = JsonLines(self.out_dir / "traces.jsonl", TraceRecord)
        calls = JsonLines(self.out_dir / "calls.jsonl", CallRecord)
        done = {(p.run, p.id): p for p in predictions.read()}
        traces.read()  # drops a torn last line before appending
        calls.read()
        stop_logging = self.client.ledger.subscribe(calls.append)
        stop_watching = self.client.ledger.subscribe(self._watch)
        try:
            if c.negation == "llm" and c.kind == "factcheck":
                instances = await self._llm_negations(instances)  # type: ignore[arg-type]
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
            self._scenario_conditions = _conditions_by_scenario(instances)
            methods = [self._method(r) for r in range(c.runs)]
            limit = asyncio.Semaphore(instance_slots(self.client.concurrency))

            async def one(r: int, inst: Instance) -> None:
                async with limit:
                    pred, trace_records = await self._evaluate(r, inst, methods[r])
                for t in trace_records:
                    traces.append(t)
                predictions.append(pred)
                done[(r, inst.id)] = pred
                self._counts.update(done=1, unknown=int(pred.unknown), failed=int(pred.status == "failed"))
                self._tick(force=True)

            await chain.gather(*(one(r, inst) for r, inst in pending))
            report = self.compute_metrics(instances, done, calls.read())
            write_atomic(self.out_dir / "metrics.json", report.model_dump_json(indent=2))
            return report
        finally:
            stop_logging()
            stop_watching()
            predictions.close()
            traces.close()
            calls.close()

    def _method(self, run: int) -> Method | PairJudge:
        assert self.client is not None
        ctx = MethodContext(
            client=self.client.with_seed(self.config.seed + run), base_client=self.client, run=run,
            config=self.config, anchor_config=self.anchor_config, embedder=lambda: self._embedder,
            store=self._store, conditions=self._conditions_of,
            estimator=None if self.estimator is None else self.estimator.with_seed(self.estimator.seed + run),
        )
        return build_method(self.spec, ctx)

    def _conditions_of(self, scenario: Scenario) -> list[str]:
        return list(self._scenario_conditions.get(scenario_key(scenario), []))

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
        total = self.client.ledger.tally() if self.client else StageCost(stage="total")
        # The failed predictions are among the unknown ones (as in metrics.json's runs[].unknown).
        info: dict[str, object] = {"unknown": f"{self._counts['unknown']} ({self._counts['failed']} failed)",
                                   "calls": total.llm_calls, "cached": total.cache_hits,
                                   "tokens": total.prompt_tokens + total.completion_tokens}
        if self._retry:
            info["retry"] = self._retry
        self.report(ProgressEvent("instances", self._counts["done"], self._counts["total"], "", info))

    async def _llm_negations(self, instances: list[DecisionInstance]) -> list[DecisionInstance]:
        assert self.client is not None

        async def negate(inst: DecisionInstance) -> DecisionInstance:
            with self.client.ledger.scope(f"negation:{inst.id}"):  # charged to the claim's scenario
                answer = await self.client.ask(prompts.NEGATE_CLAIM, claim=inst.scenario.outcome1)
            scen = Scenario(text=inst.scenario.text, outcome1=inst.scenario.outcome1, outcome2=answer.negation)
            return inst.model_copy(update={"scenario": scen})

        return list(await chain.gather(*(negate(i) for i in instances)))

    # ------------------------------------------------------------------ one instance

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

    async def _evaluate(self, run: int, inst: Instance, method: Method | PairJudge
                        ) -> tuple[Prediction, list[TraceRecord]]:
        c = self.config
        assert self.client is not None
        started = time.perf_counter()
        chain.reset()  # the instance's chain of dependent requests starts here (plus the builds it waits for)
        pred = Prediction(run=run, id=inst.id, seed=c.seed + run, kind=c.kind)
        traces: list[TraceRecord] = []
        with self.client.ledger.scope(f"instance:{run}:{inst.id}") as records:
            if isinstance(inst, PairwiseInstance):
                pred.human, pred.gold = inst.human, inst.gold
                if isinstance(method, PairJudge):
                    gold_text = inst.scenario.outcome1 if inst.gold == 1 else inst.scenario.outcome2
                    try:
                        pred.choice = await method.compare(inst.scenario, gold_text, inst.condition1, inst.condition2)
                        pred.prediction = pred.choice
                    except INSTANCE_FAILURES as exc:
                        self._fill(pred, [Estimate.failed(exc)])
                else:
                    conditions = (inst.condition1, inst.condition2)
                    estimates = await chain.gather(*(self._side(method, inst.scenario, cond, inst.gold)  # type: ignore[arg-type]
                                                     for cond in conditions))
                    p_gold = [None if e.p_outcome1 is None else (e.p_outcome1 if inst.gold == 1 else 1.0 - e.p_outcome1)
                              for e in estimates]
                    pred.p_gold_1, pred.p_gold_2 = p_gold
                    pred.prediction = pairwise_prediction(pred.p_gold_1, pred.p_gold_2)
                    self._fill(pred, estimates)
                    traces = self._traces(run, inst.id, conditions, estimates, self.calibrator)
            else:
                assert isinstance(method, Method)
                pred.label = inst.label
                estimate = await self._side(method, inst.scenario, inst.condition, inst.label)
                pred.p_outcome1, pred.p_outcome1_raw = estimate.p_outcome1, estimate.p_outcome1_raw
                if estimate.p_outcome1 is not None and c.kind == "factcheck":
                    # The fact-check decision: 'support' (1) only above the decision threshold.
                    pred.prediction = 1 if estimate.p_outcome1 > c.decision_threshold else 2
                elif estimate.p_outcome1 is not None:
                    pred.prediction = 1 if estimate.p_outcome1 > 0.5 else 2 if estimate.p_outcome1 < 0.5 else None
                self._fill(pred, [estimate])
                traces = self._traces(run, inst.id, (inst.condition,), [estimate], self.calibrator)
        pred.unknown = pred.prediction is None
        pred.cost = [c_.model_dump() for c_ in summarize(records)]
        pred.seconds = round(time.perf_counter() - started, 4)
        return pred, traces

    @staticmethod
    def _fill(pred: Prediction, estimates: Sequence[Estimate]) -> None:
        """Per-side records, the instance's status and its error line (which side, and why)."""
        pred.sides = [SideRecord(condition=k, p_outcome1=e.p_outcome1, p_outcome1_raw=e.p_outcome1_raw,
                                 status=e.status, reason=e.reason,
                                 n_factors=e.n_factors, artefact=e.artefact, fallback=e.fallback,
                                 truncated=e.truncated)
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

    @staticmethod
    def _traces(run: int, iid: str, conditions: Sequence[str], estimates: Sequence[Estimate],
                calibrator: FileCalibrator | None = None) -> list[TraceRecord]:
        def calibration(e: Estimate) -> CalibratedProbability | None:
            if calibrator is None or e.p_outcome1_raw is None or e.p_outcome1 is None:
                return None
            return CalibratedProbability(p_raw=e.p_outcome1_raw, p_calibrated=e.p_outcome1, kind=calibrator.kind,
                                         fitted_on=calibrator.file.fitted_on.summary())

        return [TraceRecord(run=run, id=iid, side=k, condition=cond, space=e.artefact, result=e.trace,
                            calibration=calibration(e))
                for k, (cond, e) in enumerate(zip(conditions, estimates, strict=True)) if e.trace is not None]

    def compute_metrics(self, instances: Sequence[Instance], done: dict[tuple[int, str], Prediction],
                        calls: Iterable[CallRecord] = ()) -> MetricsReport:
        """The run's ``MetricsReport`` (see :mod:`anchor.evaluation.runner.scoring`)."""
        scorer = RunScorer(self.config, self.spec, self.anchor_config, self._stores, self.data, self.sample_record)
        return scorer.report(instances, done, calls)


def _conditions_by_scenario(instances: Sequence[Instance]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for inst in instances:
        conds = (inst.condition1, inst.condition2) if isinstance(inst, PairwiseInstance) else (inst.condition,)
        bucket = out.setdefault(scenario_key(inst.scenario), [])
        bucket.extend(c for c in conds if c not in bucket)
    return out
