"""Clustering comparison (the paper's Appendix A.8): HDBSCAN against DBSCAN, KMeans and
Agglomerative on the stored factor embeddings of built spaces. No LLM is involved.

For each space the factor vectors stored in it (every abduced factor, as the build clustered
them) go through the project's pipeline unchanged: duplicates collapsed, UMAP with the paper's
size-dependent settings and the space's seed, then HDBSCAN (:func:`anchor.space.structure.cluster_embeddings`).
The other three algorithms run on the *same* UMAP coordinates, so the comparison isolates the
clustering step. Each algorithm gets two silhouette scores, both over clustered points only
(noise left out, as the build's own statistic does): in the UMAP space (Euclidean), where the
algorithms worked, and on the original MiniLM vectors (cosine), which no reduction can flatter.

Parameters the density-free algorithms need, decided here and recorded in the result:

* KMeans and Agglomerative (Ward linkage) need ``k``. The default ``fixed_k="sqrt"`` is the
  classic rule of thumb ``k = round(sqrt(m / 2))`` for ``m`` distinct factors (6 for 80 factors,
  3 for 16): it depends on the size of the space only, as a hand-picked ``k`` would, so the
  cluster-count panel shows how HDBSCAN adapts where a fixed rule cannot. ``fixed_k="hdbscan"``
  uses HDBSCAN's own count for the same space instead (at least 2), comparing partitions of equal
  granularity; an integer fixes ``k`` for every space. ``k`` is clamped to ``[2, m - 1]``, the
  range where a silhouette exists.
* DBSCAN needs ``min_samples`` and ``eps``. ``min_samples`` is HDBSCAN's ``min_cluster_size``
  formula (``max(2, m // 20)``), so both density methods use the same density; ``eps`` is the
  0.9 quantile (``dbscan_quantile``) of each point's distance to its ``min_samples``-th nearest
  point (itself included, as DBSCAN counts it) in the UMAP space, so that nine points in ten are
  core points. This is the k-distance heuristic of DBSCAN's authors with the hand-read "knee"
  replaced by a fixed quantile, so that it is reproducible. The median would make half the points
  non-core: on four well-separated blobs it split them into eight clusters with a fifth of the
  points as noise, while 0.9 found the four. ``dbscan_eps`` overrides the rule with a fixed value.

Spaces with fewer than five distinct factors are skipped (the build puts them in one cluster
without running UMAP); the result says which and why.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np
from pydantic import Field, field_validator

from anchor.analysis.common import (
    AnalysisFiles,
    AnalysisModel,
    AnalysisResult,
    fmt,
    markdown_table,
    write_analysis,
)
from anchor.plots import colours, new_figure, save_figure
from anchor.progress import ProgressEvent, Reporter, silent
from anchor.rundir import RunDirectory
from anchor.rundir.names import CONFIG, SPACES
from anchor.space.io import load_space
from anchor.space.structure import (
    HDBSCANClusterer,
    UMAPReducer,
    cluster_embeddings,
    hdbscan_min_cluster_size,
)
from anchor.types import FactorSpace

NAME = "clustering"
ALGORITHMS: tuple[str, ...] = ("hdbscan", "dbscan", "kmeans", "agglomerative")
#: Result files of `anchor analyze` (``<name>.json``), skipped when looking for spaces in a folder.
ANALYSIS_RESULTS = ("factors", "retrieval", "clustering", "estimator")
ALGORITHM_NAMES = {"hdbscan": "HDBSCAN", "dbscan": "DBSCAN", "kmeans": "KMeans", "agglomerative": "Agglomerative"}


class NamedSpace(NamedTuple):
    dataset: str
    name: str
    space: FactorSpace


class ClusteringSettings(AnalysisModel):
    fixed_k: Literal["sqrt", "hdbscan"] | int = Field(
        default="sqrt", description="k for KMeans/Agglomerative: 'sqrt' = round(sqrt(m/2)), 'hdbscan' = "
                                    "HDBSCAN's count on the same space, or a fixed integer.")
    dbscan_quantile: float = Field(default=0.9, gt=0, lt=1,
                                   description="eps = this quantile of the min_samples-nearest distances.")
    dbscan_eps: float | None = Field(default=None, gt=0, description="A fixed eps instead of the quantile rule.")
    linkage: Literal["ward", "average", "complete"] = "ward"
    kmeans_n_init: int = Field(default=10, ge=1)
    seed: int | None = Field(default=None, description="UMAP/KMeans seed; None = each space's build seed.")

    @field_validator("fixed_k")
    @classmethod
    def _k(cls, value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool) and value < 2:
            raise ValueError(f"a fixed k must be at least 2, got {value}")
        return value


class AlgorithmScore(AnalysisModel):
    algorithm: str
    n_clusters: int
    n_noise: int = Field(description="Points left unclustered (HDBSCAN and DBSCAN only).")
    silhouette: float | None = Field(description="In the UMAP space, Euclidean, clustered points only.")
    silhouette_embedding: float | None = Field(description="On the MiniLM vectors, cosine, clustered points only.")
    params: dict[str, float | int | str] = Field(default_factory=dict)


class SpaceClustering(AnalysisModel):
    dataset: str
    space: str
    n_factors: int
    n_distinct: int
    scores: list[AlgorithmScore] = Field(default_factory=list)
    skipped: str | None = None


class AlgorithmSummary(AnalysisModel):
    dataset: str
    algorithm: str
    n_spaces: int
    silhouette_mean: float | None
    silhouette_std: float | None
    silhouette_embedding_mean: float | None
    n_silhouette: int = Field(description="Spaces where the silhouette is defined (at least two clusters).")
    clusters_mean: float
    clusters_min: int
    clusters_max: int
    noise_share_mean: float


class ClusteringAnalysis(AnalysisResult):
    analysis: str = NAME
    settings: ClusteringSettings
    datasets: list[str]
    spaces: list[SpaceClustering]
    summary: list[AlgorithmSummary]
    notes: list[str] = Field(default_factory=list)

    def summary_for(self, dataset: str, algorithm: str) -> AlgorithmSummary | None:
        for s in self.summary:
            if (s.dataset, s.algorithm) == (dataset, algorithm):
                return s
        return None


# --------------------------------------------------------------------------- finding spaces


def collect_spaces(paths: Sequence[Path | str]) -> list[NamedSpace]:
    """Factor spaces with their dataset names, from evaluation run directories and/or folders of spaces.

    Each path may be: an ``anchor eval`` run directory (``config.json`` names the dataset, the spaces
    are in ``spaces/``); a folder of space JSON files (the folder's name is the dataset); one space
    file (its folder's name is the dataset); or a folder holding such run directories or folders, two
    levels deep at most (so an ``anchor analyze`` output folder, with its run directories in
    ``runs/``, works too).
    The same (dataset, space) reached twice is kept once. Raises ``ValueError`` when a path holds no
    space, and :class:`~anchor.space.io.SpaceFileError` for a file that is not a valid space.
    """
    if not paths:
        raise ValueError("no paths given: pass evaluation run directories or folders of factor spaces")
    found: list[NamedSpace] = []
    seen: set[tuple[str, str]] = set()
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise ValueError(f"{path}: no such file or directory")
        entries = _spaces_in(path, depth=0)
        if not entries:
            raise ValueError(f"{path}: no factor spaces found (expected an `anchor eval` run directory with spaces/, "
                             "a folder of space .json files, or a space file)")
        for dataset, file in entries:
            key = (dataset, str(file.resolve()))
            if key in seen:
                continue
            seen.add(key)
            found.append(NamedSpace(dataset, file.stem, load_space(file)))
    return found


def _run_dataset(folder: Path) -> str | None:
    run = RunDirectory(folder, error=ValueError)
    if not (run.is_run() and run.artefacts().is_dir()):
        return None
    dataset = (run.read_config_data() or {}).get("dataset")
    if not isinstance(dataset, str) or not dataset:
        raise ValueError(f"{run.config_path}: names no dataset")
    return dataset


def _spaces_in(path: Path, depth: int) -> list[tuple[str, Path]]:
    if path.is_file():
        dataset = _run_dataset(path.parent.parent) if path.parent.name == SPACES else None
        return [(dataset or path.parent.resolve().name, path)]
    dataset = _run_dataset(path)
    if dataset is not None:
        return [(dataset, f) for f in sorted(RunDirectory(path).artefacts().glob("*.json"))]
    if RunDirectory(path).is_run():
        return []  # a run directory without spaces of its own (it reused another run's)
    # An `anchor analyze` folder holds its result files next to runs/: those are not spaces.
    files = sorted(f for f in path.glob("*.json") if f.name != CONFIG and f.stem not in ANALYSIS_RESULTS)
    if files:
        return [(path.resolve().name, f) for f in files]
    if depth >= 2:
        return []
    out: list[tuple[str, Path]] = []
    for sub in sorted(p for p in path.iterdir() if p.is_dir()):
        out.extend(_spaces_in(sub, depth + 1))
    return out


# --------------------------------------------------------------------------- the comparison


class _RecordingReducer:
    """The project's UMAP reducer, keeping its input (the distinct rows) and output."""

    def __init__(self, seed: int) -> None:
        self.inner = UMAPReducer(seed=seed)
        self.distinct: np.ndarray | None = None
        self.reduced: np.ndarray | None = None

    def fit_transform(self, X: np.ndarray) -> np.ndarray:
        self.distinct = np.asarray(X, dtype=np.float64)
        self.reduced = np.asarray(self.inner.fit_transform(X), dtype=np.float64)
        return self.reduced


class _RecordingClusterer:
    """The project's HDBSCAN clusterer, keeping its raw labels on the distinct points."""

    def __init__(self) -> None:
        self.inner = HDBSCANClusterer()
        self.labels: np.ndarray | None = None

    def fit_predict(self, X: np.ndarray) -> np.ndarray:
        self.labels = np.asarray(self.inner.fit_predict(X), dtype=np.int64)
        return self.labels


def sqrt_rule_k(m: int) -> int:
    """``round(sqrt(m / 2))`` clamped to ``[2, m - 1]`` (needs ``m >= 3``)."""
    return _clamp_k(round(math.sqrt(m / 2)), m)


def _clamp_k(k: int, m: int) -> int:
    return max(2, min(int(k), m - 1))


def dbscan_eps(points: np.ndarray, min_samples: int, quantile: float = 0.9) -> float:
    """The ``quantile`` of each point's distance to its ``min_samples``-th nearest point, the point
    itself counted first (DBSCAN's own count), Euclidean."""
    from sklearn.neighbors import NearestNeighbors

    k = min(int(min_samples), points.shape[0])
    dist, _ = NearestNeighbors(n_neighbors=k).fit(points).kneighbors(points)
    eps = float(np.quantile(dist[:, k - 1], quantile))
    return max(eps, 1e-12)  # DBSCAN rejects eps = 0


def silhouette(points: np.ndarray, labels: np.ndarray, metric: str = "euclidean") -> float | None:
    """Silhouette over the clustered points (negative labels left out); None unless 2 <= k < n."""
    from sklearn.metrics import silhouette_score

    kept = labels >= 0
    k = np.unique(labels[kept]).size
    if k < 2 or int(kept.sum()) <= k:
        return None
    return float(silhouette_score(points[kept], labels[kept], metric=metric))


def _score(algorithm: str, labels: np.ndarray, reduced: np.ndarray, distinct: np.ndarray,
           params: dict[str, float | int | str]) -> AlgorithmScore:
    clustered = labels[labels >= 0]
    return AlgorithmScore(algorithm=algorithm, n_clusters=int(np.unique(clustered).size),
                          n_noise=int((labels < 0).sum()), silhouette=silhouette(reduced, labels),
                          silhouette_embedding=silhouette(distinct, labels, metric="cosine"), params=params)


def compare_space(named: NamedSpace, settings: ClusteringSettings | None = None) -> SpaceClustering:
    """Run the four algorithms on one space's stored factor embeddings."""
    from sklearn.cluster import DBSCAN, AgglomerativeClustering, KMeans

    settings = settings or ClusteringSettings()
    space = named.space
    out = SpaceClustering(dataset=named.dataset, space=named.name, n_factors=len(space.factors), n_distinct=0)
    if space.embeddings is None:
        out.skipped = "the space stores no factor embeddings"
        return out
    vectors = space.embeddings.factors.to_array().astype(np.float64)
    seed = settings.seed if settings.seed is not None else space.params.seed
    reducer, clusterer = _RecordingReducer(seed), _RecordingClusterer()
    built = cluster_embeddings(vectors, reducer=reducer, clusterer=clusterer, seed=seed)
    if reducer.reduced is None or clusterer.labels is None or reducer.distinct is None:
        out.n_distinct = len(np.unique(vectors, axis=0)) if len(vectors) else 0
        out.skipped = f"too few distinct factors to cluster ({built.stats.note or built.stats.method})"
        return out
    reduced, distinct = reducer.reduced, reducer.distinct
    m = reduced.shape[0]
    out.n_distinct = m

    hdb = clusterer.labels
    size = clusterer.inner.used_min_cluster_size or hdbscan_min_cluster_size(m)
    assert reducer.inner.params is not None
    out.scores.append(_score("hdbscan", hdb, reduced, distinct, {
        "min_cluster_size": size, "umap_n_components": reducer.inner.params.n_components,
        "umap_n_neighbors": reducer.inner.params.n_neighbors, "seed": seed}))

    min_samples = hdbscan_min_cluster_size(m)
    eps = settings.dbscan_eps if settings.dbscan_eps is not None else dbscan_eps(reduced, min_samples,
                                                                                  settings.dbscan_quantile)
    db = DBSCAN(eps=eps, min_samples=min_samples).fit_predict(reduced)
    out.scores.append(_score("dbscan", np.asarray(db), reduced, distinct,
                             {"eps": round(eps, 6), "min_samples": min_samples,
                              "eps_rule": "fixed" if settings.dbscan_eps is not None
                              else f"quantile {settings.dbscan_quantile} of k-distance"}))

    if settings.fixed_k == "sqrt":
        k, rule = sqrt_rule_k(m), "round(sqrt(m/2))"
    elif settings.fixed_k == "hdbscan":
        k, rule = _clamp_k(max(2, int(np.unique(hdb[hdb >= 0]).size)), m), "HDBSCAN's count"
    else:
        k, rule = _clamp_k(int(settings.fixed_k), m), "fixed"
    km = KMeans(n_clusters=k, n_init=settings.kmeans_n_init, random_state=seed).fit_predict(reduced)
    out.scores.append(_score("kmeans", np.asarray(km), reduced, distinct, {"k": k, "k_rule": rule, "seed": seed}))
    ag = AgglomerativeClustering(n_clusters=k, linkage=settings.linkage).fit_predict(reduced)
    out.scores.append(_score("agglomerative", np.asarray(ag), reduced, distinct,
                             {"k": k, "k_rule": rule, "linkage": settings.linkage}))
    return out


def compare_clustering(spaces: Sequence[NamedSpace], settings: ClusteringSettings | None = None,
                       report: Reporter = silent) -> ClusteringAnalysis:
    """The comparison over every space, with per-(dataset, algorithm) summaries. No LLM calls."""
    if not spaces:
        raise ValueError("no factor spaces given")
    settings = settings or ClusteringSettings()
    results: list[SpaceClustering] = []
    report(ProgressEvent("clustering", 0, len(spaces)))
    for i, named in enumerate(spaces, 1):
        results.append(compare_space(named, settings))
        report(ProgressEvent("clustering", i, len(spaces), f"{named.dataset}/{named.name}"))
    datasets = list(dict.fromkeys(n.dataset for n in spaces))
    summary = []
    for dataset in datasets:
        done = [r for r in results if r.dataset == dataset and r.skipped is None]
        for algorithm in ALGORITHMS:
            scores = [s for r in done for s in r.scores if s.algorithm == algorithm]
            if not scores:
                continue
            sil = [s.silhouette for s in scores if s.silhouette is not None]
            sil_emb = [s.silhouette_embedding for s in scores if s.silhouette_embedding is not None]
            counts = [s.n_clusters for s in scores]
            shares = [s.n_noise / r.n_distinct for r in done for s in r.scores if s.algorithm == algorithm]
            summary.append(AlgorithmSummary(
                dataset=dataset, algorithm=algorithm, n_spaces=len(scores),
                silhouette_mean=statistics.fmean(sil) if sil else None,
                silhouette_std=statistics.stdev(sil) if len(sil) > 1 else (0.0 if sil else None),
                silhouette_embedding_mean=statistics.fmean(sil_emb) if sil_emb else None, n_silhouette=len(sil),
                clusters_mean=statistics.fmean(counts), clusters_min=min(counts), clusters_max=max(counts),
                noise_share_mean=statistics.fmean(shares)))
    notes = ["All four algorithms cluster the same UMAP coordinates of each space (the build's reduction and "
             "seed); silhouettes leave noise points out, so read them with the noise share."]
    skipped = [r for r in results if r.skipped]
    if skipped:
        notes.append(f"{len(skipped)} space(s) skipped: " + "; ".join(f"{r.dataset}/{r.space}: {r.skipped}"
                                                                      for r in skipped[:5]))
    return ClusteringAnalysis(settings=settings, datasets=datasets, spaces=results, summary=summary, notes=notes)


# --------------------------------------------------------------------------- outputs


def clustering_markdown(result: ClusteringAnalysis) -> list[str]:
    s = result.settings
    k_words = {"sqrt": "round(sqrt(m / 2)) for m distinct factors", "hdbscan": "HDBSCAN's cluster count"}
    lines = ["# Clustering algorithms on the stored factor embeddings", "",
             f"KMeans / Agglomerative ({s.linkage}) k: {k_words.get(str(s.fixed_k), str(s.fixed_k))}; DBSCAN eps: "
             + (f"{s.dbscan_eps}" if s.dbscan_eps is not None else
                f"quantile {s.dbscan_quantile} of the distance to the min_samples-th neighbour") +
             ", min_samples = max(2, m // 20). Silhouettes over clustered points only.", ""]
    headers = ["dataset", "algorithm", "spaces", "silhouette (UMAP)", "silhouette (MiniLM, cosine)",
               "clusters mean", "clusters min–max", "noise share"]
    rows = []
    for dataset in result.datasets:
        for algorithm in ALGORITHMS:
            row = result.summary_for(dataset, algorithm)
            if row is None:
                continue
            sil = fmt(row.silhouette_mean)
            if row.silhouette_std is not None and row.n_silhouette > 1:
                sil += f" ± {row.silhouette_std:.3f}"
            if row.n_silhouette < row.n_spaces:
                sil += f" ({row.n_silhouette}/{row.n_spaces})"
            rows.append([dataset, ALGORITHM_NAMES[algorithm], str(row.n_spaces), sil,
                         fmt(row.silhouette_embedding_mean), f"{row.clusters_mean:.1f}",
                         f"{row.clusters_min}–{row.clusters_max}", f"{100 * row.noise_share_mean:.1f}%"])
    lines += markdown_table(headers, rows, align="llrrrrrr")
    lines += [""] + [f"- {n}" for n in result.notes]
    return lines


def plot_clustering(result: ClusteringAnalysis, path: Path) -> None:
    """(a) silhouette by dataset and algorithm (mean ± std over spaces); (b) number of clusters
    (mean, whiskers from the smallest to the largest count)."""
    fig = new_figure(max(9.0, 2.2 * len(result.datasets) + 5.0), 4.2)
    ax_sil, ax_k = fig.subplots(1, 2)
    palette = colours(len(ALGORITHMS))
    width = 0.8 / len(ALGORITHMS)
    xs = list(range(len(result.datasets)))
    for i, algorithm in enumerate(ALGORITHMS):
        rows = [result.summary_for(d, algorithm) for d in result.datasets]
        offs = [x + (i - (len(ALGORITHMS) - 1) / 2) * width for x in xs]
        sil = [r.silhouette_mean if r and r.silhouette_mean is not None else 0.0 for r in rows]
        err = [r.silhouette_std if r and r.silhouette_std is not None else 0.0 for r in rows]
        ax_sil.bar(offs, sil, width=width, yerr=err, capsize=2, color=palette[i], label=ALGORITHM_NAMES[algorithm])
        means = [r.clusters_mean if r else 0.0 for r in rows]
        lo = [r.clusters_mean - r.clusters_min if r else 0.0 for r in rows]
        hi = [r.clusters_max - r.clusters_mean if r else 0.0 for r in rows]
        ax_k.bar(offs, means, width=width, yerr=[lo, hi], capsize=2, color=palette[i],
                 label=ALGORITHM_NAMES[algorithm])
    for ax, title, ylabel in ((ax_sil, "(a) Silhouette score by dataset and algorithm", "silhouette (UMAP space)"),
                              (ax_k, "(b) Number of clusters by dataset and algorithm", "clusters per space")):
        ax.set_xticks(xs)
        ax.set_xticklabels(result.datasets, rotation=15, ha="right")
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    ax_sil.axhline(0.0, color="grey", linewidth=0.8)
    ax_k.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    save_figure(fig, path)


def write_clustering(result: ClusteringAnalysis, out_dir: Path | str) -> AnalysisFiles:
    """``clustering.json``, ``clustering.md`` and ``clustering.png`` in ``out_dir``."""
    return write_analysis(NAME, result, clustering_markdown(result), lambda p: plot_clustering(result, p), out_dir,
                          "Silhouette and number of clusters by dataset and algorithm")
