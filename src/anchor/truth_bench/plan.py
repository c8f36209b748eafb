"""What ``anchor truth bench`` runs: its groups of worlds, its methods, and the error settings of its sweeps.

**Groups.** Worlds come in groups of one structure at one prior P(O1) (``latent@0.15``: latent worlds whose
outcome 1 has a prior of 0.15), plus, when pgmpy is installed, one group of published Bayesian networks
(``networks``: bnlearn's networks as pgmpy ships them, each at its own prior). Each group has its own
cases file and its own cells.

**Error settings** are points on one-dimensional sweeps around the defaults of
:class:`~anchor.truth.simulate.errors.SimErrors`, each indexed by a level ``t``: ``t = 0`` is no error of
that kind, ``t = 1`` the defaults (one setting shared by every sweep), larger ``t`` more error. The
defaults are symmetric: the direct estimate's curve is the factor-level one (slope 1, noise 0.3 on the
log-odds, steps of 0.05), and the direct baselines misread a condition at the rates ANCHOR's one
selection round misses and invents factors (0.1 and 0.05 a factor).

* ``direct``: the direct baselines' errors: ``direct_curve`` noise ``0.3 t`` (steps of 0.05 above 0),
  ``direct_miss_rate = 0.1 t``, ``direct_invent_rate = 0.05 t``;
* ``factor``: every factor-level error together: ``factor_recall = 1 - 0.1 t``, ``hallucination_rate =
  0.1 t``, ``vote_flip_rate = 0.1 t``, ``map_recall = 1 - 0.1 t``, ``map_false_rate = 0.05 t``,
  ``reflect_catch = 1 - 0.5 t``, ``grouping_error = 0.1 t``, and ``factor_curve`` and ``base_rate_curve``
  with noise ``0.3 t`` (steps of 0.05 above 0);
* ``factor_curve``: the probability estimator alone: up to the defaults noise ``0.3 t`` with steps of
  ``0.05 t``; above them as consistent as the default (noise 0.3) but coarser and flatter: steps of
  ``0.05 t`` and slope ``max(0.2, 1 - 0.15 (t - 1))`` (the paper's check of swapping the estimator LLM);
* ``base_rate``: the elicited base rate alone (the consistent rule's prior): ``base_rate_curve`` noise
  ``0.3 t`` (steps of 0.05 above 0);
* ``grouping``: the latent grouping alone: ``grouping_error = 0.1 t``.

The ``direct`` and ``factor`` sweeps at every prior make the *map*: ANCHOR's answers read no parameter of
the direct sweep and the direct baselines' none of the factor sweep, so pairing ANCHOR at factor level
``f`` with a baseline at direct level ``d`` is the cell (d, f) of a grid of both errors, with no run of
its own. The other sweeps run at even odds only, to keep ``--quick`` within minutes on two cores.

One more setting lies on no sweep: ``phi-latent-link``, the defaults with ``phi_reading = "latent-link"``
(the LLM answers phi as P(f | its latent), the number the paper's network reads it as). Only the paper's
network is run there: it is that method at its best reading, set against the paper's Naive Bayes at its
own (the posterior the prompt asks for), never handing one method's numbers to another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from anchor.errors import AnchorError
from anchor.extras import extra_hint, extra_installed
from anchor.methods.registry import METHODS as REGISTRY
from anchor.predict.config import check_predict_method
from anchor.settings.inference import InferenceConfig
from anchor.truth.settings import STRUCTURES, Structure
from anchor.truth.simulate.errors import Miscalibration, SimErrors

SweepName = Literal["direct", "factor", "factor_curve", "base_rate", "grouping"]
SWEEPS: tuple[SweepName, ...] = ("direct", "factor", "factor_curve", "base_rate", "grouping")
#: The level at which every sweep is at the defaults.
DEFAULT_LEVEL = 1.0
DEFAULT = "default"
#: The setting of the paper's network at its own reading of phi (see BenchPlan.latent_link).
LATENT_LINK = "phi-latent-link"
#: The group of published networks.
NETWORKS = "networks"
#: What each sweep moves, in words (for the tables and the figures).
SWEEP_TITLES: dict[SweepName, str] = {
    "direct": "the direct baselines' errors (direct_curve noise 0.3t; misread factors: missed 0.1t, invented 0.05t)",
    "factor": "every factor-level error (recall, inventions, vote flips, mapping, reflection, grouping, the "
              "phi and base-rate curves' noise 0.3t)",
    "factor_curve": "the probability estimator alone (noise 0.3t and steps 0.05t up to the defaults; above them "
                    "steps 0.05t and slope 1 - 0.15(t - 1), noise 0.3)",
    "base_rate": "the elicited base rate alone (base_rate_curve noise 0.3t)",
    "grouping": "the latent grouping alone (grouping_error 0.1t)",
}


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


def _r(x: float) -> float:
    return round(x, 10)  # 0.1 * 3 is 0.30000000000000004


def noisy_curve(t: float) -> Miscalibration:
    """Slope 1, noise ``0.3 t``, steps of 0.05 (none at ``t = 0``): the defaults at ``t = 1``."""
    return Miscalibration(slope=1.0, bias=0.0, noise=_r(0.3 * t), step=0.05 if t > 0 else 0.0)


def estimator_at(t: float) -> Miscalibration:
    """The factor-level curve of the ``factor_curve`` sweep at level ``t`` (``t = 1``: the default)."""
    if t <= 1:
        return Miscalibration(slope=1.0, bias=0.0, noise=_r(0.3 * t), step=_r(0.05 * t))
    return Miscalibration(slope=_r(max(0.2, 1.0 - 0.15 * (t - 1))), bias=0.0, noise=0.3, step=_r(0.05 * t))


def errors_at(sweep: SweepName, t: float) -> SimErrors:
    """The simulated LLM's errors at level ``t`` of ``sweep``; every sweep gives the defaults at ``t = 1``."""
    if t < 0:
        raise ValueError(f"a sweep level is 0 or more, got {t}")
    base = SimErrors()
    if sweep == "direct":
        return base.model_copy(update={"direct_curve": noisy_curve(t), "direct_miss_rate": _r(_clip(0.1 * t)),
                                       "direct_invent_rate": _r(_clip(0.05 * t))})
    if sweep == "factor_curve":
        return base.model_copy(update={"factor_curve": estimator_at(t)})
    if sweep == "base_rate":
        return base.model_copy(update={"base_rate_curve": noisy_curve(t)})
    if sweep == "grouping":
        return base.model_copy(update={"grouping_error": _r(_clip(0.1 * t))})
    if sweep == "factor":
        return base.model_copy(update={
            "factor_recall": _r(_clip(1 - 0.1 * t)), "hallucination_rate": _r(0.1 * t),
            "vote_flip_rate": _r(_clip(0.1 * t)), "map_recall": _r(_clip(1 - 0.1 * t)),
            "map_false_rate": _r(_clip(0.05 * t)), "reflect_catch": _r(_clip(1 - 0.5 * t)),
            "grouping_error": _r(_clip(0.1 * t)), "factor_curve": noisy_curve(t), "base_rate_curve": noisy_curve(t)})
    raise ValueError(f"unknown sweep {sweep!r}")


