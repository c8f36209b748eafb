"""Estimator analysis (the paper's Table 6 and §A.7.1): swap the probability-estimator LLM.

The factor space and the mapping come from the main model; only the factor strengths phi and the
latent parameters are elicited by the second model (``Anchor(estimator=...)``, or
:func:`reestimate` on a finished result, which reuses its mapping trace as is). The analysis
reports both models' task scores and their difference, and compares the two phi distributions:

* **Jensen-Shannon divergence** between histograms of the two samples on ``[0, 1]``, by default 20
  equal bins of width 0.05 (the last bin closed, so 1.0 counts), in bits (base 2), so it lies in
  ``[0, 1]``: 0 for identical histograms, 1 for disjoint ones. It is the divergence, the square
  of SciPy's Jensen-Shannon *distance*.
* **Wasserstein-1 distance** between the two empirical distributions (SciPy), in phi units.
* **Two-sample Kolmogorov-Smirnov test** (SciPy, exact p-value for small samples): statistic and
  p-value; "significant" means ``p < alpha`` (0.05 by default).

For plotting, :func:`phi_density` gives a Gaussian kernel density estimate on ``[0, 1]`` with
reflection at both ends (phi cannot leave the interval, so mass a plain kernel would spill over
an edge is folded back) and Scott's bandwidth ``std * n ** (-1/5)``, floored at 0.01 so that a
sample of one repeated value still has a drawable density.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from pydantic import Field

from anchor.analysis.common import (
    AnalysisFiles,
    AnalysisModel,
    AnalysisResult,
    TaskScores,
    fmt,
    markdown_table,
    pct,
    task_scores,
    write_analysis,
)
from anchor.inference.engine import InferenceEngine
from anchor.llm.client import LLMClient
from anchor.plots import colours, new_figure, save_figure
from anchor.rundir.records import MetricsReport
from anchor.settings.inference import InferenceConfig
from anchor.types import FactorSpace, InferenceResult

NAME = "estimator"
JS_BINS = 20
MIN_BANDWIDTH = 0.01


def _sample(values: Sequence[float], what: str) -> np.ndarray:
    try:
        arr = np.asarray(list(values), dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a list of numbers") from None
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{what} needs at least one phi value")
    bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0.0) | (arr > 1.0))
    if bad.size:
        raise ValueError(f"{what}[{int(bad[0])}] = {float(arr[bad[0]])!r} is not a probability in [0, 1]")
    return arr


# --------------------------------------------------------------------------- statistics


class PhiDistributionStats(AnalysisModel):
    n_main: int
    n_estimator: int
    mean_main: float
    mean_estimator: float
    js_divergence: float = Field(description="Jensen-Shannon divergence of the histograms, base 2, in [0, 1].")
    js_bins: int = Field(description="Equal-width histogram bins on [0, 1] used for the divergence.")
    wasserstein: float = Field(description="Wasserstein-1 distance between the samples.")
    ks_statistic: float
    ks_pvalue: float
    alpha: float
    significant: bool = Field(description="ks_pvalue < alpha: the two distributions differ.")


def histogram(values: Sequence[float], bins: int = JS_BINS) -> np.ndarray:
    """Share of ``values`` in each of ``bins`` equal bins on [0, 1] (the last bin includes 1.0)."""
    counts, _ = np.histogram(_sample(values, "values"), bins=bins, range=(0.0, 1.0))
    return counts / counts.sum()


def js_divergence(a: Sequence[float], b: Sequence[float], bins: int = JS_BINS) -> float:
    """Jensen-Shannon divergence (base 2) between the histograms of two phi samples."""
    from scipy.spatial.distance import jensenshannon

    if isinstance(bins, bool) or int(bins) != bins or bins < 1:
        raise ValueError(f"bins must be a positive integer, got {bins!r}")
    distance = float(jensenshannon(histogram(a, bins), histogram(b, bins), base=2))
    return min(1.0, max(0.0, distance * distance))


def phi_distribution_stats(main: Sequence[float], estimator: Sequence[float], *, bins: int = JS_BINS,
                           alpha: float = 0.05) -> PhiDistributionStats:
    """JS divergence, Wasserstein distance and the two-sample KS test between two phi samples."""
    from scipy.stats import ks_2samp, wasserstein_distance

    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    a, b = _sample(main, "main phi values"), _sample(estimator, "estimator phi values")
    ks = ks_2samp(a, b)
    p = float(ks.pvalue)
    return PhiDistributionStats(
        n_main=int(a.size), n_estimator=int(b.size), mean_main=float(a.mean()), mean_estimator=float(b.mean()),
        js_divergence=js_divergence(a, b, bins), js_bins=int(bins), wasserstein=float(wasserstein_distance(a, b)),
        ks_statistic=float(ks.statistic), ks_pvalue=p, alpha=alpha, significant=p < alpha)


class Density(AnalysisModel):
    grid: list[float]
    density: list[float]
    bandwidth: float
    n: int


def phi_density(values: Sequence[float], *, points: int = 201, bandwidth: float | None = None) -> Density:
    """Gaussian KDE of a phi sample on ``points`` evenly spaced values of [0, 1], reflected at 0 and 1."""
    from scipy.stats import norm

    x = _sample(values, "phi values")
    if isinstance(points, bool) or int(points) != points or points < 2:
        raise ValueError(f"points must be an integer >= 2, got {points!r}")
    if bandwidth is None:
        spread = float(x.std(ddof=1)) if x.size > 1 else 0.0
        bandwidth = max(MIN_BANDWIDTH, spread * x.size ** (-0.2))
    elif not (math.isfinite(bandwidth) and bandwidth > 0):
        raise ValueError(f"bandwidth must be a positive number, got {bandwidth}")
    grid = np.linspace(0.0, 1.0, int(points))
    centres = np.concatenate([x, -x, 2.0 - x])  # reflections keep the mass inside [0, 1]
    dens = norm.pdf((grid[:, None] - centres[None, :]) / bandwidth).sum(axis=1) / (x.size * bandwidth)
    return Density(grid=grid.tolist(), density=dens.tolist(), bandwidth=float(bandwidth), n=int(x.size))


# --------------------------------------------------------------------------- collecting phi


def collect_phis(results: Iterable[InferenceResult], *, raw: bool = False) -> list[float]:
    """Every factor's phi from a set of results (the clipped value inference used, or with
    ``raw=True`` the value as elicited). Unknown results contribute the factors they have, if any."""
    out: list[float] = []
    for r in results:
        for f in r.factors:
            value = f.phi_raw if raw and f.phi_raw is not None else f.phi
            out.append(float(value))
    return out


async def reestimate(space: FactorSpace, result: InferenceResult, *, client: LLMClient, estimator: LLMClient,
                     config: InferenceConfig | None = None) -> InferenceResult:
    """Stage 3 again on ``result``'s mapping, with ``estimator`` eliciting phi and the latent
    parameters (``client`` groups the factors). The mapping trace is reused unchanged."""
    if result.mapping is None:
        raise ValueError("the result carries no mapping trace to reuse")
    trace = result.mapping.model_copy(deep=True)
    fresh = InferenceResult(condition=result.condition, p_outcome1=None, p_outcome2=None, unknown=False,
                            mapping=trace, variant=list(result.variant))
    return await InferenceEngine(client, space, config, estimator=estimator).infer(trace, fresh)


# --------------------------------------------------------------------------- result


class EstimatorComparison(AnalysisModel):
    dataset: str
    main_model: str
    estimator_model: str
    main: TaskScores
    estimator: TaskScores
    difference: float | None = Field(description="Estimator's headline score minus the main model's.")
    phi: PhiDistributionStats
    density_main: Density
    density_estimator: Density


class EstimatorAnalysis(AnalysisResult):
    analysis: str = NAME
    comparisons: list[EstimatorComparison]
    notes: list[str] = Field(default_factory=list)


def estimator_comparison(dataset: str, main_report: MetricsReport, estimator_report: MetricsReport,
                         main_phis: Sequence[float], estimator_phis: Sequence[float], *, main_model: str,
                         estimator_model: str, bins: int = JS_BINS, alpha: float = 0.05) -> EstimatorComparison:
    """One dataset's comparison: both task scores and their difference, and the phi statistics."""
    if main_report.kind != estimator_report.kind:
        raise ValueError(f"the two evaluations are of different kinds ({main_report.kind} and "
                         f"{estimator_report.kind}); evaluate the same dataset slice")
    main, est = task_scores(main_report), task_scores(estimator_report)
    diff = None if main.score is None or est.score is None else est.score - main.score
    return EstimatorComparison(
        dataset=dataset, main_model=main_model, estimator_model=estimator_model, main=main, estimator=est,
        difference=diff, phi=phi_distribution_stats(main_phis, estimator_phis, bins=bins, alpha=alpha),
        density_main=phi_density(main_phis), density_estimator=phi_density(estimator_phis))


