"""What ties a ``--ray local`` instance to the runner that started it, so that a runner killed with
``kill -9`` leaves nothing running and no request uncounted.

Ray has Linux end its own servers (GCS, raylet) with the process that started them, but its actors
notice a second or two later, sending requests meanwhile, and its two agent processes then wait a
minute on the dead servers. So, with ``--ray local``:

* every process of the instance carries a tag in its environment (:func:`tagged_environment`: the
  variable is set while ``ray.init`` starts the instance, and Ray's processes pass it on), and a
  watchdog the runner starts with the instance ends them all once the runner has ended
  (:mod:`anchor.runs.ray_watchdog`);
* each actor watches its runner (:class:`RunnerWatch`) and ends as soon as the runner has; it looks
  again as each request is about to leave, so that no request leaves once the runner is gone;
* each actor writes its records into its own shard of the run directory, each request's record
  before the request goes out (:mod:`anchor.rundir.shards`), as a helper process does; the
  next start of a killed run copies into ``calls.jsonl`` what the runner had not copied yet.

The watch needs the runner's process id, so it applies where the actors run on the runner's machine:
``--ray local``. On a cluster Ray ends a dead driver's actors itself.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from anchor.rundir.names import WORKERS
from anchor.runs.ray_watchdog import TAG_VARIABLE

#: The run directory's folder of the workers' shards (``--ray local``'s actors among them).
WORKERS_FOLDER = WORKERS
#: How often a runner's liveness is polled where the system has no process file descriptors.
POLL_SECONDS = 0.1


@contextlib.contextmanager
def tagged_environment() -> Iterator[str]:
    """Set the tag for the processes started inside the block (a local Ray instance); yields it."""
    tag = f"{os.getpid()}-{secrets.token_hex(8)}"
    before = os.environ.get(TAG_VARIABLE)
    os.environ[TAG_VARIABLE] = tag
    try:
        yield tag
    finally:
        if before is None:
            os.environ.pop(TAG_VARIABLE, None)
        else:
            os.environ[TAG_VARIABLE] = before


def _start_time(pid: int) -> str | None:
    """When process ``pid`` started (its clock ticks after boot), to tell it from a later process that
    reuses its id; None where there is no /proc or no such process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


@dataclass(frozen=True)
class LocalHome:
    """What an actor of a ``--ray local`` instance is given about its runner: the runner's process
    (id and start time), and the run directory, where it writes its shard."""

    runner: int
    runner_started: str | None
    run_dir: Path

    @classmethod
    def here(cls, run_dir: Path) -> LocalHome:
        return cls(runner=os.getpid(), runner_started=_start_time(os.getpid()), run_dir=Path(run_dir).resolve())


def _readable(fd: int, timeout_ms: int | None) -> bool:
    poller = select.poll()  # not select(): a Ray worker may hold descriptors past its limit of 1024
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout_ms))


class RunnerWatch:
    """An actor's watch on its runner: once the runner is gone, the actor ends (:meth:`die`). A thread
    waits for the runner's end; :meth:`check` looks at once."""

    def __init__(self, home: LocalHome) -> None:
        self.home = home
        self._fd: int | None = None
        self._gone = False
        try:
            self._fd = os.pidfd_open(home.runner)  # readable once the runner has ended (Linux)
        except ProcessLookupError:
            self._gone = True
        except (AttributeError, OSError):
            self._fd = None  # no process file descriptors here: poll the process id
        if home.runner_started is not None and _start_time(home.runner) != home.runner_started:
            self._gone = True  # the id now belongs to another process
        self.check()
        threading.Thread(target=self._wait, name="anchor-runner-watch", daemon=True).start()

    def alive(self) -> bool:
        if self._gone:
            return False
        if self._fd is not None:
            return not _readable(self._fd, 0)
        try:
            os.kill(self.home.runner, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True

    def check(self) -> None:
        """End here if the runner is gone (called before each request leaves)."""
        if not self.alive():
            self.die()

    def _wait(self) -> None:
        if self._fd is not None and not self._gone:
            _readable(self._fd, None)
        while self.alive():
            time.sleep(POLL_SECONDS)
        self.die()

    def die(self) -> NoReturn:
        os._exit(1)  # at once: the runner's watchdog ends the instance's other processes
