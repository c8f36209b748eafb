"""Workers' shards of a run directory: what a helper process or a local Ray actor writes itself, and how
the runner folds it into the run's own files.

A worker that runs away from the runner (another process on the same machine) appends its own
records, as it makes them, to a shard of its own: ``.workers/<name>/calls.jsonl``,
``predictions.jsonl`` and ``traces.jsonl``. Nothing of it travels through the runner: the record of a
request is in the shard before the request leaves, exactly as one process writes it to
``calls.jsonl``, so a kill of the worker, of the runner or of both loses nothing one process would
not lose. The worker holds a lock on ``.workers/<name>/alive`` while it lives.

The runner copies what the shards hold into the run's own files (:class:`ShardMerger`): every few
tenths of a second while the run goes, once more at its end, and at the next start of a run that was
killed. It copies complete lines only, as bytes (nothing is parsed). Before each copy it appends a line
to the shard's journal, ``merged.jsonl``: the log, the main file's size and the shard's offsets the copy
goes from and to (one small write, no file replaced: the copies run several times a second). A copy
whose bytes the main file does not hold in full was cut off by a kill: the next start cuts the main file
back to its size before it and copies again, so a line is never copied twice. A shard whose worker is
gone and whose lines are all copied is removed.

Until then, every reader of the run directory sees the uncopied tails of the shards after the main
file's own lines (:meth:`ShardMerger.tails`), so a killed run's cost and predictions are complete
before it is resumed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Protocol

from anchor.rundir import names
from anchor.rundir.lines import RunDirError
from anchor.rundir.sync import GroupSync

#: The logs a worker keeps a shard of, by their names in the run directory.
SHARDED_LOGS = (names.CALLS, names.PREDICTIONS, names.TRACES)
ALIVE = "alive"
STATE = "merged.jsonl"
#: The layout of ``merged.jsonl``'s lines.
STATE_VERSION = 1
#: How often a durable shard (predictions) reaches the disk, as the run's own predictions.jsonl does.
SYNC_SECONDS = 0.5
#: Bytes read from a shard at once when copying.
CHUNK_BYTES = 1 << 20


class Appender(Protocol):
    def append_raw(self, data: bytes, *, before: Callable[[int], None] | None = None) -> None:
        """Append complete lines; ``before(size)`` is called first with the file's size."""
        ...


def workers_folder(run_dir: Path) -> Path:
    return Path(run_dir) / names.WORKERS


