"""Which of a file's columns hold which field: the ``--column NAME=COLUMN`` mapping, checked against
the canonical names and the file's header, with a "did you mean" for near misses."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from anchor.cases.model import CASE_COLUMNS, COLUMN_FLAG, REQUIRED_COLUMNS, CasesError

_SHOWN_COLUMNS = 12


def parse_column_options(options: Iterable[str]) -> dict[str, str]:
    """``["condition=Evidence", ...]`` (the repeatable ``--column``) as a checked mapping."""
    mapping: dict[str, str] = {}
    for option in options:
        name, sep, column = option.partition("=")
        name, column = name.strip(), column.strip()
        if not sep or not name or not column:
            raise CasesError(f"{COLUMN_FLAG} expects NAME=COLUMN (e.g. condition=Evidence), got {option!r}")
        if name in mapping:
            raise CasesError(f"{COLUMN_FLAG} {name} is given twice ({mapping[name]!r} and {column!r})")
        mapping[name] = column
    return check_column_mapping(mapping)


def check_column_mapping(mapping: Mapping[str, str]) -> dict[str, str]:
    """The mapping (canonical name -> the file's column) when its names are known and its columns distinct."""
    by_column: dict[str, str] = {}
    for name, column in mapping.items():
        if name not in CASE_COLUMNS:
            raise CasesError(f"{COLUMN_FLAG} {name}={column}: unknown name {name!r}; the names are "
                             f"{', '.join(CASE_COLUMNS)}{_did_you_mean(name, CASE_COLUMNS)}")
        if not column.strip():
            raise CasesError(f"{COLUMN_FLAG} {name}=: the column name is empty")
        if column in by_column:
            raise CasesError(f"{COLUMN_FLAG}: {by_column[column]} and {name} both map to the column {column!r}")
        by_column[column] = name
    return dict(mapping)


@dataclass(frozen=True)
class ResolvedColumns:
    """The file's column read for each canonical name, and the header's columns nobody reads."""

    used: dict[str, str]
    ignored: tuple[str, ...]
    header: tuple[str, ...]


def resolve_columns(
    header: Sequence[str], mapping: Mapping[str, str], *, source: str, complete: bool
) -> ResolvedColumns:
    """Match a header to the canonical columns.

    ``complete`` says whether the header lists every column of the file (CSV, TSV, Parquet). For
    JSON the header is the first object's keys: required columns must be among them, while the
    optional ones (``id``, ``scenario``, ``label``) are read from any row that has them.
    """
    mapping = check_column_mapping(mapping)
    present = set(header)
    seen: set[str] = set()
    for column in header:
        if column in seen and _reads(column, mapping):
            raise CasesError(f"{source}: the column {column!r} appears twice in the header")
        seen.add(column)
    used: dict[str, str] = {}
    for name in CASE_COLUMNS:
        column = mapping.get(name, name)
        if column in present:
            used[name] = column
            continue
        if name in mapping and (complete or name in REQUIRED_COLUMNS):
            raise CasesError(f"{source}: {COLUMN_FLAG} {name}={column}: the file has no column {column!r} "
                             f"(columns: {_listing(header)}){_did_you_mean(column, header)}")
        if name in REQUIRED_COLUMNS:
            spare = [c for c in header if c not in CASE_COLUMNS and c not in mapping.values()]
            close = _did_you_mean(name, spare)
            advice = f"{close.removeprefix('; ')} Otherwise name" if close else "name"
            raise CasesError(f"{source}: no column {name!r} (columns: {_listing(header)}): {advice} the column "
                             f"that holds it with {COLUMN_FLAG} {name}=COLUMN")
        if not complete:
            used[name] = column  # JSON: an optional key may first appear in a later row
    readers: dict[str, str] = {}
    for name, column in used.items():
        if column in readers:
            raise CasesError(f"{source}: {readers[column]} and {name} would both read the column {column!r}; "
                             f"map one of them elsewhere with {COLUMN_FLAG}")
        readers[column] = name
    ignored = tuple(c for c in dict.fromkeys(header) if c not in readers)
    return ResolvedColumns(used=used, ignored=ignored, header=tuple(header))


def _reads(column: str, mapping: Mapping[str, str]) -> bool:
    return column in mapping.values() or (column in CASE_COLUMNS and column not in mapping)


def _listing(names: Sequence[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:_SHOWN_COLUMNS])
    more = len(names) - _SHOWN_COLUMNS
    return f"{shown}, and {more} more" if more > 0 else (shown or "none")


def _did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest candidate (ignoring case), or nothing."""
    folded: dict[str, str] = {}
    for candidate in candidates:
        folded.setdefault(candidate.casefold(), candidate)
    close = difflib.get_close_matches(name.casefold(), list(folded), n=1, cutoff=0.75)
    return f"; did you mean {folded[close[0]]!r}?" if close and folded[close[0]] != name else ""
