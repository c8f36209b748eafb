"""What ``anchor truth bench`` runs: the worlds, the methods, and the error settings of its sweeps.

Every setting of the simulated LLM's errors is a point on one of three one-dimensional sweeps around
the defaults (:class:`~anchor.truth.simulate.errors.SimErrors`), indexed by a level ``t``: ``t = 0``
is no error of that kind, ``t = 1`` the defaults (one setting shared by the three sweeps), larger ``t``
more error.

* ``direct`` (the direct estimate's error, everything else at its default): ``direct_curve`` with
  slope ``max(0, 1 - 0.4 t)`` (0.6 at the default: flattened), noise ``0.5 t`` on the log-odds and
  step 0.05 (none at ``t = 0``).
* ``factor`` (every factor-level error together, the direct estimate at its default):
  ``factor_recall = 1 - 0.1 t``, ``hallucination_rate = 0.1 t``, ``vote_flip_rate = 0.1 t``,
  ``map_recall = 1 - 0.1 t``, ``map_false_rate = 0.05 t``, ``reflect_catch = 1 - 0.5 t`` (clipped to
  [0, 1]) and ``factor_curve`` with noise ``0.3 t`` and step 0.05 (none at ``t = 0``).
  ``grouping_error`` stays 0 (its default) and ``phi_reading`` ``posterior``.
* ``factor_curve`` (the probability estimator alone, everything else at its default): up to the
  defaults its noise grows, ``0.3 t``, with steps of ``0.05 t``; above them it is an estimator as
  consistent as the default one (noise 0.3) that gives coarser and flatter numbers: steps of
  ``0.05 t`` (0.1 at ``t = 2``, 0.2 at ``t = 4``: only 0.2, 0.4, 0.6, 0.8) and slope
  ``max(0.2, 1 - 0.15 (t - 1))`` on the log-odds (0.85 at ``t = 2``, 0.55 at ``t = 4``). The factor
  space and the mapping are those of the defaults at every level (none of their prompts reads
  ``factor_curve``), so only the estimates change: the paper's check of swapping the estimator LLM.

One more setting lies on no sweep: the defaults with ``phi_reading = "latent-link"`` (the LLM answers
phi as P(f | its latent), the number ANCHOR's network uses, rather than P(O1 | f), what the prompt
asks), to show what the latent network does when it is given the numbers it assumes.

``--quick`` is small enough for two cores in a few minutes; the full plan has more worlds,
conditions and levels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from anchor.errors import AnchorError
from anchor.extras import extra_hint, extra_installed
from anchor.methods.registry import METHODS as REGISTRY
from anchor.predict.config import check_predict_method
from anchor.truth.settings import STRUCTURES, Structure
from anchor.truth.simulate.errors import Miscalibration, SimErrors

SweepName = Literal["direct", "factor", "factor_curve"]
SWEEPS: tuple[SweepName, ...] = ("direct", "factor", "factor_curve")
#: The level at which every sweep is at the defaults.
DEFAULT_LEVEL = 1.0
#: The extra setting with phi read as the network uses it (see BenchPlan.latent_link).
LATENT_LINK = "phi-latent-link"
#: What each sweep moves, in words (for the table and the docs).
SWEEP_TITLES: dict[SweepName, str] = {
    "direct": "the direct estimate's error (direct_curve: slope 1 - 0.4t, noise 0.5t)",
    "factor": "every factor-level error (recall, hallucination, vote flips, mapping, reflection, factor_curve noise)",
    "factor_curve": "the probability estimator alone (noise 0.3t and steps 0.05t up to the defaults; above them "
                    "steps 0.05t and slope 1 - 0.15(t - 1), noise 0.3)",
}


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


def factor_noise_at(t: float) -> Miscalibration:
    """The factor-level curve of the ``factor`` sweep at level ``t``: noise ``0.3 t``, steps of 0.05."""
    return Miscalibration(slope=1.0, bias=0.0, noise=round(0.3 * t, 10), step=0.05 if t > 0 else 0.0)


def estimator_at(t: float) -> Miscalibration:
    """The factor-level curve of the ``factor_curve`` sweep at level ``t`` (``t = 1``: the default)."""
    if t <= 1:
        return Miscalibration(slope=1.0, bias=0.0, noise=round(0.3 * t, 10), step=round(0.05 * t, 10))
    return Miscalibration(slope=round(max(0.2, 1.0 - 0.15 * (t - 1)), 10), bias=0.0, noise=0.3,
                          step=round(0.05 * t, 10))


def direct_curve_at(t: float) -> Miscalibration:
    """The direct estimate's curve at level ``t`` (``t = 1``: the default slope 0.6, noise 0.5, step 0.05)."""
    return Miscalibration(slope=round(max(0.0, 1.0 - 0.4 * t), 10), bias=0.0, noise=round(0.5 * t, 10),
                          step=0.05 if t > 0 else 0.0)


