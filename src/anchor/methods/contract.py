"""The shape every method the run engine drives fills in, and how it is described.

A method is built once per run (``MethodSpec.factory(context)``) and then asked, for each instance,
to ``prepare`` the instance's scenario (build or load what it keeps per scenario: ANCHOR's factor
space, BIRD's trained model; nothing for a direct baseline) and to ``estimate`` P(O1) for each
condition. The runner never looks at a method's name: what it needs to know (does the method judge
two conditions together, does it choose rather than estimate, does it see the gold answer) is in
its ``MethodSpec``. Each family of methods declares its specs beside its implementation (its
module's ``SPECS``), and :mod:`anchor.methods.registry` collects them into ``METHODS``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel

from anchor.artefacts import ArtefactStore, content_key
from anchor.secrets import scrub
from anchor.types import Scenario, TextTruncation, scenario_key

if TYPE_CHECKING:
    from anchor.config import AnchorConfig
    from anchor.embedding.embed import Embedder
    from anchor.llm.client import LLMClient
    from anchor.rundir.records import RunConfig

Status = Literal["ok", "abstained", "failed"]


class Estimate(BaseModel):
    """A method's answer for one condition."""

    p_outcome1: float | None = None
    p_outcome1_raw: float | None = None
    """Set by the runner when it applies a calibrator: the method's own P(O1) (p_outcome1 is then the
    calibrated one)."""
    status: Status = "ok"
    """ok: a probability; abstained: the method said "unknown" (a real answer); failed: the run could
    not get an answer (the model kept answering off-schema, the server was unreachable, ...)."""
    reason: str | None = None
    n_factors: int | None = None
    factors: list[str] | None = None
    """The factors (BIRD: factor = value) the condition was mapped to, for methods that map."""
    trace: dict[str, Any] | None = None
    """The method's audit trail for this condition (ANCHOR: the InferenceResult), as JSON."""
    artefact: str | None = None
    """Key of the per-scenario artefact used (file name in the run directory)."""
    fallback: str | None = None
    """Name of the method that answered instead when this one abstained (BIRD's CoT fallback)."""
    truncated: TextTruncation | None = None
    """Set when the condition was cut to fit a prompt into the model's context window; the runner
    records it on the prediction whatever the status."""

    @classmethod
    def failed(cls, exc: BaseException) -> Estimate:
        return cls(status="failed", reason=scrub(str(exc))[:800])


@dataclass(frozen=True)
class ArtefactKind:
    """One kind of per-scenario artefact (factor spaces, BIRD models, ...): the folder it lives in
    (its name) and how one file of it is read and written. ``uses(item)`` names the artefacts of other
    kinds it was built on (``{kind: key}``), so that the cost of a reused one can be traced."""

    name: str
    load: Callable[[Path], Any]
    save: Callable[[Any, Path], Any]
    uses: Callable[[Any], dict[str, str]] | None = None


@dataclass
class MethodContext:
    """What the runner hands a method: the run's client (seeded for the run), shared resources,
    and the run's configuration."""

    client: LLMClient
    base_client: LLMClient
    """The client with the run directory's base seed (for artefacts shared by all runs)."""
    run: int
    config: RunConfig
    anchor_config: AnchorConfig | None
    embedder: Callable[[], Embedder]
    store: Callable[[ArtefactKind], ArtefactStore[Any]]
    """``store(kind)``: the run's store for one kind of artefact, shared by every run (the kinds a
    method uses are listed on its spec, ``MethodSpec.artefacts``)."""
    extras: dict[str, Any] = field(default_factory=dict)
    conditions: Callable[[Scenario], list[str]] = lambda scenario: []
    """The conditions of this run's instances that belong to ``scenario`` (for methods that train on
    a scenario's conditions before estimating any of them, like the BIRD-on-ANCHOR transplant)."""
    estimator: LLMClient | None = None
    """A second LLM for the probability estimates (``RunConfig.estimator``), seeded for the run;
    None = ``client`` answers everything."""

    # The --spaces rule for per-scenario artefacts (factor spaces, BIRD models), one place for every
    # method that builds them: per run, each run builds its own with seed + run under its own key;
    # shared, every run uses one artefact per scenario built with the base seed, whichever run asks
    # first, so it does not depend on scheduling.

    @property
    def artefacts_per_run(self) -> bool:
        return self.config.spaces == "per-run"

    @property
    def artefact_seed(self) -> int:
        return self.config.seed + self.run if self.artefacts_per_run else self.config.seed

    @property
    def artefact_client(self) -> LLMClient:
        """The client that builds artefacts (seeded with ``artefact_seed``)."""
        return self.client if self.artefacts_per_run else self.base_client

    def artefact_key(self, scenario: Scenario, settings: dict[str, Any] | None = None) -> str:
        """The name of the scenario's artefact. By scenario (``RunConfig.artefact_keys`` 'scenario'):
        its key, with the seed when built per run. By content ('content', a store shared by runs):
        its key and a digest of ``settings``, everything the artefact depends on (seed included)."""
        if self.config.artefact_keys == "content":
            if settings is None:
                raise ValueError("an artefact named by its content needs the settings that build it")
            return content_key(scenario, settings)
        base = scenario_key(scenario)
        return f"{base}-s{self.artefact_seed}" if self.artefacts_per_run else base


