"""Direct-LLM baselines of the paper, on the same client as ANCHOR.

Each turns (scenario, condition) into P(O1), except Compare, which judges two conditions jointly.
Vanilla and CoT verbalise a probability; their starred variants (``*-direct``) only choose, which
we score as probability 1 or 0. Logits reads the probability of the answer token from the
backend's log-probabilities. Factor-based is an oracle: its factors are generated knowing the
gold outcome, so it is not a fair comparison and every report flags it.

Every prompt that carries the condition is fitted to the backend's context window first
(:mod:`anchor.llm.context`): a condition too long for it keeps its beginning and a marker of what
was omitted, and the estimate's ``note`` says so.

At the end of the module each baseline is wrapped in the runner's method shape
(:mod:`anchor.methods.contract`) and described by its ``MethodSpec`` in ``SPECS``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from anchor import prompts
from anchor.llm import chain
from anchor.llm.base import Message
from anchor.llm.client import LLMClient
from anchor.llm.context import FittedPrompt, fit_fields, fit_prompt, merge_truncations
from anchor.llm.prompt import PromptSpec
from anchor.methods import contract
from anchor.types import Scenario, TextTruncation


@dataclass
class Estimate:
    p_outcome1: float | None
    note: str | None = None
    truncated: TextTruncation | None = None
    """What was cut of the condition to fit the context (None: it went whole)."""


def _values(scenario: Scenario, condition: str) -> dict[str, str]:
    return {"scenario": scenario.text or "(none)", "condition": condition, "outcome1": scenario.outcome1,
            "outcome2": scenario.outcome2}


def _fit(client: LLMClient, prompt: PromptSpec[Any], scenario: Scenario, condition: str, **extra: str) -> FittedPrompt:
    """The prompt's values with the condition shortened, if need be, to fit the backend's context."""
    return fit_prompt(client.backend, prompt, **_values(scenario, condition), **extra)


async def vanilla(client: LLMClient, scenario: Scenario, condition: str, gold: int | None = None) -> Estimate:
    fitted = _fit(client, prompts.VANILLA, scenario, condition)
    answer = await client.ask(prompts.VANILLA, **fitted.values)
    return Estimate(answer.probability, note=fitted.note(), truncated=fitted.truncated.get("condition"))


async def vanilla_direct(client: LLMClient, scenario: Scenario, condition: str, gold: int | None = None) -> Estimate:
    fitted = _fit(client, prompts.VANILLA_DIRECT, scenario, condition)
    answer = await client.ask(prompts.VANILLA_DIRECT, **fitted.values)
    return Estimate(1.0 if answer.choice == "1" else 0.0, note=fitted.note(),
                    truncated=fitted.truncated.get("condition"))


async def cot(client: LLMClient, scenario: Scenario, condition: str, gold: int | None = None) -> Estimate:
    fitted = _fit(client, prompts.COT, scenario, condition)
    answer = await client.ask(prompts.COT, **fitted.values)
    return Estimate(answer.probability, note=fitted.note(), truncated=fitted.truncated.get("condition"))


async def cot_direct(client: LLMClient, scenario: Scenario, condition: str, gold: int | None = None) -> Estimate:
    fitted = _fit(client, prompts.COT_DIRECT, scenario, condition)
    answer = await client.ask(prompts.COT_DIRECT, **fitted.values)
    return Estimate(1.0 if answer.choice == "1" else 0.0, note=fitted.note(),
                    truncated=fitted.truncated.get("condition"))


LOGIT_TOP_K = 20


async def logits(client: LLMClient, scenario: Scenario, condition: str, gold: int | None = None) -> Estimate:
    """P(O1) = P('1') / (P('1') + P('2')) at the first answer position.

    When only one of the two tokens is among the top-k alternatives, the other is given the
    lowest listed log-probability (an upper bound on its true value); when neither is, the
    instance is unknown.
    """
    def render(values: Mapping[str, Any]) -> list[Message]:
        return [{"role": "system", "content": prompts.LOGITS_MESSAGES_SYSTEM},
                {"role": "user", "content": prompts.LOGITS_USER.format(**values)}]

    fitted = fit_fields(client.backend, render, _values(scenario, condition), ("condition",), max_tokens=1,
                        stage="baseline.logits")
    answer = await client.complete("baseline.logits", render(fitted.values), max_tokens=1, top_logprobs=LOGIT_TOP_K)
    assert answer.logprobs  # the client raises LogprobsUnavailable otherwise
    first = answer.logprobs[0]
    top = dict(first.top) or {first.token: first.logprob}
    best: dict[str, float] = {}
    for token, lp in top.items():
        key = token.strip()
        if key in ("1", "2"):
            best[key] = max(lp, best.get(key, -math.inf))
    if not best:
        return Estimate(None, note=_join(f"neither '1' nor '2' among the top {len(top)} first tokens", fitted.note()),
                        truncated=fitted.truncated.get("condition"))
    floor = min(top.values())
    lp1, lp2 = best.get("1", floor), best.get("2", floor)
    m = max(lp1, lp2)
    w1, w2 = math.exp(lp1 - m), math.exp(lp2 - m)
    return Estimate(w1 / (w1 + w2), note=fitted.note(), truncated=fitted.truncated.get("condition"))


def _join(*notes: str | None) -> str | None:
    return "; ".join(dict.fromkeys(n for n in notes if n)) or None


ORACLE_FACTORS = 5


async def factor_based(client: LLMClient, scenario: Scenario, condition: str, gold: int | None = None) -> Estimate:
    """Average P(O1) over five factors written by an LLM that was told the gold outcome (oracle)."""
    if gold not in (1, 2):
        raise ValueError("the factor-based baseline needs the gold outcome")
    gold_text, other = (scenario.outcome1, scenario.outcome2) if gold == 1 else (scenario.outcome2, scenario.outcome1)
    generated = await client.ask(
        prompts.ORACLE_FACTORS, schema=prompts.text_list_schema("OracleFactors", "factors", ORACLE_FACTORS, 120),
        scenario=scenario.text or "(none)", gold=gold_text, other=other, n=ORACLE_FACTORS,
    )
    factors = [f for f in dict.fromkeys(" ".join(x.split()) for x in generated.factors) if f][:ORACLE_FACTORS]
    if not factors:
        return Estimate(None, note="no factors generated")
    fits = [_fit(client, prompts.ORACLE_FACTOR_PROB, scenario, condition, factor=f) for f in factors]
    answers = await chain.gather(*(client.ask(prompts.ORACLE_FACTOR_PROB, **fit.values) for fit in fits))
    return Estimate(sum(a.probability for a in answers) / len(answers), note=_join(*(fit.note() for fit in fits)),
                    truncated=functools.reduce(merge_truncations, (fit.truncated.get("condition") for fit in fits), None))


async def compare_with_note(client: LLMClient, scenario: Scenario, outcome: str, condition1: str,
                            condition2: str) -> tuple[int, str | None]:
    """:func:`compare`'s choice, and a note when the conditions were shortened to fit the context
    (they then share the room: a short one stays whole)."""
    fitted = fit_prompt(client.backend, prompts.COMPARE, fields=("condition1", "condition2"),
                        scenario=scenario.text or "(none)", outcome=outcome, condition1=condition1,
                        condition2=condition2)
    answer = await client.ask(prompts.COMPARE, **fitted.values)
    return {"1": 1, "2": 2, "same": 3}[answer.choice], fitted.note()


async def compare(client: LLMClient, scenario: Scenario, outcome: str, condition1: str, condition2: str) -> int:
    """1 if condition 1 supports ``outcome`` more, 2 if condition 2 does, 3 if equally."""
    return (await compare_with_note(client, scenario, outcome, condition1, condition2))[0]


Estimator = Callable[[LLMClient, Scenario, str, "int | None"], Awaitable[Estimate]]

ESTIMATORS: dict[str, Estimator] = {
    "vanilla": vanilla,
    "vanilla-direct": vanilla_direct,
    "cot": cot,
    "cot-direct": cot_direct,
    "logits": logits,
    "factor-based": factor_based,
}


# --------------------------------------------------------------------------- as the runner's methods


class BaselineMethod:
    """A direct-LLM baseline: nothing per scenario, one estimate per condition."""

    def __init__(self, ctx: contract.MethodContext, estimator: Callable[..., Awaitable[Any]]) -> None:
        self.client = ctx.client
        self.estimator = estimator

    async def prepare(self, scenario: Scenario) -> None:
        return None

    async def estimate(self, scenario: Scenario, condition: str, gold: int | None) -> contract.Estimate:
        result = await self.estimator(self.client, scenario, condition, gold)
        if result.p_outcome1 is None:
            return contract.Estimate(status="abstained", reason=result.note, truncated=result.truncated)
        return contract.Estimate(p_outcome1=result.p_outcome1, reason=result.note, truncated=result.truncated)


class CompareMethod:
    """The Compare baseline: which of two conditions supports the gold outcome more."""

    def __init__(self, ctx: contract.MethodContext) -> None:
        self.client = ctx.client

    async def compare(self, scenario: Scenario, outcome: str, condition1: str, condition2: str) -> int:
        return await compare(self.client, scenario, outcome, condition1, condition2)


def _baseline(name: str) -> Callable[[contract.MethodContext], contract.Method]:
    def factory(ctx: contract.MethodContext) -> contract.Method:
        return BaselineMethod(ctx, ESTIMATORS[name])

    return factory


def _one_request(answer_tokens: int, what: str) -> Callable[[Any], contract.CostShape]:
    return lambda config: contract.CostShape(basis=what, prompt_tokens=60, answer_tokens=answer_tokens)


SPECS = (
    contract.MethodSpec("vanilla", _baseline("vanilla"), "the LLM states P(O1) directly", title="Vanilla",
                        paper_tables=("1", "2"),
                        cost_shape=_one_request(10, "one request a condition")),
    contract.MethodSpec("vanilla-direct", _baseline("vanilla-direct"), "the LLM chooses O1 or O2", direct=True,
                        title="Vanilla", paper_tables=("2",),
                        cost_shape=_one_request(5, "one request a condition")),
    contract.MethodSpec("cot", _baseline("cot"), "reasons step by step, then states P(O1)", title="CoT",
                        paper_tables=("1", "2"),
                        cost_shape=_one_request(200, "one request a condition, with its reasoning")),
    contract.MethodSpec("cot-direct", _baseline("cot-direct"), "reasons step by step, then chooses", direct=True,
                        title="CoT", paper_tables=("2",),
                        cost_shape=_one_request(200, "one request a condition, with its reasoning")),
    contract.MethodSpec("logits", _baseline("logits"), "P(O1) from the answer token's log-probabilities",
                        title="Logits", paper_tables=("1",),
                        cost_shape=_one_request(1, "one request a condition")),
    contract.MethodSpec("compare", CompareMethod, "judges the two conditions of a pair together",
                        pairwise_only=True, title="Compare", paper_tables=("1",)),
    contract.MethodSpec("factor-based", _baseline("factor-based"), "averages P(O1) over factors written knowing the "
                        "gold outcome (an oracle)", oracle=True, title="Factor-based", paper_tables=("1",)),
)
