"""The run directory's storage: append-only JSON-lines logs and the lock that keeps one process per run."""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from anchor.evaluation.runner.errors import EvalError

M = TypeVar("M", bound=BaseModel)


class JsonLines(Generic[M]):
    """An append-only JSON-lines file of one record type, tolerant of a torn last line.

    Records are flushed as they are written (a killed process loses at most the line it was
    writing); ``durable=True`` also has them reach the disk (fsync) within ``sync_seconds``, in the
    background, and at ``close()`` (see :class:`GroupSync`).
    """

    def __init__(self, path: Path, model: type[M], *, durable: bool = False, sync_seconds: float = 0.5) -> None:
        self.path = path
        self.model = model
        self.durable = durable
        self.sync_seconds = sync_seconds
        self._lock = threading.Lock()
        self._fh: IO[str] | None = None
        self._sync: GroupSync | None = None

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

    def repair(self) -> None:
        """Drop the line a killed process was writing, without reading the rest of the file."""
        if not self.path.exists():
            return
        with open(self.path, "r+b") as fh:
            end = fh.seek(0, os.SEEK_END)
            if end == 0:
                return
            fh.seek(end - 1)
            if fh.read(1) == b"\n":
                return
            pos = end
            while pos > 0:
                step = min(pos, 1 << 16)
                fh.seek(pos - step)
                chunk = fh.read(step)
                cut = chunk.rfind(b"\n")
                if cut != -1:
                    fh.truncate(pos - step + cut + 1)
                    return
                pos -= step
            fh.truncate(0)

    def append(self, record: M) -> None:
        line = record.model_dump_json() + "\n"
        with self._lock:
            if self._fh is None:
                self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
                if self.durable:
                    self._sync = GroupSync(self._fh.fileno(), self.sync_seconds)
            self._fh.write(line)
            self._fh.flush()
            if self._sync is not None:
                self._sync.written()

    def close(self) -> None:
        with self._lock:
            if self._sync is not None:
                self._sync.close()  # the last lines reach the disk before the file is closed
                self._sync = None
            if self._fh is not None:
                self._fh.close()
                self._fh = None


class GroupSync:
    """fsyncs of one file, grouped: at most one per ``seconds``, on a thread of its own.

    An fsync per line cost about 1 ms of CPU and 4 ms of event-loop time per instance (most of an
    instance's own cost against a fast server). Grouped, an operating-system crash or power cut can
    lose the lines of the last ``seconds`` (a killed process still loses none: every line is flushed
    as it is written); a resumed run then answers those instances again, from the response cache or
    by asking again, as it does for any instance without a line, so a crash costs requests, never a
    wrong result. ``close()`` syncs what is left before returning.
    """

    def __init__(self, fd: int, seconds: float, fsync: Callable[[int], None] = os.fsync) -> None:
        self._fd = os.dup(fd)  # its own descriptor: the file object may close while a sync runs
        self._seconds = seconds
        self._fsync = fsync
        self._dirty = threading.Event()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="anchor-group-sync", daemon=True)
        self._thread.start()

    def written(self) -> None:
        self._dirty.set()

    def _run(self) -> None:
        while True:
            self._dirty.wait()
            if self._closing.is_set():
                return
            self._dirty.clear()
            self._fsync(self._fd)
            self._closing.wait(self._seconds)  # lines written meanwhile share the next sync

    def close(self) -> None:
        self._closing.set()
        self._dirty.set()
        self._thread.join()
        try:
            self._fsync(self._fd)
        finally:
            os.close(self._fd)


class DirectoryBusy(EvalError):
    """Another process holds the directory's lock (``pid``: its process id, when it wrote one)."""

    def __init__(self, message: str, pid: int | None) -> None:
        super().__init__(message)
        self.pid = pid


class DirectoryLock:
    """An exclusive lock on a run directory, so two processes never write one run at once. The holder
    writes its process id into the lock file; the lock itself ends with the process, however it ends."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / ".lock"
        self._fh: IO[str] | None = None

    def __enter__(self) -> DirectoryLock:
        self._fh = open(self.path, "a+")  # noqa: SIM115 - closed in __exit__; "a+": the holder's pid stays readable
        try:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._fh.seek(0)
            text = self._fh.read().strip()
            self._fh.close()
            pid = int(text) if text.isdigit() else None
            raise DirectoryBusy(f"{self.path.parent} is in use by another anchor process"
                                + (f" (pid {pid})" if pid else "") + "; wait for it to finish or use another --out",
                                pid) from None
        self._fh.seek(0)
        self._fh.truncate()
        self._fh.write(str(os.getpid()))
        self._fh.flush()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._fh is not None
        fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
        self._fh.close()
