"""Reading a dataset file (bundled or given) and reporting what is wrong with it.

A file that cannot be used raises :class:`DatasetError` (a ``ValueError``) naming the file and, for
each problem, where it is; :class:`Problems` collects located problems over a whole file so that
the first ten are reported together.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anchor.evaluation.datasets.bundled import bundled_file

MAX_REPORTED_PROBLEMS = 10


class DatasetError(ValueError):
    """A dataset file is unreadable or malformed.

    ``source`` names the file, ``problems`` holds up to ten located problems and ``total`` how
    many were found in all.
    """

    def __init__(self, source: str, problems: Sequence[str], total: int | None = None) -> None:
        self.source = source
        self.problems = list(problems)
        self.total = max(total or 0, len(self.problems))
        super().__init__(self._format())

    def _format(self) -> str:
        if self.total == 1 and len(self.problems) == 1:
            return f"{self.source}: {self.problems[0]}"
        head = f"{self.source}: {self.total} problems"
        if self.total > len(self.problems):
            head += f" (first {len(self.problems)} shown)"
        return "\n".join([head + ":", *(f"  {p}" for p in self.problems)])

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, (self.source, self.problems, self.total))


class Problems:
    """Collects located problems; keeps the first few and counts all of them."""

    def __init__(self, source: str, limit: int = MAX_REPORTED_PROBLEMS) -> None:
        self.source = source
        self.limit = limit
        self.items: list[str] = []
        self.count = 0

    def add(self, where: str, what: str) -> None:
        self.count += 1
        if len(self.items) < self.limit:
            self.items.append(f"{where}: {what}")

    def raise_if_any(self) -> None:
        if self.count:
            raise DatasetError(self.source, self.items, self.count)


def read_text(path: str | Path | None, name: str) -> tuple[str, str]:
    """(source label for messages, decoded text) of a user file or the bundled copy."""
    if path is None:
        res = bundled_file(name)
        source = f"{res} (bundled)"
        reader = res.read_bytes
    else:
        p = Path(path)
        source = str(p)
        reader = p.read_bytes
    try:
        raw = reader()
    except OSError as exc:
        raise DatasetError(source, [f"cannot read the file ({exc.strerror or exc})"]) from exc
    try:
        return source, raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DatasetError(source, [f"line {line}: not valid UTF-8 (byte offset {exc.start})"]) from None


