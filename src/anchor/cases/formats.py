"""Reading the records of a cases file as a stream, one reader per format.

Each reader yields :class:`RawRecord` values (the physical line where a record starts, and its
values by the file's column names, or the reason it cannot be read) and never holds more than one
record, or one chunk of the file, at a time:

* CSV and TSV: the first non-blank record is the header; records may span lines (quoted fields).
  Bytes that are not UTF-8 are kept as surrogate escapes, so one bad row does not stop the file;
  the row check rejects a field holding them.
* JSON lines: one object per line, blank lines skipped, read by anchor's one lenient JSON-lines reader
  (:mod:`anchor.jsonl`), as the fact-checking sets are.
* JSON array: decoded element by element from 64 KiB chunks; the header is the first object's keys.
  In both JSON formats a row nested deeper than :data:`anchor.jsonl.MAX_JSON_DEPTH` is a bad row.
* Parquet: record batches of the columns read (needs pyarrow, the ``parquet`` extra).

Text files are UTF-8 (a UTF-8 byte-order mark is skipped). A file that starts with a UTF-16 or UTF-32
byte-order mark, or whose first line holds NUL bytes, is refused with a hint to save it as UTF-8,
rather than read as garbled column names. A JSON object with a key given twice is a bad row (which
value is meant cannot be told), as a column given twice in a CSV header stops the file.
"""

from __future__ import annotations

import codecs
import csv
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePath
from typing import IO, Any

from anchor import jsonl
from anchor.cases.csvlines import RowLines, RowTooLong
from anchor.cases.model import CASE_FORMATS, FORMAT_FLAG, MAX_ROW_BYTES, CaseFormat, CasesError
from anchor.text import kind_of

_SUFFIXES: dict[str, CaseFormat] = {
    ".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json",
    ".parquet": "parquet", ".pq": "parquet",
}
_BOM = "\ufeff"
#: Raw bytes that were not UTF-8, as the ``surrogateescape`` error handler keeps them.
NOT_UTF8 = re.compile("[\udc80-\udcff]")
PARQUET_EXTRA_HINT = "reading Parquet needs pyarrow: pip install 'anchor-infer[parquet]'"
_CHUNK_BYTES = 1 << 16
_PARQUET_BATCH_ROWS = 2048


def detect_format(name: str, given: str | None = None) -> CaseFormat:
    """The format named by ``given`` or, failing that, by the file name's suffix."""
    if given is not None:
        fmt = given.strip().lower().lstrip(".")
        if fmt == "ndjson":
            fmt = "jsonl"
        if fmt not in CASE_FORMATS:
            raise CasesError(f"{FORMAT_FLAG}: unknown format {given!r}; the formats are {', '.join(CASE_FORMATS)}")
        return fmt  # type: ignore[return-value]
    suffix = PurePath(name).suffix.lower()
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    what = "standard input" if name == "-" else f"{name!r} from its suffix"
    raise CasesError(f"cannot tell the format of {what}: give {FORMAT_FLAG} "
                     f"({', '.join(CASE_FORMATS)})")


def check_encoding(start: bytes, source: str) -> None:
    """Refuse a text file that is not UTF-8 as a whole (``start``: its first line or chunk), naming
    the encoding it seems to be in and how to convert it (:func:`anchor.jsonl.check_encoding`)."""
    jsonl.check_encoding(start, source, CasesError)


@dataclass(slots=True)
class RawRecord:
    """One record as read: its values by the file's column names, or why it cannot be read."""

    line: int
    values: dict[str, Any] | None
    problem: str | None = None


class RecordReader:
    """The records of one open file; ``header`` is known before the first record for CSV, TSV and
    Parquet, and is None for JSON (whose header is the first object's keys)."""

    header: list[str] | None = None
    #: True when ``header`` lists every column of the file.
    complete_header = True

    def records(self) -> Iterator[RawRecord]:
        raise NotImplementedError


