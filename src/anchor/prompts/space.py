"""Prompts of stage 1, the factor space: abductive sentences, factor extraction and validation,
voting on each factor's outcome, and naming (and pruning) the themes of clusters."""

from __future__ import annotations

from anchor.llm.prompt import Example, PromptSpec

# --------------------------------------------------------------------------- abduction

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
        "sentences, no judgement words like 'better'. Leave out whatever has no bearing on the scenario "
        "or its outcomes; when nothing is left, the list is empty."
    ),
    user=(
        "Scenario: {scenario}\nOutcome 1: {outcome1}\nOutcome 2: {outcome2}\nSentences:\n{sentences}\n"
        "List the distinct factors."
    ),
    schema=None,
    examples=(
        Example(
            user=(
                "Scenario: A cafe owner decides whether to keep the terrace open in late autumn.\nOutcome 1: "
                "Keeping the terrace open raises the cafe's weekly takings.\nOutcome 2: Keeping the terrace open "
                "does not raise the cafe's weekly takings.\nSentences:\n1. Guests with dogs prefer outdoor seats "
                "and would otherwise walk on to another cafe.\n2. On cold evenings the terrace stays empty while "
                "its patio heaters still burn gas.\n3. The owner's nephew collects stamps.\nList the distinct "
                "factors."
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
