"""The service's parts put together (:class:`Service`): the state folder, the one LLM budget, the online
engine, online answers, spaces, jobs, metrics; started and stopped with the server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from anchor.audit.markup import esc
from anchor.audit.pages import explanation_document
from anchor.cases import CasesError
from anchor.config import AnchorConfig
from anchor.llm.settings import LLMSettings
from anchor.serve import engine as run_engine
from anchor.serve.budget import BATCH, ONLINE, SharedBudget, SlotFiles
from anchor.serve.errors import API_SCHEMA_VERSION, ApiError
from anchor.serve.jobs import Jobs
from anchor.serve.metrics import PUBLISH_SECONDS, Metrics, SharedMetrics
from anchor.serve.online import Calibrators, OnlineAnswers
from anchor.serve.settings import ServeSettings
from anchor.serve.spaces import Spaces
from anchor.serve.state import JobRecord, StateFolder
from anchor.space.io import SpaceFileError, load_space
from anchor.types import FactorSpace
from anchor.version import __version__


class Service:
    def __init__(self, settings: ServeSettings, llm: LLMSettings, anchor_config: AnchorConfig | None,
                 ablations: list[str] | None = None, command: str = "anchor serve") -> None:
        self.settings = settings
        self.llm = llm
        self.anchor_config = anchor_config
        self.ablations = list(ablations or [])
        self.command = command
        # With --workers N this is one of N processes: the supervisor holds the folder's lock, and the budget
        # and the counters are shared through files of the state folder.
        self.shared = settings.workers > 1
        self.state = StateFolder(settings.state, shared=self.shared)
        self.metrics = SharedMetrics(settings.state / "metrics") if self.shared else Metrics()
        slots = SlotFiles(settings.state / "budget", llm.max_concurrency) if self.shared else None
        self.budget = SharedBudget(llm.max_concurrency, settings.batch_share, slots)
        self.engine = run_engine.OnlineEngine(settings=llm, anchor_config=anchor_config, ablations=self.ablations,
                                              store=settings.store_dir, backends=self.budget.factory(ONLINE))
        self.calibrators = Calibrators(settings.calibrators)
        self.online = OnlineAnswers(self.engine, self.state, settings, self.calibrators, self.budget)
        self.spaces = Spaces(settings.store_dir, self.engine)
        self.jobs = Jobs(self.state, self._make_run, max_running=settings.max_running_jobs,
                         max_queued=settings.max_queued_jobs, shared=self.shared)
        self.accepting = True
        self.started = time.time()
        self.resumed = 0
        self._publisher: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifetime

    async def start(self) -> None:
        self.state.acquire()
        try:
            self.settings.store_dir.mkdir(parents=True, exist_ok=True)
            await self.engine.start()
            assert self.engine.client is not None
            self.engine.client.ledger.subscribe(self.metrics.call_observer("online"))
            self.resumed = self.jobs.load(tidy_first=not self.shared)
            self.jobs.start()
            self._gauges()
            if self.shared:
                self._publisher = asyncio.get_running_loop().create_task(self._publish_forever(), name="metrics")
        except BaseException:
            self.state.release()
            raise

    async def stop(self) -> None:
        """Stop accepting, record what is in flight (interrupted answers, jobs left queued), close."""
        self.accepting = False
        if self._publisher is not None:
            self._publisher.cancel()
        await self.online.close()
        await self.spaces.close()
        await self.jobs.close(self.settings.shutdown_seconds)
        await self.engine.close()
        self.state.release()
        if self.budget.slots is not None:
            self.budget.slots.close()

    async def _publish_forever(self) -> None:
        while True:
            await asyncio.sleep(PUBLISH_SECONDS)
            self.metrics.publish()

    def _gauges(self) -> None:
        m, b = self.metrics, self.budget
        m.gauge("anchor_serve_llm_budget", "The service's LLM concurrency budget (requests in flight at most).",
                lambda: [({}, b.limit)])
        m.gauge("anchor_serve_llm_in_flight", "LLM requests in flight.", lambda: [({}, b.in_flight)], per_process=True)
        m.gauge("anchor_serve_llm_waiting", "LLM requests waiting for a slot of the budget, by class.",
                lambda: [({"class": "online"}, b.waiting(ONLINE)), ({"class": "batch"}, b.waiting(BATCH))],
                per_process=True)
        m.gauge("anchor_serve_online_pending", "Online cases admitted and not yet answered (the queue).",
                lambda: [({}, len(self.online.pending))], per_process=True)
        m.gauge("anchor_serve_jobs", "Jobs by state.", lambda: [({"state": s}, n) for s, n in self.jobs.by_state().items()])

    # ------------------------------------------------------------------ limits and settings

    def body_limit(self, path: str, method: str) -> int:
        if path == "/v1/jobs" and method == "POST":
            return self.settings.max_upload_bytes
        return self.settings.max_body_bytes

    def describe(self) -> dict[str, Any]:
        s = self.settings
        methods = []
        for name in run_engine.METHOD_NAMES:
            try:
                run_engine.check_method(name, None, online=True)
                online = True
            except run_engine.RunError:
                online = False
            methods.append({"name": name, "online": online, "extra": run_engine.method_extra(name)})
        return {"schema_version": API_SCHEMA_VERSION, "version": __version__, "model": self.engine.model,
                "methods": methods, "calibrators": self.calibrators.names(),
                "build": self.anchor_config.build.model_dump(mode="json") if self.anchor_config else None,
                "limits": {"max_body_bytes": s.max_body_bytes, "max_upload_bytes": s.max_upload_bytes,
                           "max_cases": s.max_cases, "max_queue": s.max_queue, "max_wait": s.max_wait,
                           "default_wait": s.default_wait, "llm_budget": self.budget.limit,
                           "batch_slots_beside_online": self.budget.batch_cap,
                           "max_running_jobs": s.max_running_jobs, "max_queued_jobs": s.max_queued_jobs}}

    # ------------------------------------------------------------------ jobs

    def _make_run(self, record: JobRecord) -> run_engine.JobRun:
        folder = self.state.job_dir(record.id)
        calibrator = self.calibrators.get(record.calibrator)
        return run_engine.JobRun(
            run_dir=folder / "run", cases_path=folder / record.file, fmt=record.format, columns=record.columns,
            method=record.method, stage=record.stage, settings=self.llm, anchor_config=self.anchor_config,
            ablations=self.ablations, store=self.settings.store_dir, calibrator=calibrator,
            backends=self.budget.factory(BATCH), command=f"{self.command} (job {record.id})",
            on_call=self.metrics.call_observer("batch"))

    def check_cases(self, path: Path, fmt: str, columns: dict[str, str]) -> dict[str, Any]:
        """The file's check, as a job's record keeps it; a 422 naming the field when it is unusable."""
        try:
            summary = run_engine.check_cases_file(path, fmt, columns)
        except CasesError as exc:
            message = str(exc).replace(str(path), "the cases file").replace("--column", "column")
            raise ApiError(422, message, field="column" if "column" in message else "body") from None
        if not summary.good:
            raise ApiError(422, f"the cases file has no usable row ({summary.rows} read, {summary.bad} bad)"
                                + (f"; first: line {summary.rejected[0].line}: {summary.rejected[0].reason}"
                                   if summary.rejected else ""), field="body")
        shown = summary.model_dump(mode="json", include={"rows", "good", "bad", "labelled", "groups", "columns_used",
                                                         "columns_ignored", "rejected"})
        return shown

    @staticmethod
    def is_run(run_dir: Path) -> bool:
        return run_engine.is_run(run_dir)

    def result_lines(self, record: JobRecord, fmt: str) -> Iterator[bytes]:
        run_dir = self.state.run_dir(record.id)
        if fmt == "csv":
            return run_engine.table_lines(run_dir, truth=run_engine.job_has_truth(record.check))
        return run_engine.prediction_lines(run_dir)

    # ------------------------------------------------------------------ explanation pages

    def _space(self, key: str | None, *folders: Path) -> FactorSpace | None:
        if key is None:
            return None
        for folder in folders:
            path = run_engine.space_file(folder, key)
            if path.exists():
                try:
                    return load_space(path)
                except SpaceFileError:
                    return None
        return None

    def explanation(self, answer_id: str) -> str:
        if answer_id in self.online.pending:
            raise ApiError(409, f"prediction {answer_id} is not answered yet; poll /v1/predictions/{answer_id}",
                           field="id")
        found = self.online.result_of(answer_id)
        if found is None:
            if self.online.get(answer_id) is None:
                raise ApiError(404, f"no prediction {answer_id!r}", field="id")
            raise ApiError(404, f"prediction {answer_id} has no explanation page: only ANCHOR's answers leave "
                                "an audit trail", field="id")
        record, result = found
        space = self._space(record.get("space"), run_engine.store_spaces(self.settings.store_dir))
        intro = (f'<p class="muted">Prediction <code>{esc(answer_id)}</code> by {esc(record.get("method"))}, '
                 f'{esc(record.get("finished") or "")}. <a href="/v1/predictions/{esc(answer_id)}">JSON</a> · '
                 '<a href="/">the service</a></p>')
        return explanation_document(space, [result], title=f"Prediction {answer_id}", intro=intro,
                                    scenario=space.scenario if space else None, headings=["Condition"])

    def row_explanation(self, job_id: str, row_id: str) -> str:
        run_dir = self.state.run_dir(job_id)
        found = run_engine.row_trace(run_dir, row_id)
        if found is None:
            raise ApiError(404, f"job {job_id} has no explanation for row {row_id[:80]!r} (not answered yet, or "
                                "not by ANCHOR)", field="row_id")
        result, key = found
        space = self._space(key, run_engine.run_spaces(run_dir), run_engine.store_spaces(self.settings.store_dir))
        intro = (f'<p class="muted">Row <code>{esc(row_id)}</code> of job <code>{esc(job_id)}</code>. '
                 f'<a href="/jobs/{esc(job_id)}">the job</a> · <a href="/">the service</a></p>')
        return explanation_document(space, [result], title=f"Job {job_id}, row {row_id}", intro=intro,
                                    scenario=space.scenario if space else None, headings=["Condition"])

