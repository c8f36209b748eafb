"""The methods the evaluation runner can drive, all in one shape.

A method is built once per run (``MethodSpec.factory(context)``) and then asked, for each instance,
to ``prepare`` the instance's scenario (build or load what it keeps per scenario: ANCHOR's factor
space, BIRD's trained model; nothing for a direct baseline) and to ``estimate`` P(O1) for each
condition. The runner never looks at a method's name: what it needs to know (does the method judge
two conditions together, does it choose rather than estimate, does it see the gold answer) is in
its ``MethodSpec``. A new method registers a spec in ``METHODS``.

Per-scenario artefacts live in the run directory and are shared through an ``ArtefactStore``: built
once (one build per key at a time), saved atomically, loaded back on resume, never saved when the
build failed (so a rerun tries again).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from anchor.llm import chain
from anchor.llm.errors import AnchorError, LLMOutputError, RequestRejected, RetryBudgetExhausted
from anchor.llm.ledger import detached_context
from anchor.secrets import scrub
from anchor.types import Scenario, TextTruncation

if TYPE_CHECKING:
    from anchor.embed import Embedder
    from anchor.evaluation.results import RunConfig
    from anchor.llm.client import LLMClient
    from anchor.pipeline import AnchorConfig

Status = Literal["ok", "abstained", "failed"]

#: Errors that fail one instance (it is recorded as failed and retried on resume) rather than the run.
INSTANCE_FAILURES: tuple[type[BaseException], ...] = (LLMOutputError, RetryBudgetExhausted, RequestRejected)


class Estimate(BaseModel):
    """A method's answer for one condition."""

    p_outcome1: float | None = None
    status: Status = "ok"
    """ok: a probability; abstained: the method said "unknown" (a real answer); failed: the run could
    not get an answer (the model kept answering off-schema, the server was unreachable, ...)."""
    reason: str | None = None
    n_factors: int | None = None
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


class ArtefactFailed(AnchorError):
    """A per-scenario artefact could not be built; every instance of the scenario fails with this."""


class ReuseMismatch(AnchorError):
    """An artefact offered for reuse was made with other settings: the whole run stops."""


M = TypeVar("M", bound=BaseModel)


class ArtefactStore(Generic[M]):
    """Per-scenario artefacts in ``folder`` (``<key>.json``), built once and shared.

    ``reuse_from`` is another folder to look in before building (artefacts of an earlier run
    directory); what was taken from there is listed in ``reused`` so its cost is not claimed as
    this run's. Builds run in a detached context: their LLM calls are charged to the artefact, not
    to whichever prediction happened to need it first. A build continues the chain of dependent
    requests (``llm.chain``) of the caller that started it (what it waited for before, such as the
    factor space a transplant is trained on), and every caller continues from the build's chain.

    ``uses(item)`` names the artefacts of other stores an artefact was built on (``{kind: key}``,
    e.g. the factor space under a BIRD-on-ANCHOR model), so that the cost of a reused one is found
    through the artefact a prediction names.
    """

    def __init__(self, folder: Path, *, load: Callable[[Path], M], save: Callable[[M, Path], Any],
                 reuse_from: Path | None = None, uses: Callable[[M], dict[str, str]] | None = None) -> None:
        self.folder = folder
        self._load = load
        self._save = save
        self.reuse_from = reuse_from
        self.uses = uses
        self._memory: dict[str, M] = {}
        self._errors: dict[str, str] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.reused: dict[str, Path] = {}
        self.built: list[str] = []
        self._chains: dict[str, chain.Chain] = {}

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def load_file(self, path: Path) -> M:
        """Read one artefact file (errors propagate)."""
        return self._load(path)

    def _try_load(self, path: Path) -> M | None:
        if not path.exists():
            return None
        try:
            return self._load(path)
        except (AnchorError, ValueError, OSError):
            return None  # damaged: rebuilt (its LLM answers come from the cache)

    async def get(self, key: str, build: Callable[[], Awaitable[M]],
                  mismatch: Callable[[M], str | None] | None = None) -> M:
        """The artefact ``key``: from memory, this run's folder, the reuse folder, or built now.

        ``mismatch(item)`` says why a reused artefact does not fit this run (None when it does).
        """
        item = await self._get(key, build, mismatch)
        chain.merge(self._chains.get(key, chain.Chain()))
        return item

    async def _get(self, key: str, build: Callable[[], Awaitable[M]],
                   mismatch: Callable[[M], str | None] | None) -> M:
        if key in self._memory:
            return self._memory[key]
        if key in self._errors:
            raise ArtefactFailed(self._errors[key])
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key in self._memory:
                return self._memory[key]
            if key in self._errors:
                raise ArtefactFailed(self._errors[key])
            item = self._try_load(self.path(key))
            if item is None and self.reuse_from is not None:
                other = self.reuse_from / f"{key}.json"
                item = self._try_load(other)
                if item is not None:
                    problem = mismatch(item) if mismatch is not None else None
                    if problem:
                        raise ReuseMismatch(f"{other}: cannot reuse it here: {problem}")
                    self.reused[key] = other
            if item is None:
                task = asyncio.get_running_loop().create_task(chain.traced(build()), context=detached_context())
                try:
                    item, self._chains[key] = await task
                except INSTANCE_FAILURES as exc:
                    self._errors[key] = f"could not build the per-scenario artefact: {scrub(str(exc))}"
                    raise ArtefactFailed(self._errors[key]) from exc
                self._save(item, self.path(key))
                self.built.append(key)
            self._memory[key] = item
            return item


