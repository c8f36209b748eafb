"""The physical lines of a CSV or TSV file, as csv.reader reads them, bounded by the row limit: a row
(its lines: a quoted field may span several) that would pass the limit is read past to its end in chunks
and never held, and :class:`RowTooLong` takes its place; :class:`RowEnd` tells where such a row ends by
following csv's quoting over the bytes read past."""

from __future__ import annotations

from typing import IO

from anchor import jsonl
from anchor.cases.model import CasesError


class RowTooLong(Exception):
    """Raised through csv.reader in place of a row over the row limit, which was read past."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class RowLines:
    """The physical lines of a CSV or TSV file as text, for csv.reader; bytes that are not UTF-8 become
    surrogate escapes. A row (its lines: a quoted field may span several) that would pass ``limit`` bytes
    is read past to its end in chunks, never held, and :class:`RowTooLong` raised in its place.
    ``read`` counts the lines read so far; :meth:`start_row` is called before each row."""

    def __init__(self, stream: IO[bytes], source: str, delimiter: str, limit: int) -> None:
        self._stream = stream
        self._source = source
        self._delimiter = delimiter.encode()
        self._limit = limit
        self.read = 0
        self._row_bytes = self._row_lines = 0

    def start_row(self) -> None:
        self._row_bytes = self._row_lines = 0

    def __iter__(self) -> RowLines:
        return self

    def __next__(self) -> str:
        room = self._limit - self._row_bytes
        raw = self._stream.readline(room + 1)
        if not raw:
            raise StopIteration
        self.read += 1
        if self.read == 1:
            jsonl.check_encoding(raw, self._source, CasesError)
            raw = raw.removeprefix(jsonl.UTF8_BOM)
        if len(raw) > room:
            raise RowTooLong(self._read_past(raw))
        self._row_bytes += len(raw)
        self._row_lines += 1
        return raw.decode("utf-8", "surrogateescape")

    def _read_past(self, raw: bytes) -> str:
        """Read on from ``raw`` (the part read of the line that takes the row over the limit) to the row's
        end; why the row is bad."""
        # Lines before this one in the row ended inside a quoted field: that is why the row went on.
        ends = RowEnd(self._delimiter, quoted=self._row_lines > 0)
        size = self._row_bytes
        while True:
            size += len(raw)
            if ends.after(raw):
                break
            line_ended = raw.endswith(b"\n")
            raw = self._stream.readline(jsonl.SKIP_CHUNK_BYTES)
            if not raw:
                break
            self.read += line_ended
        problem = jsonl.too_long(size, self._limit)
        return problem + ("; a quoted field is not closed before the end of the file" if ends.quoted else "")


class RowEnd:
    """Follows csv's quoting over the bytes of a row being read past, a chunk at a time, to find where the
    row ends: at a line end outside a quoted field (a quote opens one only at a field's start, and a
    doubled quote inside it is text)."""

    _START, _UNQUOTED, _QUOTED, _QUOTE_IN_QUOTED = range(4)

    def __init__(self, delimiter: bytes, *, quoted: bool) -> None:
        self._delimiter = delimiter
        self._state = self._QUOTED if quoted else self._START

    @property
    def quoted(self) -> bool:
        return self._state == self._QUOTED

    def after(self, chunk: bytes) -> bool:
        """Follow ``chunk`` (a line, or part of one: a line end only at its end); whether the row ends there."""
        state, pos = self._state, 0
        body = len(chunk) - 1 if chunk.endswith(b"\n") else len(chunk)
        while pos < body:
            if state == self._START:
                if chunk[pos] == ord('"'):
                    state, pos = self._QUOTED, pos + 1
                else:
                    state = self._UNQUOTED
            elif state == self._UNQUOTED:
                found = chunk.find(self._delimiter, pos, body)
                state, pos = (self._UNQUOTED, body) if found < 0 else (self._START, found + 1)
            elif state == self._QUOTED:
                found = chunk.find(b'"', pos, body)
                state, pos = (self._QUOTED, body) if found < 0 else (self._QUOTE_IN_QUOTED, found + 1)
            elif chunk[pos] == ord('"'):  # a doubled quote: text inside the field
                state, pos = self._QUOTED, pos + 1
            elif chunk.startswith(self._delimiter, pos):
                state, pos = self._START, pos + 1
            else:  # text after a closing quote: csv's error, and the row still ends at the line end
                state = self._UNQUOTED
        if body < len(chunk) and state != self._QUOTED:
            self._state = self._START
            return True
        self._state = state
        return False
