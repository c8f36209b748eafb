"""Batch jobs: a cases file answered into a predict run directory, each on its own thread and event loop.

A job is queued when it is sent, started when a place is free (``--max-running-jobs``, one by default,
in each process of the service), and run by :class:`anchor.serve.engine.JobRun`: ``anchor predict`` over
the job's file into the job's run directory. Its ``job.json`` says where it stands.

The state folder is the truth, not a process's memory, so that the N processes of ``--workers N`` share
the jobs: a process runs a job only while it holds the job's lock (``jobs/ID/.lock``, an ``flock``), so
exactly one does, and the kernel lets go of the lock when that process dies, however it dies (SIGTERM, a
crash, ``kill -9``). Every process looks over the folder a few times a second (:meth:`Jobs.tick`): it
starts the unfinished jobs nobody holds (queued, or left running by a process that died), resumed as
``anchor predict`` resumes (rows already answered are kept, and the answers of requests made before are in
the response cache); it sees the jobs sent to the others; it stops its own jobs that a DELETE made
elsewhere asked to stop (``jobs/ID/cancel``); and it writes its running jobs' figures (``progress.json``)
for the others to show.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Any

from anchor.files import write_text_atomic
from anchor.secrets import scrub
from anchor.serve.engine import JobRun, JobTally
from anchor.serve.errors import API_SCHEMA_VERSION, ApiError
from anchor.serve.settings import valid_id
from anchor.serve.state import UNFINISHED, JobRecord, StateFolder, now_iso

log = logging.getLogger("anchor.serve")
#: How often a process looks over the state folder for jobs to start, to stop and to show.
TICK_SECONDS = 0.5


def tidy(state: StateFolder) -> int:
    """At a service's start, before any of its processes serves: remove the job folders whose file was
    still being sent when the service stopped (never accepted; their ids are free again), and count the
    jobs left unfinished (they are resumed)."""
    for job_id in state.half_sent():
        shutil.rmtree(state.job_dir(job_id), ignore_errors=True)
        log.info("job %s: removed; the service stopped while its file was being sent, so it was never "
                 "accepted (its id is free again)", job_id)
    return sum(1 for record in state.jobs() if record.state in UNFINISHED)


@dataclass
class JobHandle:
    record: JobRecord
    thread: threading.Thread | None = None
    loop: asyncio.AbstractEventLoop | None = None
    task: asyncio.Task[Any] | None = None
    run: JobRun | None = None
    cancel_requested: bool = False
    stopping: bool = False
    lock: IO[bytes] | None = None
    """The job's lock file, held while this process runs it."""
    tally: JobTally = field(default_factory=JobTally)