def errors_at(sweep: SweepName, t: float) -> SimErrors:
    """The simulated LLM's errors at level ``t`` of ``sweep``; every sweep gives the defaults at ``t = 1``."""
    if t < 0:
        raise ValueError(f"a sweep level is 0 or more, got {t}")
    base = SimErrors()
    if sweep == "direct":
        return base.model_copy(update={"direct_curve": direct_curve_at(t)})
    if sweep == "factor_curve":
        return base.model_copy(update={"factor_curve": estimator_at(t)})
    if sweep == "factor":
        r = lambda x: round(x, 10)  # noqa: E731 - 0.1 * 3 is 0.30000000000000004
        return base.model_copy(update={
            "factor_recall": r(_clip(1 - 0.1 * t)), "hallucination_rate": r(0.1 * t),
            "vote_flip_rate": r(_clip(0.1 * t)), "map_recall": r(_clip(1 - 0.1 * t)),
            "map_false_rate": r(_clip(0.05 * t)), "reflect_catch": r(_clip(1 - 0.5 * t)),
            "factor_curve": factor_noise_at(t)})
    raise ValueError(f"unknown sweep {sweep!r}")


@dataclass(frozen=True)
class BenchMethod:
    """A row of the bench: a method of ``anchor predict`` with its ablations, under a short name."""

    name: str
    method: str
    ablations: tuple[str, ...] = ()
    title: str = ""

    @property
    def not_run(self) -> str | None:
        """Why ``anchor predict`` cannot run it on a world's cases here (None: it can)."""
        try:
            check_predict_method(self.method, None)
        except AnchorError as exc:
            return str(exc)
        extra = REGISTRY[self.method].extra
        if extra is not None and not extra_installed(extra):
            return extra_hint(extra, f"--method {self.method}")
        return None


#: ANCHOR, its ablations, the direct baselines, BIRD and the factor-based oracle, in table order.
METHODS: tuple[BenchMethod, ...] = (
    BenchMethod("anchor", "anchor", (), "ANCHOR (Naive Bayes and the latent network pooled)"),
    BenchMethod("no-cbn", "anchor", ("no-cbn",), "ANCHOR, Naive Bayes only"),
    BenchMethod("no-nb", "anchor", ("no-nb",), "ANCHOR, the latent network only"),
    BenchMethod("no-cluster", "anchor", ("no-cluster",), "ANCHOR, one flat factor group (no UMAP/HDBSCAN)"),
    BenchMethod("no-hierarchy", "anchor", ("no-hierarchy",), "ANCHOR, flat retrieval over all factors"),
    BenchMethod("vanilla", "vanilla", (), "the LLM states P(O1) directly"),
    BenchMethod("cot", "cot", (), "reasons step by step, then states P(O1)"),
    BenchMethod("logits", "logits", (), "P(O1) from the answer token's log-probabilities"),
    BenchMethod("bird", "bird", (), "BIRD, strict mapping"),
    BenchMethod("factor-based", "factor-based", (), "the factor-based oracle"),
)
DIRECT_METHODS = ("vanilla", "cot", "logits")


class BenchPlan(BaseModel):
    """Everything a bench run is made of; recorded in ``results.json`` and checked on a rerun into the same DIR."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    quick: bool
    seed: int = Field(ge=0)
    worlds_per_structure: int = Field(ge=1)
    conditions_per_world: int = Field(ge=4)
    structures: tuple[Structure, ...] = STRUCTURES
    methods: tuple[str, ...] = tuple(m.name for m in METHODS)
    levels: dict[SweepName, tuple[float, ...]]
    latent_link: bool = Field(default=True, description=(
        "Also the defaults with phi_reading='latent-link': the LLM answers phi as P(f | its latent), the number "
        "ANCHOR's network uses, instead of P(O1 | f), what the prompt asks (claim 3 reports both)."))
    build_sizes: str = Field(default="paper", description="ANCHOR's build sizes: `anchor predict`'s choice for "
                                                          "a server ('auto' = paper).")

    @classmethod
    def make(cls, *, quick: bool, seed: int = 0) -> BenchPlan:
        if quick:
            return cls(quick=True, seed=seed, worlds_per_structure=3, conditions_per_world=24,
                       levels={"direct": (0.0, 1.0, 2.0), "factor": (0.0, 1.0, 2.0),
                               "factor_curve": (0.0, 1.0, 2.0, 4.0)})
        return cls(quick=False, seed=seed, worlds_per_structure=4, conditions_per_world=30,
                   levels={"direct": (0.0, 0.5, 1.0, 1.5, 2.0, 2.5), "factor": (0.0, 0.5, 1.0, 1.5, 2.0, 3.0),
                           "factor_curve": (0.0, 0.5, 1.0, 2.0, 3.0, 4.0)})

    @property
    def cases_per_structure(self) -> int:
        return self.worlds_per_structure * self.conditions_per_world

    def bench_methods(self) -> list[BenchMethod]:
        return [m for m in METHODS if m.name in self.methods]

    def settings(self) -> list[Setting]:
        """Every distinct error setting, the defaults first, then each sweep's other levels in order."""
        out = [Setting("default", None, DEFAULT_LEVEL, SimErrors())]
        for sweep in SWEEPS:
            for t in self.levels[sweep]:
                if t != DEFAULT_LEVEL:
                    out.append(Setting(f"{sweep}-{t:g}", sweep, t, errors_at(sweep, t)))
        if self.latent_link:
            out.append(Setting(LATENT_LINK, None, DEFAULT_LEVEL, SimErrors(phi_reading="latent-link")))
        return out

    def setting_of(self, sweep: SweepName, t: float) -> str:
        """The name of the setting at level ``t`` of ``sweep``."""
        return "default" if t == DEFAULT_LEVEL else f"{sweep}-{t:g}"


@dataclass(frozen=True)
class Setting:
    """One error setting: its name, where it lies (None for the defaults, which lie on every sweep)."""

    name: str
    sweep: SweepName | None
    level: float
    errors: SimErrors
