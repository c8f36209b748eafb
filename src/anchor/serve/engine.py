"""The service's one adapter to the predict engine: every import of the run engine's internals is here.

``anchor serve`` implements no method and no run of its own. It drives what ``anchor predict`` drives:

* **Online answers** (:class:`OnlineEngine`): the predict engine's ``InstanceWorker``, the piece that turns
  one case into its ``Prediction`` and trace, under the run configuration a predict run records for the
  same settings (kind ``cases``, per-scenario artefacts named by their content). Nothing of it is made
  here: the configuration comes from ``make_predict_config`` (with no cases file) and is resolved, and
  the worker set up, by the functions a run session uses (:mod:`anchor.runs.session`). Its artefact folder
  is the service's space store itself, so an answer finds the spaces ``anchor predict --spaces STORE``
  built and what it builds is there for the next run.
* **Batch jobs** (:class:`JobRun`): a ``PredictRunner`` over the job's cases file into the job's run
  directory, with the store as ``--spaces``. A restart runs the same runner on the same directory: it
  resumes as ``anchor predict`` resumes.
* **Reading a run directory back**, through ``RunDirectory``: its predictions as JSON lines or predict's
  CSV table, and a row's explanation page.

A setting the engine refuses is a ``RunError`` whose ``field`` names it (``method``, ``stage``).

The run engine (:mod:`anchor.runs`) and the method registry (:mod:`anchor.methods`) are reached from here
only: when they change, this file is the one to re-point.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anchor.artefacts import ArtefactStore
from anchor.calibration.registry import FileCalibrator
from anchor.cases import CaseCheck, CaseRow
from anchor.config import AnchorConfig
from anchor.embedding.embed import Embedder
from anchor.embedding.server import make_embedder
from anchor.llm import chain
from anchor.llm.client import LLMClient
from anchor.llm.ledger import CallRecord, CostLedger, total
from anchor.llm.settings import BackendFactory, LLMSettings, make_client
from anchor.methods.registry import METHODS
from anchor.predict.config import (
    CASES_DATASET,
    CASES_THRESHOLD,
    CasesInput,
    check_predict_method,
    make_predict_config,
    method_settings,
)
from anchor.predict.export import carries_truth, csv_table, table_row, why_unknown
from anchor.predict.runner import PredictRunner
from anchor.progress import ProgressEvent
from anchor.rundir import RunDirectory
from anchor.rundir.instances import DecisionInstance
from anchor.rundir.names import SPACES
from anchor.rundir.records import Prediction, RunConfig
from anchor.runs.errors import RunError
from anchor.runs.session import RunOptions, local_worker, resolve_config, worker_setup
from anchor.runs.worker import DecisionRule, InstanceWorker, Work
from anchor.types import InferenceResult, Scenario

#: The methods, by name.
METHOD_NAMES = tuple(METHODS)


def check_method(method: str, stage: str | None, *, online: bool) -> None:
    """Refuse, in one line, a method the predict engine cannot answer a case with; ``online``: one at a time,
    without the rest of its scenario's conditions."""
    check_predict_method(method, stage)
    if online and METHODS[method].trains_on_conditions:
        raise RunError(f"method {method!r} learns from every condition of a scenario before answering any: "
                          "send its cases as a job (POST /v1/jobs)", field="method")


def method_extra(method: str) -> str | None:
    """The optional extra a method needs (BIRD's torch), or None."""
    return METHODS[method].extra


def has_spaces(method: str) -> bool:
    """Whether the method builds a per-scenario artefact (a factor space, a BIRD model) before answering."""
    return METHODS[method].per_scenario_artefact


@dataclass
class Answer:
    """One case answered: the predict engine's prediction record, its traces (as JSON), the longest chain
    of LLM requests it waited for, and the key of the space (or model) it used."""

    prediction: Prediction
    traces: list[dict[str, Any]]
    critical_path: chain.Chain
    artefact: str | None


