"""Persistent response cache in SQLite.

Only answers that passed validation are stored, so a cached entry is always usable. SQLite in
WAL mode keeps the file consistent when several processes write at once or one is killed in
the middle of a write (a transaction either lands whole or not at all).

Beside each answer, table ``requests`` keeps what the request that produced it cost (seconds, when
it was sent, its id), so that a run answered from the cache can say what those answers cost when
they were asked for (``CallRecord.recorded``). It is a table of its own so that the ``responses``
table keeps the shape every earlier version reads and writes. Answers cached before it existed,
or by an earlier version, have no row there.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir
from pydantic import BaseModel

from anchor.llm.base import TokenLogprob
from anchor.llm.ledger import RecordedCost

#: The files of the cache directory: LLM answers, and embedding vectors (``anchor.embedding.embed.VectorStore``).
RESPONSES_FILE = "responses.sqlite"
VECTORS_FILE = "vectors.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    stage TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    logprobs TEXT,
    created REAL NOT NULL
)
"""

_REQUESTS = """
CREATE TABLE IF NOT EXISTS requests (
    key TEXT PRIMARY KEY,
    seconds REAL NOT NULL,
    started REAL NOT NULL,
    request_id TEXT NOT NULL
)
"""

_SELECT = ("SELECT r.text, r.prompt_tokens, r.completion_tokens, r.logprobs, q.seconds, q.started, q.request_id "
           "FROM responses r LEFT JOIN requests q ON q.key = r.key WHERE r.key = ?")


def default_cache_dir() -> Path:
    """``$ANCHOR_CACHE_DIR`` if set, else the per-user cache directory."""
    env = os.environ.get("ANCHOR_CACHE_DIR")
    return Path(env).expanduser() if env else Path(user_cache_dir("anchor", appauthor=False))


class CachedResponse(BaseModel):
    text: str
    prompt_tokens: int
    completion_tokens: int
    logprobs: list[TokenLogprob] | None = None
    seconds: float | None = None
    """How long the request that produced this answer took (None: not recorded)."""
    started: float | None = None
    """When that request was sent (``time.time()``)."""
    request_id: str | None = None
    """That request's id (``CallRecord.request_id``); the answers of one request for several share it."""

    def recorded_cost(self, key: str) -> RecordedCost | None:
        """What the request behind this answer cost, for the ledger record of a hit on ``key``."""
        if self.request_id is None:
            return None
        return RecordedCost(request_id=self.request_id, prompt_tokens=self.prompt_tokens,
                            completion_tokens=self.completion_tokens, seconds=self.seconds or 0.0,
                            started=self.started or 0.0, entry=key[:16])


def cache_key(
    *,
    backend: str,
    model: str,
    messages: list[dict[str, str]],
    schema: dict[str, Any] | None,
    params: dict[str, Any],
    sample_index: int,
) -> str:
    """Stable hash of everything that determines an answer. ``backend`` is the backend's kind, not
    its address: the same model answers the same way wherever it listens (the client keeps looking
    under the keys that older versions made with the full base URL, see ``ResponseCache.get``).
    Never includes credentials."""
    payload = {
        "v": 1,
        "backend": backend,
        "model": model,
        "messages": messages,
        "schema": schema,
        "params": params,
        "sample": sample_index,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def legacy_keys(backend: object, request: dict[str, Any]) -> list[str]:
    """The keys older versions cached ``request`` under: ``cache_key`` with each of the backend's
    ``cache_aliases`` (the server's full address) in place of its kind."""
    return [cache_key(backend=alias, **request) for alias in getattr(backend, "cache_aliases", ())]


class ResponseCache:
    """Key-value store of validated LLM answers, safe for threads and for several processes."""

    def __init__(self, path: Path | str | None = None) -> None:
        if path is None:
            path = default_cache_dir() / RESPONSES_FILE
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = self._open()

    def _open(self) -> sqlite3.Connection:
        try:
            return self._connect()
        except sqlite3.DatabaseError as exc:
            # A file that is not a database (or is damaged beyond SQLite's recovery): set it aside
            # rather than fail every run.
            moved = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
            os.replace(self.path, moved)
            warnings.warn(f"response cache {self.path} was unreadable ({exc}); moved it to {moved}", stacklevel=2)
            return self._connect()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA busy_timeout=60000")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(_SCHEMA)
        conn.execute(_REQUESTS)
        conn.execute("SELECT count(*) FROM responses LIMIT 1").fetchone()
        return conn

    def get(self, key: str, *, legacy: Callable[[], Iterable[str]] | None = None) -> CachedResponse | None:
        """The answer stored under ``key``. On a miss, the first found under one of the ``legacy``
        keys (how an earlier version keyed the same request), which is then copied under ``key``."""
        with self._lock:
            row = self._conn.execute(_SELECT, (key,)).fetchone()
            for old in legacy() if row is None and legacy is not None else ():
                row = self._conn.execute(_SELECT, (old,)).fetchone()
                if row is not None:
                    self._conn.execute("INSERT OR IGNORE INTO responses SELECT ?, stage, text, prompt_tokens, "
                                       "completion_tokens, logprobs, created FROM responses WHERE key = ?", (key, old))
                    self._conn.execute("INSERT OR IGNORE INTO requests SELECT ?, seconds, started, request_id "
                                       "FROM requests WHERE key = ?", (key, old))
                    break
        if row is None:
            return None
        logprobs = None
        if row[3]:
            logprobs = [TokenLogprob.model_validate(item) for item in json.loads(row[3])]
        return CachedResponse(text=row[0], prompt_tokens=row[1], completion_tokens=row[2], logprobs=logprobs,
                              seconds=row[4], started=row[5], request_id=row[6])

    def put(self, key: str, stage: str, response: CachedResponse) -> None:
        """Store an answer unless one is already stored: the first answer for a key stays the
        answer, so every later reader sees the same one."""
        logprobs = None
        if response.logprobs is not None:
            logprobs = json.dumps([lp.model_dump() for lp in response.logprobs])
        with self._lock:
            # One transaction: an answer never lands without the cost of its request.
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                cur = self._conn.execute(
                    "INSERT OR IGNORE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (key, stage, response.text, response.prompt_tokens, response.completion_tokens, logprobs,
                     time.time()),
                )
                if cur.rowcount and response.request_id is not None:
                    self._conn.execute("INSERT OR IGNORE INTO requests VALUES (?, ?, ?, ?)",
                                       (key, response.seconds or 0.0, response.started or 0.0, response.request_id))
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT count(*) FROM responses").fetchone()[0])

    def stats(self) -> dict[str, int]:
        with self._lock:
            rows = self._conn.execute("SELECT stage, count(*) FROM responses GROUP BY stage").fetchall()
        return {stage: int(n) for stage, n in rows}

    def clear(self) -> int:
        with self._lock:
            n = int(self._conn.execute("SELECT count(*) FROM responses").fetchone()[0])
            self._conn.execute("DELETE FROM responses")
            self._conn.execute("DELETE FROM requests")
        return n

    def close(self) -> None:
        with self._lock:
            self._conn.close()
