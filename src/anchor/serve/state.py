"""The service's state folder: what survives a restart, and the lock that keeps one service per folder.

```
STATE/
  .lock               held by the running service (a second one on the folder is refused); with
                      --workers N, by the process that supervises the N
  budget/K.lock       with --workers N: the LLM budget's slots, one file each (serve/budget.py)
  metrics/            with --workers N: each process's counters (Prometheus multiprocess files)
  store/spaces/       the space store (the default; --spaces names another, such as predict's)
  jobs/ID/job.json    a job: its settings, state and check summary (JobRecord)
  jobs/ID/cases.EXT   the cases file as it was sent
  jobs/ID/run/        the job's predict run directory (anchor predict's --out)
  jobs/ID/.lock       held (flock) by the process running the job: exactly one does, and the kernel
                      lets go of it when that process dies, however it dies
  jobs/ID/cancel      a DELETE made in another process than the one running the job
  jobs/ID/progress.json  the running job's figures, for the other processes to show
  answers/ID.json     an online answer: the case, the answer and its traces (for the explanation page)
  answers/.recent     with --workers N: the ids of the answers, one a line as they are written (the live
                      page lists the latest of every process from its end)
  answers/ID.pending  with --workers N: an answer still pending when its request came back (202), and the
                      process answering it, for a poll that reaches another process
```

Every id that names a file here was checked (:func:`anchor.serve.settings.valid_id`): no path leaves
the folder.
"""

from __future__ import annotations

import fcntl
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, Field

from anchor.errors import ConfigurationError
from anchor.files import write_text_atomic
from anchor.serve.errors import API_SCHEMA_VERSION
from anchor.serve.settings import valid_id

#: The ids of the answers as they are written, with --workers (``answers/.recent``).
RECENT = ".recent"
JobState = Literal["queued", "running", "done", "failed", "cancelled"]
#: States a job leaves only by being started (again): the service resumes them when it starts.
UNFINISHED: tuple[JobState, ...] = ("queued", "running")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class JobRecord(BaseModel):
    """``jobs/ID/job.json``: one batch job as the service keeps it."""

    schema_version: int = API_SCHEMA_VERSION
    id: str
    state: JobState = "queued"
    created: str = Field(default_factory=now_iso)
    started: str | None = None
    finished: str | None = None
    method: str = "anchor"
    stage: str | None = None
    calibrator: str | None = None
    format: str
    columns: dict[str, str] = Field(default_factory=dict)
    file: str = Field(description="The cases file's name in the job's folder.")
    bytes: int = 0
    check: dict[str, Any] = Field(default_factory=dict, description="rows, good, bad, groups, labelled, columns")
    error: str | None = None
    note: str | None = None
    summary: dict[str, Any] | None = None
    starts: int = Field(default=0, description="How many times the service has started (or resumed) its run.")
    process: int | None = Field(default=None, description="The id of the process that runs it (or ran it last): "
                                                          "one of the service's processes with --workers.")