class Jobs:
    def __init__(self, state: StateFolder, make_run: Callable[[JobRecord], JobRun], *, max_running: int,
                 max_queued: int, shared: bool = False) -> None:
        self.state = state
        self.shared = shared
        """One of several processes (``--workers``): the running jobs' figures are written for the others."""
        self.make_run = make_run
        self.max_running = max_running
        self.max_queued = max_queued
        self.records: dict[str, JobRecord] = {}
        """Every job of the state folder as last read (those this process runs: as they are)."""
        self.running: dict[str, JobHandle] = {}
        self.sending = 0
        """Jobs whose file is being sent: each holds a place in the queue (:meth:`place`)."""
        self.stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ticker: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifetime

    def load(self, *, tidy_first: bool = True) -> int:
        """Read every job of the state folder; how many are unfinished (they are started again when free).
        ``tidy_first``: this process is the service's only one, so it clears half-sent folders too."""
        again = tidy(self.state) if tidy_first else 0
        self._apply(self._read_changes())
        return again if tidy_first else sum(1 for r in self.records.values() if r.state in UNFINISHED)

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.schedule()
        self._ticker = self._loop.create_task(self._tick_forever(), name="jobs-tick")

    async def _tick_forever(self) -> None:
        while not self.stopping:
            await asyncio.sleep(TICK_SECONDS)
            try:
                await self.tick()
            except Exception as exc:  # noqa: BLE001 - a failed look is tried again at the next tick
                log.warning("jobs: could not read the state folder (%s); trying again", scrub(str(exc)))

    async def tick(self) -> None:
        """Look over the state folder: jobs sent elsewhere, DELETEs made elsewhere, jobs to start."""
        self._apply(await asyncio.to_thread(self._read_changes))
        await asyncio.to_thread(self._watch_running)
        self.schedule()

    async def refresh(self) -> None:
        """Read what the other processes changed (before listing every job)."""
        self._apply(await asyncio.to_thread(self._read_changes))

    def _apply(self, found: dict[str, JobRecord]) -> None:
        for job_id, record in found.items():
            if job_id not in self.running:  # started here since it was read: this process's copy is ahead
                self.records[job_id] = record

    def _read_changes(self) -> dict[str, JobRecord]:
        """The records of the jobs not known yet or not finished, as the folder has them now (not those this
        process runs: its own copies are ahead of the files)."""
        found: dict[str, JobRecord] = {}
        for folder in (self.state.root / "jobs").iterdir():
            job_id = folder.name
            if job_id in self.running:
                continue
            known = self.records.get(job_id)
            if known is not None and known.state not in UNFINISHED:
                continue
            record = self.state.read_job(job_id) if folder.is_dir() and valid_id(job_id) else None
            if record is not None:
                found[job_id] = record
        return dict(sorted(found.items(), key=lambda kv: (kv[1].created, kv[0])))

    def _watch_running(self) -> None:
        """For this process's running jobs: a DELETE made in another process, and the figures to show there."""
        for handle in list(self.running.values()):
            job_id = handle.record.id
            marker = self.state.cancel_marker(job_id)
            if marker.exists():
                marker.unlink(missing_ok=True)
                handle.cancel_requested = True
                self._cancel(handle)
            if self.shared and handle.run is not None:
                t = handle.tally
                write_text_atomic(self.state.progress_path(job_id), json.dumps(
                    {"rows_done": t.done, "rows_total": t.total or handle.record.check.get("good"),
                     "requests": t.requests, "tokens": t.tokens, "prompt_tokens": t.prompt_tokens,
                     "completion_tokens": t.completion_tokens, "seconds_left": t.seconds_left(time.monotonic())}))

    async def close(self, seconds: float) -> None:
        """Stop every running job: cancelled, its files closed, and left queued for the next start."""
        self.stopping = True
        if self._ticker is not None:
            self._ticker.cancel()
        handles = list(self.running.values())
        for handle in handles:
            handle.stopping = True
            self._cancel(handle)
        for handle in handles:
            if handle.thread is not None:
                await asyncio.to_thread(handle.thread.join, seconds)

    # ------------------------------------------------------------------ the queue

    def queued(self) -> int:
        return sum(1 for r in self.records.values() if r.state == "queued")

    @contextmanager
    def place(self) -> Iterator[None]:
        """Hold a place in the queue while a job's file is sent and checked (let go when the job is added,
        or refused): 429 when every place is queued or held. Checked before the file is read, so that uploads
        sent together cannot all pass the check while none of them is queued yet."""
        queued = self.queued()
        if queued + self.sending >= self.max_queued:
            raise ApiError(429, f"{queued} jobs are queued and {self.sending} being sent (at most "
                                f"{self.max_queued} in all); try again later", headers={"Retry-After": "60"})
        self.sending += 1
        try:
            yield
        finally:
            self.sending -= 1

    def add(self, record: JobRecord) -> None:
        self.records[record.id] = record
        self.state.write_job(record)
        self.schedule()

    def ids(self) -> list[str]:
        """Every job's id, oldest first."""
        return [r.id for r in sorted(list(self.records.values()), key=lambda r: (r.created, r.id))]

    def known(self, job_id: str) -> bool:
        """Whether there is such a job (sent to this process or another)."""
        if job_id not in self.records:
            record = self.state.read_job(job_id)
            if record is None:
                return False
            self.records[job_id] = record
        return True

    def schedule(self) -> None:
        """Start unfinished jobs, oldest first, while this process has room and nobody else holds them."""
        waiting = sorted((r for r in self.records.values() if r.state in UNFINISHED), key=lambda r: (r.created, r.id))
        for record in waiting:
            job_id = record.id
            if self.stopping or len(self.running) >= self.max_running:
                return
            if record.state not in UNFINISHED or job_id in self.running:
                continue
            lock = self.state.claim(job_id)
            if lock is None:
                continue  # another process runs it
            fresh = self.state.read_job(job_id)  # as it is now that nobody else can change it
            if fresh is None or fresh.state not in UNFINISHED:
                lock.close()
                if fresh is not None:
                    self.records[job_id] = fresh
                continue
            self.records[job_id] = record = fresh
            if self.state.cancel_marker(job_id).exists():
                self.state.cancel_marker(job_id).unlink(missing_ok=True)
                record.state, record.finished = "cancelled", now_iso()
                record.note = "cancelled (DELETE); the rows answered are kept"
                self.state.write_job(record)
                lock.close()
                continue
            if record.starts:
                record.note = "resumed after the service stopped"
            handle = JobHandle(record, lock=lock)
            self.running[job_id] = handle
            record.state, record.started, record.error = "running", now_iso(), None
            record.starts += 1
            record.process = os.getpid()
            self.state.write_job(record)
            handle.thread = threading.Thread(target=self._thread, args=(handle,), name=f"job-{job_id}", daemon=True)
            handle.thread.start()

    def cancel(self, job_id: str) -> bool:
        """Cancel a job nobody runs at once (False), or ask the one running to stop (True: under way), in this
        process or, through ``jobs/ID/cancel``, in another. Which of the two is decided here, not read back
        from the record afterwards: a running job may have finished cancelling on its own before the caller
        looks."""
        handle = self.running.get(job_id)
        if handle is not None:
            # A job whose thread has ended it (written its record) but not yet handed it back to this loop is
            # finished: the 409 below.
            record = handle.record
            if record.state in UNFINISHED:
                handle.cancel_requested = True
                self._cancel(handle)
                return True
        else:
            record = self.state.read_job(job_id) or self.records[job_id]
            self.records[job_id] = record
        if handle is None and record.state in UNFINISHED:
            lock = self.state.claim(job_id)
            if lock is None:  # running in another process (or being started there): it watches for this
                self.state.cancel_marker(job_id).touch()
                return True
            try:
                record = self.state.read_job(job_id) or record
                if record.state in UNFINISHED:
                    record.state, record.finished = "cancelled", now_iso()
                    self.state.write_job(record)
                    self.records[job_id] = record
                    return False
            finally:
                lock.close()
        raise ApiError(409, f"job {job_id} is {record.state} already: nothing to cancel", field="id")

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
            self.state.progress_path(record.id).unlink(missing_ok=True)
            if handle.lock is not None:
                handle.lock.close()  # after the record is written: whoever takes the job next reads it whole
            if self._loop is not None:
                try:
                    self._loop.call_soon_threadsafe(self._ended, handle)
                except RuntimeError:
                    pass

    def _ended(self, handle: JobHandle) -> None:
        self.running.pop(handle.record.id, None)
        self.records[handle.record.id] = handle.record
        self.schedule()

    # ------------------------------------------------------------------ what a client sees

    def view(self, job_id: str) -> dict[str, Any]:
        handle = self.running.get(job_id)
        record = self.records[job_id]
        if handle is None and record.state in UNFINISHED:  # another process may have moved it on
            record = self.records[job_id] = self.state.read_job(job_id) or record
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
        if record.state == "running":
            try:  # run by another process: the figures it writes
                return json.loads(self.state.progress_path(record.id).read_bytes())
            except (OSError, ValueError):
                pass
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