class OnlineEngine:
    """Answers one case at a time with the predict engine's worker (see the module docstring)."""

    def __init__(self, *, settings: LLMSettings, anchor_config: AnchorConfig | None, ablations: list[str],
                 store: Path, backends: BackendFactory) -> None:
        self.settings = settings
        self.anchor_config = anchor_config
        self.ablations = ablations
        self.store = store
        self.backends = backends
        self.client: LLMClient | None = None
        self.model = settings.model or ""
        self._workers: dict[tuple[str, str | None, str | None], InstanceWorker] = {}
        self._stores: dict[str, Any] = {}  # one artefact store per kind, shared by every method's worker

    async def start(self) -> None:
        """Make the client and ask the server for its model (the model names the stored spaces)."""
        self.client = make_client(self.settings, ledger=CostLedger(keep=False), backends=self.backends)
        await self.client.ensure_ready()
        self.model = self.client.backend.model

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()

    @functools.cached_property
    def embedder(self) -> Embedder:
        return make_embedder(self.settings)

    async def config(self, method: str, stage: str | None, calibrator: FileCalibrator | None) -> RunConfig:
        """The run configuration ``anchor predict`` records for these settings, for no cases file: made and
        resolved (the server's model, the embedder) by the functions a predict run uses."""
        assert self.client is not None, "start() the engine first"
        anchor_config, ablations = method_settings(method, self.anchor_config, self.ablations)
        config = make_predict_config(cases=None, method=method, settings=self.settings, anchor_config=anchor_config,
                                     ablations=ablations, stage=stage, calibrator=calibrator)
        return await resolve_config(config, self.client, lambda: self.embedder, harness=self.backends is not None)

    async def worker(self, method: str, stage: str | None, calibrator: FileCalibrator | None) -> InstanceWorker:
        """The worker for (method, stage, calibrator), made on first use: set up as a predict run sets up its
        own, with the store as its artefact folder, and one artefact store per kind shared by every method's
        worker (a space built for one method is found by the others)."""
        assert self.client is not None, "start() the engine first"
        key = (method, stage, calibrator.sha256 if calibrator is not None else None)
        found = self._workers.get(key)
        if found is None:
            config = await self.config(method, stage, calibrator)
            anchor_config, _ = method_settings(method, self.anchor_config, self.ablations)
            setup = worker_setup(config, settings=self.settings, artefacts=self.store, anchor_config=anchor_config,
                                 calibrator=calibrator, decide=DecisionRule(CASES_THRESHOLD), backends=self.backends)
            found = local_worker(setup, client=self.client, embedder=lambda: self.embedder, stores=self._stores)
            await found.start()
            found = self._workers.setdefault(key, found)
        return found

    async def prepare(self, worker: InstanceWorker, scenario: Scenario) -> None:
        """Load or build what the method keeps for ``scenario`` (a factor space), as answering would."""
        await worker.method(0).prepare(scenario)  # type: ignore[union-attr]

    def artefact_key(self, worker: InstanceWorker, scenario: Scenario) -> str | None:
        """The name in the store of the scenario's artefact for this worker's method (None: it keeps none)."""
        key = getattr(worker.method(0), "key", None)
        return key(scenario) if callable(key) else None

    def artefact_stored(self, worker: InstanceWorker, scenario: Scenario) -> bool | None:
        """Whether the store holds the scenario's artefact for this worker's method (None: it keeps none)."""
        key = self.artefact_key(worker, scenario)
        kinds = METHODS[worker.config.method].artefacts()
        if key is None or not kinds:
            return None
        return worker.store(kinds[-1]).path(key).exists()  # the method's own kind comes last

    async def answer(self, worker: InstanceWorker, case: CaseRow, rank: int = 0) -> Answer:
        """The predict engine's answer to one case (as a row of a predict run, run 0)."""
        inst = DecisionInstance(id=case.id, dataset=CASES_DATASET, scenario=case.to_scenario(),
                                condition=case.condition, label=case.label)
        stamp: dict[str, Any] = {"line": case.line}
        if case.p_true is not None:
            stamp["p_true"] = case.p_true
        pred, traces = await worker.evaluate(Work(0, inst, case.group, stamp=stamp), rank)
        path = chain.current()
        artefact = next((side.artefact for side in pred.sides if side.artefact), None)
        return Answer(pred, [t.model_dump(mode="json") for t in traces], path, artefact)


