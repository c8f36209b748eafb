"""Every prompt anchor sends, with the schema its answer must fit.

All wording here is ours. The prompts follow the intent of the ANCHOR method: abductive sentence
generation, factor extraction, validation, factor-outcome voting, theme naming and pruning,
condition-to-factor selection and reflection, probability elicitation, latent discovery, and the
direct-LLM baselines.

One module per stage, all re-exported here (``prompts.SELECT_FACTORS``):

* ``schemas``: the base of every answer schema, the schema factories and list layout helpers;
* ``space`` (stage 1), ``mapping`` (stage 2), ``inference`` (stage 3);
* ``baselines`` (the direct-LLM baselines), ``factcheck`` (claim negation), ``bird`` (BIRD).

Some schemas depend on the request (how many items, which strings are allowed); those come from
the small factories in ``schemas``, cached so that an identical request produces an identical
schema (and so an identical cache key).

Validation is deliberately looser than the schema sent: lengths, item counts and allowed strings
(``enum``) are sent to the server to constrain generation (small models otherwise ramble or loop),
but an answer is only re-asked when it is unusable (wrong shape, missing keys, a probability
outside [0, 1]). Stages trim long lists and discard, and count, strings that were not offered,
instead of re-asking forever a server that ignores the constraints.
"""

from __future__ import annotations

from anchor.llm.prompt import Example, PromptSpec
from anchor.prompts.baselines import (
    COMPARE,
    COT,
    COT_DIRECT,
    LOGITS_MESSAGES_SYSTEM,
    LOGITS_USER,
    ORACLE_FACTOR_PROB,
    ORACLE_FACTORS,
    VANILLA,
    VANILLA_DIRECT,
    CompareChoice,
    DirectChoice,
    ReasonedChoice,
    ReasonedProbability,
    VerbalProbability,
)
from anchor.prompts.bird import (
    BIRD_CPT_DATA,
    BIRD_FACTORS,
    BIRD_FACTORS_EXTEND,
    BIRD_FACTORS_RERANK,
    BIRD_LABEL_OPTIONS,
    BIRD_LABELS,
    BIRD_MAPPING,
    BIRD_MAPPING_RELAXED,
    BIRD_NONE,
    BIRD_REFLECT,
    BIRD_SENTENCES,
    BIRD_VALUES_AS_NEEDED,
    BIRD_VALUES_OPPOSITES,
    BIRD_VERBAL_LEVELS,
    BirdFactorItem,
    BirdFactorStructure,
    BirdJudgement,
    bird_closest_schema,
    bird_label_schema,
    bird_structure_text,
    bird_value_choice_schema,
    bird_value_keys,
)
from anchor.prompts.factcheck import NEGATE_CLAIM, Negation
from anchor.prompts.inference import (
    DISCOVER_LATENTS,
    ELICIT_BASE_RATE,
    ELICIT_LATENT_PARAMS,
    ELICIT_PHI,
    ELICIT_PHI_GIVEN_BASE_RATE,
    BaseRateAnswer,
)
from anchor.prompts.mapping import REFLECT_FACTORS, SELECT_FACTORS
from anchor.prompts.schemas import (
    AnswerModel,
    LabelName,
    LatentPair,
    Verdict,
    choice_list_schema,
    example_strings,
    item_keys,
    keyed_schema,
    latent_params_schema,
    latent_partition_schema,
    numbered,
    text_list_schema,
    theme_schema,
)
from anchor.prompts.space import (
    EXTRACT_FACTORS,
    GENERATE_SENTENCES,
    NAME_THEME,
    VALIDATE_FACTORS,
    VOTE_LABELS,
)

__all__ = [
    # stage 1: the factor space
    "EXTRACT_FACTORS", "GENERATE_SENTENCES", "NAME_THEME", "VALIDATE_FACTORS", "VOTE_LABELS",
    # stage 2: mapping
    "REFLECT_FACTORS", "SELECT_FACTORS",
    # stage 3: elicitation
    "BaseRateAnswer", "DISCOVER_LATENTS", "ELICIT_BASE_RATE", "ELICIT_LATENT_PARAMS", "ELICIT_PHI", "ELICIT_PHI_GIVEN_BASE_RATE",
    # baselines and fact checking
    "COMPARE", "COT", "COT_DIRECT", "LOGITS_MESSAGES_SYSTEM", "LOGITS_USER", "NEGATE_CLAIM", "ORACLE_FACTORS",
    "ORACLE_FACTOR_PROB", "VANILLA", "VANILLA_DIRECT", "CompareChoice", "DirectChoice", "Negation",
    "ReasonedChoice", "ReasonedProbability", "VerbalProbability",
    # BIRD
    "BIRD_CPT_DATA", "BIRD_FACTORS", "BIRD_FACTORS_EXTEND", "BIRD_FACTORS_RERANK", "BIRD_LABELS",
    "BIRD_LABEL_OPTIONS", "BIRD_MAPPING", "BIRD_MAPPING_RELAXED", "BIRD_NONE", "BIRD_REFLECT", "BIRD_SENTENCES",
    "BIRD_VALUES_AS_NEEDED", "BIRD_VALUES_OPPOSITES", "BIRD_VERBAL_LEVELS", "BirdFactorItem",
    "BirdFactorStructure", "BirdJudgement", "bird_closest_schema", "bird_label_schema", "bird_structure_text",
    "bird_value_choice_schema", "bird_value_keys",
    # schemas and layout
    "AnswerModel", "Example", "LabelName", "LatentPair", "PromptSpec", "Verdict", "choice_list_schema",
    "example_strings", "item_keys", "keyed_schema", "latent_params_schema", "latent_partition_schema",
    "numbered", "text_list_schema", "theme_schema",
]
