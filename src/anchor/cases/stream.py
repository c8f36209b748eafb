"""One pass over a cases file: :func:`read_cases` yields a :class:`CaseRow` or a :class:`RejectedRow`
for every row, in input order, holding one row (or one chunk of the file) at a time."""

from __future__ import annotations

import sys
from collections.abc import Generator, Iterator, Mapping
from pathlib import Path
from typing import IO

from anchor.cases.columns import ResolvedColumns, check_column_mapping, resolve_columns
from anchor.cases.formats import (
    ParquetReader,
    RecordReader,
    detect_format,
    open_reader,
)
from anchor.cases.model import (
    FORMAT_FLAG,
    BadCaseRow,
    CaseFormat,
    CaseLimits,
    CaseRow,
    CasesError,
    RejectedRow,
)
from anchor.cases.validate import RowChecker

CaseSource = str | Path | IO[bytes]
#: Distinct unread JSON keys remembered for the summary; more are counted, not named.
MAX_IGNORED_NAMES = 50


class CaseStream:
    """The rows of one cases file, read once, in input order.

    ``source`` is a path, ``"-"`` for standard input, or a binary file object (then ``name`` labels
    it in messages and its suffix, or ``format``, gives the format). ``columns`` maps canonical
    names to the file's columns (``{"condition": "Evidence"}``). With ``strict`` the first bad row
    raises :class:`BadCaseRow` instead of being yielded as a :class:`RejectedRow`. A file that
    cannot be read at all, or a mapping that does not fit its header, raises :class:`CasesError`.

    After iteration (or during it, once the header is read) ``header``, ``used_columns`` and
    ``ignored_columns`` say which columns were read and which were not; ``rows``, ``good`` and
    ``bad`` count the rows so far. In JSON an optional column (``id``, ``scenario``, ``label``) is
    looked for in every row, and is among ``used_columns`` once some row has it.
    """

    def __init__(
        self,
        source: CaseSource,
        *,
        format: str | None = None,
        columns: Mapping[str, str] | None = None,
        strict: bool = False,
        limits: CaseLimits | None = None,
        name: str | None = None,
        duplicates: Mapping[int, int] | None = None,
    ) -> None:
        self._source = source
        self._known_duplicates = duplicates
        self._checker: RowChecker | None = None
        self.name = name or (str(source) if isinstance(source, str | Path) else getattr(source, "name", "<stream>"))
        if not isinstance(self.name, str):
            self.name = "<stream>"
        self.format: CaseFormat = detect_format(self.name, format)
        self.mapping = check_column_mapping(dict(columns or {}))
        self.strict = strict
        self.limits = limits or CaseLimits()
        self.header: list[str] | None = None
        self.mapped_columns: dict[str, str] = {}
        """Canonical name -> the column looked for (in JSON, some may be in no row)."""
        self._complete = True
        self._present: set[str] = set()
        self._ignored: dict[str, None] = {}
        self.ignored_overflow = 0
        self.rows = self.good = self.bad = 0
        self._iterator: Generator[CaseRow | RejectedRow, None, None] | None = None

    @property
    def used_columns(self) -> dict[str, str]:
        """Canonical name -> the file's column read for it: in the header, or (JSON) in a row read so far."""
        return {name: column for name, column in self.mapped_columns.items()
                if self._complete or column in self._present}

    @property
    def duplicates(self) -> dict[int, int]:
        """The rows rejected so far for an id seen before (row -> its id's first line). Given as
        ``duplicates`` to a later pass over the same file, it spares that pass remembering every id."""
        return self._checker.duplicates if self._checker is not None else {}

    @property
    def ignored_columns(self) -> list[str]:
        return list(self._ignored)

    def __iter__(self) -> Iterator[CaseRow | RejectedRow]:
        if self._iterator is not None:
            raise CasesError(f"{self.name}: a case stream is read once; open the file again")
        self._iterator = self._generate()
        return self._iterator

    def close(self) -> None:
        """Stop reading and close the file (when this stream opened it)."""
        if self._iterator is not None:
            self._iterator.close()

    def __enter__(self) -> CaseStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _generate(self) -> Generator[CaseRow | RejectedRow, None, None]:
        stream, owned = self._open()
        try:
            yield from self._rows(open_reader(self.format, stream, self.name, self.limits.max_row_bytes))
        finally:
            if owned:
                stream.close()

    def _open(self) -> tuple[IO[bytes], bool]:
        if not isinstance(self._source, str | Path):
            return self._source, False
        if str(self._source) == "-":
            if self.format == "parquet":
                raise CasesError(f"Parquet cannot be read from standard input: give a file, or another {FORMAT_FLAG}")
            return sys.stdin.buffer, False
        try:
            return open(self._source, "rb"), True  # noqa: SIM115 - closed by __iter__'s finally
        except OSError as exc:
            raise CasesError(f"{self.name}: cannot read the file ({exc.strerror or exc})") from None

    def _resolve(self, reader: RecordReader, header: list[str]) -> RowChecker:
        resolved: ResolvedColumns = resolve_columns(header, self.mapping, source=self.name,
                                                    complete=reader.complete_header)
        self.header = list(resolved.header)
        self.mapped_columns = dict(resolved.used)
        self._complete = reader.complete_header
        for column in resolved.ignored:
            self._note_ignored(column)
        if isinstance(reader, ParquetReader):
            reader.columns = list(dict.fromkeys(resolved.used.values()))
        self._checker = RowChecker(resolved, self.limits, self._known_duplicates)
        return self._checker

    def _note_ignored(self, column: str) -> None:
        if column in self._ignored:
            return
        if len(self._ignored) < MAX_IGNORED_NAMES:
            self._ignored[column] = None
        else:
            self.ignored_overflow += 1

    def _rows(self, reader: RecordReader) -> Iterator[CaseRow | RejectedRow]:
        checker = self._resolve(reader, reader.header) if reader.header is not None else None
        read = set(self.mapped_columns.values())
        for record in reader.records():
            if checker is None and record.values is not None:
                checker = self._resolve(reader, list(record.values))
                read = set(self.mapped_columns.values())
            if record.values is not None and not reader.complete_header:
                keys = record.values.keys()
                self._present.update(keys & read)
                for key in keys - read:
                    self._note_ignored(key)
            self.rows += 1
            if checker is None:  # JSON rows before the first object: nothing to check against yet
                item: CaseRow | RejectedRow = RejectedRow(line=record.line, row=self.rows,
                                                          reason=record.problem or "cannot be read")
            else:
                item = checker.check(record, self.rows)
            if isinstance(item, RejectedRow):
                self.bad += 1
                if self.strict:
                    raise BadCaseRow(self.name, item)
            else:
                self.good += 1
            yield item


def read_cases(
    source: CaseSource,
    *,
    format: str | None = None,
    columns: Mapping[str, str] | None = None,
    strict: bool = False,
    limits: CaseLimits | None = None,
    name: str | None = None,
    duplicates: Mapping[int, int] | None = None,
) -> CaseStream:
    """The rows of a cases file as a one-pass iterator of :class:`CaseRow` and :class:`RejectedRow`
    (see :class:`CaseStream`); nothing is read until it is iterated."""
    return CaseStream(source, format=format, columns=columns, strict=strict, limits=limits, name=name,
                      duplicates=duplicates)