Scope = Literal["every", "even-default"]


@dataclass(frozen=True)
class BenchMethod:
    """A row of the bench: a method of ``anchor predict`` with its ablations and stage-3 settings (the rule
    and the pool's weights), under a short name. ``scope``: ``every`` cell, or only the default errors in the
    groups at even odds (the slow or structural rows)."""

    name: str
    method: str
    ablations: tuple[str, ...] = ()
    title: str = ""
    inference: dict[str, object] = field(default_factory=dict)
    scope: Scope = "every"

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

    def inference_config(self) -> InferenceConfig:
        return InferenceConfig(**self.inference)  # type: ignore[arg-type]


_CONSISTENT = {"rule": "consistent"}
#: The methods in table order: ANCHOR under the consistent rule (what `anchor predict` answers) and its
#: parts, the paper's ANCHOR and its parts, two structural ablations, the direct baselines, BIRD, and the
#: factor-based oracle (listed, not run).
METHODS: tuple[BenchMethod, ...] = (
    BenchMethod("anchor", "anchor", (), "ANCHOR, consistent rule (the latent network, links solved from phi, the "
                "base rate counted once): what anchor predict answers", _CONSISTENT),
    BenchMethod("nb", "anchor", ("no-cbn",), "ANCHOR, consistent rule, Naive Bayes with the prior term alone",
                _CONSISTENT),
    BenchMethod("pool", "anchor", (), "ANCHOR, consistent rule, Naive Bayes and the network pooled half and half",
                {**_CONSISTENT, "w_nb": 0.5, "w_cbn": 0.5}),
    BenchMethod("anchor-paper", "anchor", (), "ANCHOR as the paper computes it (even odds; Naive Bayes and the "
                "network with phi as its link, pooled half and half)"),
    BenchMethod("nb-paper", "anchor", ("no-cbn",), "the paper's Naive Bayes alone ('w/o cbn')"),
    BenchMethod("net-paper", "anchor", ("no-nb",), "the paper's latent network alone ('w/o nb')"),
    BenchMethod("no-cluster", "anchor", ("no-cluster",), "ANCHOR (consistent), one flat factor group (no "
                "UMAP/HDBSCAN)", _CONSISTENT, "even-default"),
    BenchMethod("no-hierarchy", "anchor", ("no-hierarchy",), "ANCHOR (consistent), flat retrieval over all factors",
                _CONSISTENT, "even-default"),
    BenchMethod("vanilla", "vanilla", (), "the LLM states P(O1) directly"),
    BenchMethod("cot", "cot", (), "reasons step by step, then states P(O1)"),
    BenchMethod("logits", "logits", (), "P(O1) from the answer token's log-probabilities"),
    BenchMethod("bird", "bird", (), "BIRD, strict mapping", scope="even-default"),
    BenchMethod("factor-based", "factor-based", (), "the factor-based oracle"),
)
DIRECT_METHODS = ("vanilla", "cot", "logits")
#: The methods run at the phi-latent-link setting.
LINK_METHODS = ("net-paper",)


