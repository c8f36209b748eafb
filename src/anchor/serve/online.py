"""Online predictions: cases checked as a cases file's rows are, admitted while the queue has room,
answered by the predict engine's worker on the server's event loop, kept on disk for their explanation.

A request is held open up to ``wait`` seconds. A case answered by then comes back whole (200); one that
is not, typically because its scenario's space is being built first, comes back as ``pending`` with where
to poll (202), and is answered all the same. The rule is the same for every method: a method without a
per-scenario artefact simply never waits for a build.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import secrets as random_ids
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchor.calibration.registry import FileCalibrator, read_calibrator
from anchor.cases import CASE_COLUMNS, CaseLimits, CaseRow
from anchor.cases.columns import ResolvedColumns
from anchor.cases.formats import RawRecord
from anchor.cases.validate import RowChecker
from anchor.errors import AnchorError
from anchor.extras import extra_hint, extra_installed
from anchor.secrets import scrub
from anchor.serve.budget import SharedBudget
from anchor.serve.engine import (
    OnlineEngine,
    RunError,
    anchor_result,
    check_method,
    method_extra,
    public_answer,
    space_file,
    store_spaces,
)
from anchor.serve.errors import API_SCHEMA_VERSION, ApiError, refused
from anchor.serve.models import CaseIn, PredictionRequest
from anchor.serve.settings import ServeSettings, valid_id
from anchor.serve.state import StateFolder, now_iso

CASE_FIELDS = ("scenario", "outcome1", "outcome2", "condition")


class Calibrators:
    """The calibrator files of the ``--calibrators`` folder, asked for by name (never by path)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._read: dict[str, tuple[float, FileCalibrator]] = {}

    def names(self) -> list[str]:
        if self.folder is None or not self.folder.is_dir():
            return []
        return sorted(p.stem for p in self.folder.glob("*.json") if valid_id(p.stem))

    def get(self, name: str | None, field: str = "calibrator") -> FileCalibrator | None:
        if name is None:
            return None
        if not valid_id(name):
            raise ApiError(422, f"{field} {name[:60]!r} is not a calibrator name (letters, digits, '.', '_', '-')",
                           field=field)
        if self.folder is None:
            raise ApiError(422, f"{field} {name!r}: this service has no calibrators (start it with --calibrators DIR)",
                           field=field)
        path = self.folder / f"{name}.json"
        try:
            stamp = path.stat().st_mtime
        except OSError:
            raise ApiError(422, f"{field} {name!r}: no such calibrator (there are: {', '.join(self.names()) or 'none'})",
                           field=field) from None
        found = self._read.get(name)
        if found is None or found[0] != stamp:
            try:
                found = self._read[name] = (stamp, read_calibrator(path, what=field))
            except AnchorError as exc:
                raise ApiError(422, scrub(str(exc)).replace(str(self.folder) + "/", ""), field=field) from None
        return found[1]


@dataclass
class Pending:
    id: str
    digest: str
    request: dict[str, Any]
    phase: str = "queued"
    artefact: str | None = None
    created: str = field(default_factory=now_iso)
    task: asyncio.Task[None] | None = None
    answered: asyncio.Future[None] | None = None
    """Done when the answer is in memory (its file is written after, off the request's path)."""


def new_id(prefix: str) -> str:
    return f"{prefix}-{random_ids.token_hex(8)}"


