"""``PredictRunner``: the evaluation runner over a user's cases file, read as a stream.

A predict run is an evaluation run of kind ``cases`` (same run directory, same methods, same
resumption and cost accounting; see :mod:`anchor.evaluation.runner`) that differs in how it meets
its instances:

* The file is read twice, one row at a time: once to check it (counts, groups, bad rows: nothing is
  asked of the LLM before the file is known to be usable), once to answer it. At most
  ``instance_slots`` rows are in flight; reading waits for a free slot, so memory does not grow with
  the file.
* Rows are answered in any order, and ``predictions.jsonl`` grows in that order; when the run ends
  it is rewritten in input order (:meth:`~anchor.evaluation.rundir.RunDirectory.order_predictions`).
* Each bad row is written to ``rejected.jsonl`` with its line and reason; ``--strict`` stops before
  any request at the first one. Each row scored is written to ``instances.jsonl`` as it is read (the
  file is put in place when the pass ends), so the run's readers need not find the cases file again.
* Per-scenario artefacts (factor spaces, BIRD models) are named by their content and can live in a
  store shared with other runs (``RunConfig.spaces_from``): a run publishes what it builds there.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from anchor.calibration.registry import FileCalibrator
from anchor.cases import BadCaseRow, CaseCheck, CaseRow, CasesError, RejectedRow, check_cases
from anchor.config import AnchorConfig
from anchor.evaluation.datasets.instances import DecisionInstance
from anchor.evaluation.results import MetricsReport, Prediction, RunConfig, TraceRecord
from anchor.evaluation.rundir import JsonLines, Skipped
from anchor.evaluation.rundir.names import REJECTED
from anchor.evaluation.runner import EvalRunner, instance_slots
from anchor.evaluation.runner.loop import Instance
from anchor.evaluation.runner.worker import WorkerSetup
from anchor.llm.ledger import CallRecord
from anchor.llm.settings import BackendFactory, LLMSettings
from anchor.predict.config import CasesInput
from anchor.predict.export import TableFormat, write_table
from anchor.progress import ProgressEvent, Reporter, silent
from anchor.types import Scenario, StageCost


class PredictRunner(EvalRunner):
    """Answers every good row of a cases file with the run's method and writes the run directory."""

    def __init__(
        self,
        config: RunConfig,
        out_dir: Path,
        *,
        cases: CasesInput,
        settings: LLMSettings,
        anchor_config: AnchorConfig | None = None,
        report: Reporter = silent,
        retry_failed: bool = True,
        estimator_settings: LLMSettings | None = None,
        calibrator: FileCalibrator | None = None,
        strict: bool = False,
        table: TableFormat = "jsonl",
        workers: int = 1,
        ray: str | None = None,
        backends: BackendFactory | None = None,
    ) -> None:
        super().__init__(config, out_dir, settings=settings, anchor_config=anchor_config, report=report,
                         retry_failed=retry_failed, estimator_settings=estimator_settings, calibrator=calibrator,
                         workers=workers, ray=ray, backends=backends)
        self.cases = cases
        self.strict = strict
        self.table = table
        self.summary: CaseCheck | None = None
        """What the check pass found (set by :meth:`check_input`)."""
        self.rejected = 0
        self.table_path: Path | None = None
        self._started = time.monotonic()
        self._scenarios: dict[str, Scenario] = {}
        self._rows: list[tuple[str, str, int | None]] = []
        """(id, group, label) of every row the run scores, in input order (for the metrics)."""

    # ------------------------------------------------------------------ the input

    def check_input(self) -> CaseCheck:
        """Read the file once, checking every row; nothing is asked of the LLM. Refuses a file with no
        usable row, and under ``strict`` one with a bad row (naming its line)."""
        summary = check_cases(self.cases.path, format=self.cases.format, columns=self.cases.columns,
                              limits=self.cases.limits)
        if self.strict and summary.rejected:
            raise BadCaseRow(str(self.cases.path), summary.rejected[0])
        if not summary.good:
            raise CasesError(f"{self.cases.path}: no usable row ({summary.rows} read, {summary.bad} bad)")
        self.summary = summary
        return summary

    def load_instances(self) -> list[Instance]:
        """Nothing up front: the rows are read as a stream while the run goes (see :meth:`check_input`)."""
        return []

    def scenario_groups(self, instances: Sequence[Instance]) -> int:
        """The groups the check pass counted (the rows are not held)."""
        return self.summary.groups if self.summary is not None else 0

    def record_instances(self, instances: list[Instance]) -> None:
        """Nothing up front: ``instances.jsonl`` is written as the rows are read (see :meth:`_answer_all`)."""

    @property
    def total(self) -> int:
        good = self.summary.good if self.summary is not None else 0
        return good if self.config.limit is None else min(good, self.config.limit)

    # ------------------------------------------------------------------ the run

    async def _run_locked(self, instances: list[Instance]) -> MetricsReport:
        assert self.client is not None
        if self.summary is None:
            self.check_input()
        d = self.directory
        journal, traces, calls = d.logs()
        for log in (journal, traces, calls):
            log.repair()
        status = d.prediction_statuses()
        stop_logging = self.client.ledger.subscribe(calls.append)
        stop_watching = self.client.ledger.subscribe(self._watch)
        try:
            await self._answer_all(status, journal, traces)
            assert self.pool is not None
            await self.pool.settle()
        finally:
            stop_logging()
            stop_watching()
            journal.close()
            traces.close()
            calls.close()
        self._tick(force=True)
        d.order_predictions(key=lambda record: int(record.get("line") or 0))
        truth = self.summary is not None and "p_true" in self.summary.columns_used
        self.table_path = write_table(d, self.table, calibrated=self.calibrator is not None, truth=truth)
        # Leniently: the run's answers are all in; a damaged line of the call log costs its figures only,
        # and metrics.json says so.
        damaged = Skipped()
        report = self._score(d.call_log(skipped=damaged))
        if damaged:
            report.notes.append(f"Cost: {damaged.note()}.")
        d.write_metrics(report)
        return report

    async def _answer_all(self, status: dict[str, str], journal: JsonLines[Prediction],
                          traces: JsonLines[TraceRecord]) -> None:
        """One pass over the file: bad rows to rejected.jsonl, every good row not yet answered to the method."""
        assert self.client is not None
        slots = asyncio.Semaphore(instance_slots(self.client.concurrency))
        running: set[asyncio.Task[None]] = set()
        ranks: dict[str, int] = {}
        failures: list[BaseException] = []
        again = self.retry_failed
        self._counts.update(total=self.total, done=sum(1 for s in status.values() if s != "failed" or not again))
        self._tick(force=True)

        def finished(task: asyncio.Task[None]) -> None:
            running.discard(task)
            slots.release()
            if not task.cancelled() and task.exception() is not None:
                failures.append(task.exception())  # type: ignore[arg-type]

        taken = 0
        d = self.directory
        with d.rejected_rows() as rejected, d.instances_log() as kept, self.cases.open(strict=self.strict) as stream:
            for item in stream:
                if isinstance(item, RejectedRow):
                    rejected.write(item.model_dump_json() + "\n")
                    self.rejected += 1
                    continue
                if self.config.limit is not None and taken >= self.config.limit:
                    break
                taken += 1
                self._remember(item)
                kept.write(self._instance(item).model_dump_json() + "\n")
                was = status.get(item.id)
                if was is not None and (was != "failed" or not again):
                    continue
                await slots.acquire()
                if failures:
                    slots.release()
                    break
                # Groups numbered in the order they start: an earlier group's requests get a free slot
                # first (see anchor.llm.parallel).
                rank = ranks.setdefault(item.group, len(ranks))
                self.answering = True
                task = asyncio.get_running_loop().create_task(self._answer(item, journal, traces, rank))
                running.add(task)
                task.add_done_callback(finished)
            if running:
                await asyncio.gather(*running, return_exceptions=True)
            if failures:
                raise failures[0]

    def _remember(self, row: CaseRow) -> None:
        self._scenarios.setdefault(row.group, row.to_scenario())
        self._rows.append((row.id, row.group, row.label))

    def _instance(self, row: CaseRow) -> DecisionInstance:
        return DecisionInstance(id=row.id, dataset=self.config.dataset, scenario=self._scenarios[row.group],
                                condition=row.condition, label=row.label)

    async def _answer(self, row: CaseRow, journal: JsonLines[Prediction], traces: JsonLines[TraceRecord],
                      rank: int) -> None:
        inst = self._instance(row)
        assert self.pool is not None
        pred, trace_records = await self.pool.answer(0, inst, row.group, rank)
        pred.line = row.line
        pred.p_true = row.p_true
        for t in trace_records:
            traces.append(t)
        journal.append(pred)
        self._counts.update(done=1, unknown=int(pred.unknown), failed=int(pred.status == "failed"))
        self._tick(force=True)

    def worker_setup(self, instances: Sequence[Instance] = ()) -> WorkerSetup:
        """The evaluation's setup, with every condition of each group for a method that learns from them first."""
        setup = super().worker_setup(instances)
        if self.spec.trains_on_conditions:
            setup = dataclasses.replace(setup, conditions=self._conditions_by_group())
        return setup

    def _conditions_by_group(self) -> dict[str, list[str]]:
        """Every condition of every group, for a method that learns from them all before answering any."""
        out: dict[str, list[str]] = {}
        with self.cases.open() as stream:
            for item in stream:
                if isinstance(item, CaseRow):
                    bucket = out.setdefault(item.group, [])
                    if item.condition not in bucket:
                        bucket.append(item.condition)
        return out

    # ------------------------------------------------------------------ progress and scores

    def _tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_tick < 0.2:
            return
        self._last_tick = now
        total = self.client.ledger.tally() if self.client else StageCost(stage="total")
        stores = self.pool.stores() if self.pool is not None else {}
        built = sum(len(store.built) for store in stores.values())
        info: dict[str, object] = {**({"spaces": built} if self.spec.per_scenario_artefact else {}),
                                   "req": _short(total.logical_requests or 0),
                                   "tok": _short(total.prompt_tokens + total.completion_tokens)}
        if self._retry:
            info["retry"] = self._retry
        self.report(ProgressEvent("rows", self._counts["done"], self._counts["total"], "", info))

    def _score(self, calls: Iterable[CallRecord]) -> MetricsReport:
        """``metrics.json`` of the rows the run scored (its predictions, read back in input order)."""
        instances = [DecisionInstance.model_construct(id=iid, dataset=self.config.dataset, scenario=self._scenarios[g],
                                                      condition="", label=label)
                     for iid, g, label in self._rows]
        # Without the per-stage cost of each row (the run's cost comes from calls.jsonl): a large run's
        # predictions are held here all at once.
        done = {(0, p.id): p for p in self.directory.iter_predictions(without_cost=True)}
        report = self.compute_metrics(instances, done, calls)
        report.data = self.data_summary()
        return report

    def data_summary(self) -> dict[str, Any]:
        s = self.summary
        assert s is not None
        return {"source": s.source, "format": s.format, "rows": s.rows, "usable": s.good, "skipped": s.bad,
                "labelled": s.labelled, "groups": s.groups, "rejected_file": REJECTED,
                "skipped_rows": [{"line": r.line, "problem": r.reason} for r in s.rejected]}


def _short(n: int) -> str:
    """A count in at most four characters: 950, 12k, 3.4M."""
    if n < 1000:
        return str(n)
    if n < 100_000:
        return f"{n / 1000:.1f}k" if n < 10_000 else f"{n // 1000}k"
    return f"{n / 1_000_000:.1f}M" if n < 10_000_000 else f"{n // 1_000_000}M"
