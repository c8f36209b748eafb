"""Batch jobs: a cases file answered into a predict run directory, each on its own thread and event loop.

A job is queued when it is sent, started when a place is free (``--max-running-jobs``, one by default),
and run by :class:`anchor.serve.engine.JobRun`: ``anchor predict`` over the job's file into the job's
run directory. Its ``job.json`` says where it stands. When the service starts it queues again every job
that was queued or running when it stopped (however it stopped: SIGTERM, a crash, ``kill -9``), and the
run resumes as ``anchor predict`` resumes: rows already answered are kept, and the answers of requests
made before are in the response cache.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from anchor.secrets import scrub
from anchor.serve.engine import JobRun, JobTally
from anchor.serve.errors import API_SCHEMA_VERSION, ApiError
from anchor.serve.state import UNFINISHED, JobRecord, StateFolder, now_iso

log = logging.getLogger("anchor.serve")


@dataclass
class JobHandle:
    record: JobRecord
    thread: threading.Thread | None = None
    loop: asyncio.AbstractEventLoop | None = None
    task: asyncio.Task[Any] | None = None
    run: JobRun | None = None
    cancel_requested: bool = False
    stopping: bool = False
    tally: JobTally = field(default_factory=JobTally)


class Jobs:
    def __init__(self, state: StateFolder, make_run: Callable[[JobRecord], JobRun], *, max_running: int,
                 max_queued: int) -> None:
        self.state = state
        self.make_run = make_run
        self.max_running = max_running
        self.max_queued = max_queued
        self.records: dict[str, JobRecord] = {}
        self.queue: deque[str] = deque()
        self.running: dict[str, JobHandle] = {}
        self.sending = 0
        """Jobs whose file is being sent: each holds a place in the queue (:meth:`place`)."""
        self.stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ lifetime

    def load(self) -> int:
        """Read every job of the state folder and queue again those left unfinished; how many. A job whose
        file was still being sent when the service stopped is removed, which frees its id."""
        for job_id in self.state.half_sent():
            shutil.rmtree(self.state.job_dir(job_id), ignore_errors=True)
            log.info("job %s: removed; the service stopped while its file was being sent, so it was never "
                     "accepted (its id is free again)", job_id)
        again = 0
        for record in self.state.jobs():
            self.records[record.id] = record
            if record.state in UNFINISHED:
                if record.starts:
                    record.note = "resumed after the service stopped"
                record.state = "queued"
                self.state.write_job(record)
                self.queue.append(record.id)
                again += 1
        return again

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.schedule()

    async def close(self, seconds: float) -> None:
        """Stop every running job: cancelled, its files closed, and left queued for the next start."""
        self.stopping = True
        handles = list(self.running.values())
        for handle in handles:
            handle.stopping = True
            self._cancel(handle)
        for handle in handles:
            if handle.thread is not None:
                await asyncio.to_thread(handle.thread.join, seconds)

    # ------------------------------------------------------------------ the queue

    def queued(self) -> int:
        return len(self.queue)

    @contextmanager
    def place(self) -> Iterator[None]:
        """Hold a place in the queue while a job's file is sent and checked (let go when the job is added,
        or refused): 429 when every place is queued or held. Checked before the file is read, so that uploads
        sent together cannot all pass the check while none of them is queued yet."""
        taken = len(self.queue) + self.sending
        if taken >= self.max_queued:
            raise ApiError(429, f"{len(self.queue)} jobs are queued and {self.sending} being sent (at most "
                                f"{self.max_queued} in all); try again later", headers={"Retry-After": "60"})
        self.sending += 1
        try:
            yield
        finally:
            self.sending -= 1

    def add(self, record: JobRecord) -> None:
        self.records[record.id] = record
        self.state.write_job(record)
        self.queue.append(record.id)
        self.schedule()

    def schedule(self) -> None:
        while not self.stopping and self.queue and len(self.running) < self.max_running:
            record = self.records[self.queue.popleft()]
            if record.state != "queued":
                continue
            handle = JobHandle(record)
            self.running[record.id] = handle
            record.state, record.started, record.error = "running", now_iso(), None
            record.starts += 1
            self.state.write_job(record)
            handle.thread = threading.Thread(target=self._thread, args=(handle,), name=f"job-{record.id}", daemon=True)
            handle.thread.start()

    def cancel(self, job_id: str) -> bool:
        """Cancel a queued job at once (False) or ask a running one to stop (True: under way). Which of the two
        is decided here, not read back from the record afterwards: a running job may have finished
        cancelling on its own thread before the caller looks."""
        record = self.records[job_id]
        if record.state == "queued":
            self.queue = deque(j for j in self.queue if j != job_id)
            record.state, record.finished = "cancelled", now_iso()
            self.state.write_job(record)
            return False
        handle = self.running.get(job_id)
        if handle is None:
            raise ApiError(409, f"job {job_id} is {record.state} already: nothing to cancel", field="id")
        handle.cancel_requested = True
        self._cancel(handle)
        return True

    @staticmethod
    def _cancel(handle: JobHandle) -> None:
        loop, task = handle.loop, handle.task
        if loop is not None and task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # its loop has just ended
                pass

    # ------------------------------------------------------------------ one job, on its own thread

    def _thread(self, handle: JobHandle) -> None:
        asyncio.run(self._run(handle))

    async def _run(self, handle: JobHandle) -> None:
        record = handle.record
        handle.loop, handle.task = asyncio.get_running_loop(), asyncio.current_task()
        try:
            if handle.cancel_requested or handle.stopping:
                raise asyncio.CancelledError
            run = handle.run = self.make_run(record)
            handle.tally = run.tally
            summary = await run.run()
            record.summary = {**summary, "requests": run.tally.requests, "tokens": run.tally.tokens,
                              "prompt_tokens": run.tally.prompt_tokens, "completion_tokens": run.tally.completion_tokens}
            record.state, record.note = "done", None
        except asyncio.CancelledError:
            if handle.stopping and not handle.cancel_requested:
                record.state, record.note = "queued", "stopped with the service; resumes when it starts again"
            else:
                record.state, record.note = "cancelled", "cancelled (DELETE); the rows answered are kept"
        except Exception as exc:  # noqa: BLE001 - a job's failure is its record, never the service's
            record.state, record.error = "failed", scrub(str(exc))[:2000] or type(exc).__name__
        finally:
            record.finished = now_iso() if record.state != "queued" else None
            self.state.write_job(record)
            if self._loop is not None:
                try:
                    self._loop.call_soon_threadsafe(self._ended, handle)
                except RuntimeError:
                    pass

    def _ended(self, handle: JobHandle) -> None:
        self.running.pop(handle.record.id, None)
        self.schedule()

    # ------------------------------------------------------------------ what a client sees

    def view(self, job_id: str) -> dict[str, Any]:
        record = self.records[job_id]
        handle = self.running.get(job_id)
        progress = self._progress(record, handle)
        base = f"/v1/jobs/{job_id}"
        return {**record.model_dump(mode="json"), "schema_version": API_SCHEMA_VERSION, "progress": progress,
                "links": {"self": base, "results": f"{base}/results", "results_csv": f"{base}/results?format=csv",
                          "page": f"/jobs/{job_id}"}}

    def _progress(self, record: JobRecord, handle: JobHandle | None) -> dict[str, Any]:
        if handle is not None and handle.run is not None:
            t = handle.tally
            return {"rows_done": t.done, "rows_total": t.total or record.check.get("good"),
                    "requests": t.requests, "tokens": t.tokens, "prompt_tokens": t.prompt_tokens,
                    "completion_tokens": t.completion_tokens, "seconds_left": t.seconds_left(time.monotonic())}
        summary = record.summary or {}
        total = record.check.get("good")
        done = summary.get("rows") if record.state == "done" else None
        return {"rows_done": done if done is not None else self._answered(record), "rows_total": total,
                "requests": summary.get("requests"), "tokens": summary.get("tokens"),
                "prompt_tokens": summary.get("prompt_tokens"), "completion_tokens": summary.get("completion_tokens"),
                "seconds_left": 0.0 if record.state == "done" else None}

    def _answered(self, record: JobRecord) -> int:
        from anchor.serve.engine import prediction_lines

        return sum(1 for _ in prediction_lines(self.state.run_dir(record.id)))

    def by_state(self) -> dict[str, int]:
        out = dict.fromkeys(("queued", "running", "done", "failed", "cancelled"), 0)
        for record in self.records.values():
            out[record.state] += 1
        return out
