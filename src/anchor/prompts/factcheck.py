"""The prompt that prepares fact-checking data: a claim rewritten to state its opposite, the
second outcome of a fact-checking instance."""

from __future__ import annotations

from pydantic import Field

from anchor.llm.prompt import PromptSpec
from anchor.prompts.schemas import AnswerModel


class Negation(AnswerModel):
    negation: str = Field(min_length=1, json_schema_extra={"maxLength": 600})


NEGATE_CLAIM = PromptSpec(
    stage="data.negate_claim",
    system="Rewrite a claim so that it states the opposite, keeping its wording as close as possible.",
    user="Claim: {claim}\nWrite its negation.",
    schema=Negation,
    max_tokens=160,
)
