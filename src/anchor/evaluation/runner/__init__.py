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
import fcntl
import functools
import hashlib
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from anchor import __version__, offload, prompts
from anchor.embed import Embedder
from anchor.embed_server import make_embedder
from anchor.evaluation.cost.attribution import run_critical_path
from anchor.evaluation.datasets import (
    DATASET_NAMES,
    DecisionInstance,
    FactcheckData,
    PairwiseInstance,
    bundled_file,
    is_factcheck_dataset,
)
from anchor.evaluation.datasets.sampling import SampleRecord
from anchor.evaluation.datasets.selection import (
    data_summary,
    record_sample,
    resolve_sample,
    sample_summary,
    select_instances,
)
from anchor.evaluation.methods import (
    INSTANCE_FAILURES,
    METHODS,
    ArtefactFailed,
    ArtefactStore,
    Estimate,
    Method,
    MethodContext,
    PairJudge,
    build_method,
    reused_artefacts,
)
from anchor.evaluation.metrics import (
    brier_score,
    decision_accuracy,
    expected_calibration_error,
    factcheck_metrics,
    mean_std,
    pairwise_metrics,
    pairwise_prediction,
    reliability_bins,
)
from anchor.evaluation.results import (
    METRIC_KEYS,
    CostSummary,
    Kind,
    MetricsReport,
    Prediction,
    RunConfig,
    SideRecord,
    TraceRecord,
)
from anchor.files import write_atomic
from anchor.llm import chain
from anchor.llm.client import LLMClient
from anchor.llm.errors import AnchorError
from anchor.llm.ledger import CallRecord, merge_costs, summarize
from anchor.llm.ledger import total as ledger_total
from anchor.llm.settings import LLMSettings, make_client
from anchor.pipeline import AnchorConfig
from anchor.progress import ProgressEvent, Reporter, silent
from anchor.types import BuildParams, Scenario, StageCost, with_legacy_build

Instance = DecisionInstance | PairwiseInstance

#: Paper Appendix B: factor-generation sizes per dataset group.
BUILD_SIZES: dict[str, dict[str, int]] = {
    "large": {"n_target": 80, "batch_size": 10, "max_rounds": 20},  # Common2Sense, Plasma
    "small": {"n_target": 40, "batch_size": 5, "max_rounds": 10},  # Today, fact checking
    # For the embedded 135M model, which adds a factor or two per round at best: a paper-size
    # build takes ~3 minutes per scenario there and yields no better a space.
    "quick": {"n_target": 16, "batch_size": 4, "max_rounds": 4},
}
#: RunConfig fields that do not define a run: a rerun may change them and still resume.
NOT_IDENTITY = {"command", "data_path", "anchor_version"}
#: Of the LLM description, only these define a run (not where the server listens or how the key arrives).
LLM_IDENTITY = ("backend", "model", "seed", "context_tokens")
#: RunConfig fields added later with a None default: a config.json written before them reads as None.
MAX_LISTED_FAILURES = 50


class EvalError(AnchorError):
    """An evaluation that cannot start or go on (bad arguments, a directory holding another run)."""


def instance_slots(concurrency: int) -> int:
    """Instances evaluated at once when the client allows ``concurrency`` requests in flight.

    An instance mostly waits on one request at a time (abduction rounds depend on each other), and
    now and then computes instead (embedding, clustering), so it takes about two instances per
    request slot to keep the server busy. More would only make every instance finish later.
    """
    return max(2, 2 * concurrency)


def dataset_kind(name: str) -> Kind:
    if name == "common2sense-pairwise":
        return "pairwise"
    if is_factcheck_dataset(name):
        return "factcheck"
    return "decision"


def default_build_params(dataset: str, seed: int = 0, sizes: str = "paper") -> BuildParams:
    """The paper's per-dataset sizes (``sizes="paper"``) or the quick ones (``"quick"``)."""
    if sizes == "quick":
        return BuildParams(**BUILD_SIZES["quick"], seed=seed)
    if sizes != "paper":
        raise EvalError(f"unknown build sizes {sizes!r}; use 'paper' or 'quick'")
    size = BUILD_SIZES["large" if dataset in ("common2sense-pairwise", "common2sense", "plasma") else "small"]
    return BuildParams(**size, seed=seed)