def reused_artefacts(stores: dict[str, ArtefactStore[Any]], keys: Iterable[str]) -> list[tuple[str, Any]]:
    """(key, artefact) of each artefact named in ``keys``, or built on one of them (``ArtefactStore.uses``),
    that a store took from its reuse folder: found there and not in its own folder (the artefact is
    None when that file cannot be read)."""
    wanted = [(kind, key) for kind in stores for key in sorted(set(keys))]
    seen: set[tuple[str, str]] = set()
    found: list[tuple[str, Any]] = []
    while wanted:
        kind, key = wanted.pop(0)
        store = stores.get(kind)
        if store is None or store.reuse_from is None or (kind, key) in seen:
            continue
        seen.add((kind, key))
        own, other = store.path(key), store.reuse_from / f"{key}.json"
        reused = not own.exists() and other.exists()
        if not reused and not (store.uses is not None and own.exists()):
            continue
        try:
            item = store.load_file(other if reused else own)
        except (AnchorError, ValueError, OSError):
            item = None
        if reused:
            found.append((key, item))
        if item is None:
            continue
        if store.uses is not None:
            wanted.extend(store.uses(item).items())
    return found


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
    store: Callable[..., ArtefactStore[Any]]
    """``store(kind, load, save, uses=None)``: the run directory's store for one kind of artefact
    ("spaces", ...), shared by every run; ``load``/``save`` read and write one artefact file, ``uses``
    is the store's ``ArtefactStore.uses``."""
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

    def artefact_key(self, scenario: Scenario) -> str:
        from anchor.evaluation.datasets import scenario_key

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
class MethodSpec:
    name: str
    factory: Callable[[MethodContext], Method | PairJudge]
    description: str
    direct: bool = False
    """Chooses an outcome instead of estimating a probability (scored as 1 or 0; the paper's stars)."""
    oracle: bool = False
    """Sees the gold answer: never a fair comparison."""
    pairwise_only: bool = False
    """Only meaningful for pairwise data (it judges two conditions together)."""
    uses_anchor_config: bool = False
    per_scenario_artefact: bool = False
    """Builds an artefact once per scenario (a factor space, a BIRD model), stored in the run
    directory and kept per run or shared according to ``--spaces``."""
    fallback: str | None = None
    """A method (by name) that answers instead when this one abstains, on the data kinds listed in
    ``fallback_kinds`` (BIRD falls back to CoT on decision data, as the paper does)."""
    fallback_kinds: tuple[str, ...] = ()
    stages: tuple[str, ...] = ()
    """Variants of the method chosen with ``anchor eval --stage`` (one is required when not empty)."""
    method_config: Callable[[str], dict[str, Any]] | None = None
    """The method's own settings for a dataset, recorded in config.json (``RunConfig.method_config``)
    and read back by its factory from ``ctx.config.method_config``."""


def build_method(spec: MethodSpec, ctx: MethodContext) -> Method | PairJudge:
    """The method of ``spec`` for one run, wrapped in its fallback where the spec asks for one."""
    method = spec.factory(ctx)
    if spec.fallback and ctx.config.kind in spec.fallback_kinds and isinstance(method, Method):
        backup = METHODS[spec.fallback].factory(ctx)
        if isinstance(backup, Method):
            return FallbackMethod(method, backup, spec.fallback)
    return method


