"""Prompts of stage 2, mapping a condition onto factors: selection among the retrieved candidates,
then reflection on the selection."""

from __future__ import annotations

from anchor.llm.prompt import Example, PromptSpec

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