class DelimitedReader(RecordReader):
    def __init__(self, stream: IO[bytes], source: str, delimiter: str, max_row_bytes: int) -> None:
        self._source = source
        self._lines = RowLines(stream, source, delimiter, max_row_bytes)
        # strict: a stray quote is a bad row, and a quote left open at the end of the file is one too,
        # instead of a field that silently swallows the lines after it.
        self._reader = csv.reader(self._lines, delimiter=delimiter, strict=True)
        self.header = self._read_header()

    def _next(self) -> tuple[int, list[str] | None, str | None]:
        """(start line, fields or None, problem); raises StopIteration at the end."""
        start = self._lines.read + 1
        self._lines.start_row()
        try:
            return start, next(self._reader), None
        except RowTooLong as exc:
            return start, None, exc.problem
        except csv.Error as exc:
            why = str(exc)
            if why == "unexpected end of data":
                why = "a quoted field is not closed before the end of the file"
            return start, None, f"not a valid CSV row ({why})"

    def _read_header(self) -> list[str]:
        while True:
            try:
                start, fields, problem = self._next()
            except StopIteration:
                raise CasesError(f"{self._source}: the file is empty (no header line)") from None
            if problem is not None:
                raise CasesError(f"{self._source}: line {start}: the header is {problem}")
            if fields and not _blank(fields):
                return [f.strip() for f in fields]

    def records(self) -> Iterator[RawRecord]:
        header = self.header or []
        width = len(header)
        while True:
            try:
                start, fields, problem = self._next()
            except StopIteration:
                return
            if fields is None:
                yield RawRecord(start, None, problem)
            elif _blank(fields):
                continue
            elif len(fields) != width:
                yield RawRecord(start, None, f"has {len(fields)} fields, the header has {width}")
            else:
                yield RawRecord(start, dict(zip(header, fields, strict=True)))


def _blank(fields: list[str]) -> bool:
    return not fields or (len(fields) == 1 and not fields[0].strip())


class JsonLinesReader(RecordReader):
    """One object per line, read by anchor's one lenient JSON-lines reader (:func:`anchor.jsonl.read_json_lines`)."""

    complete_header = False

    def __init__(self, stream: IO[bytes], source: str, max_row_bytes: int) -> None:
        self._stream = stream
        self._source = source
        self._max_row_bytes = max_row_bytes

    def records(self) -> Iterator[RawRecord]:
        for line in jsonl.read_json_lines(self._stream, self._source, CasesError, max_line_bytes=self._max_row_bytes):
            yield RawRecord(line.line, None, line.problem) if line.problem else _object_record(line.line, line.value)


def _object_record(line: int, value: Any) -> RawRecord:
    twice = jsonl.repeated_key(value)
    if twice is not None:
        return RawRecord(line, None, f"the key {twice!r} appears twice in the object (which value is meant "
                                     "cannot be told)")
    if isinstance(value, dict):
        return RawRecord(line, value)
    return RawRecord(line, None, f"not a JSON object (got {kind_of(value)})")


_SPACE = re.compile(r"[ \t\r\n]*")
# What follows a string's opening quote up to its closing one (or a backslash at the end of the text),
# and the next character that matters outside strings.
_STRING_BODY = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.S)
_STRUCTURE = re.compile(r'["\[\]{},]')


