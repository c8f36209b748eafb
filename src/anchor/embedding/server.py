"""Embeddings from a server: any OpenAI-compatible ``/v1/embeddings`` endpoint (vLLM, Text
Embeddings Inference, Ollama, OpenAI), for users who have one.

With ``--embed-base-url`` (``ANCHOR_EMBED_BASE_URL``) every text anchor embeds goes there instead
of through the bundled MiniLM, so a small client loads no model at all and can keep a large LLM
deployment busy. :func:`make_embedder` picks the embedder from the settings.

Which embedder made a space's vectors is recorded by model name (``FactorSpace.embedding_model``,
``Embedder.model_id``), and a condition is only mapped onto a space by an embedder of the same
name (``anchor.mapping.mapper.check_embedder``). A server running all-MiniLM-L6-v2 under the
bundled model's name (``sentence-transformers/all-MiniLM-L6-v2``, as vLLM and TEI do) therefore
counts as the same embedder: its vectors agree with the bundled model's to within 1e-5 per
component (measured: 2.8e-7, cosine >= 0.9999999; tests/embedding/test_embed_server.py, against a server
running sentence-transformers). One serving it under another name (Ollama's ``all-minilm``) is
another embedder.

Requests follow the chat backend's conventions: the SDK's own retries are off and failures are
retried here with an exponential back-off that honours ``Retry-After`` (HTTP 429/408/409/5xx,
time-outs, dropped connections); a refused key, a wrong URL or a rejected request fails at once.
The API key is only ever held in memory and scrubbed from every message. A query in the base URL
(``?key=...``) is sent as parameters of every request (``anchor.llm.endpoint``).

Vectors are checked before they are used or cached: finite, all as wide as each other and as the
model's known width (``anchor.embedding.embed.KNOWN_DIMENSIONS``: 384 for all-MiniLM-L6-v2), or, for a model
not known by name, as wide as the server's first answer or the vectors cached for it. A server
that answers another width under a known name is refused with an error naming the server and the
cache, and nothing of that answer is stored. Vectors are re-normalised to unit length (not every
server does) and cached by model, server address and text: another server under the same model
name has vectors of its own, and a cached vector of the wrong width is embedded again.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from anchor.embedding.embed import (
    DEFAULT_BATCH_WINDOW_MS,
    KNOWN_DIMENSIONS,
    MEMORY_LIMIT,
    Embedder,
    EmbedderIdentity,
    MiniLMEmbedder,
    VectorMemory,
    VectorStore,
    check_batching,
    decode_vector,
    minilm_dir,
)
from anchor.errors import (
    ConfigurationError,
    FatalBackendError,
    RequestRejected,
    RetryBudgetExhausted,
    TransientBackendError,
)
from anchor.llm.endpoint import retry_after_seconds, sdk_endpoint
from anchor.secrets import display_url, register, register_url, scrub

if TYPE_CHECKING:
    import openai

    from anchor.llm.settings import LLMSettings

#: The bundled model's name, which vLLM and TEI also serve it under: the default --embed-model.
DEFAULT_SERVER_MODEL = MiniLMEmbedder.model_id
#: Embedded to learn the width of a server's vectors when nothing else tells it (then cached like any text).
PROBE_TEXT = "anchor: the width of this server's vectors"


class ServerEmbedder:
    """Vectors from ``base_url``'s ``/embeddings`` for ``model``; texts sent ``batch_size`` at a time."""

    def __init__(self, base_url: str, model: str = DEFAULT_SERVER_MODEL, *, api_key: str | None = None,
                 timeout: float = 120.0, retries: int = 6, batch_size: int = 128,
                 cache_path: Path | str | None = None, backoff_base: float = 0.5, backoff_max: float = 30.0,
                 retry_after_max: float = 120.0, memory_limit: int = MEMORY_LIMIT,
                 max_batch: int | None = None, batch_window_ms: float = DEFAULT_BATCH_WINDOW_MS) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigurationError(f"--embed-base-url must start with http:// or https://, got {display_url(base_url)!r}")
        if not model or not model.strip():
            raise ConfigurationError("--embed-model is empty")
        if batch_size < 1 or retries < 0:
            raise ValueError("batch_size must be >= 1 and retries >= 0")
        self.base_url = base_url.rstrip("/")
        self.model_id = model.strip()
        # Concurrent calls are gathered into one (anchor.compute.offload); by default up to one request's
        # worth of texts, so a gathered batch's new texts go in one /embeddings request.
        max_batch = batch_size if max_batch is None else max_batch
        check_batching(max_batch, batch_window_ms)
        self.batch_size = batch_size
        self.max_batch, self.batch_window_ms = max_batch, batch_window_ms
        self.retries = retries
        self.backoff_base, self.backoff_max, self.retry_after_max = backoff_base, backoff_max, retry_after_max
        register(api_key)
        register_url(base_url)
        self._endpoint = sdk_endpoint(self.base_url, api_key, url_flag="--embed-base-url", key_flag="--embed-api-key")
        self.where = display_url(self.base_url)
        self._timeout = timeout
        self._client: openai.OpenAI | None = None
        self._client_lock = threading.Lock()
        self.memory = VectorMemory(memory_limit)
        self._store = VectorStore(Path(cache_path)) if cache_path is not None else None
        self.requests = 0  # requests sent (attempts included)
        # The width of this model's vectors, and what says so (for the error when an answer differs).
        self._dimension: int | None = KNOWN_DIMENSIONS.get(self.model_id)
        self._dimension_from = "the width this model's vectors have"

    @property
    def name(self) -> str:
        return f"embeddings server {display_url(self.base_url)}"

    @property
    def dimension(self) -> int:
        """The width of this server's vectors for the model: known by name, read from the cache, or
        learnt from one request (a probe text, cached like any other)."""
        if self._dimension is None:
            self.encode([PROBE_TEXT])
        assert self._dimension is not None
        return self._dimension

    @property
    def known_dimension(self) -> int | None:
        """The width of its vectors if known without a request (by the model's name, or learnt already)."""
        return self._dimension

    def _key(self, text: str) -> str:
        # Apart from the bundled model's entries, and from another server's that serves the same name
        # (which may be another model): keyed by the model, the server (as shown: no credentials) and the text.
        return hashlib.sha256(f"{self.model_id}\nserver\n{self.where}\n{text}".encode()).hexdigest()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        distinct = list(dict.fromkeys(texts))
        found = self.memory.held(distinct)
        missing = [t for t in distinct if t not in found]
        if missing and self._store is not None:
            keys = {self._key(t): t for t in missing}
            for key, blob in self._store.get_many(list(keys)).items():
                vec = decode_vector(blob, self._dimension)
                if vec is None:
                    continue  # damaged, or of another width: embedded again and replaced
                if self._dimension is None:
                    self._dimension = vec.shape[0]
                    self._dimension_from = f"as wide as the vectors cached for it in {self._store.path}"
                found[keys[key]] = vec
                self.memory.put(keys[key], vec)
            missing = [t for t in missing if t not in found]
        for start in range(0, len(missing), self.batch_size):
            batch = missing[start:start + self.batch_size]
            vectors = self._embed(batch)
            for text, vec in zip(batch, vectors, strict=True):
                found[text] = vec
                self.memory.put(text, vec)
            if self._store is not None:
                self._store.put_many([(self._key(t), v.astype("<f4").tobytes()) for t, v in zip(batch, vectors,
                                                                                                strict=True)])
        if not texts:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        return np.stack([found[t] for t in texts]).astype(np.float32)

    # ------------------------------------------------------------------ the wire

    def _sdk(self) -> openai.OpenAI:
        # The SDK costs half a second or more to import: only for a run that embeds on a server.
        import openai

        with self._client_lock:
            if self._client is None:
                # Local servers ignore the key, but the SDK insists on having one.
                end = self._endpoint
                self._client = openai.OpenAI(base_url=end.base_url, api_key=end.api_key or "not-needed",
                                             default_query=end.query or None, default_headers=end.headers or None,
                                             timeout=self._timeout, max_retries=0)
            return self._client

    def _embed(self, texts: list[str]) -> np.ndarray:
        response = self._send(texts)
        data = sorted(getattr(response, "data", None) or [], key=lambda d: d.index)
        if len(data) != len(texts) or [d.index for d in data] != list(range(len(texts))):
            raise FatalBackendError(f"{self.name} answered {len(data)} embeddings for {len(texts)} texts")
        try:
            vectors = np.asarray([d.embedding for d in data], dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise FatalBackendError(f"{self.name} sent embeddings that are not lists of numbers") from exc
        if vectors.ndim != 2 or vectors.shape[1] == 0 or not np.isfinite(vectors).all():
            raise FatalBackendError(f"{self.name} sent embeddings of uneven or no length, or with NaN/inf values; "
                                    f"nothing of its answer was cached")
        width = vectors.shape[1]
        if self._dimension is None:
            self._dimension = width
            self._dimension_from = "as wide as its first answer"
        elif width != self._dimension:
            cache = f"in {self._store.path}" if self._store is not None else "(caching is off)"
            raise FatalBackendError(
                f"{self.name} answered {width}-dimensional vectors for model {self.model_id!r}, which should be "
                f"{self._dimension}-dimensional ({self._dimension_from}); nothing of this answer was cached {cache}. "
                "Check --embed-base-url and --embed-model; if the server's model really changed, "
                "`anchor cache clear` forgets the old vectors")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32)

    def _send(self, texts: list[str]) -> Any:
        import openai  # imported by _sdk() already; needed here for its exception types

        last_error = ""
        for retry in range(self.retries + 1):
            try:
                self.requests += 1
                return self._sdk().embeddings.create(model=self.model_id, input=texts, encoding_format="float")
            except openai.APIStatusError as exc:
                error = self._classify(exc)
            except openai.APITimeoutError as exc:
                error = TransientBackendError(f"request timed out: {exc}", kind="timeout")
            except openai.APIConnectionError as exc:
                error = TransientBackendError(f"connection error: {exc}", kind="connection")
            except (openai.APIResponseValidationError, ValueError, TypeError, KeyError) as exc:
                error = TransientBackendError(f"server sent an undecodable response: {exc}", kind="bad_response")
            if not isinstance(error, TransientBackendError):
                raise error
            last_error = scrub(str(error))
            if retry < self.retries:
                time.sleep(self._backoff(retry, error.retry_after))
        raise RetryBudgetExhausted(f"{self.retries + 1} attempts to reach {self.name} failed; last error: {last_error}")

    def _backoff(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.retry_after_max)
        cap = min(self.backoff_max, self.backoff_base * (2 ** retry))
        return random.uniform(cap / 2, cap)  # as the LLM client: never zero, never synchronised

    def _classify(self, exc: openai.APIStatusError) -> Exception:
        status = exc.status_code
        detail = " ".join(scrub(str(exc.message)).split())[:300]
        if status in (408, 409, 429) or status >= 500:
            return TransientBackendError(f"HTTP {status}: {detail}", kind=f"http_{status}",
                                         retry_after=retry_after_seconds(exc.response.headers))
        where = display_url(self.base_url)
        if status in (401, 403):
            return FatalBackendError(f"HTTP {status} from {where}: check the embeddings API key ({detail})")
        if status == 404:
            return FatalBackendError(f"HTTP 404 from {where}: wrong --embed-base-url (it usually ends in /v1) or "
                                     f"unknown --embed-model {self.model_id!r} ({detail})")
        return RequestRejected(f"HTTP {status} from {where}: {detail}")

    def __repr__(self) -> str:
        return f"ServerEmbedder({display_url(self.base_url)!r}, {self.model_id!r})"


