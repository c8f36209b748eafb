"""fsyncs of a durable log, grouped on a thread of their own."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable


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
