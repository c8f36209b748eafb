"""Stage 2, candidate retrieval: which factors of a stored space might a condition touch?

Pure computation over vectors (and texts) the caller supplies (no LLM, no embedding model). Two
indexes share one interface:

* :class:`HierarchicalIndex`, the paper's coarse-to-fine search: rank clusters by the distance
  from the condition to each cluster's prototype (a mix of the theme's vector and the members'
  mean), keep the nearest ``k1``, take the nearest ``k2`` factors inside each of them, and add the
  nearest ``k2`` factors that belong to no cluster (HDBSCAN noise would otherwise be unreachable);
* :class:`FlatIndex`, the "without hierarchy" ablation: one search over every searchable factor
  with the same total budget.

How each level is searched is the job of a :class:`~anchor.mapping.retrievers.Retriever`
(exact KNN by default; FAISS flat or HNSW; BM25 over the texts), chosen when the index is built.
A query therefore carries the condition's vector and, for lexical backends, its text.

Only factors that survived pruning are searchable: the members listed in ``Cluster.factor_ids``
and the ids in ``FactorSpace.unclustered``.

Searches run single-threaded by default (``threads=1``): FAISS's distance kernels (and
scikit-learn's, which the exact search once used) start an OpenMP team per call, and for the
handful of rows searched per condition the team costs more than it saves. On a busy 2-core machine
the median query went from about 10 ms to 1.5 ms this way. The exact search runs in numpy on one
thread anyway.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Literal, Protocol, runtime_checkable

import numpy as np

from anchor.mapping.retrievers import Items, KNNRetriever, Metric, Queries, Ranked, Retriever, Searcher
from anchor.types import ClusterHit, FactorSpace, RetrievedFactor

_METRICS = ("euclidean", "cosine")

Hits = tuple[list[ClusterHit], list[RetrievedFactor]]


@runtime_checkable
class CandidateIndex(Protocol):
    kind: Literal["hierarchical", "flat"]
    retriever: Retriever

    def query(self, vector: np.ndarray | None = None, text: str | None = None) -> Hits: ...

    def query_many(self, matrix: np.ndarray | None = None, texts: Sequence[str] | None = None) -> list[Hits]: ...


# --------------------------------------------------------------------------- prototypes


def cluster_prototypes(
    theme_vectors: np.ndarray, member_vectors: Sequence[np.ndarray], alpha: float = 0.5
) -> np.ndarray:
    """One prototype per cluster: ``alpha * theme + (1 - alpha) * mean(members)``.

    ``theme_vectors`` is ``(k, d)``; ``member_vectors[j]`` is the ``(n_j, d)`` matrix of cluster
    ``j``'s member embeddings (a single ``(d,)`` vector is accepted for a one-member cluster).
    Returns a ``(k, d)`` float64 array. No renormalisation: the prototype is used as is.
    """
    if not 0.0 <= alpha <= 1.0 or not np.isfinite(alpha):
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    themes = np.asarray(theme_vectors, dtype=np.float64)
    if themes.ndim != 2:
        raise ValueError(f"theme_vectors must be 2-D (k, d), got shape {themes.shape}")
    k, d = themes.shape
    if len(member_vectors) != k:
        raise ValueError(f"{k} theme vectors but {len(member_vectors)} member groups")
    out = np.empty((k, d), dtype=np.float64)
    for j, members in enumerate(member_vectors):
        block = np.asarray(members, dtype=np.float64)
        if block.ndim == 1:
            block = block[None, :]
        if block.ndim != 2 or block.shape[1] != d:
            raise ValueError(f"cluster {j}: member vectors have shape {block.shape}, expected (n, {d})")
        if block.shape[0] == 0:
            raise ValueError(f"cluster {j} has no member vectors; its prototype is undefined")
        out[j] = alpha * themes[j] + (1.0 - alpha) * block.mean(axis=0)
    if not np.isfinite(out).all():
        raise ValueError("prototype computation produced NaN or infinite values")
    return out


# --------------------------------------------------------------------------- building blocks


class _Groups:
    """Fixed groups of factors (ids, texts, vectors) searched through one retriever's searcher."""

    def __init__(self, groups: Sequence[tuple[list[str], list[str], np.ndarray, str]], retriever: Retriever,
                 metric: Metric) -> None:
        self.ids = [ids for ids, _, _, _ in groups]
        self.texts = [texts for _, texts, _, _ in groups]
        self.sources = [source for _, _, _, source in groups]
        self.searcher: Searcher = retriever.build([Items(t, v) for _, t, v, _ in groups], metric)

    def size(self, group: int) -> int:
        return len(self.ids[group])

    def search(self, group: int, queries: Queries, k: int) -> list[Ranked]:
        return self.searcher.search(group, queries, k)

    def hits(self, group: int, ranked: Ranked) -> list[RetrievedFactor]:
        ids, texts, source = self.ids[group], self.texts[group], self.sources[group]
        return [RetrievedFactor(factor_id=ids[i], text=texts[i], distance=d, source=source) for i, d in ranked]


