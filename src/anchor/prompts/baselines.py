"""Prompts of the direct-LLM baselines (vanilla, chain of thought, logits, pairwise comparison,
factor-based oracle), with their fixed answer schemas."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from anchor.llm.prompt import PromptSpec
from anchor.prompts.schemas import AnswerModel


class VerbalProbability(AnswerModel):
    probability: float = Field(ge=0.0, le=1.0)


class DirectChoice(AnswerModel):
    choice: Literal["1", "2"]


class ReasonedProbability(AnswerModel):
    reasoning: str = Field(min_length=1, json_schema_extra={"maxLength": 800})
    probability: float = Field(ge=0.0, le=1.0)


class ReasonedChoice(AnswerModel):
    reasoning: str = Field(min_length=1, json_schema_extra={"maxLength": 800})
    choice: Literal["1", "2"]


class CompareChoice(AnswerModel):
    choice: Literal["1", "2", "same"]


_BASE_USER = "Scenario: {scenario}\nCondition: {condition}\nOutcome 1: {outcome1}\nOutcome 2: {outcome2}\n"

VANILLA = PromptSpec(
    stage="baseline.vanilla",
    system="Given a scenario, an extra condition and two competing outcomes, estimate the probability that "
           "outcome 1 rather than outcome 2 is true.",
    user=_BASE_USER + "What is the probability of outcome 1?",
    schema=VerbalProbability,
    max_tokens=40,
)

VANILLA_DIRECT = PromptSpec(
    stage="baseline.vanilla_direct",
    system="Given a scenario, an extra condition and two competing outcomes, say which outcome is more likely.",
    user=_BASE_USER + "Which outcome is more likely, 1 or 2?",
    schema=DirectChoice,
    max_tokens=20,
)

COT = PromptSpec(
    stage="baseline.cot",
    system="Given a scenario, an extra condition and two competing outcomes, first reason step by step in a "
           "few sentences, then estimate the probability that outcome 1 rather than outcome 2 is true.",
    user=_BASE_USER + "Reason briefly, then give the probability of outcome 1.",
    schema=ReasonedProbability,
    max_tokens=400,
)

COT_DIRECT = PromptSpec(
    stage="baseline.cot_direct",
    system="Given a scenario, an extra condition and two competing outcomes, first reason step by step in a "
           "few sentences, then say which outcome is more likely.",
    user=_BASE_USER + "Reason briefly, then choose 1 or 2.",
    schema=ReasonedChoice,
    max_tokens=400,
)

#: Free-text prompt for the Logits baseline: the first answer token is read from log-probabilities.
LOGITS_MESSAGES_SYSTEM = (
    "Given a scenario, an extra condition and two competing outcomes, answer with a single character: 1 if "
    "outcome 1 is more likely, 2 if outcome 2 is more likely."
)
LOGITS_USER = _BASE_USER + "Answer 1 or 2."

COMPARE = PromptSpec(
    stage="baseline.compare",
    system="Given a scenario, an outcome and two alternative conditions, say which condition makes the outcome "
           "more likely, or 'same' if they support it equally.",
    user="Scenario: {scenario}\nOutcome: {outcome}\nCondition 1: {condition1}\nCondition 2: {condition2}\n"
         "Which condition supports the outcome more: 1, 2 or same?",
    schema=CompareChoice,
    max_tokens=20,
)


ORACLE_FACTORS = PromptSpec(
    stage="baseline.factor_based.generate",
    system="You list the considerations that explain why a given outcome is the true one in a scenario.",
    user="Scenario: {scenario}\nTrue outcome: {gold}\nOther outcome: {other}\nList {n} short factors that "
         "support the true outcome.",
    schema=None,
    max_tokens=250,
    temperature=0.7,
)

ORACLE_FACTOR_PROB = PromptSpec(
    stage="baseline.factor_based.estimate",
    system="Given a scenario, an extra condition, a factor and two competing outcomes, estimate the "
           "probability that outcome 1 rather than outcome 2 is true when the factor holds.",
    user=_BASE_USER + "Factor: {factor}\nWhat is the probability of outcome 1?",
    schema=VerbalProbability,
    max_tokens=40,
)
