"""Stage 3: from mapped factors to a posterior, with the audit trail.

Naive Bayes and the latent-augmented causal Bayesian network are both computed exactly (the
network by the closed form of its evidence likelihood), then pooled linearly (LOP) or by the
paper's approximate Bayesian model averaging (BMA). The config's ``rule`` says how the elicited
numbers are read: as the paper does (:mod:`anchor.inference.bayes`), or consistently, with the
scenario's base rate counted once and the latent links solved from phi
(:mod:`anchor.inference.consistent`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import TypeVar

from anchor.inference.bayes import (
    bayesian_model_average,
    cbn_posterior,
    clip_probability,
    label_prior_phi,
    linear_opinion_pool,
    naive_bayes_posterior,
)
from anchor.inference.consistent import (
    clip_evidence,
    consistent_cbn_posterior,
    consistent_naive_bayes,
    lean_as_posterior,
    pooled_base_rate,
)
from anchor.inference.elicit import (
    LatentGrouping,
    build_latents,
    discover_latents,
    elicit_base_rate,
    elicit_latent_params,
    elicit_phis,
    elicit_phis_given_base_rate,
    frequency_latent_params,
    stated,
)
from anchor.llm import chain
from anchor.llm.client import LLMClient
from anchor.settings.inference import InferenceConfig
from anchor.types import (
    AggregationMethod,
    BaseRate,
    FactorEvidence,
    FactorSpace,
    InferenceResult,
    MappingTrace,
)


class InferenceEngine:
    """Stage 3 for one space. ``estimator``, when given, is the model that elicits phi and the latent
    parameters (the probability estimator); ``client`` still groups the factors into latents."""

    def __init__(self, client: LLMClient, space: FactorSpace, config: InferenceConfig | None = None, *,
                 estimator: LLMClient | None = None) -> None:
        self.client = client
        self.estimator = estimator if estimator is not None else client
        self.space = space
        self.config = config or InferenceConfig()
        self._factors = space.by_id()

    async def base_rate(self) -> BaseRate:
        """The scenario's base rate for the consistent rule: the config's when given, else the one stored
        with the space by this estimator's model, else elicited (one request a scenario: the response
        cache answers the repeats)."""
        c = self.config
        if c.base_rate is not None:
            return BaseRate(p_outcome1=_used(c.base_rate, c.eps), p_raw=c.base_rate, source="given")
        stored = self.space.base_rate
        if stored is not None and stored.source == "elicited":
            await self.estimator.ensure_ready()  # the server's model, when none is configured
            if stored.model == self.estimator.backend.model and len(stored.samples) == c.base_rate_samples:
                return stored.model_copy(update={"p_outcome1": _used(stored.p_raw, c.eps)})
        samples = await elicit_base_rate(self.estimator, self.space.scenario, samples=c.base_rate_samples,
                                         temperature=c.temperature)
        raw = pooled_base_rate(samples, c.eps)
        return BaseRate(p_outcome1=_used(raw, c.eps), p_raw=raw, source="elicited", model=self.estimator.backend.model,
                        samples=samples)

    async def infer(self, trace: MappingTrace, result: InferenceResult) -> InferenceResult:
        """Fill ``result`` (already holding the condition and its mapping) with the posterior."""
        c = self.config
        mapped = [self._factors[fid] for fid in trace.mapped]
        result.rule = c.rule
        if not mapped:
            result.unknown, result.unknown_reason = True, "no factor of the space was mapped to the condition"
            return result
        scenario = self.space.scenario

        async def factor_strengths() -> tuple[BaseRate | None, list[float]]:
            if c.rule == "paper":
                if c.llm_parameters:
                    return None, await elicit_phis(self.estimator, scenario, mapped, temperature=c.temperature)
                return None, [label_prior_phi(f.label) for f in mapped]
            # The consistent rule asks phi against the base rate it counts (one request a scenario, cached).
            prior = await self.base_rate()
            if c.llm_parameters:
                return prior, await elicit_phis_given_base_rate(self.estimator, scenario, mapped, prior.p_outcome1,
                                                                temperature=c.temperature)
            return prior, [lean_as_posterior(label_prior_phi(f.label), prior.p_outcome1) for f in mapped]

        async def latent_layer() -> tuple[LatentGrouping, list[tuple[float, float]]] | None:
            if not c.use_cbn:
                return None
            grouping = await discover_latents(self.client, scenario, mapped, max_latents=c.max_latents)
            if c.llm_parameters:
                return grouping, await elicit_latent_params(self.estimator, scenario, grouping, mapped,
                                                            temperature=c.temperature)
            return grouping, frequency_latent_params(grouping, mapped, smoothing=c.smoothing)

        # The factor strengths and the latent layer are asked for independently of each other; asking at
        # the same time makes the chain of dependent requests per condition shorter.
        (prior, raw_phis), layer = await _both(factor_strengths(), latent_layer())
        result.base_rate = prior
        # No single factor decisive: the paper clips phi to [eps, 1 - eps], which bounds a factor's evidence
        # only at even odds; the consistent rule bounds the evidence itself against its base rate.
        phis = ([clip_probability(p, c.eps) for p in raw_phis] if prior is None
                else [clip_evidence(p, prior.p_outcome1, c.eps) for p in raw_phis])
        result.factors = [
            FactorEvidence(factor_id=f.id, text=f.text, theme=self.space.theme_of(f.id), label=f.label, phi=phi,
                           phi_raw=raw)
            for f, phi, raw in zip(mapped, phis, raw_phis, strict=True)
        ]

        t0 = time.perf_counter()
        posteriors: dict[str, float] = {}
        if c.use_nb:
            result.nb = posteriors["nb"] = (naive_bayes_posterior(phis) if prior is None
                                            else consistent_naive_bayes(phis, prior.p_outcome1))
        nb_seconds = time.perf_counter() - t0

        cbn_seconds = 0.0
        if layer is not None:
            grouping, raw_params = layer
            # The consistent rule takes latent parameters at their word: (1, 0) is a latent that is the
            # outcome itself, which clipping would turn into a weaker one.
            latents = build_latents(grouping, mapped, raw_params, c.eps if prior is None else 0.0)
            result.latents = latents
            result.latent_repairs = grouping.repairs
            t0 = time.perf_counter()
            assignment = [0] * len(mapped)
            for li, group in enumerate(grouping.groups):
                for i in group:
                    assignment[i] = li
            params = [(lat.p_given_o1, lat.p_given_o2) for lat in latents]
            result.cbn = posteriors["cbn"] = (cbn_posterior(phis, assignment, params) if prior is None else
                                              consistent_cbn_posterior(phis, assignment, params, prior.p_outcome1))
            cbn_seconds = time.perf_counter() - t0

        t0 = time.perf_counter()
        result.aggregation = c.aggregation
        if len(posteriors) == 1:
            (name, p1), = posteriors.items()
            result.weights = {name: 1.0}
        elif c.aggregation == AggregationMethod.BMA:
            p1, result.weights = bayesian_model_average(posteriors)
        else:
            result.weights = {"nb": c.w_nb / (c.w_nb + c.w_cbn), "cbn": c.w_cbn / (c.w_nb + c.w_cbn)}
            p1 = linear_opinion_pool(posteriors, result.weights)
        result.compute_seconds.update({
            "naive_bayes": round(nb_seconds, 6),
            "cbn": round(cbn_seconds, 6),
            "aggregation": round(time.perf_counter() - t0, 6),
        })
        result.p_outcome1, result.p_outcome2 = p1, 1.0 - p1
        if max(p1, 1.0 - p1) < c.tau:
            result.unknown = True
            result.unknown_reason = f"max posterior {max(p1, 1 - p1):.3f} is below tau={c.tau}"
            result.p_outcome1 = result.p_outcome2 = None
        return result


def _used(p: float, eps: float) -> float:
    """The base rate the consistent rule counts: kept inside [eps, 1 - eps] and as the phi prompt states it, so
    that phi and the estimator read against the same number."""
    return float(stated(clip_probability(p, eps)))


A = TypeVar("A")
B = TypeVar("B")


async def _both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Await two coroutines concurrently; if one fails, cancel the other and raise that failure
    as is (not wrapped in an ExceptionGroup, so callers' ``except`` clauses still match). The caller
    continues from the longer of the two chains of requests."""
    tasks = (asyncio.ensure_future(chain.traced(first)), asyncio.ensure_future(chain.traced(second)))
    try:
        (a, ended_a), (b, ended_b) = await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        raise
    chain.merge(ended_a, ended_b)
    return a, b
