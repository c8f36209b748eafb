"""Every prompt anchor sends, with the schema its answer must fit.

All wording here is ours. The prompts follow the intent of the ANCHOR method: abductive sentence
generation, factor extraction, validation, factor-outcome voting, theme naming and pruning,
condition-to-factor selection and reflection, probability elicitation, latent discovery, and the
direct-LLM baselines.

Some schemas depend on the request (how many items, which strings are allowed); those come from
the small factories below, cached so that an identical request produces an identical schema
(and so an identical cache key).

Validation is deliberately looser than the schema sent: lengths, item counts and allowed strings
(``enum``) are sent to the server to constrain generation (small models otherwise ramble or loop),
but an answer is only re-asked when it is unusable (wrong shape, missing keys, a probability
outside [0, 1]). Stages trim long lists and discard, and count, strings that were not offered,
instead of re-asking forever a server that ignores the constraints.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from anchor.llm.prompt import Example, PromptSpec

# --------------------------------------------------------------------------- schema helpers

LabelName = Literal["outcome1", "outcome2", "neutral"]
Verdict = Literal["keep", "duplicate", "irrelevant"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore")


def item_keys(n: int) -> list[str]:
    """Short keys F1..Fn used to address the items of a numbered list in an answer."""
    return [f"F{i + 1}" for i in range(n)]


@lru_cache(maxsize=512)
def keyed_schema(name: str, n: int, value: str) -> type[BaseModel]:
    """An object with exactly the keys F1..Fn, each holding ``value``:
    'label' (outcome1/outcome2/neutral), 'verdict' (keep/duplicate/irrelevant) or 'prob' (0..1)."""
    types: dict[str, Any] = {
        "label": (LabelName, ...),
        "verdict": (Verdict, ...),
        "prob": (float, Field(ge=0.0, le=1.0)),
    }
    if value not in types:
        raise ValueError(f"unknown keyed value type {value!r}")
    fields = {key: types[value] for key in item_keys(n)}
    return create_model(f"{name}{n}", __base__=_Strict, **fields)


def _choice_field(options: tuple[str, ...], max_items: int, min_items: int = 0) -> Any:
    # Bounds and allowed values go to the server; validation accepts any list of strings, and the
    # stage discards (and counts) what was not offered.
    return Field(
        ...,
        json_schema_extra={
            "items": {"type": "string", "enum": list(options)},
            "minItems": min_items,
            "maxItems": max_items,
        },
    )


@lru_cache(maxsize=512)
def choice_list_schema(name: str, field: str, options: tuple[str, ...]) -> type[BaseModel]:
    """``{field: [strings]}``; the server is told the allowed strings, validation accepts any."""
    return create_model(name, __base__=_Strict, **{field: (list[str], _choice_field(options, len(options)))})


@lru_cache(maxsize=256)
def text_list_schema(name: str, field: str, max_items: int, max_chars: int) -> type[BaseModel]:
    """``{field: [strings]}``. Bounds go to the server (an unbounded list makes small models repeat
    themselves until the token limit); validation only needs one non-empty list, and the stage
    trims and filters what it gets."""
    extra = {"items": {"type": "string", "minLength": 1, "maxLength": max_chars}, "minItems": 1,
             "maxItems": max_items}
    return create_model(name, __base__=_Strict,
                        **{field: (list[str], Field(..., min_length=1, json_schema_extra=extra))})


@lru_cache(maxsize=256)
def latent_partition_schema(options: tuple[str, ...], max_latents: int) -> type[BaseModel]:
    group = create_model(
        "LatentGroup", __base__=_Strict,
        name=(str, Field(min_length=1, json_schema_extra={"maxLength": 40})),
        factors=(list[str], _choice_field(options, len(options), min_items=1)),
    )
    return create_model("LatentPartition", __base__=_Strict,
                        latents=(list[group], Field(min_length=1, json_schema_extra={"maxItems": max_latents})))  # type: ignore[valid-type]


class LatentPair(_Strict):
    p_outcome1: float = Field(ge=0.0, le=1.0, description="P(concept leans to outcome 1 | outcome 1)")
    p_outcome2: float = Field(ge=0.0, le=1.0, description="P(concept leans to outcome 1 | outcome 2)")


@lru_cache(maxsize=256)
def latent_params_schema(n: int) -> type[BaseModel]:
    fields = {f"L{i + 1}": (LatentPair, ...) for i in range(n)}
    return create_model(f"LatentParams{n}", __base__=_Strict, **fields)


@lru_cache(maxsize=256)
def theme_schema(options: tuple[str, ...]) -> type[BaseModel]:
    removal = create_model(
        "Redundant", __base__=_Strict,
        factor=(str, Field(json_schema_extra={"enum": list(options)})),
        same_as=(str, Field(json_schema_extra={"enum": list(options)})),
    )
    return create_model(
        "ThemeAndPruning", __base__=_Strict,
        theme=(str, Field(min_length=1, json_schema_extra={"maxLength": 40})),
        redundant=(list[removal], Field(..., json_schema_extra={"maxItems": max(0, len(options) - 1)})),  # type: ignore[valid-type]
    )


def example_strings(prompt: PromptSpec) -> frozenset[str]:
    """Every string inside the prompt's few-shot answers, case-folded.

    Small models sometimes answer with the example instead of the task; stages use this to
    recognise such echoes.
    """
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, str):
            found.add(" ".join(node.casefold().split()))
        elif isinstance(node, dict):
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for ex in prompt.examples:
        answer = ex.answer if isinstance(ex.answer, str) else ex.answer.model_dump_json()
        try:
            walk(json.loads(answer))
        except json.JSONDecodeError:
            walk(answer)
    return frozenset(found)


def numbered(items: list[str], keys: bool = False) -> str:
    """Render items one per line, numbered 1..n or keyed F1..Fn."""
    if keys:
        return "\n".join(f"{k}: {t}" for k, t in zip(item_keys(len(items)), items, strict=True))
    return "\n".join(f"{i + 1}. {t}" for i, t in enumerate(items))


# --------------------------------------------------------------------------- stage 1: abduction

GENERATE_SENTENCES = PromptSpec(
    stage="abduction.generate",
    system=(
        "You help people reason about decisions. Given a scenario and two competing outcomes, you write "
        "short, concrete sentences that each give one reason why one outcome or the other would be more "
        "likely. Mix both directions, vary the kind of reason (physical, practical, economic, social, "
        "safety, timing, ...), and avoid repeating reasons already covered."
    ),
    user=(
        "Scenario: {scenario}\nOutcome 1: {outcome1}\nOutcome 2: {outcome2}\n"
        "Aspects already covered (find different ones): {known}\n"
        "Write {n} new sentences, each one reason, about half for each outcome."
    ),
    schema=None,
    examples=(
        Example(
            user=(
                "Scenario: A cafe owner decides whether to keep the terrace open in late autumn.\nOutcome 1: "
                "Keeping the terrace open raises the cafe's weekly takings.\nOutcome 2: Keeping the terrace open "
                "does not raise the cafe's weekly takings.\nAspects already covered (find different ones): none yet"
                "\nWrite 2 new sentences, each one reason, about half for each outcome."
            ),
            answer=(
                '{"sentences": ["Guests with dogs prefer outdoor seats and would otherwise walk on to another '
                'cafe.", "On cold evenings the terrace stays empty while its patio heaters still burn gas."]}'
            ),
        ),
    ),
    max_tokens=600,
    temperature=0.9,
)


EXTRACT_FACTORS = PromptSpec(
    stage="abduction.extract",
    system=(
        "You turn sentences into factors: short noun phrases (2-6 words) naming the distinct "
        "considerations the sentences rely on. One factor per consideration, no duplicates, no full "
        "sentences, no judgement words like 'better'."
    ),
    user="Sentences:\n{sentences}\nList the distinct factors.",
    schema=None,
    examples=(
        Example(
            user=(
                "Sentences:\n1. Guests with dogs prefer outdoor seats and would otherwise walk on to another "
                "cafe.\n2. On cold evenings the terrace stays empty while its patio heaters still burn gas.\n"
                "List the distinct factors."
            ),
            answer='{"factors": ["guests with dogs", "nearby competing cafes", "evening temperatures", "patio heater gas cost"]}',
        ),
    ),
    max_tokens=400,
    temperature=0.2,
)


VALIDATE_FACTORS = PromptSpec(
    stage="abduction.validate",
    system=(
        "You review candidate factors for a decision scenario. For each candidate answer 'keep' if it is a "
        "real consideration for this scenario and says something the listed similar factor does not; "
        "'duplicate' if it means the same as the similar factor shown next to it; 'irrelevant' if it has "
        "nothing to do with the scenario or its outcomes."
    ),
    user=(
        "Scenario: {scenario}\nOutcome 1: {outcome1}\nOutcome 2: {outcome2}\nCandidates:\n{candidates}\n"
        "Give a verdict for every key."
    ),
    schema=None,
    max_tokens=300,
    temperature=0.0,
)

# --------------------------------------------------------------------------- stage 1: voting, themes

VOTE_LABELS = PromptSpec(
    stage="voting",
    system=(
        "For each factor, decide which outcome it argues for when it is present: 'outcome1', 'outcome2', "
        "or 'neutral' when it cuts both ways or is unrelated."
    ),
    user="Scenario: {scenario}\nOutcome 1: {outcome1}\nOutcome 2: {outcome2}\nFactors:\n{factors}\nLabel every key.",
    schema=None,
    examples=(
        Example(
            user=(
                "Scenario: A cafe owner decides whether to keep the terrace open in late autumn.\nOutcome 1: "
                "Keeping the terrace open raises the cafe's weekly takings.\nOutcome 2: Keeping the terrace open "
                "does not raise the cafe's weekly takings.\nFactors:\nF1: guests with dogs\nF2: day of the week\n"
                "F3: patio heater gas cost\nLabel every key."
            ),
            answer='{"F1": "outcome1", "F2": "neutral", "F3": "outcome2"}',
        ),
    ),
    max_tokens=200,
    temperature=0.7,
)


NAME_THEME = PromptSpec(
    stage="themes",
    system=(
        "You name a group of related factors with a short theme of one to three words, and point out "
        "members that say the same thing as another member (list each such member with the one it "
        "repeats). Leave the list empty when every member is distinct."
    ),
    user="Scenario: {scenario}\nFactors in the group:\n{factors}\nName the theme and list redundant members.",
    schema=None,
    examples=(
        Example(
            user=(
                "Scenario: A bakery decides whether to bake its bread overnight or at dawn.\nFactors in the group:\n"
                "1. night shift pay\n2. extra wages for night work\n3. staff willing to work nights\n"
                "Name the theme and list redundant members."
            ),
            answer='{"theme": "Night Staffing", "redundant": [{"factor": "extra wages for night work", "same_as": "night shift pay"}]}',
        ),
    ),
    max_tokens=250,
    temperature=0.0,
)

# --------------------------------------------------------------------------- stage 2: mapping


SELECT_FACTORS = PromptSpec(
    stage="mapping.select",
    system=(
        "You connect a condition to factors. From the candidate factors, select every one the condition "
        "bears on: it makes the factor present, relevant, or clearly affects it. Be inclusive, but do not "
        "select factors the condition has nothing to do with. Copy the selected factors exactly."
    ),
    user="Scenario: {scenario}\nCondition: {condition}\nCandidate factors:\n{candidates}\nSelect the related factors.",
    schema=None,
    examples=(
        Example(
            user=(
                "Scenario: A family chooses between driving and taking the train for a holiday trip.\nCondition: "
                "The family travels with a newborn baby.\nCandidate factors:\n- luggage space\n- ticket prices\n"
                "- stops whenever needed\nSelect the related factors."
            ),
            answer='{"selected": ["luggage space", "stops whenever needed"]}',
        ),
    ),
    max_tokens=300,
    temperature=0.7,
)


REFLECT_FACTORS = PromptSpec(
    stage="mapping.reflect",
    system=(
        "You review factors that were linked to a condition. A plausible connection of any kind is enough "
        "for a factor to stay; take one out only when the condition obviously has nothing to do with it or "
        "rules it out. If in doubt, it stays. Copy the factors that stay exactly as written."
    ),
    user="Condition: {condition}\nSelected factors:\n{factors}\nWhich factors should stay?",
    schema=None,
    max_tokens=300,
    temperature=0.0,
)

# --------------------------------------------------------------------------- stage 3: elicitation

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

# --------------------------------------------------------------------------- baselines


def _context(scenario: str) -> str:
    return scenario if scenario else "(none)"


class VerbalProbability(_Strict):
    probability: float = Field(ge=0.0, le=1.0)


class DirectChoice(_Strict):
    choice: Literal["1", "2"]


class ReasonedProbability(_Strict):
    reasoning: str = Field(min_length=1, json_schema_extra={"maxLength": 800})
    probability: float = Field(ge=0.0, le=1.0)


class ReasonedChoice(_Strict):
    reasoning: str = Field(min_length=1, json_schema_extra={"maxLength": 800})
    choice: Literal["1", "2"]


class CompareChoice(_Strict):
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

# --------------------------------------------------------------------------- fact checking

class Negation(_Strict):
    negation: str = Field(min_length=1, json_schema_extra={"maxLength": 600})


NEGATE_CLAIM = PromptSpec(
    stage="data.negate_claim",
    system="Rewrite a claim so that it states the opposite, keeping its wording as close as possible.",
    user="Claim: {claim}\nWrite its negation.",
    schema=Negation,
    max_tokens=160,
)

__all__ = [name for name in dir() if name.isupper()]


# =========================================================================== BIRD baseline
# Prompts of the BIRD baseline (anchor.bird). Our own wording and examples; the structure of each
# call follows the public BIRD code (see README, "BIRD baseline"). Stage names start with "bird.".

BIRD_LABEL_OPTIONS = ("statement 1", "statement 2", "both", "neither")
BIRD_VERBAL_LEVELS = ("very likely", "likely", "somewhat likely", "neutral", "somewhat unlikely", "unlikely",
                      "very unlikely")
BIRD_NONE = "none"


class BirdFactorItem(_Strict):
    factor: str = Field(min_length=1, json_schema_extra={"maxLength": 80})
    values: list[str] = Field(min_length=1, json_schema_extra={
        "items": {"type": "string", "minLength": 1, "maxLength": 80}, "maxItems": 8})


class BirdFactorStructure(_Strict):
    factors: list[BirdFactorItem] = Field(min_length=1, json_schema_extra={"maxItems": 12})


class BirdJudgement(_Strict):
    reasoning: str = Field(json_schema_extra={"maxLength": 600})
    outcome1: str = Field(json_schema_extra={"enum": list(BIRD_VERBAL_LEVELS)})
    outcome2: str = Field(json_schema_extra={"enum": list(BIRD_VERBAL_LEVELS)})


def bird_value_keys(n: int) -> list[str]:
    """Keys V1..Vn addressing the values of one factor."""
    return [f"V{i + 1}" for i in range(n)]


@lru_cache(maxsize=64)
def bird_label_schema(n: int) -> type[BaseModel]:
    """``{"explanation": str, "labels": {"V1": option, ...}}``; options are sent as an enum, any string
    validates (the stage drops and counts unreadable votes, as the reference code does)."""
    option = (str, Field(json_schema_extra={"enum": list(BIRD_LABEL_OPTIONS)}))
    labels = create_model(f"BirdValueLabels{n}", __base__=_Strict, **{k: option for k in bird_value_keys(n)})
    return create_model(f"BirdLabels{n}", __base__=_Strict,
                        explanation=(str, Field(json_schema_extra={"maxLength": 500})),
                        labels=(labels, ...))


@lru_cache(maxsize=1024)
def bird_value_choice_schema(options: tuple[str, ...]) -> type[BaseModel]:
    """``{"value": one of options or "none"}``; any string validates, the stage checks it."""
    return create_model("BirdValueChoice", __base__=_Strict,
                        value=(str, Field(json_schema_extra={"enum": [*options, BIRD_NONE]})))


@lru_cache(maxsize=256)
def bird_closest_schema(factors: tuple[str, ...], values: tuple[str, ...]) -> type[BaseModel]:
    """``{"factor": ..., "value": ...}`` for the relaxed fallback."""
    return create_model("BirdClosestValue", __base__=_Strict,
                        factor=(str, Field(json_schema_extra={"enum": list(factors)})),
                        value=(str, Field(json_schema_extra={"enum": list(values)})))


def bird_structure_text(factors: list[tuple[str, list[str]]]) -> str:
    """A factor structure as the JSON the factor prompts answer with."""
    return json.dumps({"factors": [{"factor": name, "values": list(values)} for name, values in factors]},
                      ensure_ascii=False)


_BIRD_HIKE = ("Scenario: A hiker plans a day walk on an unfamiliar mountain trail.\n"
              "Statement 1: A paper map is the better navigation aid for this walk.\n"
              "Statement 2: A phone app is the better navigation aid for this walk.\n")
_BIRD_BAKERY = ("Scenario: A family bakery considers opening a second shop in the city centre.\n"
                "Statement 1: A city-centre branch will raise the bakery's profits.\n"
                "Statement 2: A city-centre branch will not raise the bakery's profits.\n")

BIRD_SENTENCES = PromptSpec(
    stage="bird.sentences",
    system=(
        "You describe situations. Given a scenario and a statement, write sentences that each describe a "
        "different condition adding objective information that makes the statement more likely to be true, "
        "without making it certain. Each sentence covers a different aspect."
    ),
    user="Scenario: {scenario}\nStatement: {statement}\nWrite {n} sentences.",
    schema=None,
    examples=(
        Example(
            user=("Scenario: A family must reach the airport for a 7 a.m. flight.\nStatement: Taking a taxi gets "
                  "them to the airport on time.\nWrite 3 sentences."),
            answer=('{"sentences": ["The first train from their suburb leaves after 6 a.m.", "A taxi firm near '
                    'their home takes bookings the evening before.", "The motorway to the airport is empty before '
                    'dawn."]}'),
        ),
    ),
    max_tokens=400,
    temperature=1.0,
)

_BIRD_FACTOR_SYSTEM = (
    "You analyse decisions. Given a scenario, two competing statements and sentences supporting each, you "
    "identify the factors that decide which statement holds. A factor is a property of the situation (of a "
    "person, an object, a place or the circumstances); its values are mutually exclusive states of that "
    "property. Each factor needs some values that support statement 1 and some that support statement 2. "
    "Values name concrete things but stay general enough to cover many situations. Answer with JSON."
)
_BIRD_FACTOR_HEADER = ("Scenario: {scenario}\nStatement 1: {outcome1}\nStatement 2: {outcome2}\n"
                       "Sentences supporting statement 1:\n{sentences1}\nSentences supporting statement 2:\n"
                       "{sentences2}\n")
_BIRD_FACTOR_EXAMPLES = (
    Example(
        user=(_BIRD_HIKE + "Sentences supporting statement 1:\n- Much of the trail runs through deep valleys.\n"
              "Sentences supporting statement 2:\n- The hiker checks a route app every weekend.\n"
              "List the factors that decide between the two statements, each with its values."),
        answer=('{"factors": [{"factor": "mobile signal along the trail", "values": ["reliable signal", "no '
                'signal"]}, {"factor": "phone battery", "values": ["full battery and a power bank", "low '
                'battery"]}, {"factor": "hiker\'s map-reading experience", "values": ["experienced map reader", '
                '"has never used a paper map"]}]}'),
    ),
    Example(
        user=(_BIRD_BAKERY + "Sentences supporting statement 1:\n- Office workers crowd the centre every "
              "morning.\nSentences supporting statement 2:\n- Shop rents in the centre rose sharply this year.\n"
              "List the factors that decide between the two statements, each with its values."),
        answer=('{"factors": [{"factor": "rent of the premises", "values": ["affordable rent", "very high rent"]}, '
                '{"factor": "passers-by", "values": ["busy commuter street", "quiet side street"]}, '
                '{"factor": "nearby competition", "values": ["no bakery within walking distance", "several '
                'bakeries on the same street"]}, {"factor": "staff", "values": ["experienced bakers available", '
                '"bakers hard to hire"]}, {"factor": "reputation of the bakery", "values": ["well known across '
                'the city", "unknown outside its neighbourhood"]}]}'),
    ),
)

BIRD_FACTORS = PromptSpec(
    stage="bird.factors",
    system=_BIRD_FACTOR_SYSTEM,
    user=_BIRD_FACTOR_HEADER + "List the factors that decide between the two statements, each with its values.",
    schema=BirdFactorStructure,
    examples=_BIRD_FACTOR_EXAMPLES,
    max_tokens=768,
    temperature=0.15,
)

BIRD_FACTORS_EXTEND = PromptSpec(
    stage="bird.factors",
    system=_BIRD_FACTOR_SYSTEM,
    user=(_BIRD_FACTOR_HEADER + "Current factors: {structure}\nAre these all the factors? Think about the "
          "features, advantages and disadvantages of every entity involved, add any factor that is missing, and "
          "give the complete list."),
    schema=BirdFactorStructure,
    examples=_BIRD_FACTOR_EXAMPLES,
    max_tokens=768,
    temperature=0.15,
)

BIRD_FACTORS_RERANK = PromptSpec(
    stage="bird.factors",
    system=_BIRD_FACTOR_SYSTEM,
    user=(_BIRD_FACTOR_HEADER + "Current factors: {structure}\nOrder the factors from most to least important "
          "for deciding between the two statements and keep at most {max_factors}. Keep a varied set, and drop "
          "any factor that only restates how the two statements differ. Give the list."),
    schema=BirdFactorStructure,
    examples=_BIRD_FACTOR_EXAMPLES,
    max_tokens=768,
    temperature=0.15,
)

BIRD_VALUES_AS_NEEDED = PromptSpec(
    stage="bird.factors",
    system=_BIRD_FACTOR_SYSTEM,
    user=(_BIRD_FACTOR_HEADER + "Current factors: {structure}\nCheck the values of each factor. Add a value only "
          "when an important possibility is missing; never add a value that is a subset or a repeat of another. "
          "Give the complete list."),
    schema=BirdFactorStructure,
    examples=_BIRD_FACTOR_EXAMPLES,
    max_tokens=1024,
    temperature=0.15,
)

BIRD_VALUES_OPPOSITES = PromptSpec(
    stage="bird.factors",
    system=_BIRD_FACTOR_SYSTEM,
    user=(_BIRD_FACTOR_HEADER + "Current factors: {structure}\nMake the values of each factor cover both sides: "
          "add the opposite of every value that lacks one. Do not add in-between values (such as 'moderate') or "
          "extreme ones. Give the complete list."),
    schema=BirdFactorStructure,
    examples=_BIRD_FACTOR_EXAMPLES,
    max_tokens=1024,
    temperature=0.15,
)

BIRD_LABELS = PromptSpec(
    stage="bird.labels",
    system=(
        "For one factor of a decision, say which statement each of its values supports when that value holds: "
        "'statement 1', 'statement 2', 'both' (it supports both, or cuts both ways) or 'neither' (it bears on "
        "neither statement). Explain briefly first."
    ),
    user="Scenario: {scenario}\nStatement 1: {outcome1}\nStatement 2: {outcome2}\nFactor: {factor}\nValues:\n"
         "{values}\nLabel every key.",
    schema=None,
    examples=(
        Example(
            user=(_BIRD_HIKE + "Factor: mobile signal along the trail\nValues:\nV1: reliable signal\nV2: no signal\n"
                  "Label every key."),
            answer=('{"explanation": "An app needs signal to load maps and position; without it the paper map is '
                    'the safer aid.", "labels": {"V1": "statement 2", "V2": "statement 1"}}'),
        ),
    ),
    max_tokens=768,
    temperature=0.7,
)

BIRD_CPT_DATA = PromptSpec(
    stage="bird.cpt_data",
    system=(
        "You judge how likely two competing outcomes are, using only the scenario and the condition given. Rate "
        "each outcome with exactly one of: very likely, likely, somewhat likely, neutral, somewhat unlikely, "
        "unlikely, very unlikely. The outcomes compete, so the two ratings must mirror each other (for example "
        "likely and unlikely). Give your reasoning first, then the ratings."
    ),
    user="Scenario: {scenario}\nCondition: {condition}\nOutcome 1: {outcome1}\nOutcome 2: {outcome2}\n"
         "Rate both outcomes.",
    schema=BirdJudgement,
    examples=(
        Example(
            user=("Scenario: A hiker plans a day walk on an unfamiliar mountain trail.\nCondition: There is no "
                  "signal along the trail. The hiker is an experienced map reader.\nOutcome 1: A paper map is the "
                  "better navigation aid for this walk.\nOutcome 2: A phone app is the better navigation aid for "
                  "this walk.\nRate both outcomes."),
            answer=('{"reasoning": "Without signal the app cannot update, and the hiker can use a map well.", '
                    '"outcome1": "very likely", "outcome2": "very unlikely"}'),
        ),
        Example(
            user=("Scenario: A family bakery considers opening a second shop in the city centre.\nCondition: The "
                  "rent is very high. The street is busy with commuters.\nOutcome 1: A city-centre branch will "
                  "raise the bakery's profits.\nOutcome 2: A city-centre branch will not raise the bakery's "
                  "profits.\nRate both outcomes."),
            answer=('{"reasoning": "Many customers pass by, but the high rent eats much of the extra income.", '
                    '"outcome1": "somewhat likely", "outcome2": "somewhat unlikely"}'),
        ),
    ),
    max_tokens=400,
    temperature=0.7,
)

BIRD_MAPPING = PromptSpec(
    stage="bird.mapping",
    system=(
        "You decide whether a condition implies one value of a factor. Choose a value only if the condition, "
        "read plainly, implies it in most situations through clear and direct information. Do not rely on loose "
        "associations and do not assume causes or effects the condition does not state. If several values are "
        "implied, choose the one implied most; on a tie, choose the positive one. Answer 'none' when no value is "
        "clearly implied. Copy the chosen value exactly."
    ),
    user="Scenario: {scenario}\nCondition: {condition}\nFactor: {factor}\nValues:\n{values}\n"
         "Which value does the condition imply?",
    schema=None,
    examples=(
        Example(
            user=("Scenario: A hiker plans a day walk on an unfamiliar mountain trail.\nCondition: The hiker's phone "
                  "ran flat on the drive to the trailhead.\nFactor: phone battery\nValues:\n- full battery and a "
                  "power bank\n- low battery\nWhich value does the condition imply?"),
            answer='{"value": "low battery"}',
        ),
        Example(
            user=("Scenario: A hiker plans a day walk on an unfamiliar mountain trail.\nCondition: The hiker grew up "
                  "in a mountain village.\nFactor: hiker's map-reading experience\nValues:\n- experienced map "
                  "reader\n- has never used a paper map\nWhich value does the condition imply?"),
            answer='{"value": "none"}',
        ),
        Example(
            user=("Scenario: A family bakery considers opening a second shop in the city centre.\nCondition: Three "
                  "bakeries opened on the same block last year.\nFactor: nearby competition\nValues:\n- no bakery "
                  "within walking distance\n- several bakeries on the same street\n"
                  "Which value does the condition imply?"),
            answer='{"value": "several bakeries on the same street"}',
        ),
        Example(
            user=("Scenario: A family bakery considers opening a second shop in the city centre.\nCondition: The "
                  "owner recently won a national baking prize.\nFactor: rent of the premises\nValues:\n- affordable "
                  "rent\n- very high rent\nWhich value does the condition imply?"),
            answer='{"value": "none"}',
        ),
    ),
    max_tokens=200,
    temperature=0.7,
)

BIRD_REFLECT = PromptSpec(
    stage="bird.reflect",
    system=(
        "You review values matched to a condition. Remove each value the condition does not actually imply. Be "
        "lenient: keep a value whenever the condition reasonably implies it. Copy kept values exactly."
    ),
    user="Condition: {condition}\nMatched values:\n{values}\nWhich values should stay?",
    schema=None,
    examples=(
        Example(
            user=("Condition: The hiker's phone ran flat on the drive to the trailhead.\nMatched values:\n- low "
                  "battery\n- no signal\nWhich values should stay?"),
            answer='{"keep": ["low battery"]}',
        ),
    ),
    max_tokens=300,
    temperature=0.15,
)

BIRD_MAPPING_RELAXED = PromptSpec(
    stage="bird.mapping.relaxed",
    system=(
        "No factor value was clearly implied by the condition. Pick the single factor value from the list that "
        "comes closest to what the condition describes. You must pick one; copy the factor and the value exactly."
    ),
    user="Scenario: {scenario}\nCondition: {condition}\nFactors and their values:\n{options}\n"
         "Which factor value is closest?",
    schema=None,
    max_tokens=200,
    temperature=0.7,
)

__all__ += [name for name in dir() if name.startswith("BIRD_")]