def group_name(structure: str, prior: float) -> str:
    return f"{structure}@{prior:g}"


@dataclass(frozen=True)
class Group:
    """A group of worlds: one structure at one prior (``prior`` None: the published networks, each at its own)."""

    name: str
    structure: str
    prior: float | None

    @property
    def slug(self) -> str:
        """A file name for the group: ``latent-p150``, ``networks``."""
        if self.prior is None:
            return self.name
        return f"{self.structure}-p{round(self.prior * 1000):03d}"

    @property
    def even(self) -> bool:
        return self.prior == 0.5


class BenchPlan(BaseModel):
    """Everything a bench run is made of; recorded in ``results.json`` and checked on a rerun into the same DIR."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    quick: bool
    seed: int = Field(ge=0)
    worlds_per_group: int = Field(ge=1)
    conditions_per_world: int = Field(ge=4)
    structures: tuple[Structure, ...] = STRUCTURES
    priors: tuple[float, ...] = Field(default=(0.5,), description="P(O1) of the generated worlds, a group each.")
    networks: tuple[str, ...] = Field(default=(), description="Published networks pgmpy ships, one world each, "
                                                              "in one group (empty: none).")
    network_conditions: int = Field(default=24, ge=4, description="Conditions of each published network.")
    methods: tuple[str, ...] = tuple(m.name for m in METHODS)
    levels: dict[SweepName, tuple[float, ...]]
    uneven_sweeps: tuple[SweepName, ...] = Field(default=("direct", "factor", "base_rate"), description=(
        "The sweeps also run at the other priors and in the networks' group (the others at even odds only)."))
    latent_link: bool = Field(default=True, description=(
        "Also the paper's network at phi_reading='latent-link' (its own reading of phi), at even odds."))
    build_sizes: str = Field(default="paper", description="ANCHOR's build sizes: `anchor predict`'s choice for "
                                                          "a server ('auto' = paper).")

    @classmethod
    def make(cls, *, quick: bool, seed: int = 0, networks: tuple[str, ...] = ()) -> BenchPlan:
        if quick:
            return cls(quick=True, seed=seed, worlds_per_group=10, conditions_per_world=24, priors=(0.5, 0.3, 0.15),
                       networks=networks,
                       levels={"direct": (0.0, 1.0, 2.0), "factor": (0.0, 1.0, 2.0),
                               "factor_curve": (0.0, 1.0, 2.0, 4.0), "base_rate": (0.0, 1.0, 2.0),
                               "grouping": (0.0, 1.0, 3.0)})
        # 26 worlds a group is what the bank's 240 scenarios allow for nine groups; 45 conditions a world then
        # give each structure about 3,500 cases over its priors, which decides 0.01 in MAE (docs/known-truth.md).
        return cls(quick=False, seed=seed, worlds_per_group=26, conditions_per_world=45, priors=(0.5, 0.3, 0.15),
                   networks=networks, network_conditions=100,
                   levels={"direct": (0.0, 0.5, 1.0, 1.5, 2.0, 3.0), "factor": (0.0, 0.5, 1.0, 1.5, 2.0, 3.0),
                           "factor_curve": (0.0, 0.5, 1.0, 2.0, 3.0, 4.0), "base_rate": (0.0, 1.0, 2.0, 3.0),
                           "grouping": (0.0, 1.0, 2.0, 4.0)})

    def groups(self) -> list[Group]:
        out = [Group(group_name(s, p), s, p) for p in self.priors for s in self.structures]
        if self.networks:
            out.append(Group(NETWORKS, "network", None))
        return out

    def bench_methods(self) -> list[BenchMethod]:
        return [m for m in METHODS if m.name in self.methods]

    def settings(self) -> list[Setting]:
        """Every distinct error setting, the defaults first, then each sweep's other levels in order."""
        out = [Setting(DEFAULT, None, DEFAULT_LEVEL, SimErrors())]
        for sweep in SWEEPS:
            for t in self.levels.get(sweep, ()):
                if t != DEFAULT_LEVEL:
                    out.append(Setting(f"{sweep}-{t:g}", sweep, t, errors_at(sweep, t)))
        if self.latent_link:
            out.append(Setting(LATENT_LINK, None, DEFAULT_LEVEL, SimErrors(phi_reading="latent-link")))
        return out

    def setting_of(self, sweep: SweepName, t: float) -> str:
        """The name of the setting at level ``t`` of ``sweep``."""
        return DEFAULT if t == DEFAULT_LEVEL else f"{sweep}-{t:g}"

    def runs_in(self, setting: Setting, group: Group) -> bool:
        """Whether the setting is run in the group (the sweeps not in ``uneven_sweeps`` at even odds only)."""
        if setting.sweep is None:
            return setting.name == DEFAULT or group.even
        return group.even or setting.sweep in self.uneven_sweeps

    def method_runs(self, method: BenchMethod, setting: Setting, group: Group) -> bool:
        """Whether the method has a cell at the setting in the group."""
        if setting.name == LATENT_LINK:
            return method.name in LINK_METHODS
        if method.scope == "even-default":
            return group.even and setting.name == DEFAULT
        return True


@dataclass(frozen=True)
class Setting:
    """One error setting: its name, where it lies (None for the defaults, which lie on every sweep)."""

    name: str
    sweep: SweepName | None
    level: float
    errors: SimErrors
