"""The one lenient reader of a user's JSON-lines file: each line's value, or why it cannot be read.

``anchor predict``'s cases files (:mod:`anchor.cases.formats`) and the fact-checking sets
(:mod:`anchor.evaluation.datasets.factcheck`) are read through :func:`read_json_lines`, so that one file
reads the same way in both:

* The file is UTF-8. A UTF-8 byte-order mark at its very start is the mark of the encoding (Windows
  editors write one), and is skipped: the first line is read like any other. A file that starts with
  a UTF-16 or UTF-32 byte-order mark, or whose first line holds NUL bytes, is refused as a whole
  (``error``), with the way to convert it, rather than read as garbage.
* A blank line is skipped. A line that is not UTF-8, not JSON, starts with a byte-order mark (files
  joined with ``cat``, each saved with one), holds an object with a key given twice (which value is
  meant cannot be told), nests arrays and objects deeper than :data:`MAX_JSON_DEPTH` levels, or is
  longer than the caller's limit in bytes is a bad line with its reason; the others are read. What a
  value must be (an object with some keys) is the caller's to check.
* A line over the limit is never held whole: it is read on in chunks and dropped, so memory holds
  at most one line of the limit's length whatever the file holds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

UTF8_BOM = b"\xef\xbb\xbf"
#: Byte-order marks of the encodings anchor does not read (UTF-32 first: its LE mark starts with UTF-16's).
OTHER_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
              (b"\xfe\xff", "UTF-16"))
LATER_BOM = "starts with a byte-order mark (U+FEFF); save the file as UTF-8 without BOM"
#: Deepest nesting of arrays and objects a row may have, its own object counting as one. A row is a
#: flat object, and the columns anchor does not read seldom nest more than a few levels; Python's
#: decoder recurses once a level, so a row of a thousand brackets (2 KB) would exhaust its stack.
MAX_JSON_DEPTH = 16
#: The reason given for a row nested deeper.
TOO_DEEP = f"nested deeper than {MAX_JSON_DEPTH} levels of arrays and objects (a row is a flat object)"
#: The bytes a line over the limit is read on in, to find its end without holding it.
SKIP_CHUNK_BYTES = 1 << 16
# A whole string (its brackets are text), or one bracket.
_NESTING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)


def check_encoding(start: bytes, source: str, error: Callable[[str], Exception]) -> None:
    """Refuse (raising ``error(message)``) a text file that is not UTF-8 as a whole (``start``: its first
    line or chunk), naming the encoding it seems to be in and how to convert it."""
    found = next((name for mark, name in OTHER_BOMS if start.startswith(mark)), None)
    if found is None and b"\x00" in start.split(b"\n", 1)[0]:
        found = "UTF-16 or UTF-32 (NUL bytes in its first line)"
    if found is not None:
        raise error(f"{source}: the file is {found} text, and anchor reads UTF-8: save it as UTF-8 (a "
                    f"spreadsheet's \"CSV UTF-8\"; or iconv -f {found.split()[0]} -t UTF-8 FILE > NEW_FILE)")


@dataclass(frozen=True, slots=True)
class JsonLine:
    """One non-blank line: its number (1-based, physical) and its value, or the reason it cannot be read."""

    line: int
    value: Any = None
    problem: str | None = None


class _KeyedObject(dict[str, Any]):
    """A decoded JSON object with a key given twice, and the first such key (the last value would
    otherwise win without a word). Objects without one decode as plain dicts."""

    twice: str | None = None

    @classmethod
    def of(cls, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(pairs)
        if len(out) == len(pairs):
            return out
        keyed = cls(out)
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                keyed.twice = key
                break
            seen.add(key)
        return keyed


def nested_too_deep(text: str, start: int = 0, end: int | None = None) -> bool:
    """Whether the JSON text ``text[start:end]`` nests arrays and objects deeper than :data:`MAX_JSON_DEPTH`
    (brackets inside strings do not count). Iterative: safe on any depth."""
    end = len(text) if end is None else end
    if text.count("{", start, end) + text.count("[", start, end) <= MAX_JSON_DEPTH:
        return False  # the usual row: too few brackets to be that deep, and nothing more to scan
    depth = 0
    for match in _NESTING.finditer(text, start, end):
        bracket = match.group()[0]
        if bracket in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return True
        elif bracket in "]}":
            depth -= 1
    return False


def too_long(size: int, limit: int) -> str:
    """The reason given for a row of ``size`` bytes, over the row limit of ``limit`` bytes."""
    return f"longer than the row limit of {limit:,} bytes ({size:,} bytes)"


@dataclass(frozen=True, slots=True)
class LongLine:
    """A line over the limit, read past and dropped: its size (bytes, line end included) and its first
    bytes (for the encoding check of a file's first line) are kept."""

    size: int
    head: bytes


def bounded_lines(stream: IO[bytes], limit: int) -> Iterator[bytes | LongLine]:
    """Each line of ``stream`` with its line end, or a :class:`LongLine` for one of more than ``limit``
    bytes: that line is read on in chunks to its end and dropped, never held whole."""
    while True:
        raw = stream.readline(limit + 1)
        if not raw:
            return
        if len(raw) <= limit:
            yield raw
            continue
        size, head = len(raw), raw[:SKIP_CHUNK_BYTES]
        while not raw.endswith(b"\n"):
            raw = stream.readline(SKIP_CHUNK_BYTES)
            if not raw:
                break
            size += len(raw)
        yield LongLine(size, head)


def json_problem(text: str, exc: json.JSONDecodeError) -> str:
    """Why ``text`` is not JSON: only a line that opens an object or array and stops before closing it
    looks cut off; any other bad line (a word, a bare value) is just not JSON."""
    if text.startswith(("{", "[")) and (exc.pos >= len(text) or not text.endswith(("}", "]"))):
        return f"not valid JSON: the line ends too early (truncated?) ({exc.msg})"
    return f"not valid JSON ({exc.msg}, column {exc.colno})"


def repeated_key(value: Any) -> str | None:
    """The first key given twice in a decoded object (at its top level), if any."""
    return value.twice if isinstance(value, _KeyedObject) else None


def keyed_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The ``object_pairs_hook`` that notes a key given twice (:func:`repeated_key`), for a decoder of one's own."""
    return _KeyedObject.of(pairs)


def decode_json(text: str) -> Any:
    """``json.loads`` that notes a key given twice (:func:`repeated_key`)."""
    return json.loads(text, object_pairs_hook=_KeyedObject.of)


def decode_line(text: str) -> tuple[Any, str | None]:
    """One line's JSON value, or (None, why it is not one): nested too deep, not JSON, or an object with a
    key given twice."""
    if nested_too_deep(text):
        return None, TOO_DEEP
    try:
        value = decode_json(text)
    except json.JSONDecodeError as exc:
        return None, json_problem(text, exc)
    twice = repeated_key(value)
    if twice is not None:
        return None, f"the key {twice!r} appears twice in the object (which value is meant cannot be told)"
    return value, None


def read_json_lines(stream: IO[bytes], source: str, error: Callable[[str], Exception], *,
                    max_line_bytes: int) -> Iterator[JsonLine]:
    """Each non-blank line of a JSON-lines file (``stream``: the open binary file), read as the module
    docstring says; a line over ``max_line_bytes`` bytes (its line end included) is a bad line; ``error``
    is raised for a file in another encoding."""
    for number, raw in enumerate(bounded_lines(stream, max_line_bytes), start=1):
        if isinstance(raw, LongLine):
            if number == 1:
                check_encoding(raw.head, source, error)
            yield JsonLine(number, problem=too_long(raw.size, max_line_bytes))
            continue
        if number == 1:
            check_encoding(raw, source, error)
            raw = raw.removeprefix(UTF8_BOM)
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            yield JsonLine(number, problem=f"not valid UTF-8 (byte {exc.start + 1} of the line)")
            continue
        if text.startswith("\ufeff"):
            yield JsonLine(number, problem=LATER_BOM)
            continue
        value, problem = decode_line(text)
        yield JsonLine(number, value, problem)
