"""BIRD in the run engine, ``bird`` (strict mapping) and ``bird-relaxed``: ``BirdEvalMethod``.

Each is a :class:`~anchor.methods.contract.Method` built by its ``MethodSpec`` (see
:mod:`anchor.methods.bird`): one ``BirdModel`` per scenario (abduction, labels, 128
judged assignments, the CPT fit), kept in the run directory's ``bird/`` store and shared by both
variants (they differ only in how a condition is mapped), then one mapping per condition. Where
BIRD says "unknown" on decision data, CoT answers instead, as the paper does (the spec's fallback).
BIRD's CPT on ANCHOR's factor space is :mod:`anchor.methods.bird_on_anchor`.

The BIRD settings of a run come from :func:`bird_config_for` (per dataset), are recorded in
config.json as ``method_config`` and read back from there, so a resumed run uses the same ones.
"""

from __future__ import annotations

from anchor.bird.builder import build_bird_model
from anchor.bird.io import load_model, save_model
from anchor.bird.method import BirdMethod, reusable
from anchor.bird.types import BirdConfig, BirdModel
from anchor.methods.contract import ArtefactKind, Estimate, MethodContext
from anchor.types import Scenario

#: The stages that count as "mapping" in the transplant table (BIRD's and ANCHOR's mapping calls).
MAPPING_STAGES = ("bird.mapping", "bird.reflect", "bird.mapping.relaxed", "mapping.select", "mapping.reflect")


#: BIRD's trained models, one file a scenario (``DIR/bird/<key>.json``), shared by both mappings.
BIRD_MODELS = ArtefactKind("bird", load_model, save_model)


def bird_config_for(dataset: str) -> BirdConfig:
    """The BIRD settings for a bundled dataset: the reference code's defaults, plus, for Common2Sense
    (pairwise or not), the value-completion turn that adds the opposite of every value (the reference
    code does this for datasets named common2sense only)."""
    if dataset.startswith("common2sense"):
        return BirdConfig(value_completion="opposites")
    return BirdConfig()


def run_bird_config(ctx: MethodContext) -> BirdConfig:
    """The run's BirdConfig, seeded like the run's artefacts (``MethodContext.artefact_seed``)."""
    base = (BirdConfig.model_validate(ctx.config.method_config) if ctx.config.method_config
            else bird_config_for(ctx.config.dataset))
    return base.model_copy(update={"seed": ctx.artefact_seed})


class BirdEvalMethod:
    """BIRD with strict (``relaxed=False``) or relaxed mapping, one stored model per scenario."""

    def __init__(self, ctx: MethodContext, *, relaxed: bool) -> None:
        self.config = run_bird_config(ctx)
        self.relaxed = relaxed
        self.build_client = ctx.artefact_client
        settings = {"bird": self.config.model_dump(mode="json"), "model": ctx.artefact_client.backend.model}
        self.key = lambda scenario: ctx.artefact_key(scenario, settings)
        self.estimator = BirdMethod(ctx.client, self.config, relaxed=relaxed)
        self.models = ctx.store(BIRD_MODELS)

    async def prepare(self, scenario: Scenario) -> BirdModel:
        key = self.key(scenario)

        async def build() -> BirdModel:
            with self.build_client.ledger.scope(f"bird:{key}"):
                return await build_bird_model(self.build_client, scenario, self.config)

        def mismatch(model: BirdModel) -> str | None:
            if not reusable(model, scenario, self.config):
                return "it was built for another scenario or with other BIRD settings"
            if model.llm.model != self.build_client.backend.model:
                return f"it was built by {model.llm.model!r}, this run uses {self.build_client.backend.model!r}"
            return None

        model: BirdModel = await self.models.get(key, build, mismatch)
        return model

    async def estimate(self, scenario: Scenario, condition: str, gold: int | None) -> Estimate:
        model = await self.prepare(scenario)
        est = await self.estimator.estimate(model, condition)
        mapped = [f"{m.factor} = {m.value}" for m in est.trace.mapped] if est.trace is not None else None
        return Estimate(p_outcome1=est.p_outcome1, status=est.status, reason=est.reason, n_factors=est.n_values,
                        factors=mapped, trace=est.model_dump(mode="json"), artefact=self.key(scenario))