class _ElementScan:
    """Where an array element ends (the ``,`` or ``]`` after it), found by bracket depth outside strings; the
    text may come a piece at a time (the scan remembers its depth and whether it is inside a string)."""

    def __init__(self) -> None:
        self.depth = 0
        self.quoted = False

    def find(self, text: str, pos: int) -> tuple[int | None, int]:
        """(the index of the character that ends the element, or None when ``text`` ends first; where the
        scan stopped, to go on from in the next piece)."""
        while pos < len(text):
            if self.quoted:
                pos = _STRING_BODY.match(text, pos).end()  # type: ignore[union-attr]
                if pos == len(text) or text[pos] != '"':
                    return None, pos  # the text ends in the string, or on a backslash whose escaped character is next
                self.quoted, pos = False, pos + 1
                continue
            found = _STRUCTURE.search(text, pos)
            if found is None:
                return None, len(text)
            char, pos = found.group(), found.end()
            if char == '"':
                self.quoted = True
            elif char in "[{":
                self.depth += 1
            elif self.depth == 0:
                return found.start(), pos  # ',' or a closing bracket at the element's own level
            elif char != ",":
                self.depth -= 1
        return None, pos


def _element_end(text: str, pos: int) -> int | None:
    """Where the array element starting at ``pos`` ends (the index of the ``,`` or ``]`` after it),
    found by bracket depth alone; None when the text ends first."""
    return _ElementScan().find(text, pos)[0]


class JsonArrayReader(RecordReader):
    """Element by element: each is decoded on its own (one bad element is one rejected row), and the
    text already read is dropped, so memory holds one chunk and the element being read; an element
    over ``max_row_bytes`` is read past without being held."""

    complete_header = False

    def __init__(self, stream: IO[bytes], source: str, max_row_bytes: int) -> None:
        self._stream = stream
        self._source = source
        self._limit = max_row_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        self._decode = json.JSONDecoder(object_pairs_hook=jsonl.keyed_object).raw_decode
        self._buf = ""
        self._pos = 0
        self._line = 1
        self._eof = False
        self._started = False

    def _fill(self) -> bool:
        """Read one more chunk; False at the end of the file."""
        if self._eof:
            return False
        self._buf = self._buf[self._pos:]
        self._pos = 0
        data = self._stream.read(_CHUNK_BYTES)
        if not self._started:
            check_encoding(data, self._source)
            self._started = True
        self._eof = not data
        self._buf += self._decoder.decode(data, final=self._eof)
        return bool(data)

    def _advance(self, to: int) -> None:
        self._line += self._buf.count("\n", self._pos, to)
        self._pos = to

    def _peek(self) -> str:
        """The next character after whitespace ('' at the end of the file)."""
        while True:
            self._advance(_SPACE.match(self._buf, self._pos).end())  # type: ignore[union-attr]
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._fill():
                return ""

    def _fail(self, what: str) -> CasesError:
        return CasesError(f"{self._source}: line {self._line}: {what}")

    def records(self) -> Iterator[RawRecord]:
        self._fill()
        self._buf = self._buf.removeprefix(_BOM)
        first = self._peek()
        if first != "[":
            if first == "":
                raise CasesError(f"{self._source}: the file is empty")
            hint = f" (for one object per line use .jsonl or {FORMAT_FLAG} jsonl)" if first == "{" else ""
            raise self._fail(f"expected a JSON array ('['){hint}")
        self._advance(self._pos + 1)
        if self._peek() == "]":
            self._advance(self._pos + 1)
        else:
            while True:
                yield self._element()
                nxt = self._peek()
                if nxt == ",":
                    self._advance(self._pos + 1)
                    continue
                if nxt == "]":
                    self._advance(self._pos + 1)
                    break
                if nxt == "":
                    raise self._fail("the file ends inside the JSON array (truncated?)")
                raise self._fail(f"expected ',' or ']' between elements, found {nxt!r}")
        if self._peek() != "":
            raise self._fail("text after the end of the JSON array")

    def _element(self) -> RawRecord:
        if self._peek() in ("", ",", "]"):
            if self._peek() == "":
                raise self._fail("the file ends inside the JSON array (truncated?)")
            raise self._fail("an empty element (two commas, or a comma before ']')")
        line = self._line
        while True:
            start = self._pos
            try:
                value, end = self._decode(self._buf, start)
            except RecursionError:  # the decoder recurses once a level: a thousand levels exhaust its stack
                self._read_past()
                return RawRecord(line, None, jsonl.TOO_DEEP)
            except json.JSONDecodeError as exc:
                end = _element_end(self._buf, start)
                if end is not None and not self._over_limit(start, end):
                    self._advance(end)
                    return RawRecord(line, None, f"not valid JSON ({exc.msg})")
            else:
                # A number at the very end may go on in the next chunk.
                if (end < len(self._buf) or self._eof) and not self._over_limit(start, end):
                    bad = NOT_UTF8.search(self._buf, start, end)
                    deep = jsonl.nested_too_deep(self._buf, start, end)
                    self._advance(end)
                    if bad is not None:
                        return RawRecord(line, None, "not valid UTF-8 (bytes that are not text)")
                    if deep:
                        return RawRecord(line, None, jsonl.TOO_DEEP)
                    return _object_record(line, value)
            if self._over_limit(start, len(self._buf)):
                return RawRecord(line, None, jsonl.too_long(self._read_past(), self._limit))
            if not self._fill():
                raise self._fail("the file ends inside the JSON array (truncated?)")

    def _over_limit(self, start: int, end: int) -> bool:
        """Whether the text from ``start`` to ``end`` is over the row limit in bytes of UTF-8."""
        chars = end - start
        if chars > self._limit or chars * 4 <= self._limit:  # a character is 1 to 4 bytes
            return chars > self._limit
        return _utf8_bytes(self._buf, start, end) > self._limit

    def _read_past(self) -> int:
        """Read past the element at the current place to its end (the ',' or ']' after it), a chunk at a
        time, never holding it whole; its size in bytes."""
        scan, size = _ElementScan(), 0
        pos = self._pos
        while True:
            end, pos = scan.find(self._buf, pos)
            stop = pos if end is None else end
            size += _utf8_bytes(self._buf, self._pos, stop)
            self._advance(stop)
            if end is not None:
                return size
            if not self._fill():
                raise self._fail("the file ends inside the JSON array (truncated?)")
            pos = self._pos


