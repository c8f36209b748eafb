"""The lock that keeps one process per run directory."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from anchor.rundir.lines import RunDirError
from anchor.rundir.names import LOCK


class DirectoryBusy(RunDirError):
    """Another process holds the directory's lock (``pid``: its process id, when it wrote one)."""

    def __init__(self, message: str, pid: int | None) -> None:
        super().__init__(message)
        self.pid = pid


class DirectoryLock:
    """An exclusive lock on a run directory, so two processes never write one run at once. The holder
    writes its process id into the lock file; the lock itself ends with the process, however it ends."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / LOCK
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