def estimator_analysis(comparisons: Sequence[EstimatorComparison]) -> EstimatorAnalysis:
    if not comparisons:
        raise ValueError("no comparisons given")
    notes = ["Factor space and mapping from the main model; phi and the latent parameters from the estimator. "
             f"JS divergence on {comparisons[0].phi.js_bins} equal bins of [0, 1], base 2; KS significant at "
             f"p < {comparisons[0].phi.alpha}."]
    if any(c.main.small_model or c.estimator.small_model for c in comparisons):
        notes.append("At least one model is the embedded 135M model: the numbers show the analysis runs, "
                     "not the method's accuracy.")
    return EstimatorAnalysis(comparisons=list(comparisons), notes=notes)


# --------------------------------------------------------------------------- outputs


def estimator_markdown(result: EstimatorAnalysis) -> list[str]:
    lines = ["# Probability-estimator LLM", "", "## Task scores", ""]
    rows = []
    for c in result.comparisons:
        rows.append([c.dataset, c.main.metric, f"{fmt(c.main.score)} ({c.main_model})",
                     f"{fmt(c.estimator.score)} ({c.estimator_model})",
                     _delta(c.difference), pct(c.main.unknown_rate), pct(c.estimator.unknown_rate)])
    lines += markdown_table(["dataset", "metric", "main", "estimator", "Δ (estimator − main)", "unknown (main)",
                             "unknown (estimator)"], rows, align="llrrrrr")
    lines += ["", "## Factor-score (phi) distributions", ""]
    rows = []
    for c in result.comparisons:
        s = c.phi
        rows.append([c.dataset, f"{s.n_main} / {s.n_estimator}", f"{s.mean_main:.3f} / {s.mean_estimator:.3f}",
                     f"{s.js_divergence:.3f}", f"{s.wasserstein:.3f}", f"{s.ks_statistic:.3f}", _p(s.ks_pvalue),
                     "significant" if s.significant else "not significant"])
    lines += markdown_table(["dataset", "n (main / est.)", "mean phi", "JS div.", "Wass. dist.", "KS stat.",
                             "KS p-value", "difference"], rows, align="lrrrrrrl")
    lines += [""] + [f"- {n}" for n in result.notes]
    return lines


