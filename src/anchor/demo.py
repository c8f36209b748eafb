"""The demo's inputs: the noodle case study of the ANCHOR paper (its scenario, outcomes and the five
conditions of its mapping table), reproduced as data so ``anchor demo`` can be compared with it."""

from __future__ import annotations

from anchor.types import Scenario

NOODLES = Scenario(
    text="The efficiency of cooking noodles is being compared between hot water and warm water.",
    outcome1="Noodles cook much more efficiently in hot water than they do in warm water.",
    outcome2="Noodles cook much more efficiently in warm water than they do in hot water.",
)
NOODLE_CONDITIONS = [
    "The higher temperature of hot water can accelerate the gelatinization process in starchy foods like noodles.",
    "Cooking in hot water reduces the amount of total time that the noodles spend in the water.",
    "Hot water helps in killing any potential foodborne pathogens or microbes present in the noodles.",
    "You're cooking a large quantity of noodles.",
    "You are at a high altitude where water boils at lower temperatures than at sea level.",
]