def public_answer(answer: Answer) -> dict[str, Any]:
    """An answer as the service shows it: the probabilities, unknown and why, the factors with their φ
    (from an ANCHOR trace), and the cost."""
    pred = answer.prediction
    row = table_row(pred, calibrated=pred.p_outcome1_raw is not None)
    result = anchor_result(answer.traces[0]["result"]) if answer.traces else None
    side = pred.sides[0] if pred.sides else None
    if result is not None:
        factors = [{"id": f.factor_id, "text": f.text, "theme": f.theme, "phi": f.phi} for f in result.factors]
        path = result.critical_path
        critical = {"requests": path.requests, "seconds": path.seconds} if path is not None else None
    else:
        factors = [{"id": None, "text": t, "theme": None, "phi": None} for t in (side.factors or [])] if side else []
        critical = None
    if critical is None:
        critical = {"requests": answer.critical_path.requests, "seconds": answer.critical_path.seconds}
    llm_seconds = round(sum(float(stage.get("llm_seconds") or 0.0) for stage in pred.cost), 6)
    return {
        "p_outcome1": pred.p_outcome1, "p_outcome2": pred.p_outcome2, "p_outcome1_raw": pred.p_outcome1_raw,
        "prediction": pred.prediction, "unknown": pred.unknown, "why_unknown": why_unknown(pred),
        "status": pred.status, "factors": factors, "fallback": side.fallback if side else None,
        "cost": {"requests": row["requests"], "cache_hits": row["cache_hits"], "prompt_tokens": row["prompt_tokens"],
                 "completion_tokens": row["completion_tokens"], "llm_seconds": llm_seconds,
                 "critical_path": critical, "by_stage": pred.cost},
        "seconds": pred.seconds,
    }


def anchor_result(trace: dict[str, Any] | None) -> InferenceResult | None:
    """An ANCHOR trace's result, typed; None for another method's trail."""
    if not trace:
        return None
    try:
        return InferenceResult.model_validate(trace)
    except ValueError:
        return None


# --------------------------------------------------------------------------- batch jobs


def check_cases_file(path: Path, fmt: str | None, columns: dict[str, str]) -> CaseCheck:
    """The cases file read and checked as ``anchor predict`` checks it (CasesError: unusable)."""
    from anchor.cases import check_cases

    cases = CasesInput.of(path, format=fmt, columns=columns)
    return check_cases(cases.path, format=cases.format, columns=cases.columns, limits=cases.limits)


@dataclass
class JobTally:
    """How far a job's run has got (written by its thread, read by the service's)."""

    done: int = 0
    total: int = 0
    requests: int = 0
    tokens: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    done_at_start: int | None = None
    started: float = 0.0
    earlier_requests: int = 0
    earlier_prompt_tokens: int = 0
    earlier_completion_tokens: int = 0

    def seconds_left(self, now: float) -> float | None:
        """From this session's pace (rows answered since the run started or resumed)."""
        if self.done_at_start is None or self.done >= self.total:
            return 0.0 if self.total and self.done >= self.total else None
        made = self.done - self.done_at_start
        if made <= 0:
            return None
        return round((now - self.started) / made * (self.total - self.done), 1)