def _delta(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:+.3f}".replace("-", "−")


def _p(p: float) -> str:
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def plot_estimator(result: EstimatorAnalysis, path: Path) -> None:
    """One panel per dataset: the smoothed phi densities of the two estimators."""
    n = len(result.comparisons)
    cols = min(2, n)
    rows = math.ceil(n / cols)
    fig = new_figure(5.2 * cols, 3.6 * rows)
    fig.set_layout_engine("constrained")  # keeps each panel's title clear of the x label above it
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    main_colour, est_colour = colours(2)
    for ax, c in zip(axes, result.comparisons, strict=False):
        for dens, colour, label in ((c.density_main, main_colour, c.main_model),
                                    (c.density_estimator, est_colour, c.estimator_model)):
            ax.plot(dens.grid, dens.density, color=colour, label=f"{label} (n={dens.n})")
            ax.fill_between(dens.grid, dens.density, color=colour, alpha=0.15)
        s = c.phi
        ax.set_title(f"{c.dataset}: JS {s.js_divergence:.3f}, W {s.wasserstein:.3f}, KS p {_p(s.ks_pvalue)}",
                     fontsize=9)
        ax.set_xlim(0, 1)
        ax.set_xlabel("phi = P(outcome1 | factor)")
        ax.set_ylabel("density")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.suptitle("Smoothed factor-score profiles of the two probability estimators", fontsize=10)
    save_figure(fig, path)


def write_estimator(result: EstimatorAnalysis, out_dir: Path | str) -> AnalysisFiles:
    """``estimator.json``, ``estimator.md`` and ``estimator.png`` in ``out_dir``."""
    return write_analysis(NAME, result, estimator_markdown(result), lambda p: plot_estimator(result, p), out_dir,
                          "Smoothed phi densities of the two estimators")