@runtime_checkable
class Method(Protocol):
    async def prepare(self, scenario: Scenario) -> Any:
        """Build or load what the method keeps per scenario; idempotent."""
        ...

    async def estimate(self, scenario: Scenario, condition: str, gold: int | None) -> Estimate:
        """P(O1 | scenario, condition), or why there is none. ``gold`` is only for oracle methods."""
        ...


@runtime_checkable
class PairJudge(Protocol):
    """A method that judges the two conditions of a pairwise instance together (no probabilities)."""

    async def compare(self, scenario: Scenario, outcome: str, condition1: str, condition2: str) -> int:
        """1 if condition 1 supports ``outcome`` more, 2 if condition 2 does, 3 if equally."""
        ...


@dataclass(frozen=True)
class CostShape:
    """What a method usually asks of the LLM: per scenario (its artefact's build) and per condition.

    A plan from the method's settings, not a measurement: answers that need asking again, stops that
    come early and fallbacks move the real figures (``anchor predict --check`` says by how much they
    may be off)."""

    group_requests: float = 0.0
    row_requests: float = 1.0
    basis: str = ""
    """How the figures follow from the settings, in a few words."""
    prompt_tokens: int = 60
    """A request's own words (instructions, listed factors) beyond the case's texts, in tokens."""
    answer_tokens: int = 20
    """An answer's tokens."""


@dataclass(frozen=True)
class MethodSpec:
    name: str
    factory: Callable[[MethodContext], Method | PairJudge]
    description: str
    title: str = ""
    """Its name in the report's tables, the paper's (``Vanilla``, ``BIRD (strict)``); the report adds
    the marks (a star for a direct method, a dagger for an oracle). Empty: the method's own name."""
    table_rank: int = 0
    """The report's rows follow the rank, then the order the methods are registered in: 0 for the
    baselines, 1 for ANCHOR, whose rows close every table as in the paper."""
    paper_tables: tuple[str, ...] = ()
    """The paper's method tables with a row for it (``1``: pairwise F1 on Common2Sense; ``2``: accuracy
    on the decision sets), which ``anchor reproduce`` runs it for. Tables 3 and 4 vary ANCHOR and BIRD on
    ANCHOR and are planned apart."""
    direct: bool = False
    """Chooses an outcome instead of estimating a probability (scored as 1 or 0; the paper's stars)."""
    oracle: bool = False
    """Sees the gold answer: never a fair comparison."""
    pairwise_only: bool = False
    """Only meaningful for pairwise data (it judges two conditions together)."""
    uses_anchor_config: bool = False
    trains_on_conditions: bool = False
    """Learns from every condition of a scenario before estimating any (``MethodContext.conditions``),
    so a run must know them all up front."""
    per_scenario_artefact: bool = False
    """Builds an artefact once per scenario (a factor space, a BIRD model), stored in the run
    directory and kept per run or shared according to ``--spaces``."""
    artefacts: Callable[[], tuple[ArtefactKind, ...]] = tuple
    """The kinds of artefact it keeps (its own and those it builds on), for whoever stores them; a
    function, so that listing the methods does not import what reads their artefacts."""
    fallback: str | None = None
    """A method (by name) that answers instead when this one abstains, on the data kinds listed in
    ``fallback_kinds`` (BIRD falls back to CoT on decision data, as the paper does)."""
    fallback_kinds: tuple[str, ...] = ()
    stages: tuple[str, ...] = ()
    """Variants of the method chosen with ``anchor eval --stage`` (one is required when not empty)."""
    method_config: Callable[[str], dict[str, Any]] | None = None
    """The method's own settings for a dataset, recorded in config.json (``RunConfig.method_config``)
    and read back by its factory from ``ctx.config.method_config``."""
    cost_shape: Callable[[AnchorConfig | None], CostShape] = lambda config: CostShape(basis="one request a condition")
    """Its usual number of requests per scenario and per condition, for estimates made before a run
    (``anchor predict --check``), from the run's ANCHOR settings (None for a method without them)."""
    extra: str | None = None
    """The optional extra (:data:`anchor.extras.EXTRAS`) the method needs to run: checked before a run
    sends its first request."""