class StateFolder:
    """``shared=True``: one of the processes of a service whose supervisor holds the folder's lock (it
    takes no lock of its own)."""

    def __init__(self, root: Path, *, shared: bool = False) -> None:
        self.root = Path(root)
        self.shared = shared
        self._lock: IO[str] | None = None

    # ------------------------------------------------------------------ the lock

    def acquire(self) -> None:
        """Create the folder and take its lock; refuse when another service holds it."""
        try:
            for sub in ("jobs", "answers"):
                (self.root / sub).mkdir(parents=True, exist_ok=True)
            fh = open(self.root / ".lock", "a+")  # noqa: SIM115 - held for the service's lifetime
        except OSError as exc:
            raise ConfigurationError(f"--state {self.root}: {exc.strerror or exc}") from None
        if self.shared:
            fh.close()
            return
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            pid = fh.read().strip()
            fh.close()
            raise ConfigurationError(f"--state {self.root}: another anchor serve uses this folder"
                                     + (f" (pid {pid})" if pid else "")) from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._lock = fh

    def release(self) -> None:
        if self._lock is not None:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    # ------------------------------------------------------------------ jobs

    def job_dir(self, job_id: str) -> Path:
        assert valid_id(job_id), job_id
        return self.root / "jobs" / job_id

    def run_dir(self, job_id: str) -> Path:
        return self.job_dir(job_id) / "run"

    def claim(self, job_id: str) -> IO[bytes] | None:
        """Take the job's lock (``jobs/ID/.lock``) without waiting: the open file while this process holds
        it (closing it lets go), None when another process holds it."""
        try:
            fh = open(self.job_dir(job_id) / ".lock", "ab")  # noqa: SIM115 - held while the job runs
        except OSError:
            return None
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            return None
        return fh

    def cancel_marker(self, job_id: str) -> Path:
        return self.job_dir(job_id) / "cancel"

    def progress_path(self, job_id: str) -> Path:
        return self.job_dir(job_id) / "progress.json"

    def write_job(self, record: JobRecord) -> None:
        write_text_atomic(self.job_dir(record.id) / "job.json", record.model_dump_json(indent=2))

    def read_job(self, job_id: str) -> JobRecord | None:
        try:
            return JobRecord.model_validate_json((self.job_dir(job_id) / "job.json").read_bytes())
        except (OSError, ValueError):
            return None

    def half_sent(self) -> list[str]:
        """The job folders without a ``job.json``: files the service stopped while reading (a job's record is
        written once its file is whole and checked), never accepted."""
        return [folder.name for folder in sorted((self.root / "jobs").iterdir())
                if folder.is_dir() and valid_id(folder.name) and not (folder / "job.json").exists()]

    def jobs(self) -> list[JobRecord]:
        """Every job with a readable record, oldest first."""
        out = []
        for folder in sorted((self.root / "jobs").iterdir()):
            if folder.is_dir() and valid_id(folder.name):
                record = self.read_job(folder.name)
                if record is not None:
                    out.append(record)
        return sorted(out, key=lambda r: (r.created, r.id))

    # ------------------------------------------------------------------ online answers

    def answer_path(self, answer_id: str) -> Path:
        assert valid_id(answer_id), answer_id
        return self.root / "answers" / f"{answer_id}.json"

    def write_answer(self, answer_id: str, record: dict[str, Any]) -> None:
        write_text_atomic(self.answer_path(answer_id), json.dumps(record, ensure_ascii=False))
        if self.shared:
            # One write of one short line to a file opened to append: the processes' lines never mix.
            fd = os.open(self.root / "answers" / RECENT, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, f"{answer_id}\n".encode())
            finally:
                os.close(fd)

    def latest_answers(self, n: int) -> list[dict[str, Any]]:
        """The last ``n`` answers written by any of the service's processes, newest first, without traces."""
        try:
            with open(self.root / "answers" / RECENT, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                start = max(0, fh.tell() - n * 160)  # an id is 128 characters at most
                fh.seek(start)
                lines = fh.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return []
        out: list[dict[str, Any]] = []
        for answer_id in dict.fromkeys(reversed(lines[1:] if start else lines)):  # the first may be cut
            if len(out) == n:
                break
            record = self.read_answer(answer_id) if valid_id(answer_id) else None
            if record is not None:
                record.pop("traces", None)
                out.append(record)
        return out

    def write_pending(self, answer_id: str, view: dict[str, Any]) -> None:
        record = {"process": os.getpid(), "view": view}
        write_text_atomic(self.root / "answers" / f"{answer_id}.pending", json.dumps(record, ensure_ascii=False))

    def read_pending(self, answer_id: str) -> dict[str, Any] | None:
        """The view of an answer another process still works on, or None (none, or that process has died:
        its pending answers died with it)."""
        assert valid_id(answer_id), answer_id
        try:
            record = json.loads((self.root / "answers" / f"{answer_id}.pending").read_bytes())
            os.kill(int(record["process"]), 0)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        view = record.get("view")
        return view if isinstance(view, dict) else None

    def read_answer(self, answer_id: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self.answer_path(answer_id).read_bytes())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None