class OnlineAnswers:
    def __init__(self, engine: OnlineEngine, state: StateFolder, settings: ServeSettings,
                 calibrators: Calibrators, budget: SharedBudget | None = None) -> None:
        self.engine = engine
        self.budget = budget
        self.state = state
        self.settings = settings
        self.calibrators = calibrators
        self.pending: dict[str, Pending] = {}
        self.recent: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.writing: dict[str, asyncio.Task[None]] = {}
        """Answers whose file is being written (their explanation waits for it)."""
        self.answered = 0
        self._mean_seconds = 1.0

    # ------------------------------------------------------------------ checking a request

    def check_cases(self, request: PredictionRequest) -> list[CaseRow]:
        """The request's cases as checked rows, or a 422 naming the first field at fault."""
        inline = {name: getattr(request, name) for name in (*CASE_FIELDS, "id") if getattr(request, name) is not None}
        if request.cases is not None and inline:
            raise ApiError(422, f"give one case inline or a list in 'cases', not both (got {', '.join(inline)} "
                                "beside cases)", field=next(iter(inline)))
        if request.cases is None:
            for name in ("outcome1", "outcome2", "condition"):
                if name not in inline:
                    raise ApiError(422, f"missing {name} (or give a list of cases in 'cases')", field=name)
            cases = [CaseIn(**inline)]
            where = [""]
        else:
            cases = list(request.cases)
            where = [f"cases[{i}]." for i in range(len(cases))]
        if len(cases) > self.settings.max_cases:
            raise ApiError(413, f"{len(cases)} cases in one request, over the limit of {self.settings.max_cases}; "
                                "send more requests, or a job (POST /v1/jobs)", field="cases")
        checker = RowChecker(ResolvedColumns(used={c: c for c in CASE_COLUMNS if c != "label" and c != "p_true"},
                                             ignored=(), header=()), CaseLimits())
        rows = []
        first: dict[str, int] = {}
        for n, (case, prefix) in enumerate(zip(cases, where, strict=True), 1):
            if case.id is not None and not valid_id(case.id):
                raise ApiError(422, f"id {case.id[:60]!r} is not a valid id: letters, digits, '.', '_' and '-', "
                                    "at most 128, starting with a letter or digit", field=f"{prefix}id")
            if case.id is not None:  # checked here: the row checker's message names a file's line
                if case.id in first:
                    raise ApiError(422, f"duplicate id {case.id!r} (first as cases[{first[case.id]}])",
                                   field=f"{prefix}id")
                first[case.id] = n - 1
            values = case.model_dump()
            values["id"] = case.id or new_id("p")
            row = checker.check(RawRecord(line=n, values=values), n)
            if not isinstance(row, CaseRow):
                raise ApiError(422, row.reason, field=f"{prefix}{row.field or 'case'}")
            rows.append(row)
        return rows

    def check_method(self, request: PredictionRequest) -> FileCalibrator | None:
        if request.method not in self.methods():
            raise ApiError(422, f"unknown method {request.method[:60]!r}; choose from {', '.join(self.methods())}",
                           field="method")
        try:
            check_method(request.method, request.stage, online=True)
        except RunError as exc:
            raise refused(exc) from None
        self.check_method_extra(request.method)
        return self.calibrators.get(request.calibrator)

    @staticmethod
    def check_method_extra(method: str) -> None:
        """Refuse a method whose optional package is not installed (BIRD's torch), naming the extra."""
        extra = method_extra(method)
        if extra is not None and not extra_installed(extra):
            raise ApiError(422, extra_hint(extra, f"method {method}"), field="method")

    @staticmethod
    def methods() -> tuple[str, ...]:
        from anchor.serve.engine import METHOD_NAMES

        return METHOD_NAMES

    def wait_of(self, wait: float | None) -> float:
        chosen = self.settings.default_wait if wait is None else wait
        if chosen > self.settings.max_wait:
            raise ApiError(422, f"wait {chosen:g} is over the limit of {self.settings.max_wait:g} seconds", field="wait")
        return chosen

    def admit(self, n: int) -> None:
        """Refuse with 429 and Retry-After when ``n`` more cases would overfill the queue."""
        waiting = len(self.pending)
        if waiting + n > self.settings.max_queue:
            seconds = max(1, min(60, math.ceil(self._mean_seconds * (waiting + n) / max(1, self.settings.max_queue))))
            raise ApiError(429, f"{waiting} case(s) are waiting for an answer (at most {self.settings.max_queue}); "
                                f"try again in {seconds} s", field=None, headers={"Retry-After": str(seconds)})

    # ------------------------------------------------------------------ answering

    async def submit(self, request: PredictionRequest) -> tuple[list[dict[str, Any]], bool]:
        """Answer the request's cases: their records, and whether every one is answered."""
        calibrator = self.check_method(request)
        rows = self.check_cases(request)
        wait = self.wait_of(request.wait)
        settings = {"method": request.method, "stage": request.stage, "calibrator": request.calibrator}
        digests = [self._digest(row, settings) for row in rows]
        existing: dict[str, dict[str, Any] | Pending] = {}
        for i, (row, digest) in enumerate(zip(rows, digests, strict=True)):
            known = self.pending.get(row.id) or self.get(row.id)
            if known is None:
                continue
            if (known.digest if isinstance(known, Pending) else known.get("digest")) != digest:
                where = f"cases[{i}].id" if request.cases is not None else "id"
                raise ApiError(409, f"id {row.id!r} names another prediction already (another case or other "
                                    "settings); choose another id", field=where)
            existing[row.id] = known
        self.admit(sum(1 for row in rows if row.id not in existing))
        worker = await self.engine.worker(request.method, request.stage, calibrator)
        loop = asyncio.get_running_loop()
        waiting: list[asyncio.Future[None]] = []
        for row, digest in zip(rows, digests, strict=True):
            known = existing.get(row.id)
            if isinstance(known, Pending):
                assert known.answered is not None
                waiting.append(known.answered)
                continue
            if known is not None:
                continue
            entry = Pending(row.id, digest, {**{k: getattr(row, k) for k in CASE_FIELDS}, **settings})
            entry.artefact = self.engine.artefact_key(worker, row.to_scenario())
            stored = self.engine.artefact_stored(worker, row.to_scenario())
            entry.phase = "building" if stored is False else "answering"
            self.pending[row.id] = entry
            entry.answered = loop.create_future()
            entry.task = loop.create_task(self._answer(entry, worker, row))
            waiting.append(entry.answered)
        if waiting and wait > 0:
            await asyncio.wait(waiting, timeout=wait)
        records = [self.view(row.id) for row in rows]
        return records, all(r["state"] != "pending" for r in records)

    @staticmethod
    def _digest(row: CaseRow, settings: dict[str, Any]) -> str:
        payload = json.dumps([[getattr(row, k) for k in CASE_FIELDS], settings], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    async def _answer(self, entry: Pending, worker: Any, row: CaseRow) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        traces: list[dict[str, Any]] = []
        try:
            try:
                await self.engine.prepare(worker, row.to_scenario())
            except Exception:  # noqa: BLE001 - a build that failed fails the answer below, which says why
                pass
            entry.phase = "answering"
            if self.budget is not None:
                self.budget.online_started()
            try:
                answer = await self.engine.answer(worker, row)
            finally:
                if self.budget is not None:
                    self.budget.online_finished()
            traces = answer.traces
            record = {**self._base(entry), "state": "done", **public_answer(answer), "space": answer.artefact,
                      "error": answer.prediction.error}
        except asyncio.CancelledError:
            record = {**self._base(entry), "state": "interrupted", "space": entry.artefact,
                      "error": "the service stopped before this case was answered; send it again"}
            record["links"] = self._links(entry.id, record, [])
            self._remember(entry, record)
            self.state.write_answer(entry.id, record)
            raise
        except Exception as exc:  # noqa: BLE001 - one case's failure is its record, never the service's
            record = {**self._base(entry), "state": "done", "status": "failed", "unknown": True, "space": entry.artefact,
                      "error": scrub(str(exc))[:800] or type(exc).__name__}
        self._mean_seconds = 0.9 * self._mean_seconds + 0.1 * (loop.time() - started)
        record["links"] = self._links(entry.id, record, traces)
        self._remember(entry, record)
        self.writing[entry.id] = asyncio.current_task()  # type: ignore[assignment]
        try:
            await asyncio.to_thread(self.state.write_answer, entry.id, {**record, "traces": traces})
        finally:
            self.writing.pop(entry.id, None)

    def _base(self, entry: Pending) -> dict[str, Any]:
        req = entry.request
        return {"schema_version": API_SCHEMA_VERSION, "id": entry.id, "method": req["method"], "stage": req["stage"],
                "calibrator": req["calibrator"], "case": {k: req[k] for k in CASE_FIELDS}, "digest": entry.digest,
                "created": entry.created, "finished": now_iso()}

    def _links(self, answer_id: str, record: dict[str, Any], traces: list[dict[str, Any]]) -> dict[str, Any]:
        explained = bool(traces) and anchor_result(traces[0].get("result")) is not None
        space = record.get("space")
        stored = space is not None and space_file(store_spaces(self.settings.store_dir), space).exists()
        return {"self": f"/v1/predictions/{answer_id}",
                "explanation": f"/v1/predictions/{answer_id}/explanation" if explained else None,
                "space": f"/v1/spaces/{space}" if stored else None}

    def _remember(self, entry: Pending, record: dict[str, Any]) -> None:
        """The answer in memory, and the request waiting for it told (on the event loop)."""
        self.recent[entry.id] = record
        self.recent.move_to_end(entry.id)
        while len(self.recent) > self.settings.kept_answers:
            self.recent.popitem(last=False)
        self.pending.pop(entry.id, None)
        self.answered += 1
        if entry.answered is not None and not entry.answered.done():
            entry.answered.set_result(None)

    async def written(self, answer_id: str) -> None:
        """Wait until the answer's file is written (the explanation page reads it)."""
        task = self.writing.get(answer_id)
        if task is not None:
            await asyncio.wait([task])

    # ------------------------------------------------------------------ reading answers back

    def view(self, answer_id: str) -> dict[str, Any]:
        entry = self.pending.get(answer_id)
        if entry is not None:
            waiting_for = ("the factor space (or model) of this case's scenario to be built" if entry.phase == "building"
                           else "the answer")
            return {**self._base(entry), "state": "pending", "finished": None, "waiting_for": waiting_for,
                    "space": entry.artefact, "links": {"self": f"/v1/predictions/{answer_id}", "explanation": None,
                                                        "space": None}}
        found = self.get(answer_id)
        assert found is not None, answer_id
        return found

    def get(self, answer_id: str) -> dict[str, Any] | None:
        """A finished answer (from memory, else from disk) without its traces, or None."""
        found = self.recent.get(answer_id)
        if found is not None:
            return found
        record = self.state.read_answer(answer_id)
        if record is not None:
            record.pop("traces", None)
        return record

    def result_of(self, answer_id: str) -> tuple[dict[str, Any], Any] | None:
        """(record, ANCHOR result) of a finished answer, read from disk, or None."""
        record = self.state.read_answer(answer_id)
        if record is None or not record.get("traces"):
            return None
        result = anchor_result(record["traces"][0].get("result"))
        return (record, result) if result is not None else None

    async def close(self) -> None:
        """Stop answering: cancel what is still pending (each is recorded as interrupted)."""
        tasks = [entry.task for entry in self.pending.values() if entry.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
