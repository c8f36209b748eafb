"""The JSON-lines logs of a run directory: appended one record a line, read back strictly or leniently.

Every log (``predictions.jsonl``, ``traces.jsonl``, ``calls.jsonl``) is appended to as things
happen and flushed line by line, so a killed process leaves at most one unfinished last line: a
last line without its newline that is not complete JSON. Readers pass over that line in every
mode (it is what a kill leaves, not damage) and the writer cuts it off before appending
(:meth:`JsonLines.repair`).

Any other line that is not a record is damage. Read **strictly** (the default), it is an error
naming the file and the line. Read **leniently** (the caller passes a :class:`Skipped`), it is
left out and counted there, and the caller says so in its output (:meth:`Skipped.note`): a
report that must survive a damaged line never hides that it did.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import from_json

from anchor.errors import AnchorError
from anchor.rundir.sync import GroupSync

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
#: Line numbers listed per file in a note; the rest are counted.
LISTED_LINES = 5


class RunDirError(AnchorError, ValueError):
    """A run directory, or one of its files, that cannot be read as one (the default error of
    :class:`~anchor.rundir.RunDirectory`; callers name their own)."""


class LineProblem(ValueError):
    """Why one line is not a record (without the file and line, which the reader adds)."""


@dataclass
class Skipped:
    """The damaged lines a lenient read left out, per file, for the caller to report."""

    lines: dict[Path, list[int]] = field(default_factory=dict)

    def add(self, path: Path, line: int) -> None:
        self.lines.setdefault(path, []).append(line)

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.lines.values())

    def __bool__(self) -> bool:
        return self.count > 0

    def note(self) -> str | None:
        """One sentence naming the files and lines left out; None when nothing was."""
        if not self:
            return None
        parts = []
        for path, lines in self.lines.items():
            listed = ", ".join(str(n) for n in lines[:LISTED_LINES])
            more = f" and {len(lines) - LISTED_LINES} more" if len(lines) > LISTED_LINES else ""
            parts.append(f"{path} line{'s' if len(lines) > 1 else ''} {listed}{more}")
        return (f"{self.count} damaged line(s) could not be read and are left out of these figures: "
                + "; ".join(parts))


def validation_problem(exc: ValidationError, what: str) -> str:
    """A pydantic error as the reason a line (or file) is not a ``what``: the first field and message."""
    err = exc.errors()[0]
    if err.get("type") == "json_invalid":
        return f"not valid JSON ({str(err.get('ctx', {}).get('error') or err['msg'])})"
    where = ".".join(str(p) for p in err["loc"]) or "(top level)"
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"not a {what} ({where}: {err['msg']}{more})"


class Shards(Protocol):
    """Where workers' lines of a log wait to be copied into it (:class:`~anchor.rundir.shards.ShardMerger`)."""

    def tails(self, log: str) -> Iterator[tuple[Path, int]]: ...

    def main_limit(self, log: str) -> int | None: ...


