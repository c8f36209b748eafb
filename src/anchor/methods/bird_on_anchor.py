"""``bird-on-anchor`` in the run engine: BIRD-double-dagger's CPT on ANCHOR's factor space
(the paper's Table 4), at one ``--stage``.

``factors``: BIRD's mapping (relaxed) over ANCHOR's factor space, BIRD's CPT trained on it by the
structured Monte-Carlo scheme; ``mapping``: the same CPT with ANCHOR's mapping supplying the mapped
factors; ``pool``: that CPT's probability pooled with ANCHOR's Naive Bayes and CBN posteriors. The
factor space comes from ANCHOR's own ``spaces/`` store (so ``--spaces-from`` an ANCHOR run reuses
it); the trained CPT and the mapping of every condition of the scenario live in
``bird-on-anchor/``. Training needs the mapped base set of each condition first, so ``prepare``
maps all the run's conditions of the scenario (``MethodContext.conditions``) before training. The
BIRD settings are those of :mod:`anchor.methods.bird_eval`; the method's spec is in
:mod:`anchor.methods.bird`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from anchor.bird.io import BirdModelFileError
from anchor.bird.transplant import (
    DEFAULT_MAX_LENGTH,
    map_condition_on_space,
    pool_with_anchor,
    train_on_space,
    transplant_probability,
)
from anchor.bird.types import BIRD_MODEL_SCHEMA_VERSION, BirdMappingTrace, TransplantModel
from anchor.errors import AnchorError
from anchor.files import write_atomic
from anchor.llm import chain
from anchor.llm.client import LLMClient
from anchor.llm.ledger import summarize
from anchor.methods.anchor_method import SPACES, AnchorMethod
from anchor.methods.bird_eval import run_bird_config
from anchor.methods.contract import ArtefactKind, Estimate, MethodContext
from anchor.types import FactorSpace, InferenceResult, MappingTrace, Scenario, StageCost


class MappedCondition(BaseModel):
    """One condition of the scenario and the ANCHOR factors it was mapped to."""

    model_config = ConfigDict(extra="forbid")

    condition: str
    factor_ids: list[str] = Field(default_factory=list)
    bird_trace: BirdMappingTrace | None = Field(default=None, description="Stage 'factors': BIRD's mapping.")
    anchor_trace: MappingTrace | None = Field(default=None, description="Stages 'mapping' and 'pool': ANCHOR's.")


class TransplantArtefact(BaseModel):
    """What ``bird-on-anchor`` keeps per scenario: the mapping of each of the run's conditions and the
    CPT trained on their base sets (``DIR/bird-on-anchor/<key>.json``)."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    schema_version: int = BIRD_MODEL_SCHEMA_VERSION
    mapping: Literal["bird", "anchor"]
    space: str = Field(description="Key of the ANCHOR factor space it was trained on.")
    conditions: list[MappedCondition]
    model: TransplantModel
    cost: list[StageCost] = Field(default_factory=list, description="Mapping the conditions and the CPT data.")

    def mapped(self, condition: str) -> MappedCondition | None:
        return next((c for c in self.conditions if c.condition == condition), None)


def save_transplant(item: TransplantArtefact, path: Path) -> Path:
    return write_atomic(path, item.model_dump_json(indent=2))


def load_transplant(path: Path) -> TransplantArtefact:
    try:
        return TransplantArtefact.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        raise BirdModelFileError(f"{path}: not a usable bird-on-anchor artefact ({str(exc).splitlines()[0]})") from exc


#: BIRD's CPT trained on an ANCHOR space with the scenario's conditions mapped (``DIR/bird-on-anchor/``),
#: built on the space it names.
TRANSPLANTS = ArtefactKind("bird-on-anchor", load_transplant, save_transplant,
                           uses=lambda item: {SPACES.name: item.space})


