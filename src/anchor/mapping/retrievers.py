"""Candidate-search backends for stage 2, one interface for all of them.

The coarse-to-fine scheme in :mod:`anchor.mapping.retrieval` decides *what* is searched (cluster
prototypes, then the members of the chosen clusters, then the unclustered factors); a
:class:`Retriever` decides *how*. A retriever is handed every group of items of one level at
once (``build``), so a backend that needs collection statistics (BM25's inverse document
frequencies) sees the whole collection, and it returns a :class:`Searcher` that ranks the items of
one group for a batch of queries.

Backends:

* :class:`KNNRetriever`: exact nearest neighbours in numpy (brute force), the default and the
  paper's choice;
* :class:`FaissRetriever`: FAISS, either an exact flat index (``IndexFlatL2`` / inner product,
  which must agree with the exact KNN up to float32 rounding) or an approximate HNSW graph;
* :class:`BM25Retriever`: lexical ranking with ``rank-bm25`` over factor and theme texts. It
  needs the condition's text, which is why every query carries both a text and a vector.

Every backend reports a *distance*: smaller is better. For the vector backends it is the
Euclidean or cosine distance; BM25, which scores similarity, reports the negated score.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

import numpy as np

from anchor.settings.mapping import RETRIEVER_NAMES

Metric = Literal["euclidean", "cosine"]

#: For each query, ``(item position within the group, distance)`` pairs, best first.
Ranked = list[tuple[int, float]]


@dataclass(frozen=True)
class Items:
    """One group of searchable items: row ``i`` of ``vectors`` belongs to ``texts[i]``."""

    texts: Sequence[str]
    vectors: np.ndarray

    def __post_init__(self) -> None:
        if self.vectors.ndim != 2 or self.vectors.shape[0] != len(self.texts):
            raise ValueError(f"{len(self.texts)} item texts but vectors of shape {self.vectors.shape}")

    def __len__(self) -> int:
        return len(self.texts)


@dataclass(frozen=True)
class Queries:
    """A batch of conditions: their vectors ``(n, d)`` and/or their texts (``None`` = not given)."""

    vectors: np.ndarray | None = None
    texts: Sequence[str] | None = None

    def __post_init__(self) -> None:
        if self.vectors is None and self.texts is None:
            raise ValueError("a query needs a vector, a text, or both")
        if self.vectors is not None and self.texts is not None and len(self.texts) != self.vectors.shape[0]:
            raise ValueError(f"{self.vectors.shape[0]} query vectors but {len(self.texts)} query texts")

    def __len__(self) -> int:
        return self.vectors.shape[0] if self.vectors is not None else len(self.texts or ())

    def take(self, rows: np.ndarray) -> Queries:
        """The queries at positions ``rows``."""
        return Queries(
            vectors=None if self.vectors is None else self.vectors[rows],
            texts=None if self.texts is None else [self.texts[int(r)] for r in rows],
        )


@runtime_checkable
class Searcher(Protocol):
    def search(self, group: int, queries: Queries, k: int) -> list[Ranked]:
        """The best ``k`` (or fewer) items of ``group`` for each query, best first."""
        ...


@runtime_checkable
class Retriever(Protocol):
    """A candidate-search backend; configured once, then ``build`` per factor space and level."""

    name: str
    needs_text: bool
    needs_vector: bool

    def build(self, groups: Sequence[Items], metric: Metric) -> Searcher: ...


# --------------------------------------------------------------------------- exact KNN


class KNNRetriever:
    """Exact nearest neighbours (brute force): every item's distance to the query, best ``k`` first.

    Spaces hold tens to a few thousand factors, where trees buy nothing in 384 dimensions. Distances
    are computed row by row (``|x - q|``, or ``1 - cos`` on unit rows), not through the matrix-product
    expansion, so equal vectors get exactly equal distances wherever they sit, and ties are ordered
    by position: the ranking is the same on every machine. (scikit-learn's ``NearestNeighbors``, used
    before, gives the same neighbours in the same order, except that its expansion leaves equal
    vectors a few 1e-8 apart and its heap orders tied items in a way that depends on its threads;
    importing it cost about three seconds at every start.)
    """

    name = "knn"
    needs_text = False
    needs_vector = True

    def build(self, groups: Sequence[Items], metric: Metric) -> Searcher:
        return _KNNSearcher(groups, metric)

    def __repr__(self) -> str:
        return "KNNRetriever()"


#: Items compared with a query at once (bounds the temporary ``rows x dim`` array to a few MB).
_KNN_CHUNK = 1024


class _KNNSearcher:
    def __init__(self, groups: Sequence[Items], metric: Metric) -> None:
        self._metric = metric
        self._items = [self._prepare(np.asarray(g.vectors, dtype=np.float64)) if len(g) else None for g in groups]

    def _prepare(self, matrix: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(_unit_rows(matrix) if self._metric == "cosine" else matrix)

    def _distances(self, items: np.ndarray, query: np.ndarray) -> np.ndarray:
        out = np.empty(items.shape[0], dtype=np.float64)
        for start in range(0, items.shape[0], _KNN_CHUNK):
            block = items[start:start + _KNN_CHUNK]
            if self._metric == "euclidean":
                diff = block - query
                out[start:start + block.shape[0]] = np.sqrt((diff * diff).sum(axis=1))
            else:
                out[start:start + block.shape[0]] = 1.0 - (block * query).sum(axis=1)
        # As scikit-learn's cosine distance: rounding must not take it below 0 or above 2.
        return np.clip(out, 0.0, 2.0) if self._metric == "cosine" else out

    def search(self, group: int, queries: Queries, k: int) -> list[Ranked]:
        items = self._items[group]
        if items is None or len(queries) == 0:
            return [[] for _ in range(len(queries))]
        assert queries.vectors is not None
        out: list[Ranked] = []
        for query in self._prepare(np.asarray(queries.vectors, dtype=np.float64).reshape(len(queries), -1)):
            dist = self._distances(items, query)
            best = np.argsort(dist, kind="stable")[:k]
            out.append(_ranked(dist[best], best))
        return out


def _ranked(dist: np.ndarray, idx: np.ndarray) -> Ranked:
    # Sort again (stably) so the order never depends on whether a backend already sorts.
    order = np.argsort(dist, kind="stable")
    return [(int(idx[o]), float(dist[o])) for o in order if idx[o] >= 0]


# --------------------------------------------------------------------------- FAISS


class FaissRetriever:
    """FAISS indexes, one per group: ``kind="flat"`` (exact) or ``kind="hnsw"`` (approximate).

    Euclidean search uses ``IndexFlatL2`` / ``IndexHNSWFlat`` and reports the square root of
    FAISS's squared distances, so values match the exact KNN's; cosine search normalises items
    and queries and uses inner products, reporting ``1 - cos``. FAISS works in float32.
    ``hnsw_m`` is the graph degree, ``ef_construction`` / ``ef_search`` the candidate-list sizes
    when adding and when searching (``ef_search`` is raised to ``k`` when smaller).
    """

    needs_text = False
    needs_vector = True

    def __init__(self, kind: Literal["flat", "hnsw"] = "flat", *, hnsw_m: int = 32, ef_construction: int = 80,
                 ef_search: int = 64) -> None:
        if kind not in ("flat", "hnsw"):
            raise ValueError(f"FAISS index kind must be 'flat' or 'hnsw', got {kind!r}")
        for what, value in (("hnsw_m", hnsw_m), ("ef_construction", ef_construction), ("ef_search", ef_search)):
            if int(value) != value or value < 1:
                raise ValueError(f"{what} must be a positive integer, got {value}")
        self.kind = kind
        self.hnsw_m = int(hnsw_m)
        self.ef_construction = int(ef_construction)
        self.ef_search = int(ef_search)
        self.name = f"faiss-{kind}"

    def build(self, groups: Sequence[Items], metric: Metric) -> Searcher:
        return _FaissSearcher(self, groups, metric)

    def __repr__(self) -> str:
        return f"FaissRetriever(kind={self.kind!r})"


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0  # a zero vector stays zero (cosine distance 1 to everything)
    return matrix / norms


class _FaissSearcher:
    def __init__(self, config: FaissRetriever, groups: Sequence[Items], metric: Metric) -> None:
        import faiss

        self._faiss = faiss
        self._metric = metric
        self._config = config
        self._indexes: list[object | None] = []
        for g in groups:
            if not len(g):
                self._indexes.append(None)
                continue
            data = np.ascontiguousarray(self._prepare(g.vectors), dtype=np.float32)
            d = data.shape[1]
            kind = faiss.METRIC_L2 if metric == "euclidean" else faiss.METRIC_INNER_PRODUCT
            if config.kind == "flat":
                index = faiss.IndexFlatL2(d) if metric == "euclidean" else faiss.IndexFlatIP(d)
            else:
                index = faiss.IndexHNSWFlat(d, config.hnsw_m, kind)
                index.hnsw.efConstruction = config.ef_construction
            index.add(data)
            self._indexes.append(index)

    def _prepare(self, matrix: np.ndarray) -> np.ndarray:
        return _unit_rows(matrix) if self._metric == "cosine" else matrix

    def search(self, group: int, queries: Queries, k: int) -> list[Ranked]:
        index = self._indexes[group]
        if index is None or len(queries) == 0:
            return [[] for _ in range(len(queries))]
        assert queries.vectors is not None
        q = np.ascontiguousarray(self._prepare(queries.vectors), dtype=np.float32)
        k = min(k, index.ntotal)  # type: ignore[attr-defined]
        params = None
        if self._config.kind == "hnsw":
            params = self._faiss.SearchParametersHNSW(efSearch=max(self._config.ef_search, k))
        raw, idx = index.search(q, k, params=params)  # type: ignore[attr-defined]
        if self._metric == "euclidean":
            dist = np.sqrt(np.maximum(raw.astype(np.float64), 0.0))
        else:
            dist = 1.0 - raw.astype(np.float64)
        return [_ranked(d, i) for d, i in zip(dist, idx, strict=True)]


# --------------------------------------------------------------------------- BM25

_WORD = re.compile(r"[a-z0-9]+")


def _stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def simple_tokens(text: str, stop_words: frozenset[str] = frozenset()) -> list[str]:
    """Lower-cased alphanumeric words minus ``stop_words``, with a regular plural folded to its
    singular (``temperatures`` -> ``temperature``; words ending in ``ss``/``us``/``is`` and words of
    up to three letters are left alone) so that a condition and a factor need not agree in number."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        if word in stop_words:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
            word = word[:-1]
        out.append(word)
    return out