def settings_identity(settings: LLMSettings) -> EmbedderIdentity:
    """The identity of the embedder :func:`make_embedder` would make, as far as it is known without
    asking a server (the width of a server's vectors only when its model is known by name)."""
    if settings.embed_base_url:
        model = (settings.embed_model or DEFAULT_SERVER_MODEL).strip()
        return EmbedderIdentity(model=model, dimension=KNOWN_DIMENSIONS.get(model),
                                where=display_url(settings.embed_base_url.rstrip("/")))
    return EmbedderIdentity(model=MiniLMEmbedder.model_id, dimension=MiniLMEmbedder.dimension,
                            where=MiniLMEmbedder.where)


def make_embedder(settings: LLMSettings) -> Embedder:
    """The embedder the settings ask for: a server's (``embed_base_url``) or the bundled MiniLM."""
    if settings.embed_base_url:
        key = settings.embed_api_key.get_secret_value() if settings.embed_api_key else None
        return ServerEmbedder(settings.embed_base_url, settings.embed_model or DEFAULT_SERVER_MODEL, api_key=key,
                              timeout=settings.timeout, retries=settings.transport_retries,
                              cache_path=settings.vector_cache_path, max_batch=settings.embed_max_batch,
                              batch_window_ms=settings.embed_batch_window_ms)
    if settings.embed_model and settings.embed_model != MiniLMEmbedder.model_id:
        raise ConfigurationError(f"--embed-model {settings.embed_model!r} needs --embed-base-url (the bundled "
                                 f"embedder is {MiniLMEmbedder.model_id})")
    check_embedder(settings)
    return MiniLMEmbedder(cache_path=settings.vector_cache_path, batch_window_ms=settings.embed_batch_window_ms,
                          **({"max_batch": settings.embed_max_batch} if settings.embed_max_batch is not None else {}))


def check_embedder(settings: LLMSettings) -> None:
    """Raise the one-line ``ConfigurationError`` now when the embedder the settings ask for is the bundled
    MiniLM and its package is not installed: it is not one of anchor's dependencies (docs/install.md),
    and without this a run would fail at the first text it embeds, after its first requests."""
    if not settings.embed_base_url:
        minilm_dir()