class JsonLines(Generic[M]):
    """One JSON-lines log of records of type ``model`` (a ``what``, in messages).

    Appends are flushed as they are written (a killed process loses at most the line it was
    writing); ``durable=True`` also has them reach the disk (fsync) within ``sync_seconds``, in the
    background, and at ``close()`` (see :class:`~anchor.rundir.sync.GroupSync`).
    ``error`` is the exception a strict read raises, ``hint`` a clause added to its message (what to
    do about it).
    """

    def __init__(self, path: Path, model: type[M], what: str = "record", *, durable: bool = False,
                 error: Callable[[str], Exception] = RunDirError, hint: str = "", sync_seconds: float = 0.5,
                 shards: Shards | None = None) -> None:
        self.path = path
        self.shards = shards
        """Where workers' lines not copied into this file yet are (read after its own)."""
        self.model = model
        self.what = what
        self.durable = durable
        self.error = error
        self.hint = hint
        self.sync_seconds = sync_seconds
        self._lock = threading.Lock()
        self._fh: IO[bytes] | None = None
        self._sync: GroupSync | None = None

    # ------------------------------------------------------------------ reading

    def exists(self) -> bool:
        return self.path.exists()

    def lines(self) -> Iterator[tuple[int, int, int, bytes, bool]]:
        """(line number, offset, length, bytes without the newline, whether the line is complete) of every
        non-blank line; only the last line can lack its newline. A missing file has none. Then, when
        workers write shards of this log, their lines not copied here yet (numbered and placed in their own
        files; see :mod:`anchor.rundir.shards`)."""
        limit = self.shards.main_limit(self.path.name) if self.shards is not None else None
        yield from self._file_lines(self.path, 0, limit)
        if self.shards is not None:
            for path, start in self.shards.tails(self.path.name):
                yield from self._file_lines(path, start, None)

    def _file_lines(self, path: Path, start: int, limit: int | None) -> Iterator[tuple[int, int, int, bytes, bool]]:
        try:
            fh = open(path, "rb")  # noqa: SIM115 - closed by the `with` below; opened apart to tell a missing file
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self.error(f"{path}: cannot be read ({exc.strerror or exc})") from None
        offset = start
        with fh:
            fh.seek(start)
            for n, raw in enumerate(fh, 1):
                if limit is not None and offset + len(raw) > limit:
                    return  # a copy a killed runner left half done: its lines are read from the shard
                begin, offset = offset, offset + len(raw)
                complete = raw.endswith(b"\n")
                body = raw.rstrip(b"\r\n")
                if body.strip():
                    yield n, begin, len(raw), body, complete

    def written(self) -> Iterator[bytes]:
        """This file's lines as they stand, each one whole and as written (its newline included), for a reader
        that passes them on while a run may still be writing: the line a writer is in the middle of is left
        out, and so are the workers' lines not copied here yet. A file that cannot be opened has none; the
        one opened is read to its end, even when it is replaced meanwhile (a predict run's reordering)."""
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 - closed by the `with` below; opened apart to pass over a missing file
        except OSError:
            return
        with fh:
            for line in fh:
                if line.endswith(b"\n") and line.strip():
                    yield line

    def last_of(self, iid: str) -> dict[str, Any] | None:
        """The last whole line of this file whose record's ``id`` is ``iid``, as a JSON object, or None (also
        when a line holding the id is not JSON). A line that does not hold the id's text is passed over
        unparsed, so a long log is searched in about the time it takes to read."""
        needle = iid.encode("utf-8")
        found: dict[str, Any] | None = None
        for line in self.written():
            if needle not in line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                return None
            if isinstance(record, dict) and record.get("id") == iid:
                found = record
        return found

    def parsed(self, parse: Callable[[str], T], *, skipped: Skipped | None = None) -> Iterator[tuple[int, T]]:
        """(line number, ``parse(line)``) of every line, one at a time; ``parse`` raises
        :class:`LineProblem` for a line that is not a record. The unfinished last line a kill leaves is
        passed over; any other bad line is an error naming it, or, when ``skipped`` is given, left out and
        counted there."""
        for n, _, _, value in self.located(parse, skipped=skipped):
            yield n, value

    def located(self, parse: Callable[[str], T], *, skipped: Skipped | None = None
                ) -> Iterator[tuple[int, int, int, T]]:
        """:meth:`parsed` with each line's offset and length in the file."""
        for n, start, length, body, complete in self.lines():
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError:
                if not complete:
                    continue
                self._bad(n, "not UTF-8 text", skipped)
                continue
            if not complete and not _is_json(text):
                continue  # the line a killed writer left unfinished
            try:
                value = parse(text)
            except LineProblem as exc:
                self._bad(n, str(exc), skipped)
                continue
            yield n, start, length, value

    def numbered(self, *, skipped: Skipped | None = None) -> Iterator[tuple[int, M]]:
        """(line number, record) of every line, one at a time (see :meth:`parsed`)."""
        return self.parsed(self.parse, skipped=skipped)

    def read(self, *, skipped: Skipped | None = None) -> list[M]:
        """Every record, in file order (see :meth:`parsed`)."""
        return [record for _, record in self.numbered(skipped=skipped)]

    def parse(self, text: str) -> M:
        try:
            return self.model.model_validate_json(text)
        except ValidationError as exc:
            raise LineProblem(validation_problem(exc, f"{self.what} record")) from None

    def _bad(self, n: int, problem: str, skipped: Skipped | None) -> None:
        if skipped is None:
            raise self.error(f"{self.path}, line {n}: {problem}" + (f"; {self.hint}" if self.hint else ""))
        skipped.add(self.path, n)

    # ------------------------------------------------------------------ writing

    def repair(self) -> None:
        """Cut off the line a killed process was writing (a last line without its newline), without
        reading the rest of the file."""
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
        self.append_raw((record.model_dump_json() + "\n").encode("utf-8"))

    def append_raw(self, data: bytes, *, before: Callable[[int], None] | None = None) -> None:
        """Append complete lines as they are (records serialised elsewhere: a worker's); ``before(size)``
        is called first, under the same lock, with the file's size before the append."""
        with self._lock:
            if self._fh is None:
                self._fh = open(self.path, "ab")  # noqa: SIM115 - closed in close()
                if self.durable:
                    self._sync = GroupSync(self._fh.fileno(), self.sync_seconds)
            if before is not None:
                before(self._fh.tell())
            self._fh.write(data)
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


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def json_object(text: str) -> dict[str, Any]:
    """A line as a JSON object (for readers that look at a few fields only)."""
    try:
        value = from_json(text)  # pydantic's parser: a third of json.loads' time on a prediction's line
    except ValueError as exc:
        raise LineProblem(f"not valid JSON ({str(exc).split(' at line ')[0]})") from None
    if not isinstance(value, dict):
        raise LineProblem(f"not a JSON object (got {type(value).__name__})")
    return value
