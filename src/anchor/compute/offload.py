"""CPU-heavy work off the event loop, so requests keep flowing while it runs.

An evaluation keeps many scenarios in flight; whatever one of them computes on the event-loop
thread stalls the network traffic of all the others. Two kinds of work are heavy enough to
matter:

* **Embedding.** ``await encode(embedder, texts)`` queues the texts; while the model is busy
  with one batch, requests from other scenarios pile up and go through together as the next
  one. For MiniLM the merged call gives exactly the vectors separate calls would (see
  ``anchor.embedding.embed``).
* **Clustering.** ``await cluster(job, *args)`` runs the clustering job its caller hands it (the
  space builder's UMAP + HDBSCAN: this layer knows nothing of spaces). UMAP's first fit in a
  process imports UMAP (about three seconds) and loads its numba kernels from numba's cache
  (``anchor.space.umap_cache``; on a machine where they were never compiled, compiling them takes
  ten seconds or more); ``warm_up(clustering=job)`` starts that at once, so it overlaps with the
  first abduction rounds' requests instead of stalling traffic later. It runs once per process;
  calling it again does nothing.

Where the work runs (``ANCHOR_COMPUTE``):

* ``processes`` (the default): MiniLM and the clustering jobs each run in a helper process
  of their own (``anchor.compute.workerproc``). Threads were not enough when MiniLM ran in
  sentence-transformers: its Python code, UMAP's imports and numba and the event loop all need
  the GIL, and on two busy cores every request then waited on it (an encode of three texts took
  75 ms instead of 10, and each request carried 50 ms of client delay). Custom embedders (a
  server's among them), and the jobs their caller marks ``local`` (those holding a custom reducer
  or clusterer), stay in this process, on the threads below.
* ``threads``: everything in this process, on one embedding thread and one compute thread.

Results do not depend on the choice, or on scheduling: an answer is the same whether a request
was merged with others, queued behind a warm-up, or run alone.
"""

from __future__ import annotations

import asyncio
import atexit
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from anchor.compute.workerproc import WorkerProcess
from anchor.embedding.embed import (
    DEFAULT_MAX_BATCH,
    Embedder,
    LongTextEmbedder,
    MiniLMEmbedder,
    embed_condition,
    embedding_thread,
)
from anchor.types import ConditionEmbedding

ENV_COMPUTE = "ANCHOR_COMPUTE"
MODES = ("processes", "threads")

_COMPUTE: ThreadPoolExecutor | None = None
_COMPUTE_LOCK = threading.Lock()
_WARM_UP: Future[float] | None = None
_WARM_UP_LOCK = threading.Lock()
_EMBED_PROCESS = WorkerProcess("embedding")
_CLUSTER_PROCESS = WorkerProcess("clustering")
atexit.register(_EMBED_PROCESS.close)
atexit.register(_CLUSTER_PROCESS.close)

R = TypeVar("R")


def mode() -> str:
    """Where heavy work runs: ``processes`` (default) or ``threads`` (from ``ANCHOR_COMPUTE``)."""
    value = os.environ.get(ENV_COMPUTE, "processes").strip().lower() or "processes"
    if value not in MODES:
        raise ValueError(f"environment variable {ENV_COMPUTE}={value!r} must be one of {', '.join(MODES)}")
    return value


def compute_thread() -> ThreadPoolExecutor:
    """The one thread that runs clustering in this process (jobs queue in order)."""
    global _COMPUTE
    with _COMPUTE_LOCK:
        if _COMPUTE is None:
            _COMPUTE = ThreadPoolExecutor(1, thread_name_prefix="anchor-compute")
        return _COMPUTE


# --------------------------------------------------------------------------- in the helper processes

_WORKER_EMBEDDERS: dict[tuple[str | None, str | None, int], MiniLMEmbedder] = {}


def _worker_embedder(model_dir: str | None, cache_path: str | None, batch_size: int) -> MiniLMEmbedder:
    key = (model_dir, cache_path, batch_size)
    embedder = _WORKER_EMBEDDERS.get(key)
    if embedder is None:
        embedder = _WORKER_EMBEDDERS[key] = MiniLMEmbedder(model_dir, batch_size=batch_size, cache_path=cache_path)
    return embedder


def _encode_in_worker(model_dir: str | None, cache_path: str | None, batch_size: int,
                      texts: list[str]) -> np.ndarray:
    return _worker_embedder(model_dir, cache_path, batch_size).encode(texts)


def _load_in_worker(model_dir: str | None, cache_path: str | None, batch_size: int) -> None:
    _worker_embedder(model_dir, cache_path, batch_size).model  # noqa: B018 - loads it