def file_sha256(dataset: str, path: Path | None) -> str:
    data = Path(path).read_bytes() if path is not None else bundled_file(dataset).read_bytes()
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- append-only logs

M = TypeVar("M", bound=BaseModel)


class JsonLines(Generic[M]):
    """An append-only JSON-lines file of one record type, tolerant of a torn last line.

    Records are flushed as they are written (a killed process loses at most the line it was
    writing); ``durable=True`` also fsyncs each one.
    """

    def __init__(self, path: Path, model: type[M], *, durable: bool = False) -> None:
        self.path = path
        self.model = model
        self.durable = durable
        self._lock = threading.Lock()
        self._fh: IO[str] | None = None

    def read(self) -> list[M]:
        if not self.path.exists():
            return []
        raw = self.path.read_bytes()
        good = raw
        if raw and not raw.endswith(b"\n"):
            good = raw[: raw.rfind(b"\n") + 1]  # drop the line a killed process was writing
            with open(self.path, "r+b") as fh:
                fh.truncate(len(good))
        out: list[M] = []
        for n, line in enumerate(good.decode("utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append(self.model.model_validate_json(line))
            except ValidationError as exc:
                raise EvalError(f"{self.path}, line {n}: not a {self.model.__name__} record "
                                f"({exc.errors()[0].get('msg')}); move the file away to start the run afresh") from exc
        return out

    def append(self, record: M) -> None:
        line = record.model_dump_json() + "\n"
        with self._lock:
            if self._fh is None:
                self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
            self._fh.write(line)
            self._fh.flush()
            if self.durable:
                os.fsync(self._fh.fileno())

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


class DirectoryLock:
    """An exclusive lock on a run directory, so two processes never write one run at once."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / ".lock"
        self._fh: IO[str] | None = None

    def __enter__(self) -> DirectoryLock:
        self._fh = open(self.path, "w")  # noqa: SIM115 - closed in __exit__
        try:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._fh.close()
            raise EvalError(f"{self.path.parent} is in use by another anchor process; wait for it to finish "
                            "or use another --out") from None
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._fh is not None
        fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
        self._fh.close()


# --------------------------------------------------------------------------- run identity


def _identity(config: dict[str, Any]) -> dict[str, Any]:
    """The parts of a run configuration that must match to resume it.

    The configuration is read through ``RunConfig`` and ``AnchorConfig`` first, so that a setting
    added after a run was written counts as its default there (an older run directory stays
    resumable as long as the new setting is left at its default). The abduction window is the
    exception: a run written before it existed built its spaces one round at a time, and reads so.
    """
    config = _with_defaults(config)
    out = {k: v for k, v in config.items() if k not in NOT_IDENTITY}
    llm = out.get("llm") or {}
    out["llm"] = {k: llm.get(k) for k in LLM_IDENTITY}
    if out.get("estimator"):
        out["estimator"] = {k: out["estimator"].get(k) for k in LLM_IDENTITY}
    return out


def _with_defaults(config: dict[str, Any]) -> dict[str, Any]:
    try:
        filled = RunConfig.model_validate(config).model_dump(mode="json")
        anchor = filled.get("anchor_config")
        if isinstance(anchor, dict):
            anchor = {**anchor, "build": with_legacy_build(anchor["build"])} if "build" in anchor else anchor
            filled["anchor_config"] = AnchorConfig.model_validate(anchor).model_dump(mode="json")
    except ValidationError:
        return config  # compared as written; the difference is reported field by field
    return filled


def _first_difference(old: Any, new: Any, path: str = "") -> tuple[str, Any, Any] | None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            found = _first_difference(old.get(key, "<absent>"), new.get(key, "<absent>"),
                                      f"{path}.{key}" if path else str(key))
            if found:
                return found
        return None
    return None if old == new else (path, old, new)


# --------------------------------------------------------------------------- the runner


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

    def prepare_dir(self) -> None:
        """Create the run directory and its config.json, or check that it holds this same run."""
        path = self.out_dir / "config.json"
        new = self.config.model_dump(mode="json")
        if path.exists():
            try:
                old = json.loads(path.read_text(encoding="utf-8"))
                if not isinstance(old, dict):
                    raise ValueError("not a JSON object")
            except (ValueError, UnicodeDecodeError) as exc:
                raise EvalError(f"{path} is not a run configuration ({exc}); move it away to start afresh") from exc
            diff = _first_difference(_identity(old), _identity(new))
            if diff is not None:
                field, was, now = diff
                raise EvalError(f"{self.out_dir} holds a run with other settings: {field} was {was!r}, now {now!r}; "
                                "use another --out, or the same settings to resume it")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        # Rewritten on every start so the recorded command and connection details are the latest.
        write_atomic(path, self.config.model_dump_json(indent=2))

    def _store(self, kind: str, load: Callable[[Path], Any], save: Callable[[Any, Path], Any],
               uses: Callable[[Any], dict[str, str]] | None = None) -> ArtefactStore[Any]:
        store = self._stores.get(kind)
        if store is None:
            reuse = Path(self.config.spaces_from) / kind if self.config.spaces_from else None
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
        if instances is None:
            instances = self.load_instances()
        if self.spec.uses_anchor_config:
            # ANCHOR's methods embed from their first request on: start loading the model now, in its
            # helper process, while this one sets up the client (the SDK alone takes half a second).
            offload.warm_up(self._embedder)
        self.client = make_client(self.settings)
        await self.client.ensure_ready()
        self.config.llm["model"] = self.client.backend.model
        if self.estimator_settings is not None:
            # The estimator's requests go to the same ledger, so calls.jsonl and the cost count them.
            self.estimator = make_client(self.estimator_settings, ledger=self.client.ledger)
            await self.estimator.ensure_ready()
            self.config.estimator = {**(self.config.estimator or {}), "model": self.estimator.backend.model}
        self.prepare_dir()
        with DirectoryLock(self.out_dir):
            if self.sample_record is not None:
                record_sample(self.out_dir, self.sample_record)
            return await self._run_locked(instances)

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
            await self.client.aclose()
            if self.estimator is not None:
                await self.estimator.aclose()

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
        from anchor.evaluation.datasets import scenario_key

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
        info: dict[str, object] = {"unknown": self._counts["unknown"], "failed": self._counts["failed"],
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
            return await method.estimate(scenario, condition, gold)
        except (ArtefactFailed, *INSTANCE_FAILURES) as exc:
            return Estimate.failed(exc)

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
                    traces = self._traces(run, inst.id, conditions, estimates)
            else:
                assert isinstance(method, Method)
                pred.label = inst.label
                estimate = await self._side(method, inst.scenario, inst.condition, inst.label)
                pred.p_outcome1 = estimate.p_outcome1
                if estimate.p_outcome1 is not None and c.kind == "factcheck":
                    # The fact-check decision: 'support' (1) only above the decision threshold.
                    pred.prediction = 1 if estimate.p_outcome1 > c.decision_threshold else 2
                elif estimate.p_outcome1 is not None:
                    pred.prediction = 1 if estimate.p_outcome1 > 0.5 else 2 if estimate.p_outcome1 < 0.5 else None
                self._fill(pred, [estimate])
                traces = self._traces(run, inst.id, (inst.condition,), [estimate])
        pred.unknown = pred.prediction is None
        pred.cost = [c_.model_dump() for c_ in summarize(records)]
        pred.seconds = round(time.perf_counter() - started, 4)
        return pred, traces

    @staticmethod
    def _fill(pred: Prediction, estimates: Sequence[Estimate]) -> None:
        """Per-side records, the instance's status and its error line (which side, and why)."""
        pred.sides = [SideRecord(condition=k, p_outcome1=e.p_outcome1, status=e.status, reason=e.reason,
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
    def _traces(run: int, iid: str, conditions: Sequence[str], estimates: Sequence[Estimate]) -> list[TraceRecord]:
        return [TraceRecord(run=run, id=iid, side=k, condition=cond, space=e.artefact, result=e.trace)
                for k, (cond, e) in enumerate(zip(conditions, estimates, strict=True)) if e.trace is not None]

    # ------------------------------------------------------------------ metrics

    def compute_metrics(self, instances: Sequence[Instance], done: dict[tuple[int, str], Prediction],
                        calls: Iterable[CallRecord] = ()) -> MetricsReport:
        c = self.config
        ids = [inst.id for inst in instances]
        runs: list[dict[str, Any]] = []
        cal_labels: list[int] = []
        cal_probs: list[float | None] = []
        per_run_cal: list[tuple[float | None, float | None]] = []
        for r in range(c.runs):
            preds = [done[(r, i)] for i in ids if (r, i) in done]
            entry: dict[str, Any] = {"run": r, "seed": c.seed + r, "n": len(preds),
                                     "unknown": sum(p.unknown for p in preds),
                                     "failed": sum(p.status == "failed" for p in preds)}
            labels: list[int] = []
            probs: list[float | None] = []
            if c.kind == "pairwise":
                human = [p.human for p in preds]
                if self.spec.pairwise_only:
                    all_pred = covered = [p.choice for p in preds]
                else:
                    all_pred = [pairwise_prediction(p.p_gold_1, p.p_gold_2, unknown_as=0.5) for p in preds]
                    covered = [pairwise_prediction(p.p_gold_1, p.p_gold_2) for p in preds]
                    for p in preds:
                        for pg in (p.p_gold_1, p.p_gold_2):
                            labels.append(p.gold)
                            probs.append(None if pg is None else (pg if p.gold == 1 else 1.0 - pg))
                m_all = pairwise_metrics(human, all_pred)
                m_cov = pairwise_metrics(human, covered)
                entry.update({k: m_all[k] for k in METRIC_KEYS["pairwise"]})
                entry["coverage"] = m_cov["coverage"]
                entry["covered"] = {k: m_cov[k] for k in ("f1_context1", "f1_context2", "f1_same", "f1_micro")}
                entry["n_covered"] = m_cov["n_covered"]
            else:
                labels = [p.label for p in preds]
                probs = [p.p_outcome1 for p in preds]
                if c.kind == "factcheck":
                    m = factcheck_metrics(labels, probs, threshold=c.decision_threshold)
                else:
                    m = decision_accuracy(labels, probs)
                entry.update({k: m.get(k) for k in METRIC_KEYS[c.kind]})
            if labels:
                b = brier_score(labels, probs)
                e = expected_calibration_error(labels, probs)
                per_run_cal.append((b["brier"], e["ece"]))
                entry["brier"], entry["ece"] = b["brier"], e["ece"]
                cal_labels.extend(labels)
                cal_probs.extend(probs)
            runs.append(entry)

        keys = list(METRIC_KEYS[c.kind])
        flat_runs = [dict(r) for r in runs]
        if c.kind == "pairwise":
            for fr in flat_runs:
                for k, v in fr.get("covered", {}).items():
                    fr[f"covered_{k}"] = v
            keys += ["covered_f1_context1", "covered_f1_context2", "covered_f1_same", "covered_f1_micro"]
        mean: dict[str, float | None] = {}
        std: dict[str, float | None] = {}
        for k in keys:
            vals = [v for v in (fr.get(k) for fr in flat_runs) if v is not None]
            if vals:
                mean[k], std[k] = mean_std(vals)
            else:
                mean[k] = std[k] = None

        calibration = None
        if cal_labels:
            briers = [b for b, _ in per_run_cal if b is not None]
            eces = [e for _, e in per_run_cal if e is not None]
            bins = reliability_bins(cal_labels, cal_probs)
            calibration = {
                "event": "outcome1" if c.kind != "pairwise" else "the gold outcome, per condition (as P(outcome1))",
                "brier": sum(briers) / len(briers) if briers else None,
                "ece": sum(eces) / len(eces) if eces else None,
                "n_skipped": sum(1 for p in cal_probs if p is None),
                "reliability": [{"lo": b["lo"], "hi": b["hi"], "count": b["count"],
                                 "mean_confidence": b["mean_confidence"], "observed": b["observed_frequency"]}
                                for b in bins],
            }

        final = [done[(r, i)] for r in range(c.runs) for i in ids if (r, i) in done]
        failed = [p for p in final if p.status == "failed"]
        abstained = [p for p in final if p.status == "abstained"]
        fallbacks = [p for p in final if any(s.fallback and s.status == "ok" for s in p.sides)]
        calls = list(calls)
        cost, reused, cost_scope = self._cost(final, calls)
        per_inst = None
        if final:
            t = cost["total"]
            n = len(final)
            per_inst = CostSummary(
                llm_calls=round(t.llm_calls / n), failed_attempts=round(t.failed_attempts / n),
                samples=round(t.samples / n),
                cache_hits=round(t.cache_hits / n), prompt_tokens=round(t.prompt_tokens / n),
                completion_tokens=round(t.completion_tokens / n), request_seconds=round(t.request_seconds / n, 4),
                wall_seconds=round(t.wall_seconds / n, 4))
        llm = dict(c.llm)
        small = not llm.get("base_url")
        return MetricsReport(
            dataset=c.dataset, kind=c.kind, method=c.method, ablations=list(c.ablations), llm=llm, small_model=small,
            oracle=self.spec.oracle, n_instances=len(ids), n_runs=c.runs, scope=self._scope(), runs=runs,
            mean=mean, std=std, n_failed=len(failed), n_abstained=len(abstained),
            failures=[{"run": p.run, "id": p.id, "reason": p.error} for p in failed[:MAX_LISTED_FAILURES]],
            calibration=calibration, cost=cost, cost_scope=cost_scope, cost_reused=reused,
            cost_per_instance=per_inst, critical_path=run_critical_path(calls, instances, c.runs),
            notes=self._notes(failed, small) + self._fallback_notes(fallbacks, len(final))
            + self._data_notes(final, len(ids)),
            stage=c.stage, n_fallback=len(fallbacks), fallback=self._fallback_name(),
            data=data_summary(self.data), sample=sample_summary(self.sample_record, len(ids)),
            n_truncated=sum(p.truncated for p in final),
        )

    def _fallback_name(self) -> str | None:
        return self.spec.fallback if self.spec.fallback and self.config.kind in self.spec.fallback_kinds else None

    def _fallback_notes(self, fallbacks: Sequence[Prediction], n: int) -> list[str]:
        name = self._fallback_name()
        if name is None:
            return []
        return [f"{len(fallbacks)} of {n} prediction(s): {self.config.method} said 'unknown' and {name} answered "
                "instead (as the paper does on decision data); its calls are in the cost under their own stages."]

    def _scope(self) -> str:
        c = self.config
        failed = "a failed prediction counts as unknown"
        if c.kind == "pairwise":
            return ("f1_* and f1_micro over all pairs, an unknown side scored as p = 0.5; 'covered' (covered_f1_*) "
                    f"over pairs where both sides are known; coverage = share of such pairs; {failed}")
        if c.kind == "factcheck":
            return (f"balanced accuracy with 'support' iff P(claim) > {c.decision_threshold}; unknown counts as "
                    f"'not support'; coverage = share of instances with a probability; {failed}")
        return ("accuracy over all instances (unknown or a tie at 0.5 is not a correct decision); "
                f"accuracy_covered over instances with a probability; {failed}")

    def _notes(self, failed: Sequence[Prediction], small: bool) -> list[str]:
        c = self.config
        notes = []
        if self.spec.oracle:
            notes.append("Factor-based is an oracle: its factors are generated knowing the gold outcome; "
                         "not a fair comparison.")
        if self.spec.direct:
            notes.append("Direct-choice method: its choice is scored as probability 1 or 0.")
        if small:
            notes.append("Numbers from the embedded SmolLM2-135M model: they show the pipeline runs, not the "
                         "method's accuracy.")
        if c.kind == "decision" and c.dataset in ("plasma", "today") and not c.balance_outcomes:
            notes.append("In the bundled Plasma/Today files every condition supports outcome 1, so always "
                         "answering outcome 1 scores 100%; consider --balance-outcomes.")
        if self.spec.uses_anchor_config and self.anchor_config is not None:
            b = self.anchor_config.build
            paper = default_build_params(c.dataset)
            if (b.n_target, b.batch_size, b.max_rounds) != (paper.n_target, paper.batch_size, paper.max_rounds):
                notes.append(f"Factor spaces built with n_target={b.n_target}, b={b.batch_size}, "
                             f"T_max={b.max_rounds} (the paper uses {paper.n_target}/{paper.batch_size}/"
                             f"{paper.max_rounds} here).")
            if c.max_factors is not None:
                notes.append(f"Every factor space truncated to its first {c.max_factors} factors by abduction order.")
            if c.estimator:
                notes.append(f"phi and the latent parameters elicited by {c.estimator.get('model')!r} "
                             f"({c.estimator.get('backend')}); the space and the mapping by {c.llm.get('model')!r}.")
            notes.append("Factor spaces: " + ("built separately for every run (seed + run), so the std over runs "
                                              "includes stage 1." if c.spaces == "per-run" else
                                              "built once per scenario and shared by all runs, so the std over "
                                              "runs reflects stages 2-3 only."))
        if failed:
            reasons = Counter((p.error or "unknown reason").split(";")[0][:160] for p in failed)
            top, n_top = reasons.most_common(1)[0]
            notes.append(f"{len(failed)} prediction(s) failed (no usable answer from the LLM, or the server could not "
                         f"be reached); they count as unknown in these metrics and are retried when this command is "
                         f"run again. Most common reason ({n_top}x): {top}")
        return notes

    def _data_notes(self, final: Sequence[Prediction], used: int) -> list[str]:
        """What the data, the sample and long conditions did to the instances scored."""
        notes = []
        if self.data is not None and self.data.skipped:
            first = self.data.skipped[0]
            notes.append(f"{len(self.data.skipped)} of {self.data.rows} rows of {self.data.source} were skipped as "
                         f"unusable (listed under data.skipped_rows); first: line {first.line}: {first.problem}")
        rec = self.sample_record
        if rec is not None:
            what = "every usable instance" if rec.requested == "all" else f"a sample of {len(rec.ids)}"
            notes.append(f"Scored on {what} of {rec.population} in the seeded order (seed {rec.seed}); the ids are in "
                         f"sample.json" + (f"; --limit kept the first {used}" if used < len(rec.ids) else "") + ".")
            if rec.note:
                notes.append(f"Sample: {rec.note}.")
        cut = [p for p in final if p.truncated]
        if cut:
            sides = [s.truncated for p in cut for s in p.sides if s.truncated is not None]
            kept = min(t.kept_chars for t in sides)
            longest = max(t.original_chars for t in sides)
            notes.append(f"{len(cut)} prediction(s) had a condition cut to fit the {sides[0].context_tokens:,}-token "
                         f"context (it kept its beginning, at least {kept:,} characters; the longest was {longest:,}); "
                         "see 'truncated' in predictions.jsonl.")
        return notes

    def _cost(self, final: Sequence[Prediction], calls: list[CallRecord]
              ) -> tuple[dict[str, CostSummary], dict[str, CostSummary], str]:
        """Cost from the call log (every request once), plus the recorded cost of reused artefacts."""
        stages = summarize(calls)
        total = [ledger_total(calls)]
        cost = {s.stage: _summary(s) for s in [*stages, *total]}
        reused: dict[str, CostSummary] = {}
        reused_keys: list[str] = []
        if self.config.spaces_from:
            used = {s.artefact for p in final for s in p.sides if s.artefact}
            found = reused_artefacts(self._stores, used)
            reused_keys = [key for key, _ in found]
            rows: list[StageCost] = [c for _, item in found if item is not None for c in item.cost]
            if rows:
                reused = {s.stage: _summary(s) for s in [*merge_costs(rows), *merge_costs(rows, label="total")]}
        t = total[0]
        scope = (f"every LLM request made for this run directory, counted once each from calls.jsonl across "
                 f"interruptions and resumes, including the builds of per-scenario artefacts (factor spaces) made "
                 f"for it: {t.llm_calls} request(s) with a known outcome ({t.failed_attempts} of them failed "
                 f"attempts), {t.interrupted} interrupted by a kill (outcome unknown: the server may or may not have "
                 f"received them; not in llm_calls; their prompts about {t.interrupted_prompt_tokens} tokens by the "
                 f"client's estimate), and {t.cache_hits} cache hit(s) (no request); tokens are those the server "
                 "reported in its answers, so a request it received but never answered (time-out, dropped "
                 "connection, kill) adds none")
        if reused_keys:
            scope += (f"; {len(reused_keys)} artefact(s) reused from {self.config.spaces_from} are not included "
                      "(their recorded build cost is under cost_reused)")
        return cost, reused, scope


def _conditions_by_scenario(instances: Sequence[Instance]) -> dict[str, list[str]]:
    from anchor.evaluation.datasets import scenario_key

    out: dict[str, list[str]] = {}
    for inst in instances:
        conds = (inst.condition1, inst.condition2) if isinstance(inst, PairwiseInstance) else (inst.condition,)
        bucket = out.setdefault(scenario_key(inst.scenario), [])
        bucket.extend(c for c in conds if c not in bucket)
    return out


def _summary(c: StageCost) -> CostSummary:
    return CostSummary(llm_calls=c.llm_calls, failed_attempts=c.failed_attempts, samples=c.samples,
                       interrupted=c.interrupted, interrupted_prompt_tokens=c.interrupted_prompt_tokens,
                       cache_hits=c.cache_hits,
                       prompt_tokens=c.prompt_tokens, completion_tokens=c.completion_tokens,
                       request_seconds=round(c.llm_seconds, 4), wall_seconds=round(c.wall_seconds, 4))


def make_run_config(
    *, dataset: str, method: str, data_path: Path | None, ablations: Sequence[str], limit: int | None, runs: int,
    seed: int, settings: LLMSettings, anchor_config: AnchorConfig | None, negation: str = "template",
    decision_threshold: float = 0.9, balance_outcomes: bool = False, spaces: str = "per-run",
    spaces_from: Path | None = None, command: str = "", stage: str | None = None,
    sample: str | int | None = None, sample_seed: int | None = None, max_factors: int | None = None,
    estimator: LLMSettings | None = None,
) -> RunConfig:
    """The run's configuration, checked. ``sample``/``sample_seed`` are the options as given (None: not
    given); the dataset's default protocol fills them in (a seeded 100 for the fact-checking sets)."""
    if data_path is not None and not Path(data_path).is_file():
        raise EvalError(f"--data {data_path}: no such file")
    if dataset not in DATASET_NAMES:
        raise EvalError(f"unknown dataset {dataset!r}; choose from {', '.join(DATASET_NAMES)}")
    if method not in METHODS:
        raise EvalError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    spec = METHODS[method]
    if stage is not None and not spec.stages:
        staged = [name for name, m in METHODS.items() if m.stages]
        raise EvalError(f"--stage applies only to --method {' or '.join(staged)}, not to {method!r}")
    if spec.stages and stage not in spec.stages:
        raise EvalError(f"--method {method} needs --stage, one of: {', '.join(spec.stages)}"
                        + (f" (got {stage!r})" if stage is not None else ""))
    if spaces_from is not None and not Path(spaces_from).is_dir():
        raise EvalError(f"--spaces-from {spaces_from}: no such run directory")
    sample_size, sample_seed = resolve_sample(dataset, sample, sample_seed)
    llm = settings.describe()
    llm.pop("api_key", None)
    estimator_llm = None
    if estimator is not None:
        estimator_llm = estimator.describe()
        estimator_llm.pop("api_key", None)
    return RunConfig(
        anchor_version=__version__, dataset=dataset, data_path=str(data_path) if data_path else None,
        data_sha256=file_sha256(dataset, Path(data_path) if data_path else None), kind=dataset_kind(dataset),
        method=method, ablations=list(ablations), limit=limit, runs=runs, seed=seed, negation=negation,  # type: ignore[arg-type]
        decision_threshold=decision_threshold, balance_outcomes=balance_outcomes, spaces=spaces,  # type: ignore[arg-type]
        spaces_from=str(spaces_from) if spaces_from else None, llm=llm, sample=sample_size, sample_seed=sample_seed,
        anchor_config=anchor_config.model_dump(mode="json") if anchor_config else None, command=command,
        stage=stage, method_config=spec.method_config(dataset) if spec.method_config else None,
        max_factors=max_factors, estimator=estimator_llm,
    )