class BM25Retriever:
    """Lexical candidate search with ``rank-bm25`` (Okapi BM25 by default).

    Documents are the factor texts; at the coarse level a cluster's document is its theme followed
    by its members' texts (the lexical counterpart of a prototype, which mixes the theme with the
    members; ``alpha`` has no lexical meaning and is ignored). Inverse document frequencies come
    from all groups of one level together, so a small cluster is not scored against itself only.

    Only documents sharing at least one token with the condition are returned: a document with
    no word in common is no lexical match, and ranking it anyway would hand the LLM arbitrary
    candidates. A condition with no overlap therefore gets no candidates (an "unknown"). Ties
    keep the items' order. The reported distance is the negated BM25 score.

    ``variant`` picks Okapi (``"okapi"``), BM25L (``"l"``) or BM25+ (``"plus"``). Okapi's
    inverse document frequency turns negative for a word in more than half of a small
    collection (rank-bm25 floors it at ``epsilon`` times the average); BM25L's never does.
    ``stop_words=True`` drops scikit-learn's English stop-word list before scoring.
    """

    needs_text = True
    needs_vector = False

    def __init__(self, *, variant: Literal["okapi", "l", "plus"] = "okapi", k1: float = 1.5, b: float = 0.75,
                 stop_words: bool = True) -> None:
        if variant not in ("okapi", "l", "plus"):
            raise ValueError(f"BM25 variant must be 'okapi', 'l' or 'plus', got {variant!r}")
        if not (np.isfinite(k1) and k1 >= 0):
            raise ValueError(f"BM25 k1 must be a non-negative number, got {k1}")
        if not (np.isfinite(b) and 0 <= b <= 1):
            raise ValueError(f"BM25 b must lie in [0, 1], got {b}")
        self.variant = variant
        self.k1 = float(k1)
        self.b = float(b)
        self.stop_words = _stop_words() if stop_words else frozenset()
        self.name = "bm25" if variant == "okapi" else f"bm25-{variant}"

    def tokens(self, text: str) -> list[str]:
        return simple_tokens(text, self.stop_words)

    def build(self, groups: Sequence[Items], metric: Metric) -> Searcher:
        return _BM25Searcher(self, groups)

    def __repr__(self) -> str:
        return f"BM25Retriever(variant={self.variant!r})"


