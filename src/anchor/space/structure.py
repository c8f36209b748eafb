"""Stage 1, "structure": group factor embeddings into clusters (UMAP reduction, then HDBSCAN).

The two steps are swappable in the BERTopic manner: anything with ``fit_transform`` can stand in
for UMAP and anything with ``fit_predict`` for HDBSCAN (PCA, KMeans, ...). The defaults follow
the paper's hyperparameter table, with the parameters derived from the number of factors.

UMAP is imported lazily, inside :meth:`UMAPReducer.fit_transform`: importing it costs about three
seconds, so code that only maps conditions onto a stored space must never reach it. Its numba
kernels are cached on disk (:mod:`anchor.space.umap_cache`): the first fit in a process loads them
instead of compiling them for ten seconds or more.

Edge cases, decided here so the rest of the pipeline never sees them:

* fewer than :data:`MIN_POINTS_FOR_UMAP` distinct points: every factor goes to one cluster
  ("tiny-fallback"). UMAP's neighbour graph and HDBSCAN's density estimate are meaningless on a
  handful of points, and one themed group is the honest structure for so few factors;
* exact duplicate rows are collapsed before reduction and their labels copied back afterwards.
  Zero-distance copies distort UMAP's neighbour graph (twenty copies of one vector come out as
  several "clusters"), and a duplicate belongs wherever its original goes anyway;
* small sets (fewer than about 12 points) need ``n_components`` clamped below the paper's floor of
  10, because UMAP's spectral initialisation asks for ``n_components + 1`` eigenvectors of an
  ``n x n`` graph Laplacian and fails unless ``n_components <= n - 2``. The clamp is recorded in
  ``ClusteringStats.note``;
* HDBSCAN may call every point noise. That is kept as is: unclustered factors are searched on
  their own at mapping time, so nothing is lost.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from anchor.space.umap_cache import import_umap
from anchor.types import ClusteringStats

# Below this many distinct points no reduction or density clustering is attempted.
MIN_POINTS_FOR_UMAP = 5


# --------------------------------------------------------------------------- parameter formulas


@dataclass(frozen=True)
class UMAPParams:
    n_components: int
    n_neighbors: int


def umap_params(n: int) -> UMAPParams:
    """The paper's UMAP settings for ``n`` factors, before any small-``n`` clamping.

    ``n_components = min(50, max(10, n // 5))`` and ``n_neighbors = min(15, n - 1)``.
    """
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    return UMAPParams(n_components=min(50, max(10, n // 5)), n_neighbors=min(15, n - 1))


def hdbscan_min_cluster_size(n: int) -> int:
    """The paper's HDBSCAN ``min_cluster_size`` for ``n`` factors: ``max(2, n // 20)``."""
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    return max(2, n // 20)


# --------------------------------------------------------------------------- swappable parts


@runtime_checkable
class Reducer(Protocol):
    def fit_transform(self, X: np.ndarray) -> np.ndarray:
        """Rows of ``X`` mapped to a lower-dimensional space, one output row per input row."""
        ...


@runtime_checkable
class Clusterer(Protocol):
    def fit_predict(self, X: np.ndarray) -> np.ndarray:
        """An integer label per row; negative labels mean "no cluster"."""
        ...


class UMAPReducer:
    """UMAP with the paper's size-dependent defaults and a fixed seed.

    ``None`` for ``n_components`` / ``n_neighbors`` means "derive from the number of points with
    :func:`umap_params`". After :meth:`fit_transform`, ``params`` holds what was actually used,
    ``clamped`` says whether ``n_components`` had to be lowered for a small input, and
    ``messages`` collects the warnings UMAP raised (kept for the audit note rather than printed,
    since a batch build over hundreds of scenarios would otherwise bury the console).

    Passing a seed makes UMAP deterministic, which also makes it single-threaded; we accept that
    because factor spaces are small (tens to hundreds of points) and reproducibility matters more.
    """

    def __init__(
        self,
        n_components: int | None = None,
        n_neighbors: int | None = None,
        metric: str = "cosine",
        seed: int = 0,
    ) -> None:
        if n_components is not None and n_components < 1:
            raise ValueError(f"n_components must be >= 1, got {n_components}")
        if n_neighbors is not None and n_neighbors < 2:
            raise ValueError(f"n_neighbors must be >= 2, got {n_neighbors}")
        self.n_components = n_components
        self.n_neighbors = n_neighbors
        self.metric = metric
        self.seed = seed
        self.params: UMAPParams | None = None
        self.clamped = False
        self.messages: list[str] = []

    def resolve(self, n: int) -> tuple[UMAPParams, bool]:
        """The parameters a fit on ``n`` points would use, and whether ``n_components`` was clamped."""
        if n < MIN_POINTS_FOR_UMAP:
            raise ValueError(f"UMAP needs at least {MIN_POINTS_FOR_UMAP} points, got {n}")
        formula = umap_params(n)
        n_components = self.n_components if self.n_components is not None else formula.n_components
        n_neighbors = self.n_neighbors if self.n_neighbors is not None else formula.n_neighbors
        # A neighbourhood cannot hold more points than exist besides the point itself.
        n_neighbors = min(n_neighbors, n - 1)
        # Spectral init needs n_components + 1 eigenvectors of an n x n sparse Laplacian, which
        # scipy's sparse eigensolver only provides while that count stays below n.
        limit = n - 2
        clamped = n_components > limit
        return UMAPParams(n_components=min(n_components, limit), n_neighbors=n_neighbors), clamped

    def fit_transform(self, X: np.ndarray) -> np.ndarray:
        umap = import_umap()  # lazy: see the module docstring

        X = np.asarray(X)
        params, clamped = self.resolve(X.shape[0])
        model = umap.UMAP(
            n_components=params.n_components,
            n_neighbors=params.n_neighbors,
            metric=self.metric,
            random_state=self.seed,
            # random_state forces one thread anyway; saying so up front avoids UMAP's warning.
            n_jobs=1,
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            reduced = model.fit_transform(X)
        self.params, self.clamped = params, clamped
        self.messages = _warning_texts(caught)
        return np.asarray(reduced)


class HDBSCANClusterer:
    """scikit-learn's HDBSCAN with the paper's ``min_cluster_size`` formula as the default."""

    def __init__(self, min_cluster_size: int | None = None, metric: str = "euclidean") -> None:
        if min_cluster_size is not None and min_cluster_size < 2:
            raise ValueError(f"min_cluster_size must be >= 2, got {min_cluster_size}")
        self.min_cluster_size = min_cluster_size
        self.metric = metric
        self.used_min_cluster_size: int | None = None

    def resolve(self, n: int) -> int:
        return self.min_cluster_size if self.min_cluster_size is not None else hdbscan_min_cluster_size(n)

    def fit_predict(self, X: np.ndarray) -> np.ndarray:
        from sklearn.cluster import HDBSCAN

        X = np.asarray(X)
        size = self.resolve(X.shape[0])
        # copy=True: never let HDBSCAN write into the caller's array (and it silences the
        # scikit-learn 1.9 warning about that default changing).
        model = HDBSCAN(min_cluster_size=size, metric=self.metric, copy=True)
        labels = model.fit_predict(X)
        self.used_min_cluster_size = size
        return np.asarray(labels, dtype=np.int64)


# --------------------------------------------------------------------------- pipeline


@dataclass
class ClusteringResult:
    """Cluster labels per input row (``-1`` = unclustered; clusters numbered ``0..k-1``)."""

    labels: np.ndarray
    stats: ClusteringStats
    reduced: np.ndarray | None = field(default=None, repr=False)
    """The reduced coordinates of the distinct points, when a reduction ran (for diagnostics)."""


def cluster_embeddings(
    embeddings: np.ndarray,
    *,
    enabled: bool = True,
    reducer: Reducer | None = None,
    clusterer: Clusterer | None = None,
    seed: int = 0,
) -> ClusteringResult:
    """Cluster factor embeddings (rows) into themed-group candidates.

    ``enabled=False`` puts every factor into one cluster, the "without clustering" ablation.
    ``reducer`` and ``clusterer`` default to :class:`UMAPReducer` (seeded with ``seed``) and
    :class:`HDBSCANClusterer`; any objects with ``fit_transform`` / ``fit_predict`` can replace
    them. Raises ``ValueError`` for non-2-D input or NaN / infinite values.
    """
    X = _validated(embeddings)
    n = X.shape[0]

    if not enabled:
        labels = np.zeros(n, dtype=np.int64)
        return ClusteringResult(labels, ClusteringStats(
            method="flat", n_factors=n, n_clusters=1 if n else 0, n_unclustered=0, seed=seed,
            note="clustering disabled: all factors in one cluster" if n else "no factors",
        ))
    if n == 0:
        return ClusteringResult(np.zeros(0, dtype=np.int64), ClusteringStats(
            method="tiny-fallback", n_factors=0, n_clusters=0, n_unclustered=0, seed=seed, note="no factors",
        ))

    unique, inverse = _collapse_duplicates(X)
    m = unique.shape[0]
    notes: list[str] = []
    if m < n:
        notes.append(f"{n - m} duplicate row(s) collapsed into {m} distinct point(s); size formulas use {m}")

    if m < MIN_POINTS_FOR_UMAP:
        notes.insert(0, f"fewer than {MIN_POINTS_FOR_UMAP} distinct points: all factors in one cluster")
        return ClusteringResult(np.zeros(n, dtype=np.int64), ClusteringStats(
            method="tiny-fallback", n_factors=n, n_clusters=1, n_unclustered=0, seed=seed,
            note="; ".join(notes),
        ))

    reducer = reducer if reducer is not None else UMAPReducer(seed=seed)
    clusterer = clusterer if clusterer is not None else HDBSCANClusterer()

    reduced = np.asarray(reducer.fit_transform(unique), dtype=np.float64)
    if reduced.ndim != 2 or reduced.shape[0] != m:
        raise ValueError(f"reducer returned shape {reduced.shape}, expected ({m}, k)")
    if not np.isfinite(reduced).all():
        raise ValueError("reducer produced NaN or infinite coordinates")
    raw = np.asarray(clusterer.fit_predict(reduced))
    if raw.shape != (m,):
        raise ValueError(f"clusterer returned labels of shape {raw.shape} for {m} points")
    unique_labels = _contiguous(raw)
    labels = unique_labels[inverse]

    n_clusters = int(unique_labels.max()) + 1 if (unique_labels >= 0).any() else 0
    n_unclustered = int((labels < 0).sum())

    umap_nc = umap_nn = min_size = None
    if isinstance(reducer, UMAPReducer) and reducer.params is not None:
        umap_nc, umap_nn = reducer.params.n_components, reducer.params.n_neighbors
        if reducer.clamped:
            asked = reducer.n_components if reducer.n_components is not None else umap_params(m).n_components
            notes.append(
                f"UMAP n_components clamped from {asked} to {umap_nc} (spectral init allows at most n - 2)"
            )
        notes.extend(f"UMAP: {msg}" for msg in reducer.messages)
    else:
        notes.append(f"reducer: {type(reducer).__name__}")
    if isinstance(clusterer, HDBSCANClusterer):
        min_size = clusterer.used_min_cluster_size
    else:
        notes.append(f"clusterer: {type(clusterer).__name__}")
    if n_clusters == 0:
        notes.append("no cluster found: every factor is unclustered (searched on its own at mapping time)")

    return ClusteringResult(
        labels,
        ClusteringStats(
            method="umap+hdbscan",
            n_factors=n,
            n_clusters=n_clusters,
            n_unclustered=n_unclustered,
            silhouette=_silhouette(reduced, unique_labels),
            umap_n_components=umap_nc,
            umap_n_neighbors=umap_nn,
            hdbscan_min_cluster_size=min_size,
            seed=seed,
            note="; ".join(notes),
        ),
        reduced=reduced,
    )


# --------------------------------------------------------------------------- helpers


# Enough points for UMAP's full path (neighbour graph, spectral init, layout) and HDBSCAN, few
# enough to fit in milliseconds once compiled.
_WARM_UP_POINTS = 24


def warm_up() -> None:
    """Cluster a few random unit vectors, which imports UMAP and loads (or compiles) its kernels and
    HDBSCAN's: the job the builder hands ``anchor.compute.offload.warm_up``, run where clustering runs."""
    rng = np.random.default_rng(0)
    points = rng.normal(size=(_WARM_UP_POINTS, 384))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    cluster_embeddings(points, seed=0)


def _validated(embeddings: np.ndarray) -> np.ndarray:
    X = np.asarray(embeddings, dtype=np.float64)
    if X.ndim == 1 and X.size == 0:
        return X.reshape(0, 0)
    if X.ndim != 2:
        raise ValueError(f"embeddings must be a 2-D array (n_factors, dim), got shape {X.shape}")
    bad = ~np.isfinite(X).all(axis=1)
    if bad.any():
        rows = np.flatnonzero(bad)
        raise ValueError(
            f"embeddings contain NaN or infinite values in {rows.size} row(s), first: {rows[:5].tolist()}"
        )
    return X


def _collapse_duplicates(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows in order of first appearance, and for each input row the index of its distinct row."""
    if X.shape[0] == 0:
        return X, np.zeros(0, dtype=np.int64)
    _, first, inverse = np.unique(X, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    # np.unique sorts rows lexicographically; reorder to first appearance so the points reach
    # the reducer in input order (keeps results independent of coordinate values' sort order).
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return X[np.sort(first)], rank[inverse]


def _contiguous(raw: np.ndarray) -> np.ndarray:
    """Renumber non-negative labels to 0..k-1 in increasing order of the original label; others -> -1."""
    raw = raw.astype(np.int64, copy=False)
    out = np.full(raw.shape, -1, dtype=np.int64)
    kept = raw >= 0
    if kept.any():
        _, out[kept] = np.unique(raw[kept], return_inverse=True)
    return out


def _silhouette(reduced: np.ndarray, labels: np.ndarray) -> float | None:
    """Silhouette of the clustered points in the reduced space; None when it is undefined."""
    from sklearn.metrics import silhouette_score

    kept = labels >= 0
    points, kept_labels = reduced[kept], labels[kept]
    k = np.unique(kept_labels).size
    # silhouette_score needs 2 <= k <= n_points - 1.
    if k < 2 or points.shape[0] <= k:
        return None
    return float(silhouette_score(points, kept_labels, metric="euclidean"))


def _warning_texts(caught: list[warnings.WarningMessage]) -> list[str]:
    texts: list[str] = []
    for item in caught:
        # Deprecation chatter from numba/umap internals says nothing about this fit.
        if issubclass(item.category, DeprecationWarning):
            continue
        text = " ".join(str(item.message).split())
        if text not in texts:
            texts.append(text)
    return texts
