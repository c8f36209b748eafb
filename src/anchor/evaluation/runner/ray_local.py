"""What ties a ``--ray local`` instance to the runner that started it, so that a runner killed with
``kill -9`` leaves nothing running, nothing in ``/tmp`` and no request uncounted.

Ray has Linux end its own servers (GCS, raylet) with the process that started them, but its actors
notice a second or two later, sending requests meanwhile, and its two agent processes then wait a
minute on the dead servers. So, with ``--ray local``:

* every process of the instance carries a tag in its environment (:func:`tagged_environment`: the
  variable is set while ``ray.init`` starts the instance, and Ray's processes pass it on), and a
  watchdog the runner starts with the instance ends them all once the runner has ended
  (:mod:`anchor.evaluation.runner.ray_watchdog`);
* each actor watches its runner (:class:`RunnerWatch`) and ends as soon as the runner has; it looks
  again as each request is about to leave, so that no request leaves once the runner is gone;
* each actor keeps its scratch folder (the artefacts it builds and is sent) in the run directory, not
  in ``/tmp``, beside a journal of its requests (:class:`Journal`), each record written before its
  request goes out. The runner reads its actors' records on a stream, and those in transit when it
  was killed are lost there; :func:`merge_journals` adds them to ``calls.jsonl`` from the journal of
  every actor that is gone, and removes what that actor left.

The watch needs the runner's process id, so it applies where the actors run on the runner's machine:
``--ray local``. On a cluster Ray ends a dead driver's actors itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import select
import shutil
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from anchor.evaluation.rundir.lines import JsonLines, Skipped
from anchor.evaluation.runner.ray_watchdog import TAG_VARIABLE
from anchor.llm.ledger import CallRecord

#: The run directory's folder of actor scratch folders and journals (``--ray local``).
WORKERS_FOLDER = ".ray-workers"
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
    (id and start time), and the run directory's folder for scratch folders."""

    runner: int
    runner_started: str | None
    folder: Path

    @classmethod
    def here(cls, run_dir: Path) -> LocalHome:
        return cls(runner=os.getpid(), runner_started=_start_time(os.getpid()),
                   folder=Path(run_dir).resolve() / WORKERS_FOLDER)


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


class Journal:
    """An actor's scratch folder in the run directory and the journal of its requests beside it
    (``NAME/`` and ``NAME.jsonl``). The actor holds a lock on the journal while it lives, so that the
    runner can tell the journal of an actor that is gone; a folder never outlives its journal."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        # Locked before it gets its name: the runner never sees an unlocked journal of a live actor.
        name = f"{os.getpid()}-{secrets.token_hex(6)}"
        part = folder / f"{name}.part"
        self._fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        self.path = folder / f"{name}.jsonl"
        os.rename(part, self.path)
        self.scratch = folder / name
        self.scratch.mkdir()

    def write(self, record: CallRecord) -> None:
        """Keep a request's record (one write: a kill never leaves half a line); cache hits are not
        requests and are left out."""
        if record.request_id:
            os.write(self._fd, (record.model_dump_json() + "\n").encode())

    def remove(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)
        self.path.unlink(missing_ok=True)
        os.close(self._fd)


def _gone_owner(path: Path) -> int | None:
    """An open descriptor of ``path`` locked by this process when its actor is gone, else None."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def merge_journals(folder: Path, calls: JsonLines[CallRecord]) -> int:
    """Add to ``calls`` the request records in the journals in ``folder`` of actors that are gone (a
    killed runner's, or actors Ray lost) which it lacks, and remove those journals and scratch folders;
    the number of records added. Only the process that holds the run directory's lock calls it."""
    if not folder.is_dir():
        return 0
    for part in folder.glob("*.part"):  # an actor that ended before naming its journal: nothing in it
        fd = _gone_owner(part)
        if fd is not None:
            part.unlink(missing_ok=True)
            os.close(fd)
    gone = [(path, fd) for path in sorted(folder.glob("*.jsonl")) if (fd := _gone_owner(path)) is not None]
    if not gone:
        return 0
    # What the runner already wrote, line by line: a journal's records that reached it are skipped.
    calls.repair()  # the line a killed runner left unfinished, before appending
    written = Counter(r.model_dump_json() for r in calls.read(skipped=Skipped()) if r.request_id)
    added = 0
    for path, fd in gone:
        for record in JsonLines(path, CallRecord, "call").read(skipped=Skipped()):
            key = record.model_dump_json()
            if written[key]:
                written[key] -= 1
                continue
            calls.append(record)
            added += 1
        shutil.rmtree(path.with_suffix(""), ignore_errors=True)
        path.unlink(missing_ok=True)
        os.close(fd)
    with contextlib.suppress(OSError):
        folder.rmdir()  # empty now, unless an actor is still running
    return added
