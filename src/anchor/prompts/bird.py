"""Prompts of the BIRD baseline (``anchor.bird``). Our own wording and examples; the structure of
each call follows the public BIRD code (see docs/bird.md). Stage names start with
"bird.".
"""

from __future__ import annotations

import json
from functools import lru_cache

from pydantic import BaseModel, Field, create_model

from anchor.llm.prompt import Example, PromptSpec
from anchor.prompts.schemas import AnswerModel

BIRD_LABEL_OPTIONS = ("statement 1", "statement 2", "both", "neither")
BIRD_VERBAL_LEVELS = ("very likely", "likely", "somewhat likely", "neutral", "somewhat unlikely", "unlikely",
                      "very unlikely")
BIRD_NONE = "none"


class BirdFactorItem(AnswerModel):
    factor: str = Field(min_length=1, json_schema_extra={"maxLength": 80})
    values: list[str] = Field(min_length=1, json_schema_extra={
        "items": {"type": "string", "minLength": 1, "maxLength": 80}, "maxItems": 8})


class BirdFactorStructure(AnswerModel):
    factors: list[BirdFactorItem] = Field(min_length=1, json_schema_extra={"maxItems": 12})


class BirdJudgement(AnswerModel):
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
    labels = create_model(f"BirdValueLabels{n}", __base__=AnswerModel, **{k: option for k in bird_value_keys(n)})
    return create_model(f"BirdLabels{n}", __base__=AnswerModel,
                        explanation=(str, Field(json_schema_extra={"maxLength": 500})),
                        labels=(labels, ...))


@lru_cache(maxsize=1024)
def bird_value_choice_schema(options: tuple[str, ...]) -> type[BaseModel]:
    """``{"value": one of options or "none"}``; any string validates, the stage checks it."""
    return create_model("BirdValueChoice", __base__=AnswerModel,
                        value=(str, Field(json_schema_extra={"enum": [*options, BIRD_NONE]})))


@lru_cache(maxsize=256)
def bird_closest_schema(factors: tuple[str, ...], values: tuple[str, ...]) -> type[BaseModel]:
    """``{"factor": ..., "value": ...}`` for the relaxed fallback."""
    return create_model("BirdClosestValue", __base__=AnswerModel,
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