class FallbackMethod:
    """``primary``, except that where it abstains ``backup`` answers; the estimate keeps the primary's
    trace and reason and names the method that answered (``Estimate.fallback``). The backup's LLM calls
    are made inside the instance like any other, so its cost is counted once, under its own stages."""

    def __init__(self, primary: Method, backup: Method, name: str) -> None:
        self.primary = primary
        self.backup = backup
        self.name = name

    async def prepare(self, scenario: Scenario) -> Any:
        return await self.primary.prepare(scenario)

    async def estimate(self, scenario: Scenario, condition: str, gold: int | None) -> Estimate:
        first = await self.primary.estimate(scenario, condition, gold)
        if first.status != "abstained":
            return first
        second = await self.backup.estimate(scenario, condition, gold)
        why = first.reason or "unknown"
        if second.status != "ok":
            reason = f"{why}; the fallback {self.name} gave no answer either: {second.reason or second.status}"
            return first.model_copy(update={"reason": reason, "fallback": self.name,
                                            "status": "failed" if second.status == "failed" else "abstained"})
        return first.model_copy(update={"p_outcome1": second.p_outcome1, "status": "ok", "fallback": self.name,
                                        "reason": f"{why}; answered by the fallback {self.name}"})


# --------------------------------------------------------------------------- ANCHOR


class AnchorMethod:
    """ANCHOR: a factor space per scenario (per run, or shared by the runs), then mapping and inference."""

    def __init__(self, ctx: MethodContext) -> None:
        from anchor import offload
        from anchor.pipeline import Anchor, AnchorConfig
        from anchor.space.io import load_space, save_space

        config = ctx.anchor_config or AnchorConfig()
        # Start loading MiniLM (in its helper process) now, not when the first condition or space
        # needs it; a space build also starts UMAP's compilation, which loaded spaces never need.
        offload.warm_up(ctx.embedder())
        self.seed = ctx.artefact_seed
        self.key = ctx.artefact_key
        self.engine = Anchor(client=ctx.client, embedder=ctx.embedder(), config=config, estimator=ctx.estimator)
        # RunConfig.max_factors: each space is used as it stood after its first N factors (a view
        # made once per space; the stored space stays whole).
        self.max_factors = ctx.config.max_factors
        self._views: dict[str, tuple[Any, Any]] = {}
        self.builder = Anchor(client=ctx.artefact_client, embedder=ctx.embedder(),
                              config=config.model_copy(update={"build": config.build.model_copy(
                                  update={"seed": self.seed})}))
        self.spaces = ctx.store("spaces", load_space, save_space)

    async def prepare(self, scenario: Scenario) -> Any:
        key = self.key(scenario)

        async def build() -> Any:
            with self.builder.client.ledger.scope(f"space:{key}"):
                return await self.builder.abuild(scenario)

        return self._view(key, await self.spaces.get(key, build, self._mismatch))

    def _view(self, key: str, space: Any) -> Any:
        if self.max_factors is None:
            return space
        from anchor.space.truncate import truncate_space

        view = self._views.get(key)
        if view is None or view[0] is not space:
            view = self._views[key] = (space, truncate_space(space, self.max_factors))
        return view[1]

    def _mismatch(self, space: Any) -> str | None:
        wanted = self.builder.config.build
        if space.params != wanted:
            diff = sorted(k for k, v in wanted.model_dump().items() if space.params.model_dump().get(k) != v)
            return f"it was built with other stage-1 settings ({', '.join(diff)})"
        if space.llm.model != self.builder.client.backend.model:
            return f"it was built by {space.llm.model!r}, this run uses {self.builder.client.backend.model!r}"
        return None

    async def estimate(self, scenario: Scenario, condition: str, gold: int | None) -> Estimate:
        space = await self.prepare(scenario)
        result = await self.engine.ainfer_one(space, condition)
        return Estimate(
            p_outcome1=None if result.unknown else result.p_outcome1,
            status="abstained" if result.unknown else "ok",
            reason=result.unknown_reason,
            n_factors=len(result.factors),
            trace=result.model_dump(mode="json"),
            artefact=self.key(scenario),
            truncated=result.mapping.condition_truncated if result.mapping is not None else None,
        )