class BirdOnAnchorMethod:
    """BIRD-double-dagger's CPT on ANCHOR's factor space, at one ``--stage`` of the paper's Table 4."""

    def __init__(self, ctx: MethodContext) -> None:
        stage = ctx.config.stage
        if stage not in ("factors", "mapping", "pool"):
            raise AnchorError(f"--method bird-on-anchor needs --stage factors, mapping or pool (got {stage!r})")
        self.stage = stage
        self.anchor = AnchorMethod(ctx)  # the factor-space store, keys and reuse checks are ANCHOR's
        self.config = run_bird_config(ctx)
        self.client = ctx.client
        # The stored artefact (the mapping of the scenario's conditions and the CPT) is built like the
        # factor space under it: by the artefact client, so that under --spaces shared it does not
        # depend on which run happens to build it first.
        self.build_client = ctx.artefact_client
        self.embedder = ctx.embedder
        self.anchor_config = self.anchor.engine.config
        self.conditions = ctx.conditions
        self.mapping_kind: Literal["bird", "anchor"] = "bird" if stage == "factors" else "anchor"
        self.store = ctx.store(TRANSPLANTS)
        self.max_length = DEFAULT_MAX_LENGTH
        self._stages: dict[tuple[int, int], tuple[FactorSpace, LLMClient, Any, Any]] = {}

    def key(self, scenario: Scenario) -> str:
        digest = hashlib.sha256(json.dumps(sorted(self.conditions(scenario))).encode()).hexdigest()[:10]
        return f"{self.anchor.key(scenario)}-{self.mapping_kind}-map-{digest}"

    def _anchor_stages(self, space: FactorSpace, client: LLMClient) -> tuple[Any, Any]:
        """ANCHOR's mapper and inference engine over ``space``, asking ``client``."""
        from anchor.inference.engine import InferenceEngine  # start-up time, as in anchor_method
        from anchor.mapping.mapper import ConditionMapper

        entry = self._stages.get((id(space), id(client)))
        if entry is None or entry[0] is not space or entry[1] is not client:
            entry = (space, client, ConditionMapper(client, self.embedder(), space, self.anchor_config.mapping),
                     InferenceEngine(client, space, self.anchor_config.inference))
            self._stages[(id(space), id(client))] = entry
        return entry[2], entry[3]

    async def _map(self, space: FactorSpace, condition: str, client: LLMClient) -> MappedCondition:
        if self.mapping_kind == "bird":
            ids, trace = await map_condition_on_space(client, space, condition, self.config, relaxed=True)
            return MappedCondition(condition=condition, factor_ids=ids, bird_trace=trace)
        mapper, _ = self._anchor_stages(space, client)
        anchor_trace: MappingTrace = await mapper.map(condition)
        return MappedCondition(condition=condition, factor_ids=list(anchor_trace.mapped), anchor_trace=anchor_trace)

    async def prepare(self, scenario: Scenario) -> tuple[FactorSpace, TransplantArtefact]:
        space: FactorSpace = await self.anchor.prepare(scenario)
        key = self.key(scenario)
        conditions = self.conditions(scenario)

        async def build() -> TransplantArtefact:
            client = self.build_client
            with client.ledger.scope(f"bird-on-anchor:{key}") as records:
                mapped = list(await chain.gather(*(self._map(space, c, client) for c in conditions)))
                model = await train_on_space(client, space, [m.factor_ids for m in mapped], self.config,
                                             max_length=self.max_length)
            return TransplantArtefact(mapping=self.mapping_kind, space=self.anchor.key(scenario),
                                      conditions=mapped, model=model, cost=summarize(records))

        def mismatch(item: TransplantArtefact) -> str | None:
            if item.model.config.build_settings() != self.config.build_settings():
                return "it was trained with other BIRD settings"
            if item.model.scenario != space.scenario:
                return "it was trained for another scenario"
            if item.model.llm.model != self.build_client.backend.model:
                return (f"it was trained by {item.model.llm.model!r}, this run uses "
                        f"{self.build_client.backend.model!r}")
            return None

        artefact: TransplantArtefact = await self.store.get(key, build, mismatch)
        return space, artefact

    async def estimate(self, scenario: Scenario, condition: str, gold: int | None) -> Estimate:
        space, artefact = await self.prepare(scenario)
        mapped = artefact.mapped(condition)
        if mapped is None:  # a condition the CPT was not trained with: map it now (its base set is not in training)
            mapped = await self._map(space, condition, self.client)
        model = artefact.model
        if not model.usable:
            why = "; ".join(model.notes) or "the transplanted CPT is not trained"
            return Estimate(status="failed", reason=why, artefact=self.key(scenario))
        est = transplant_probability(model, mapped.factor_ids)
        trace: dict[str, Any] = {"stage": self.stage, "mapping": mapped.model_dump(mode="json"),
                                 "p_cpt": est.p_outcome1, "n_assignments": est.n_assignments, "notes": est.notes}
        base = {"n_factors": est.n_factors, "artefact": self.key(scenario)}
        if est.p_outcome1 is None:
            return Estimate(status="abstained", reason="no factor of the space was mapped to the condition",
                            trace=trace, **base)
        p = est.p_outcome1
        if self.stage == "pool":
            assert mapped.anchor_trace is not None
            _, engine = self._anchor_stages(space, self.client)
            result = InferenceResult(condition=condition, p_outcome1=None, p_outcome2=None, unknown=False,
                                     mapping=mapped.anchor_trace)
            result = await engine.infer(mapped.anchor_trace, result)
            p = pool_with_anchor(p, {"nb": result.nb, "cbn": result.cbn})
            trace.update({"nb": result.nb, "cbn": result.cbn, "pooled": p})
        if p == 0.5:
            return Estimate(p_outcome1=0.5, status="abstained", trace=trace, **base,
                            reason="the model gives exactly 0.5: no decision (BIRD's decision rule)")
        return Estimate(p_outcome1=p, trace=trace, **base)

