"""Stage 3's LLM side: factor strengths phi_f = P(O1 | f), the latent grouping, each latent's
P(L=1 | O1), P(L=1 | O2), and the scenario's base rate for the consistent estimator. Also the
frequency-based alternative used by the 'w/o pe-llm' ablation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from anchor import prompts
from anchor.inference.bayes import clip_probability, label_prior_phi, latent_params_from_counts
from anchor.llm.client import LLMClient
from anchor.types import Factor, FactorLabel, Latent, Scenario

UNASSIGNED_LATENT = "Unassigned"


async def elicit_phis(client: LLMClient, scenario: Scenario, factors: list[Factor], *,
                      temperature: float = 0.5) -> list[float]:
    """Raw elicited P(O1 | f) per factor, one call for the whole set; the label prior is a hint."""
    if not factors:
        return []
    lines = [f"{f.text} (rough: {label_prior_phi(f.label):.2f})" for f in factors]
    answer = await client.ask(
        prompts.ELICIT_PHI, schema=prompts.keyed_schema("FactorProbabilities", len(factors), "prob"),
        temperature=temperature,
        scenario=scenario.text or "(none)", outcome1=scenario.outcome1, outcome2=scenario.outcome2,
        factors=prompts.numbered(lines, keys=True),
    )
    data = answer.model_dump()
    return [float(data[k]) for k in prompts.item_keys(len(factors))]


async def elicit_base_rate(client: LLMClient, scenario: Scenario, *, samples: int = 1,
                           temperature: float = 0.5) -> list[float]:
    """Raw elicited P(O1 | the scenario alone), ``samples`` times (one request where the server honours
    ``n``): the base rate the consistent estimator counts once."""
    answers = await client.ask_samples(prompts.ELICIT_BASE_RATE, samples=samples, temperature=temperature,
                                       scenario=scenario.text or "(none)", outcome1=scenario.outcome1,
                                       outcome2=scenario.outcome2)
    return [float(a.p_outcome1) for a in answers]  # type: ignore[attr-defined]


def stated(p: float) -> str:
    """A probability as a prompt states it (six significant digits); the estimator counts this very number."""
    return f"{p:.6g}"


async def elicit_phis_given_base_rate(client: LLMClient, scenario: Scenario, factors: list[Factor], base_rate: float,
                                      *, temperature: float = 0.5) -> list[float]:
    """Raw elicited P(O1 | f) per factor against the base rate stated in the prompt (the consistent rule):
    a factor that says nothing is to be given the base rate itself."""
    if not factors:
        return []
    answer = await client.ask(
        prompts.ELICIT_PHI_GIVEN_BASE_RATE, schema=prompts.keyed_schema("FactorProbabilities", len(factors), "prob"),
        temperature=temperature, scenario=scenario.text or "(none)", outcome1=scenario.outcome1,
        outcome2=scenario.outcome2, base_rate=stated(base_rate),
        factors=prompts.numbered([f.text for f in factors], keys=True),
    )
    data = answer.model_dump()
    return [float(data[k]) for k in prompts.item_keys(len(factors))]


@dataclass
class LatentGrouping:
    """Factor groups (indices into the mapped factors) with names, plus what had to be repaired."""

    names: list[str]
    groups: list[list[int]]
    repairs: list[str] = field(default_factory=list)


def repair_partition(raw: list[tuple[str, list[str]]], texts: list[str]) -> LatentGrouping:
    """Make the LLM's grouping a partition: drop invented or repeated factors, put omitted ones
    into one extra group, drop empty groups, and make names unique."""
    index = {t: i for i, t in enumerate(texts)}
    assigned: dict[int, int] = {}
    names: list[str] = []
    groups: list[list[int]] = []
    repairs: list[str] = []
    for name, members in raw:
        group: list[int] = []
        for item in members:
            i = index.get(item.strip())
            if i is None:
                repairs.append(f"dropped unknown factor {item!r} from latent {name!r}")
            elif i in assigned:
                if assigned[i] != len(groups):
                    repairs.append(f"factor {texts[i]!r} was in several latents; kept the first")
            else:
                assigned[i] = len(groups)
                group.append(i)
        if group:
            names.append(name)
            groups.append(group)
        else:
            repairs.append(f"dropped empty latent {name!r}")
    omitted = [i for i in range(len(texts)) if i not in assigned]
    if omitted:
        repairs.append(f"{len(omitted)} factor(s) not grouped; put them in latent {UNASSIGNED_LATENT!r}")
        names.append(UNASSIGNED_LATENT)
        groups.append(omitted)
    seen: dict[str, int] = {}
    unique: list[str] = []
    for name in names:
        name = " ".join(name.split()) or "Latent"
        n = seen.get(name.casefold(), 0)
        seen[name.casefold()] = n + 1
        unique.append(name if n == 0 else f"{name} ({n + 1})")
    return LatentGrouping(unique, groups, repairs)


async def discover_latents(client: LLMClient, scenario: Scenario, factors: list[Factor], *,
                           max_latents: int = 5) -> LatentGrouping:
    texts = [f.text for f in factors]
    if len(texts) <= 1:
        return LatentGrouping(["Single"], [list(range(len(texts)))]) if texts else LatentGrouping([], [])
    answer = await client.ask(
        prompts.DISCOVER_LATENTS, schema=prompts.latent_partition_schema(tuple(texts), min(max_latents, len(texts))),
        scenario=scenario.text or "(none)", factors="\n".join(f"- {t}" for t in texts),
        max_latents=min(max_latents, len(texts)),
    )
    raw = [(g.name, list(g.factors)) for g in answer.latents]  # type: ignore[attr-defined]
    return repair_partition(raw, texts)


async def elicit_latent_params(client: LLMClient, scenario: Scenario, grouping: LatentGrouping,
                               factors: list[Factor], *, temperature: float = 0.5) -> list[tuple[float, float]]:
    """Raw [P(L=1 | O1), P(L=1 | O2)] per latent."""
    if not grouping.groups:
        return []
    lines = [f"{name} ({'; '.join(factors[i].text for i in group)})"
             for name, group in zip(grouping.names, grouping.groups, strict=True)]
    answer = await client.ask(
        prompts.ELICIT_LATENT_PARAMS, schema=prompts.latent_params_schema(len(lines)), temperature=temperature,
        scenario=scenario.text or "(none)", outcome1=scenario.outcome1, outcome2=scenario.outcome2,
        latents="\n".join(f"L{i + 1}: {line}" for i, line in enumerate(lines)),
    )
    data = answer.model_dump()
    return [(float(data[f"L{i + 1}"]["p_outcome1"]), float(data[f"L{i + 1}"]["p_outcome2"]))
            for i in range(len(lines))]


def frequency_latent_params(grouping: LatentGrouping, factors: list[Factor], smoothing: float = 0.5
                            ) -> list[tuple[float, float]]:
    """'w/o pe-llm': latent CPTs from the label counts of each group, Laplace-smoothed."""
    out = []
    for group in grouping.groups:
        labels = [factors[i].label for i in group]
        out.append(latent_params_from_counts(labels.count(FactorLabel.OUTCOME1), labels.count(FactorLabel.OUTCOME2),
                                             labels.count(FactorLabel.NEUTRAL), smoothing=smoothing))
    return out


def build_latents(grouping: LatentGrouping, factors: list[Factor], params: list[tuple[float, float]],
                  eps: float) -> list[Latent]:
    return [
        Latent(name=name, factor_ids=[factors[i].id for i in group],
               p_given_o1=clip_probability(p1, eps), p_given_o2=clip_probability(p2, eps))
        for name, group, (p1, p2) in zip(grouping.names, grouping.groups, params, strict=True)
    ]