class JobRun:
    """One job's predict run: ``anchor predict CASES --out RUN_DIR --spaces STORE`` with the service's settings."""

    def __init__(self, *, run_dir: Path, cases_path: Path, fmt: str, columns: dict[str, str], method: str,
                 stage: str | None, settings: LLMSettings, anchor_config: AnchorConfig | None, ablations: list[str],
                 store: Path, calibrator: FileCalibrator | None, backends: BackendFactory, command: str,
                 on_call: Callable[[CallRecord], None] | None = None) -> None:
        cases = CasesInput.of(cases_path, format=fmt, columns=columns)
        anchor_config, ablations = method_settings(method, anchor_config, ablations)
        config = make_predict_config(cases=cases, method=method, settings=settings, anchor_config=anchor_config,
                                     ablations=ablations, stage=stage, spaces=store, command=command)
        self.run_dir = run_dir
        self.tally = JobTally()
        self.on_call = on_call
        self._subscribed = False
        self.runner = PredictRunner(config, run_dir, RunOptions(settings, anchor_config, calibrator=calibrator,
                                                                backends=backends),
                                    cases=cases, report=self._progress, table="csv")

    def _progress(self, event: ProgressEvent) -> None:
        t = self.tally
        if t.done_at_start is None:
            t.done_at_start, t.started = event.done, time.monotonic()
        t.done, t.total = event.done, event.total or t.total
        client = self.runner.session.client
        if client is not None:
            if not self._subscribed and self.on_call is not None:
                client.ledger.subscribe(self.on_call)
                self._subscribed = True
            now = client.ledger.tally()
            t.requests = t.earlier_requests + (now.logical_requests or 0)
            # A resumed run's ledger starts empty: what earlier sessions paid is added to every figure.
            t.prompt_tokens = t.earlier_prompt_tokens + now.prompt_tokens
            t.completion_tokens = t.earlier_completion_tokens + now.completion_tokens
            t.tokens = t.prompt_tokens + t.completion_tokens

    def _count_earlier(self) -> None:
        directory = RunDirectory(self.run_dir)
        if not directory.calls.path.exists():
            return
        spent = total(directory.call_log())
        self.tally.earlier_requests = spent.logical_requests or 0
        self.tally.earlier_prompt_tokens = spent.prompt_tokens
        self.tally.earlier_completion_tokens = spent.completion_tokens

    async def run(self) -> dict[str, Any]:
        """Check the file, then answer every row not yet answered (a resume when the directory holds a run)."""
        summary = self.runner.check_input()
        self.tally.total = self.runner.total
        self._count_earlier()
        metrics = await self.runner.run()
        self.tally.done = self.tally.total
        return {"rows": metrics.n_instances, "rejected": summary.bad, "unknown": metrics.n_unknown,
                "failed": metrics.n_failed, "notes": metrics.notes}


# --------------------------------------------------------------------------- reading a run directory back


def is_run(run_dir: Path) -> bool:
    return RunDirectory(run_dir).is_run()


def prediction_lines(run_dir: Path) -> Iterator[bytes]:
    """``predictions.jsonl`` as it stands, whole lines only (a run still writing it may have half of one)."""
    return RunDirectory(run_dir).prediction_lines()


def table_lines(run_dir: Path, *, truth: bool) -> Iterator[bytes]:
    """The predictions as ``anchor predict --format csv`` writes its table (by the same function), one row at a
    time; ``truth``: the cases file has a ``p_true`` column (:func:`job_has_truth`)."""
    calibrated = RunDirectory(run_dir).read_config().calibrator is not None  # read with the lines, off the loop
    predictions = (Prediction.model_validate_json(line) for line in prediction_lines(run_dir))
    yield from csv_table(predictions, calibrated=calibrated, truth=truth)


def job_has_truth(check: dict[str, Any]) -> bool:
    """Whether a job's cases file has a ``p_true`` column, from its check (as a predict run decides it)."""
    return carries_truth(check.get("columns_used") or {})


def row_trace(run_dir: Path, row_id: str) -> tuple[InferenceResult, str | None] | None:
    """The ANCHOR result of one row of a run and the key of its space (its last trace), or None."""
    trace = RunDirectory(run_dir).row_trace(row_id)
    return (trace.result, trace.space) if trace is not None else None


def run_spaces(run_dir: Path) -> Path:
    """Where a run directory keeps the spaces it built."""
    return RunDirectory(run_dir).artefacts()


def store_spaces(store: Path) -> Path:
    """Where the store (``anchor predict --spaces STORE``) keeps its factor spaces."""
    return ArtefactStore.kind_folder(store, SPACES)


def space_file(folder: Path, key: str) -> Path:
    """The file of space ``key`` in a folder of spaces (:func:`store_spaces`, :func:`run_spaces`)."""
    return ArtefactStore.file(folder, key)