@functools.lru_cache(maxsize=2)
def _controller(faiss_loaded: bool) -> object:
    from threadpoolctl import ThreadpoolController

    # Built once FAISS has loaded its OpenMP runtime (again if a search ran before it was loaded);
    # limiting through a ready controller costs microseconds, whereas threadpool_limits() rescans
    # the libraries each time.
    return ThreadpoolController()


@contextlib.contextmanager
def _threads(limit: int | None) -> Iterator[None]:
    if limit is None:
        yield
        return
    with _controller("faiss" in sys.modules).limit(limits=limit, user_api="openmp"):  # type: ignore[attr-defined]
        yield


def _check_threads(threads: int | None) -> int | None:
    if threads is not None and (int(threads) != threads or threads < 1):
        raise ValueError(f"threads must be a positive integer or None, got {threads}")
    return threads


def _check_metric(metric: str) -> Metric:
    if metric not in _METRICS:
        raise ValueError(f"metric must be one of {_METRICS}, got {metric!r}")
    return metric  # type: ignore[return-value]


def _check_k(name: str, value: int) -> int:
    if int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return int(value)


def _stack(ids: Sequence[str], vectors: Mapping[str, np.ndarray], what: str) -> np.ndarray:
    missing = [fid for fid in ids if fid not in vectors]
    if missing:
        raise ValueError(f"no vector for {what} {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    rows = [np.asarray(vectors[fid], dtype=np.float64).reshape(-1) for fid in ids]
    dims = {row.shape[0] for row in rows}
    if len(dims) > 1:
        raise ValueError(f"{what} vectors have differing dimensions: {sorted(dims)}")
    matrix = np.vstack(rows)
    if not np.isfinite(matrix).all():
        raise ValueError(f"{what} vectors contain NaN or infinite values")
    return matrix


def _queries(matrix: np.ndarray | None, texts: Sequence[str] | None, dim: int | None,
             retriever: Retriever) -> Queries:
    Q = None
    if matrix is not None:
        Q = np.asarray(matrix, dtype=np.float64)
        if Q.ndim == 1:
            Q = Q[None, :]
        if Q.ndim != 2:
            raise ValueError(f"query matrix must be 2-D (n_queries, dim), got shape {Q.shape}")
        if dim is not None and Q.shape[0] and Q.shape[1] != dim:
            raise ValueError(f"query vectors have dimension {Q.shape[1]}, the index holds {dim}")
        if not np.isfinite(Q).all():
            raise ValueError("query vectors contain NaN or infinite values")
    if texts is not None:
        if isinstance(texts, str):
            raise ValueError("texts must be a sequence of strings (one per query), not a single string")
        texts = [str(t) for t in texts]
    if Q is None and retriever.needs_vector:
        raise ValueError(f"the {retriever.name} retriever needs the condition's vector")
    if texts is None and retriever.needs_text:
        raise ValueError(f"the {retriever.name} retriever needs the condition's text (pass text=/texts=)")
    if Q is None and texts is None:
        raise ValueError("a query needs a vector, a text, or both")
    return Queries(vectors=Q, texts=texts)


def _single(vector: np.ndarray | None) -> np.ndarray | None:
    if vector is None:
        return None
    v = np.asarray(vector, dtype=np.float64)
    if v.ndim == 2 and v.shape[0] == 1:
        v = v[0]
    if v.ndim != 1:
        raise ValueError(f"query expects one vector of shape (dim,), got shape {v.shape}; use query_many")
    return v[None, :]


def _check_retriever(retriever: Retriever | None) -> Retriever:
    if retriever is None:
        return KNNRetriever()
    if not isinstance(retriever, Retriever):
        raise ValueError(f"retriever must be a Retriever (knn, faiss, bm25, ...), got {type(retriever).__name__}")
    return retriever


# --------------------------------------------------------------------------- hierarchical index


class HierarchicalIndex:
    """Coarse-to-fine candidate retrieval over one factor space; build once, query per condition.

    ``factor_vectors`` maps factor id to its embedding and ``theme_vectors`` maps cluster id to
    the embedding of the cluster's theme name. Clusters whose members were all pruned are left
    out (they have nothing to return). Each query returns the selected clusters (best first)
    and the candidates: for each selected cluster its best ``k2`` members, then the best ``k2``
    unclustered factors; best first within each group. ``k1``/``k2`` are clamped to what exists
    (a lexical retriever may return fewer: only items that match). ``metric`` is "euclidean"
    (the paper's KNN) or "cosine"; ``retriever`` is the search backend (exact KNN when None);
    ``threads`` caps the OpenMP threads during a query (``None`` leaves the library default).
    """

    kind: Literal["hierarchical", "flat"] = "hierarchical"

    def __init__(
        self,
        space: FactorSpace,
        factor_vectors: Mapping[str, np.ndarray],
        theme_vectors: Mapping[int, np.ndarray],
        alpha: float = 0.5,
        k1: int = 3,
        k2: int = 5,
        metric: Metric = "euclidean",
        threads: int | None = 1,
        retriever: Retriever | None = None,
    ) -> None:
        self.metric = _check_metric(metric)
        self.threads = _check_threads(threads)
        self.retriever = _check_retriever(retriever)
        self.k1 = _check_k("k1", k1)
        self.k2 = _check_k("k2", k2)
        self.alpha = float(alpha)
        text = {f.id: f.text for f in space.factors}

        clusters = [c for c in space.clusters if c.factor_ids]
        self.skipped_clusters = [c.id for c in space.clusters if not c.factor_ids]
        self.cluster_ids = [c.id for c in clusters]
        self._position = {cid: j for j, cid in enumerate(self.cluster_ids)}
        self.themes = [c.theme for c in clusters]
        groups: list[tuple[list[str], list[str], np.ndarray, str]] = []
        members: list[np.ndarray] = []
        for c in clusters:
            vecs = _stack(c.factor_ids, factor_vectors, f"cluster {c.id} factor")
            members.append(vecs)
            groups.append((list(c.factor_ids), [text[f] for f in c.factor_ids], vecs, f"cluster:{c.id}"))

        self.prototypes: np.ndarray | None = None
        self._coarse: _Groups | None = None
        if clusters:
            missing = [c.id for c in clusters if c.id not in theme_vectors]
            if missing:
                raise ValueError(f"no theme vector for cluster(s) {missing}")
            themes = _stack([c.id for c in clusters], theme_vectors, "theme")  # type: ignore[arg-type]
            self.prototypes = cluster_prototypes(themes, members, alpha=self.alpha)
            # A cluster's document for lexical search: its theme, then its members' texts.
            documents = [" ".join([c.theme, *(text[f] for f in c.factor_ids)]) for c in clusters]
            self._coarse = _Groups([([str(cid) for cid in self.cluster_ids], documents, self.prototypes, "coarse")],
                                   self.retriever, self.metric)

        self._unclustered: int | None = None
        if space.unclustered:
            ids = list(space.unclustered)
            vecs = _stack(ids, factor_vectors, "unclustered factor")
            self._unclustered = len(groups)
            groups.append((ids, [text[f] for f in ids], vecs, "unclustered"))

        dims = {g[2].shape[1] for g in groups}
        if self.prototypes is not None:
            dims.add(self.prototypes.shape[1])
        if len(dims) > 1:
            raise ValueError(f"factor and theme vectors have differing dimensions: {sorted(dims)}")
        self.dim: int | None = dims.pop() if dims else None
        self._fine = _Groups(groups, self.retriever, self.metric)
        self._n_clusters = len(clusters)

    @classmethod
    def from_space(
        cls,
        space: FactorSpace,
        alpha: float = 0.5,
        k1: int = 3,
        k2: int = 5,
        metric: Metric = "euclidean",
        threads: int | None = 1,
        retriever: Retriever | None = None,
    ) -> HierarchicalIndex:
        """Build from the vectors stored in ``space.embeddings`` (theme rows aligned with ``cluster_ids``)."""
        factor_vectors, theme_vectors = _stored_vectors(space)
        return cls(space, factor_vectors, theme_vectors, alpha=alpha, k1=k1, k2=k2, metric=metric, threads=threads,
                   retriever=retriever)

    @property
    def n_clusters(self) -> int:
        return self._n_clusters

    @property
    def n_searchable(self) -> int:
        return sum(self._fine.size(g) for g in range(len(self._fine.ids)))

    def query(self, vector: np.ndarray | None = None, text: str | None = None) -> Hits:
        """Clusters and candidates for one condition, given its vector and/or its text."""
        return self.query_many(_single(vector), None if text is None else [text])[0]

    def query_many(self, matrix: np.ndarray | None = None, texts: Sequence[str] | None = None) -> list[Hits]:
        """``query`` for each row of ``matrix`` (and each of ``texts``); the fine search is batched per cluster."""
        Q = _queries(matrix, texts, self.dim, self.retriever)
        with _threads(self.threads):
            return self._search(Q)

    def _search(self, Q: Queries) -> list[Hits]:
        n_q = len(Q)
        cluster_hits: list[list[ClusterHit]] = [[] for _ in range(n_q)]
        per_cluster: list[dict[int, list[RetrievedFactor]]] = [{} for _ in range(n_q)]

        if self._coarse is not None and n_q:
            chosen_by_query = self._coarse.search(0, Q, self.k1)
            for q, ranked in enumerate(chosen_by_query):
                cluster_hits[q] = [ClusterHit(cluster_id=self.cluster_ids[j], theme=self.themes[j], distance=d)
                                   for j, d in ranked]
            # Batch the fine search per cluster over the queries that selected it.
            for j in range(self._n_clusters):
                chosen = np.array([q for q, ranked in enumerate(chosen_by_query) if any(i == j for i, _ in ranked)],
                                  dtype=np.int64)
                if chosen.size == 0:
                    continue
                for q, ranked in zip(chosen.tolist(), self._fine.search(j, Q.take(chosen), self.k2), strict=True):
                    per_cluster[q][j] = self._fine.hits(j, ranked)

        loose: list[list[RetrievedFactor]] = [[] for _ in range(n_q)]
        if self._unclustered is not None and n_q:
            u = self._unclustered
            loose = [self._fine.hits(u, ranked) for ranked in self._fine.search(u, Q, self.k2)]

        out: list[Hits] = []
        for q in range(n_q):
            seen: set[str] = set()
            candidates: list[RetrievedFactor] = []
            groups = [per_cluster[q][self._position[h.cluster_id]] for h in cluster_hits[q]]
            for hits in [*groups, loose[q]]:
                for hit in hits:
                    if hit.factor_id not in seen:  # a space never shares ids, but stay safe
                        seen.add(hit.factor_id)
                        candidates.append(hit)
            out.append((cluster_hits[q], candidates))
        return out


# --------------------------------------------------------------------------- flat index


class FlatIndex:
    """The "without hierarchy" ablation: best factors over the whole searchable space.

    The budget defaults to what the hierarchical search can return at most, ``k1 * k2 + k2``,
    so the two are compared at equal candidate counts. ``query`` returns no cluster hits.
    """

    kind: Literal["hierarchical", "flat"] = "flat"

    def __init__(
        self,
        space: FactorSpace,
        factor_vectors: Mapping[str, np.ndarray],
        k: int | None = None,
        k1: int = 3,
        k2: int = 5,
        metric: Metric = "euclidean",
        threads: int | None = 1,
        retriever: Retriever | None = None,
    ) -> None:
        self.metric = _check_metric(metric)
        self.threads = _check_threads(threads)
        self.retriever = _check_retriever(retriever)
        self.k = _check_k("k", k) if k is not None else _check_k("k1", k1) * _check_k("k2", k2) + k2
        text = {f.id: f.text for f in space.factors}
        ids = space.active_factor_ids()
        self._all: _Groups | None = None
        self.dim: int | None = None
        if ids:
            vecs = _stack(ids, factor_vectors, "factor")
            self._all = _Groups([(ids, [text[f] for f in ids], vecs, "flat")], self.retriever, self.metric)
            self.dim = vecs.shape[1]

    @classmethod
    def from_space(
        cls,
        space: FactorSpace,
        k: int | None = None,
        k1: int = 3,
        k2: int = 5,
        metric: Metric = "euclidean",
        threads: int | None = 1,
        retriever: Retriever | None = None,
    ) -> FlatIndex:
        factor_vectors, _ = _stored_vectors(space, need_themes=False)
        return cls(space, factor_vectors, k=k, k1=k1, k2=k2, metric=metric, threads=threads, retriever=retriever)

    @property
    def n_searchable(self) -> int:
        return self._all.size(0) if self._all else 0

    def query(self, vector: np.ndarray | None = None, text: str | None = None) -> Hits:
        return self.query_many(_single(vector), None if text is None else [text])[0]

    def query_many(self, matrix: np.ndarray | None = None, texts: Sequence[str] | None = None) -> list[Hits]:
        Q = _queries(matrix, texts, self.dim, self.retriever)
        if self._all is None or len(Q) == 0:
            return [([], []) for _ in range(len(Q))]
        with _threads(self.threads):
            ranked = self._all.search(0, Q, self.k)
        return [([], self._all.hits(0, r)) for r in ranked]


def _stored_vectors(
    space: FactorSpace, need_themes: bool = True
) -> tuple[dict[str, np.ndarray], dict[int, np.ndarray]]:
    emb = space.embeddings
    if emb is None:
        raise ValueError("this factor space stores no embeddings; pass the vectors explicitly")
    factors = emb.factors.to_array()
    if factors.shape[0] != len(emb.factor_ids):
        raise ValueError(f"{len(emb.factor_ids)} factor ids but {factors.shape[0]} stored vectors")
    factor_vectors = dict(zip(emb.factor_ids, factors, strict=True))
    theme_vectors: dict[int, np.ndarray] = {}
    if emb.themes is not None:
        themes = emb.themes.to_array()
        if themes.shape[0] != len(emb.cluster_ids):
            raise ValueError(f"{len(emb.cluster_ids)} cluster ids but {themes.shape[0]} stored theme vectors")
        theme_vectors = dict(zip(emb.cluster_ids, themes, strict=True))
    elif need_themes and any(c.factor_ids for c in space.clusters):
        raise ValueError("this factor space stores no theme vectors; pass them explicitly")
    return factor_vectors, theme_vectors
