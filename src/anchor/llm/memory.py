"""What servers accept, remembered from one process to the next.

Servers differ in how they take structured output (``response_format``) and whether they answer a
request for several answers (``n``) with several. A backend finds out with a refused or short
answer; without a memory every process would pay for that again (against llama.cpp's server, one
refused request per concurrent request at every start). The verdicts are kept in ``servers.json``
in the cache directory, per server (its address as shown: no credentials) and model. ``anchor
cache clear`` forgets them, and ``--no-cache`` neither reads nor writes them.

The file is small and rewritten whole (to a temporary file, then renamed) under an exclusive lock,
so processes that learn at the same time each add their verdict and a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

SERVERS_FILE = "servers.json"
log = logging.getLogger("anchor.llm")


class ServerFacts(BaseModel):
    """What one server accepted for one model (None: not known yet)."""

    format_mode: str | None = None
    """The structured-output request shape it accepted (``anchor.llm.openai_backend.FORMAT_MODES``)."""
    honours_n: bool | None = None
    """Whether it answered a request for several answers with as many."""


class ServerMemory:
    """``servers.json``: per ``server`` and ``model``, the :class:`ServerFacts` learnt."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    @staticmethod
    def _key(server: str, model: str) -> str:
        return f"{server} {model}"

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # none yet, or unreadable: everything is learnt again (and the file rewritten)
        return data if isinstance(data, dict) else {}

    def recall(self, server: str, model: str) -> ServerFacts:
        entry = self._read().get(self._key(server, model))
        try:
            return ServerFacts.model_validate(entry) if isinstance(entry, dict) else ServerFacts()
        except ValidationError:
            return ServerFacts()

    def remember(self, server: str, model: str, **facts: object) -> None:
        """Store ``facts`` (fields of :class:`ServerFacts`) for ``server`` and ``model``, keeping the rest.
        A folder that cannot be written only costs the next process the requests it takes to learn again."""
        try:
            with self._exclusive():
                data = self._read()
                key = self._key(server, model)
                entry = data.get(key) if isinstance(data.get(key), dict) else {}
                data[key] = ServerFacts.model_validate({**entry, **facts}).model_dump(exclude_none=True)
                self._write(data)
        except OSError as exc:
            log.warning("could not remember what %s accepts in %s: %s", server, self.path, exc)

    def describe(self) -> list[str]:
        """One line per server and model: what it accepts."""
        out = []
        for key, entry in sorted(self._read().items()):
            if isinstance(entry, dict):
                out.append(f"{key}: " + ", ".join(f"{k}={v}" for k, v in sorted(entry.items())))
        return out

    def clear(self) -> int:
        """Forget everything; how many server-and-model entries there were."""
        with self._exclusive():
            n = len(self._read())
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        return n

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock, open(self.path.with_name(f".{self.path.name}.lock"), "w") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def _write(self, data: dict[str, Any]) -> None:
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=2, sort_keys=True)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
