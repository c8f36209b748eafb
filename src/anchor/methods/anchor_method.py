"""ANCHOR in the run engine: a factor space per scenario (per run, or shared by the runs),
then mapping and inference for each condition.

The pipeline is imported when a run builds the method, not with this module: the registry imports
every family to list the methods (``anchor --help``, ``--method`` choices), and loading the
pipeline there would add about a tenth of a second to the start of every command.
"""

from __future__ import annotations

import math
from typing import Any

from anchor.config import AnchorConfig
from anchor.methods.contract import ArtefactKind, CostShape, Estimate, MethodContext, MethodSpec
from anchor.space.io import load_space, save_space, space_settings
from anchor.types import Scenario

#: ANCHOR's factor spaces, one file a scenario (``DIR/spaces/<key>.json``).
SPACES = ArtefactKind("spaces", load_space, save_space)


class AnchorMethod:
    """ANCHOR: a factor space per scenario (per run, or shared by the runs), then mapping and inference."""

    def __init__(self, ctx: MethodContext) -> None:
        from anchor.compute import offload  # start-up time, see the module docstring
        from anchor.pipeline import Anchor

        config = ctx.anchor_config or AnchorConfig()
        # Start loading MiniLM (in its helper process) now, not when the first condition or space
        # needs it; a space build also starts UMAP's compilation, which loaded spaces never need.
        offload.warm_up(ctx.embedder())
        self.seed = ctx.artefact_seed
        self.engine = Anchor(client=ctx.client, embedder=ctx.embedder(), config=config, estimator=ctx.estimator)
        # RunConfig.max_factors: each space is used as it stood after its first N factors (a view
        # made once per space; the stored space stays whole).
        self.max_factors = ctx.config.max_factors
        self._views: dict[str, tuple[Any, Any]] = {}
        self.builder = Anchor(client=ctx.artefact_client, embedder=ctx.embedder(),
                              config=config.model_copy(update={"build": config.build.model_copy(
                                  update={"seed": self.seed})}))
        self.spaces = ctx.store(SPACES)
        settings = space_settings(self.builder.config.build, ctx.artefact_client.backend.model, ctx.config.embedder)
        self.key = lambda scenario: ctx.artefact_key(scenario, settings)

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
            factors=[f.text for f in result.factors],
            trace=result.model_dump(mode="json"),
            artefact=self.key(scenario),
            truncated=result.mapping.condition_truncated if result.mapping is not None else None,
        )


def anchor_cost_shape(config: Any) -> CostShape:
    """ANCHOR's usual requests. A space: three a round (sentences, factors, their check) for every
    round, one label vote per batch of factors, and about one theme per six factors plus the pruning.
    A condition: the R selections, the reflection, phi and the latent parameters."""
    config = config or AnchorConfig()
    b, m = config.build, config.mapping
    build = 3 * b.max_rounds + math.ceil(b.n_target / b.vote_batch_size) + math.ceil(b.n_target / 6) + 1
    row = m.rounds + int(m.reflection) + 2
    return CostShape(float(build), float(row), f"{b.max_rounds} rounds of 3, votes, themes; R={m.rounds} "
                     f"selections{' + reflection' if m.reflection else ''} + phi + latent parameters",
                     prompt_tokens=200, answer_tokens=60)


SPECS = (
    MethodSpec("anchor", AnchorMethod, "ANCHOR (factor space, mapping, NB + latent CBN)", title="ANCHOR",
               table_rank=1, paper_tables=("1", "2"), uses_anchor_config=True, per_scenario_artefact=True,
               cost_shape=anchor_cost_shape, artefacts=lambda: (SPACES,)),
)
