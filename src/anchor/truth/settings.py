"""What a world file is generated from: the settings of :func:`anchor.truth.generate.generate_worlds`,
light to import (the command line checks its flags against them before anything else loads)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: The structures a world's hidden model can have:
#: ``naive-bayes``: O -> f (factors independent given the outcome, what Naive Bayes assumes);
#: ``latent``: O -> L_i -> f (the latent layer ANCHOR's network assumes);
#: ``interaction``: f -> O with interaction terms (factors that matter together), which neither
#: model can represent;
#: ``network``: a published Bayesian network (anchor.truth.networks), not generated here.
GeneratedStructure = Literal["naive-bayes", "latent", "interaction"]
Structure = GeneratedStructure | Literal["network"]
STRUCTURES: tuple[GeneratedStructure, ...] = ("naive-bayes", "latent", "interaction")
StructureChoice = GeneratedStructure | Literal["all"]
STRUCTURE_CHOICES: tuple[str, ...] = (*STRUCTURES, "all")

#: The most skewed prior a generated world may have: beyond it some factors' P(O1 | f) would have to
#: leave the bounds every world keeps (anchor.truth.generate.PHI_BOUNDS).
MIN_PRIOR = 0.05

#: Factor counts and theme counts a world may have (1 + 4 + 14 = 19 variables at most).
MIN_FACTORS, MAX_FACTORS = 8, 14
MIN_THEMES, MAX_THEMES = 2, 4


class GenerationSettings(BaseModel):
    """What a world file is generated from (recorded in ``WorldFile.generator``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    structure: StructureChoice = "all"
    n_worlds: int = Field(default=2, ge=1, le=80, description="Worlds per structure (the bank has 240 "
                                                               "distinct scenarios: 80 for each of three).")
    seed: int = Field(default=0, ge=0, description="Seed of every draw.")
    n_conditions: int = Field(default=24, ge=4, le=300, description="Conditions per world (at least one of "
                                                                     "each of the four kinds).")
    min_factors: int = Field(default=MIN_FACTORS, ge=MIN_FACTORS, le=MAX_FACTORS)
    max_factors: int = Field(default=MAX_FACTORS, ge=MIN_FACTORS, le=MAX_FACTORS)
    prior: float = Field(default=0.5, ge=MIN_PRIOR, le=1 - MIN_PRIOR, description=(
        "P(O1) before anything is known, in every world (naive-bayes and latent: the outcome's own table; "
        "interaction: the intercept is set to give it)."))

    @model_validator(mode="after")
    def _ordered(self) -> GenerationSettings:
        if self.min_factors > self.max_factors:
            raise ValueError(f"min_factors {self.min_factors} is above max_factors {self.max_factors}")
        return self

    @property
    def structures(self) -> tuple[GeneratedStructure, ...]:
        return STRUCTURES if self.structure == "all" else (self.structure,)