class _BM25Searcher:
    def __init__(self, config: BM25Retriever, groups: Sequence[Items]) -> None:
        self._config = config
        docs: list[list[str]] = []
        self._offsets: list[int] = []
        # Per group, token -> positions of the group's documents that contain it.
        self._postings: list[dict[str, list[int]]] = []
        for g in groups:
            self._offsets.append(len(docs))
            postings: dict[str, list[int]] = {}
            for i, text in enumerate(g.texts):
                doc = config.tokens(text)
                docs.append(doc)
                for token in dict.fromkeys(doc):
                    postings.setdefault(token, []).append(i)
            self._postings.append(postings)
        self._model = None
        if any(docs):  # rank-bm25 divides by the mean document length
            import rank_bm25

            cls = {"okapi": rank_bm25.BM25Okapi, "l": rank_bm25.BM25L, "plus": rank_bm25.BM25Plus}[config.variant]
            self._model = cls(docs, k1=config.k1, b=config.b)

    def search(self, group: int, queries: Queries, k: int) -> list[Ranked]:
        if queries.texts is None:
            raise ValueError("the BM25 retriever needs the condition text, not only its vector")
        out: list[Ranked] = []
        start, postings = self._offsets[group], self._postings[group]
        for text in queries.texts:
            terms = self._config.tokens(text)
            matches = sorted({i for t in dict.fromkeys(terms) for i in postings.get(t, ())})
            if self._model is None or not matches:
                out.append([])
                continue
            scores = self._model.get_batch_scores(terms, [start + i for i in matches])
            order = sorted(range(len(matches)), key=lambda j: -scores[j])  # stable: ties keep item order
            out.append([(matches[j], -float(scores[j])) for j in order[:k]])
        return out


# --------------------------------------------------------------------------- by name

# The backends by the names the command line and analyses use: RETRIEVER_NAMES (in settings.mapping,
# so that reading the settings does not import this module).


def make_retriever(name: str) -> Retriever:
    """A retriever from its name in :data:`RETRIEVER_NAMES`, with default settings."""
    if name == "knn":
        return KNNRetriever()
    if name == "faiss-flat":
        return FaissRetriever("flat")
    if name == "faiss-hnsw":
        return FaissRetriever("hnsw")
    if name == "bm25":
        return BM25Retriever()
    raise ValueError(f"unknown retriever {name!r}; choose from {', '.join(RETRIEVER_NAMES)}")

