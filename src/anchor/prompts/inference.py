"""Prompts of stage 3, elicitation: phi per mapped factor, latent concepts grouping the factors,
the two parameters of each latent, and, for the consistent estimator, the scenario's base rate and phi
asked against it."""

from __future__ import annotations

from pydantic import Field

from anchor.llm.prompt import Example, PromptSpec
from anchor.prompts.schemas import AnswerModel


class BaseRateAnswer(AnswerModel):
    p_outcome1: float = Field(ge=0.0, le=1.0, description="P(outcome 1 | the scenario alone)")

ELICIT_PHI = PromptSpec(
    stage="inference.phi",
    system=(
        "You estimate how strongly single factors favour one outcome over another. For each factor give the "
        "probability (0 to 1) that, with this factor present, outcome 1 rather than outcome 2 holds: near 1 "
        "strongly favours outcome 1, near 0 strongly favours outcome 2, 0.5 favours neither."
    ),
    user=(
        "Scenario: {scenario}\nOutcome 1: {outcome1}\nOutcome 2: {outcome2}\n"
        "Factors (with a first rough estimate you may revise):\n{factors}\nGive a probability for every key."
    ),
    schema=None,
    examples=(
        Example(
            user=(
                "Scenario: Heating a small flat.\nOutcome 1: A heat pump is the better choice.\nOutcome 2: A gas "
                "boiler is the better choice.\n"
                "Factors (with a first rough estimate you may revise):\nF1: running cost per unit of heat (rough: "
                "0.75)\nF2: installation price (rough: 0.25)\nF3: colour of the casing (rough: 0.5)\n"
                "Give a probability for every key."
            ),
            answer='{"F1": 0.82, "F2": 0.3, "F3": 0.5}',
        ),
    ),
    max_tokens=300,
    temperature=0.5,
)


DISCOVER_LATENTS = PromptSpec(
    stage="inference.latents",
    system=(
        "You find hidden common causes. Group the factors into a few latent concepts so that factors in the "
        "same group tend to appear together because of that concept. Every factor belongs to exactly one "
        "group; use only the factors listed, copied exactly; give each group a short name."
    ),
    user="Scenario: {scenario}\nFactors:\n{factors}\nGroup them into at most {max_latents} latent concepts.",
    schema=None,
    examples=(
        Example(
            user="Scenario: Picking a city for a weekend trip.\nFactors:\n- museum opening hours\n- art galleries\n"
                 "- hotel prices\n- train fare\nGroup them into at most 3 latent concepts.",
            answer='{"latents": [{"name": "Culture", "factors": ["museum opening hours", "art galleries"]}, '
                   '{"name": "Budget", "factors": ["hotel prices", "train fare"]}]}',
        ),
    ),
    max_tokens=500,
    temperature=0.0,
)

ELICIT_LATENT_PARAMS = PromptSpec(
    stage="inference.latent_params",
    system=(
        "Each latent concept below groups related factors. In a given situation a concept either leans "
        "towards outcome 1 or it does not. For each concept estimate p_outcome1 = the probability that it "
        "leans towards outcome 1 when outcome 1 is in fact true, and p_outcome2 = the probability that it "
        "leans towards outcome 1 when outcome 2 is in fact true. A concept that tracks the truth well has a "
        "high p_outcome1 and a low p_outcome2; one that says little has both near 0.5."
    ),
    user="Scenario: {scenario}\nOutcome 1: {outcome1}\nOutcome 2: {outcome2}\nLatent concepts:\n{latents}\n"
         "Give both probabilities for every key.",
    schema=None,
    examples=(
        Example(
            user="Scenario: A team considers holding its weekly meeting online.\nOutcome 1: Online meetings make "
                 "the team more productive.\nOutcome 2: Online meetings do not make the team more productive.\n"
                 "Latent concepts:\nL1: Time savings (no travel between offices, shorter meetings)\nL2: "
                 "Communication quality (video glitches, side conversations)\nGive both probabilities for every key.",
            answer='{"L1": {"p_outcome1": 0.8, "p_outcome2": 0.3}, "L2": {"p_outcome1": 0.55, "p_outcome2": 0.45}}',
        ),
    ),
    max_tokens=400,
    temperature=0.5,
)


ELICIT_BASE_RATE = PromptSpec(
    stage="inference.base_rate",
    system=(
        "You estimate base rates. Before any particular detail is known, how often does outcome 1 rather than "
        "outcome 2 turn out to be true in situations like the one described? Give that probability (0 to 1): "
        "0.5 when both are equally common, lower when outcome 2 is the usual result, higher when outcome 1 is."
    ),
    user="Scenario: {scenario}\nOutcome 1: {outcome1}\nOutcome 2: {outcome2}\nGive the probability of outcome 1.",
    schema=BaseRateAnswer,
    examples=(
        Example(
            user="Scenario: A customer returns to a bakery that opened last month.\nOutcome 1: The customer "
                 "buys a cake.\nOutcome 2: The customer does not buy a cake.\nGive the probability of outcome 1.",
            answer='{"p_outcome1": 0.2}',
        ),
    ),
    max_tokens=40,
    temperature=0.5,
)


#: The consistent estimator's phi: the probability of outcome 1 once the factor is known, against the base
#: rate stated in the prompt (a factor that says nothing leaves it there), so that each phi is read against
#: the very prior the estimator counts (ELICIT_PHI's "0.5 favours neither" holds only at even odds).
ELICIT_PHI_GIVEN_BASE_RATE = PromptSpec(
    stage="inference.phi",
    system=(
        "You estimate how single factors move the probability of one outcome against another. You are given the "
        "base rate: how likely outcome 1 rather than outcome 2 is in situations like this before anything else is "
        "known. For each factor give the probability (0 to 1) that outcome 1 rather than outcome 2 holds once the "
        "factor is known to be present: above the base rate when the factor favours outcome 1, below it when it "
        "favours outcome 2, equal to it when the factor says nothing about them."
    ),
    user=(
        "Scenario: {scenario}\nOutcome 1: {outcome1}\nOutcome 2: {outcome2}\nBase rate of outcome 1: {base_rate}\n"
        "Factors:\n{factors}\nGive a probability for every key."
    ),
    schema=None,
    examples=(
        Example(
            user=(
                "Scenario: A customer returns to a bakery that opened last month.\nOutcome 1: The customer buys a "
                "cake.\nOutcome 2: The customer does not buy a cake.\nBase rate of outcome 1: 0.2\nFactors:\n"
                "F1: a birthday in the family this week\nF2: the customer follows a strict diet\nF3: light rain "
                "outside\nGive a probability for every key."
            ),
            answer='{"F1": 0.6, "F2": 0.05, "F3": 0.2}',
        ),
    ),
    max_tokens=300,
    temperature=0.5,
)