# --------------------------------------------------------------------------- direct baselines


class BaselineMethod:
    """A direct-LLM baseline: nothing per scenario, one estimate per condition."""

    def __init__(self, ctx: MethodContext, estimator: Callable[..., Awaitable[Any]]) -> None:
        self.client = ctx.client
        self.estimator = estimator

    async def prepare(self, scenario: Scenario) -> None:
        return None

    async def estimate(self, scenario: Scenario, condition: str, gold: int | None) -> Estimate:
        result = await self.estimator(self.client, scenario, condition, gold)
        if result.p_outcome1 is None:
            return Estimate(status="abstained", reason=result.note, truncated=result.truncated)
        return Estimate(p_outcome1=result.p_outcome1, reason=result.note, truncated=result.truncated)


class CompareMethod:
    """The Compare baseline: which of two conditions supports the gold outcome more."""

    def __init__(self, ctx: MethodContext) -> None:
        self.client = ctx.client

    async def compare(self, scenario: Scenario, outcome: str, condition1: str, condition2: str) -> int:
        from anchor.evaluation.methods import baselines

        return await baselines.compare(self.client, scenario, outcome, condition1, condition2)


def _baseline(name: str) -> Callable[[MethodContext], Method]:
    def factory(ctx: MethodContext) -> Method:
        from anchor.evaluation.methods import baselines

        return BaselineMethod(ctx, baselines.ESTIMATORS[name])

    return factory


def _bird(variant: str) -> Callable[[MethodContext], Method]:
    def factory(ctx: MethodContext) -> Method:
        from anchor.evaluation.methods import bird as bird_methods

        return bird_methods.make(variant, ctx)

    return factory


def _bird_config(dataset: str) -> dict[str, Any]:
    from anchor.evaluation.methods.bird import bird_config_for

    return bird_config_for(dataset).model_dump(mode="json")


METHODS: dict[str, MethodSpec] = {spec.name: spec for spec in (
    MethodSpec("anchor", AnchorMethod, "ANCHOR (factor space, mapping, NB + latent CBN)", uses_anchor_config=True,
               per_scenario_artefact=True),
    MethodSpec("vanilla", _baseline("vanilla"), "the LLM states P(O1) directly"),
    MethodSpec("vanilla-direct", _baseline("vanilla-direct"), "the LLM chooses O1 or O2", direct=True),
    MethodSpec("cot", _baseline("cot"), "reasons step by step, then states P(O1)"),
    MethodSpec("cot-direct", _baseline("cot-direct"), "reasons step by step, then chooses", direct=True),
    MethodSpec("logits", _baseline("logits"), "P(O1) from the answer token's log-probabilities"),
    MethodSpec("compare", CompareMethod, "judges the two conditions of a pair together", pairwise_only=True),
    MethodSpec("factor-based", _baseline("factor-based"), "averages P(O1) over factors written knowing the gold "
               "outcome (an oracle)", oracle=True),
    MethodSpec("bird", _bird("strict"), "BIRD, strict mapping (the paper's BIRD-dagger): nothing mapped -> unknown; "
               "CoT answers instead on decision data", fallback="cot", fallback_kinds=("decision", "factcheck"),
               method_config=_bird_config, per_scenario_artefact=True),
    MethodSpec("bird-relaxed", _bird("relaxed"), "BIRD with the relaxed mapping (BIRD-double-dagger): the closest "
               "value when nothing maps", fallback="cot", fallback_kinds=("decision", "factcheck"),
               method_config=_bird_config, per_scenario_artefact=True),
    MethodSpec("bird-on-anchor", _bird("on-anchor"), "BIRD-double-dagger's CPT on ANCHOR's factor space (the "
               "paper's Table 4; --stage factors|mapping|pool)", uses_anchor_config=True,
               stages=("factors", "mapping", "pool"), method_config=_bird_config, per_scenario_artefact=True),
)}

DIRECT_METHODS = tuple(name for name, spec in METHODS.items() if spec.direct)
ORACLE_METHODS = tuple(name for name, spec in METHODS.items() if spec.oracle)
PAIRWISE_ONLY_METHODS = tuple(name for name, spec in METHODS.items() if spec.pairwise_only)
STAGED_METHODS = tuple(name for name, spec in METHODS.items() if spec.stages)