def _replace(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (a kill leaves the old file or the new one): a temporary file and
    a rename, not synced to the disk (a kill of the process, not of the machine, is what it guards against)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class ShardWriter:
    """A worker's own shard: appends one record a line (one ``write`` each, so a kill never leaves half a
    line but the one being written) and holds the shard's lock until :meth:`close`."""

    def __init__(self, run_dir: Path, name: str | None = None) -> None:
        name = name or f"{os.getpid()}-{secrets.token_hex(6)}"
        # Locked before it gets its name: the runner never sees the shard of a live worker unlocked.
        making = workers_folder(run_dir) / f".{name}.part"
        for _ in range(100):
            try:
                making.mkdir(parents=True)
                break
            except FileNotFoundError:
                continue  # the runner removed the empty folder of the shards between its making and ours
        else:
            making.mkdir(parents=True)
        self._alive = os.open(making / ALIVE, os.O_WRONLY | os.O_CREAT, 0o600)
        fcntl.flock(self._alive, fcntl.LOCK_EX)
        self.folder = making.with_name(name)
        os.rename(making, self.folder)
        self._fds: dict[str, int] = {}
        self._sync: GroupSync | None = None

    def _fd(self, log: str) -> int:
        fd = self._fds.get(log)
        if fd is None:
            fd = self._fds[log] = os.open(self.folder / log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            if log == names.PREDICTIONS:  # what a resume trusts: on disk within SYNC_SECONDS
                self._sync = GroupSync(fd, SYNC_SECONDS)
        return fd

    def write(self, log: str, line: str) -> None:
        """Append one record (its JSON, without the newline) to the shard of ``log``."""
        os.write(self._fd(log), (line + "\n").encode("utf-8"))
        if log == names.PREDICTIONS and self._sync is not None:
            self._sync.written()

    def close(self) -> None:
        if self._sync is not None:
            self._sync.close()
            self._sync = None
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        with contextlib.suppress(OSError):
            os.close(self._alive)  # the lock goes with it: the runner may now remove the shard


def _gone(folder: Path) -> bool:
    """Has the worker of this shard ended (its lock is free)?"""
    try:
        fd = os.open(folder / ALIVE, os.O_RDONLY)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


class _State:
    """How far each log of one shard was copied, read from the shard's ``merged.jsonl``: the runner's journal
    of its copies, one line each (with a ``schema_version`` like every JSON anchor writes), appended before
    the copy's bytes reach the main file. Every copy but the last is complete (the runner makes one at a
    time); the last is complete when the main file holds its bytes, else it is under way or was cut off by
    a kill (``pending``: the main file's size before it, and the shard's offset it copies to)."""

    def __init__(self, folder: Path, run_dir: Path) -> None:
        self.path = folder / STATE
        self.copied: dict[str, int] = dict.fromkeys(SHARDED_LOGS, 0)
        self.pending: dict[str, list[int]] = {}
        entries = []
        with contextlib.suppress(OSError):
            for n, text in enumerate(self.path.read_bytes().split(b"\n")[:-1], 1):  # an unfinished last line: none
                try:
                    entry = json.loads(text)
                except ValueError:
                    raise RunDirError(f"{self.path}, line {n}: not a journal entry; move the run's .workers "
                                      "folder away to resume without the lines its workers had not copied") from None
                if int(entry.get("schema_version", STATE_VERSION)) > STATE_VERSION:
                    raise RunDirError(f"{self.path}: written by a newer anchor (schema_version "
                                      f"{entry['schema_version']}); upgrade anchor to go on with this run")
                entries.append(entry)
        for entry in entries:
            self.copied[entry["log"]] = int(entry["to"])
        if entries:
            last = entries[-1]
            log, before, start, to = last["log"], int(last["main"]), int(last["from"]), int(last["to"])
            main = run_dir / log
            if (main.stat().st_size if main.exists() else 0) < before + (to - start):
                self.copied[log], self.pending = start, {log: [before, to]}
        self._fd: int | None = None

    def note(self, log: str, main_size: int, to: int) -> None:
        """Journal a copy of ``log`` from the shard's offset ``copied[log]`` to ``to``, before it is made, into
        a main file of ``main_size`` bytes."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        line = {"schema_version": STATE_VERSION, "log": log, "main": main_size, "from": self.copied[log], "to": to}
        os.write(self._fd, (json.dumps(line, separators=(",", ":")) + "\n").encode("ascii"))

    def undo(self) -> None:
        """Forget the copy a kill cut off (the main file is back to its size before it): the journal without
        its last line."""
        self.close()
        lines = self.path.read_bytes().split(b"\n")[:-1]
        _replace(self.path, "".join(line.decode("ascii") + "\n" for line in lines[:-1]))
        self.pending = {}

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class ShardMerger:
    """The runner's side: copies the shards of ``run_dir`` into its main logs through ``append(log, data)``
    (which returns the main file's size before the append), and removes the shards that are done."""

    def __init__(self, run_dir: Path) -> None:
        self.folder = workers_folder(run_dir)
        self.run_dir = Path(run_dir)
        self._states: dict[Path, _State] = {}

    def shards(self) -> list[Path]:
        """The shards, in name order (a shard still being made, ``.NAME.part``, is not one yet)."""
        if not self.folder.is_dir():
            return []
        return sorted(p for p in self.folder.iterdir() if p.is_dir() and not p.name.startswith("."))

    def has_records(self) -> bool:
        """Does any shard hold a line (a start that got this far did work, kept for a resume)?"""
        return any((shard / log).exists() and (shard / log).stat().st_size > 0
                   for shard in self.shards() for log in SHARDED_LOGS)

    def recover(self) -> None:
        """After a runner was killed during a copy: cut each main log back to its size before that copy
        (the shard still holds the lines, and they are copied again). Called at a start, before anything
        is appended to the main logs."""
        for shard in self.shards():
            state = _State(shard, self.run_dir)
            for log, (size_before, _) in state.pending.items():
                main = self.run_dir / log
                if main.exists() and main.stat().st_size > size_before:
                    with open(main, "r+b") as fh:
                        fh.truncate(size_before)
            if state.pending:
                state.undo()
            state.close()

    def sweep(self, logs: Mapping[str, Appender], *, final: bool = False) -> int:
        """Copy every complete line not copied yet into ``logs`` (the main logs, by name); remove the
        shards whose worker is gone and that are copied in full (an unfinished last line, left by a kill,
        is dropped: it is not a record). ``final``: the workers have ended. Returns the bytes copied."""
        copied = 0
        for shard in self.shards():
            gone = final or _gone(shard)
            state = self._states.get(shard)
            if state is None:  # read once: from then on this process is the journal's only writer
                state = self._states[shard] = _State(shard, self.run_dir)
            for log in SHARDED_LOGS:
                data = self._new_lines(shard / log, state.copied[log])
                if not data:
                    continue
                to = state.copied[log] + len(data)

                def note(size_before: int, log: str = log, to: int = to, state: _State = state) -> None:
                    state.note(log, size_before, to)  # before the append: a kill during it is undone at the next start

                logs[log].append_raw(data, before=note)
                state.copied[log] = to
                copied += len(data)
            if gone:
                state.close()
                del self._states[shard]
                shutil.rmtree(shard, ignore_errors=True)
        if self.folder.is_dir():
            if final:
                # Only once the workers have ended: a worker making its shard has made its folder and lock
                # file a moment before it holds the lock, and removing them then pulls them from under it.
                for making in self.folder.glob(".*.part"):  # a worker that ended before its shard got its name
                    shutil.rmtree(making, ignore_errors=True)
            with contextlib.suppress(OSError):
                self.folder.rmdir()  # empty now (a worker making its shard makes the folder again)
        return copied

    def close(self) -> None:
        """Close the journals this merger keeps open."""
        for state in self._states.values():
            state.close()
        self._states.clear()

    @staticmethod
    def _new_lines(path: Path, start: int) -> bytes:
        """The complete lines of ``path`` after byte ``start``."""
        try:
            with open(path, "rb") as fh:
                fh.seek(start)
                data = fh.read()
        except FileNotFoundError:
            return b""
        end = data.rfind(b"\n")
        return data[: end + 1] if end >= 0 else b""

    def tails(self, log: str) -> Iterator[tuple[Path, int]]:
        """(shard file, offset) of each shard's lines of ``log`` that are not in the main file yet."""
        for shard in self.shards():
            state = _State(shard, self.run_dir)
            path = shard / log
            if path.exists() and path.stat().st_size > state.copied[log]:
                yield path, state.copied[log]

    def main_limit(self, log: str) -> int | None:
        """The size of the main file before a copy that a killed runner left half done (its bytes past it
        are that copy, to be read from the shard instead); None when no copy is under way."""
        for shard in self.shards():
            span = _State(shard, self.run_dir).pending.get(log)
            if span:
                return span[0]
        return None
