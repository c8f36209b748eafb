"""``BirdMethod``: BIRD in the shape the run engine drives (prepare a scenario once, then
estimate conditions).

    method = BirdMethod(client, BirdConfig(), relaxed=True, load=..., save=...)
    model = await method.prepare(scenario)            # built, or reused through ``load``
    estimate = await method.estimate(model, "The water is at a rolling boil.")
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

from pydantic import ValidationError

from anchor.bird.builder import build_bird_model
from anchor.bird.inference import marginal_probability
from anchor.bird.mapping import MappingSlot, RelaxedMappingFailed, map_condition
from anchor.bird.types import BirdConfig, BirdEstimate, BirdMappingTrace, BirdModel
from anchor.llm.client import LLMClient
from anchor.llm.ledger import summarize
from anchor.progress import Reporter, silent
from anchor.types import Condition, Scenario

LoadHook = Callable[[Scenario], BirdModel | None]
SaveHook = Callable[[BirdModel], None]


def model_slots(model: BirdModel) -> list[MappingSlot]:
    return [MappingSlot(key=f.name, name=f.name, values=tuple(f.value_texts())) for f in model.factors]


def reusable(model: BirdModel, scenario: Scenario, config: BirdConfig) -> bool:
    """A stored model fits when it is for this scenario and was built with the same settings
    (mapping settings may differ: they only act at estimation time)."""
    return model.scenario == scenario and model.config.build_settings() == config.build_settings()


class BirdMethod:
    """BIRD-dagger (``relaxed=False``: strict mapping, nothing mapped -> abstain) or
    BIRD-double-dagger (``relaxed=True``: the closest value when the strict pass maps nothing).

    ``load(scenario)`` may return a stored model (ignored unless ``reusable``); ``save(model)`` is
    called after each build. Models are also kept in memory, and concurrent ``prepare`` calls for
    one scenario build it once.
    """

    def __init__(self, client: LLMClient, config: BirdConfig | None = None, *, relaxed: bool = False,
                 load: LoadHook | None = None, save: SaveHook | None = None, report: Reporter = silent) -> None:
        self.client = client
        self.config = config or BirdConfig()
        self.relaxed = relaxed
        self._load = load
        self._save = save
        self.report = report
        self._models: dict[tuple[str, str, str], BirdModel] = {}
        self._locks: dict[tuple[str, str, str], asyncio.Lock] = {}

    @property
    def name(self) -> str:
        return "bird-relaxed" if self.relaxed else "bird"

    async def prepare(self, scenario: Scenario) -> BirdModel:
        k = (scenario.text, scenario.outcome1, scenario.outcome2)
        if k in self._models:
            return self._models[k]
        async with self._locks.setdefault(k, asyncio.Lock()):
            if k in self._models:
                return self._models[k]
            model = self._load(scenario) if self._load is not None else None
            if model is None or not reusable(model, scenario, self.config):
                model = await build_bird_model(self.client, scenario, self.config, self.report)
                if self._save is not None:
                    self._save(model)
            self._models[k] = model
            return model

    async def estimate(self, model: BirdModel, condition: str | Condition) -> BirdEstimate:
        if isinstance(condition, Condition):
            text = condition.text
        else:
            try:
                text = Condition(text=condition).text
            except ValidationError as exc:
                raise ValueError(f"condition: {exc.errors()[0]['msg'].removeprefix('Value error, ')}") from None
        with self.client.ledger.scope() as records:
            estimate = await self._estimate(model, text)
        estimate.cost = summarize(records)
        return estimate

    async def _estimate(self, model: BirdModel, condition: str) -> BirdEstimate:
        notes = list(model.warnings)
        if not model.factors:
            why = "; ".join(model.notes) or "BIRD found no usable factor for this scenario"
            # Factors that were found and then all pruned are the method's own answer (BIRD has no
            # variable to reason with: unknown, which the CoT fallback may answer); no factor in the
            # model's reply at all is a failed call, retried on resume.
            status = "abstained" if model.pruned else "failed"
            return BirdEstimate(condition=condition, status=status, reason=why, notes=notes)
        if not model.usable:
            why = next((n for n in model.notes if "could not be trained" in n), "the CPT was not trained")
            return BirdEstimate(condition=condition, status="failed", reason=why, notes=notes)
        try:
            trace = await map_condition(self.client, model.scenario, model_slots(model), condition, self.config,
                                        relaxed=self.relaxed)
        except RelaxedMappingFailed as exc:
            trace = getattr(exc, "trace", None)
            return BirdEstimate(condition=condition, status="failed", reason=str(exc), notes=notes, trace=trace)
        notes.extend(mapping_notes(trace))
        if not trace.mapped:
            return BirdEstimate(condition=condition, status="abstained", reason=unmapped_reason(trace), notes=notes,
                                trace=trace)
        marginal = marginal_probability(model, trace.mapped, seed=self.config.seed)
        notes.extend(marginal.notes)
        p = marginal.p_outcome1
        base = {"condition": condition, "n_values": len(trace.mapped), "n_assignments": marginal.n_assignments,
                "trace": trace}
        if not math.isfinite(p):
            return BirdEstimate(**base, status="failed", notes=notes,
                                reason="the trained model gives no finite probability here (unconstrained parameters)")
        if not 0.0 <= p <= 1.0:
            notes.append(f"model output {p:.4f} lies outside [0, 1] (unconstrained parameters); clipped")
            p = min(max(p, 0.0), 1.0)
        if p == 0.5:
            return BirdEstimate(**base, p_outcome1=0.5, status="abstained", notes=notes,
                                reason="the model gives exactly 0.5: no decision (BIRD's decision rule)")
        return BirdEstimate(**base, p_outcome1=p, status="ok", notes=notes)


def mapping_notes(trace: BirdMappingTrace) -> list[str]:
    notes = []
    if trace.invalid_answers:
        notes.append(f"{trace.invalid_answers} mapping answer(s) named no listed value and were discarded")
    if trace.failed_calls:
        notes.append(f"{trace.failed_calls} mapping call(s) gave no valid answer")
    if trace.reflection_invalid:
        notes.append(f"reflection named {trace.reflection_invalid} value(s) that were not mapped; discarded")
    if trace.conflicts:
        notes.append(f"factors voted to several values (dropped when tied): {', '.join(trace.conflicts)}")
    if trace.relaxed_used and trace.mapped:
        notes.append("strict mapping found nothing; the relaxed fallback chose the closest value")
    return notes


def unmapped_reason(trace: BirdMappingTrace) -> str:
    if trace.reflection_failed:
        return "the reflection call gave no valid answer, so nothing stays mapped (as in the reference code)"
    if trace.voted and trace.reflection_ran:
        extra = f"; {trace.reflection_invalid} reflection answer(s) named no mapped value" \
            if trace.reflection_invalid else ""
        return f"reflection removed every mapped value{extra}"
    if trace.invalid_answers:
        return (f"no value reached {trace.vote_threshold} of {len(trace.rounds)} votes "
                f"({trace.invalid_answers} answer(s) named no listed value)")
    return f"no value of any factor reached {trace.vote_threshold} of {len(trace.rounds)} votes"