def _utf8_bytes(text: str, start: int, end: int) -> int:
    """How many bytes ``text[start:end]`` was in the file (a surrogate escape is the one byte it stands for)."""
    part = text[start:end]
    return len(part) if part.isascii() else len(part.encode("utf-8", "surrogateescape"))


class ParquetReader(RecordReader):
    def __init__(self, stream: IO[bytes], source: str) -> None:
        try:
            import pyarrow.parquet as pq  # optional: the 'parquet' extra
        except ImportError:
            raise CasesError(PARQUET_EXTRA_HINT) from None
        try:
            self._file = pq.ParquetFile(stream)
        except Exception as exc:  # pyarrow raises its own ArrowInvalid / OSError kinds
            raise CasesError(f"{source}: not a readable Parquet file ({' '.join(str(exc).split())})") from None
        self.header = list(self._file.schema_arrow.names)
        self.columns: list[str] | None = None  # set by the caller: only these are read

    def records(self) -> Iterator[RawRecord]:
        number = 0
        for batch in self._file.iter_batches(batch_size=_PARQUET_BATCH_ROWS, columns=self.columns):
            for values in batch.to_pylist():
                number += 1
                yield RawRecord(number, values)


def open_reader(fmt: CaseFormat, stream: IO[bytes], source: str, max_row_bytes: int = MAX_ROW_BYTES) -> RecordReader:
    """The reader of ``fmt``; a row of a text format over ``max_row_bytes`` bytes is a bad row."""
    if fmt == "csv":
        return DelimitedReader(stream, source, ",", max_row_bytes)
    if fmt == "tsv":
        return DelimitedReader(stream, source, "\t", max_row_bytes)
    if fmt == "jsonl":
        return JsonLinesReader(stream, source, max_row_bytes)
    if fmt == "json":
        return JsonArrayReader(stream, source, max_row_bytes)
    return ParquetReader(stream, source)