def _describe(embedder: MiniLMEmbedder) -> tuple[str | None, str | None, int]:
    model_dir = embedder._model_dir  # noqa: SLF001 - the worker rebuilds the same embedder
    return (str(model_dir) if model_dir else None,
            str(embedder.cache_path) if embedder.cache_path else None, embedder.batch_size)


def _in_process(embedder: Embedder) -> bool:
    """Does this embedder's work go to the embedding process?"""
    return type(embedder) is MiniLMEmbedder and mode() == "processes"


# --------------------------------------------------------------------------- embedding


def batching_of(embedder: Embedder) -> tuple[float, int]:
    """(window in seconds, largest batch in texts) of ``embedder``'s gathered calls: its ``batch_window_ms``
    and ``max_batch`` attributes (set by its constructor), else no window and :data:`DEFAULT_MAX_BATCH`."""
    window = max(0.0, float(getattr(embedder, "batch_window_ms", 0.0) or 0.0)) / 1000.0
    largest = int(getattr(embedder, "max_batch", DEFAULT_MAX_BATCH) or DEFAULT_MAX_BATCH)
    return window, max(1, largest)


class _Batcher:
    """Gathers the encode calls of one embedder into one model call each (its micro-batches).

    Calls that arrive while the model is busy go together as its next batch, up to the embedder's largest
    batch (whole calls: one with more texts than that goes alone, and the embedder splits it). When the
    model is free a batch starts at once, unless the embedder has a window and another call came less than
    a window ago: then the batch waits up to the window (or until it is full) for more. A lone call in an
    idle service therefore never waits. Each caller gets its own rows; an error goes to every caller of
    its batch; a caller that gives up is left out, and the others are not disturbed.
    """

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.window, self.max_batch = batching_of(embedder)
        self.pending: list[tuple[list[str], asyncio.Future[np.ndarray]]] = []
        self.draining = False
        self.batches = 0  # model calls made (for the tests and benchmarks)
        self._last_arrival = -math.inf
        self._full: asyncio.Event | None = None

    async def encode(self, texts: list[str]) -> np.ndarray:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[np.ndarray] = loop.create_future()
        now = loop.time()
        recent, self._last_arrival = now - self._last_arrival < self.window, now
        self.pending.append((texts, future))
        if not self.draining:
            self.draining = True
            loop.create_task(self._drain(gather=recent))
        elif self._full is not None and self._queued() >= self.max_batch:
            self._full.set()
        return await future

    def _queued(self) -> int:
        return sum(len(texts) for texts, future in self.pending if not future.done())

    def _take(self) -> list[tuple[list[str], asyncio.Future[np.ndarray]]]:
        """The next batch: the waiting calls in order, whole, up to the largest batch (at least one)."""
        live = [(texts, future) for texts, future in self.pending if not future.done()]
        taken, size = 0, 0
        for texts, _ in live:
            if taken and size + len(texts) > self.max_batch:
                break
            taken, size = taken + 1, size + len(texts)
        self.pending = live[taken:]
        return live[:taken]

    async def _run(self, texts: list[str]) -> np.ndarray:
        if _in_process(self.embedder):
            assert isinstance(self.embedder, MiniLMEmbedder)
            job = _EMBED_PROCESS.submit(_encode_in_worker, *_describe(self.embedder), texts)
            return await asyncio.wrap_future(job)
        return await asyncio.get_running_loop().run_in_executor(embedding_thread(), self.embedder.encode, texts)

    async def _drain(self, gather: bool) -> None:
        try:
            if gather and self._queued() < self.max_batch:
                # Calls are coming in: give the model's next batch up to the window to fill.
                self._full = asyncio.Event()
                try:
                    await asyncio.wait_for(self._full.wait(), self.window)
                except TimeoutError:
                    pass
                finally:
                    self._full = None
            while self.pending:
                batch = self._take()
                if not batch:
                    continue
                merged = list(dict.fromkeys(t for texts, _ in batch for t in texts))
                self.batches += 1
                try:
                    vectors = np.asarray(await self._run(merged), dtype=np.float32)
                except BaseException as exc:  # noqa: BLE001 - handed to every waiter
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                            # Marked as seen: a waiter cancelled before it woke (a build stopping on
                            # this very error) would otherwise have asyncio print it again at exit.
                            future.exception()
                    if not isinstance(exc, Exception):
                        raise
                    continue
                row = {text: i for i, text in enumerate(merged)}
                for texts, future in batch:
                    if not future.done():  # the waiter may have been cancelled
                        future.set_result(vectors[[row[t] for t in texts]])
        finally:
            self.draining = False


_BATCHERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, _Batcher]] = weakref.WeakKeyDictionary()


def _batcher(embedder: Embedder) -> _Batcher:
    # asyncio futures belong to one loop, so each loop gets its own batcher per embedder.
    per_loop = _BATCHERS.setdefault(asyncio.get_running_loop(), {})
    batcher = per_loop.get(id(embedder))
    if batcher is None or batcher.embedder is not embedder:
        batcher = per_loop[id(embedder)] = _Batcher(embedder)
    return batcher


async def encode(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """``embedder.encode(texts)`` off the event loop, merged with concurrent requests."""
    texts = list(texts)
    if not texts:
        return np.asarray(embedder.encode([]), dtype=np.float32)
    return await _batcher(embedder).encode(texts)


async def encode_condition(embedder: Embedder, text: str) -> tuple[np.ndarray, ConditionEmbedding]:
    """``embed.embed_condition`` off the event loop. A condition that fits the model (nearly all of
    them) goes through the merged encoder like any text; a longer one (a fact-checking document)
    is chunked and embedded on the compute thread."""
    if isinstance(embedder, MiniLMEmbedder) and len(text) <= embedder.chunk_tokens:
        # Fits by construction (a word piece covers at least one character): what embed_condition
        # would say, without tokenising.
        return (await encode(embedder, [text]))[0], ConditionEmbedding(method="single", chunk_tokens=embedder.chunk_tokens)
    if isinstance(embedder, LongTextEmbedder):
        return await asyncio.get_running_loop().run_in_executor(compute_thread(), embed_condition, embedder, text)
    return (await encode(embedder, [text]))[0], ConditionEmbedding(method="embedder")


# --------------------------------------------------------------------------- clustering


@dataclass
class Timed(Generic[R]):
    result: R
    seconds: float
    """Time the job itself took (not the wait for it)."""


def _timed(job: Callable[..., R], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Timed[R]:
    t0 = time.perf_counter()
    result = job(*args, **kwargs)
    return Timed(result, time.perf_counter() - t0)


async def cluster(job: Callable[..., R], /, *args: Any, local: bool = False, **kwargs: Any) -> Timed[R]:
    """``job(*args, **kwargs)`` off the event loop, timed: in the clustering process (the job, a
    module-level function, and its arguments go there by pickle), or on the compute thread when
    ``local`` (a job holding parts of its caller's, such as a custom reducer) or in ``threads`` mode."""
    if not local and mode() == "processes":
        return await asyncio.wrap_future(_CLUSTER_PROCESS.submit(_timed, job, args, kwargs))
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(compute_thread(), _timed, job, args, kwargs)


def _warm_up(job: Callable[[], object]) -> float:
    return _timed(job, (), {}).seconds


def warm_up_clustering(job: Callable[[], object]) -> Future[float]:
    """Run ``job`` (a small clustering that compiles UMAP/HDBSCAN) where clustering runs, once per
    process; returns the job (its result is the seconds it took). Clustering jobs submitted later
    queue behind it."""
    global _WARM_UP
    with _WARM_UP_LOCK:
        if _WARM_UP is None:
            if mode() == "processes":
                _WARM_UP = _CLUSTER_PROCESS.submit(_warm_up, job)
            else:
                _WARM_UP = compute_thread().submit(_warm_up, job)
        return _WARM_UP


def warm_up(embedder: Embedder | None = None, *, clustering: Callable[[], object] | None = None) -> None:
    """Start the slow first-use costs and return at once: loading the embedding model (if it
    loads lazily, as MiniLM does), then the ``clustering`` warm-up job when one is given.

    The model comes first because the first abduction round needs it within a second; UMAP is
    needed only when the first space is clustered, and doing both at once would slow both down
    (and the event loop with them). Calling this again costs nothing.
    """
    loading: Future[object] | None = None
    if embedder is not None and _in_process(embedder):
        assert isinstance(embedder, MiniLMEmbedder)
        loading = _EMBED_PROCESS.submit(_load_in_worker, *_describe(embedder))
    # Looked up on the class: reading the property here would load the model on this thread.
    elif embedder is not None and isinstance(getattr(type(embedder), "model", None), property):
        loading = embedding_thread().submit(lambda: embedder.model)  # type: ignore[attr-defined]
    if clustering is None:
        return
    if loading is None:
        warm_up_clustering(clustering)
    else:
        loading.add_done_callback(lambda _: warm_up_clustering(clustering))
