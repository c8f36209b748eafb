"""Stage-3 settings, in a module of their own so that reading them (the command line does, for its
help and checks) does not import the inference stack."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field, model_validator

#: How stage 3 reads the elicited numbers: ``paper`` as the ANCHOR paper (even odds; phi doubles as the
#: latent link), ``consistent`` as what each prompt asks, with the scenario's base rate counted once
#: (:mod:`anchor.inference.consistent`).
InferenceRule = Literal["paper", "consistent"]
INFERENCE_RULES: tuple[InferenceRule, ...] = ("paper", "consistent")


class AggregationMethod(StrEnum):
    LOP = "lop"
    BMA = "bma"


#: The rule of the commands that answer a user's own cases (predict, serve, infer, explain, build) and of
#: ``anchor.Anchor`` when given no configuration: the one ``anchor truth bench`` finds closer to the truth
#: at its default errors in every structure and prior (docs/inference.md). The paper's evaluation
#: commands (eval, reproduce, the analyses) keep InferenceConfig's own default, the paper's rule.
USER_RULE: InferenceRule = "consistent"
#: The pool's weights (Naive Bayes, network) under the consistent rule when none are given.
CONSISTENT_WEIGHTS = (0.0, 1.0)


class InferenceConfig(BaseModel):
    """Stage-3 settings (paper defaults: elicitation temperature 0.5, Laplace smoothing 0.5,
    equal LOP weights, tau = 0)."""

    llm_parameters: bool = Field(default=True, description="False = 'w/o pe-llm': parameters from labels.")
    use_nb: bool = True
    use_cbn: bool = True
    aggregation: AggregationMethod = AggregationMethod.LOP
    w_nb: float = Field(default=0.5, ge=0)
    w_cbn: float = Field(default=0.5, ge=0)
    eps: float = Field(default=0.01, ge=0, lt=0.5, description="Elicited probabilities are clipped to [eps, 1-eps].")
    smoothing: float = Field(default=0.5, ge=0, description="Laplace smoothing for label-count latent CPTs.")
    temperature: float = Field(default=0.5, ge=0, le=2, description="Temperature of the phi and latent-parameter "
                                                                     "elicitation (the paper's 0.5).")
    max_latents: int = Field(default=5, ge=1)
    tau: float = Field(default=0.0, ge=0, le=1, description="Unknown when max(P(O1), P(O2)) < tau.")
    rule: InferenceRule = Field(default="paper", description=(
        "'paper': the paper's arithmetic (even odds; phi doubles as the latent link); 'consistent': phi read as "
        "P(O1 | f), the scenario's base rate counted once and the latent links solved from phi "
        "(anchor.inference.consistent)."))
    base_rate: float | None = Field(default=None, gt=0, lt=1, description=(
        "The consistent rule's base rate P(O1 | scenario), when known (None: elicited once per scenario)."))
    base_rate_samples: int = Field(default=5, ge=1, le=20, description=(
        "How many times the base rate is asked (one request where the server honours n); their log-odds are "
        "averaged: an error in the base rate moves every answer of the scenario."))

    @model_validator(mode="after")
    def _rule_weights(self) -> InferenceConfig:
        # Under the consistent rule the network contains Naive Bayes (a latent that is the outcome itself is
        # Naive Bayes exactly) and is exact in every world of either shape; Naive Bayes is not, where factors
        # share a latent. So unless the pool's weights are given, the network answers alone.
        if self.rule == "consistent" and not {"w_nb", "w_cbn"} & self.model_fields_set:
            self.w_nb, self.w_cbn = CONSISTENT_WEIGHTS
        return self

    @model_validator(mode="after")
    def _models(self) -> InferenceConfig:
        if not (self.use_nb or self.use_cbn):
            raise ValueError("at least one of Naive Bayes and the CBN must be used")
        if self.use_nb and self.use_cbn and self.aggregation == AggregationMethod.LOP and self.w_nb + self.w_cbn <= 0:
            raise ValueError("LOP weights must not both be zero")
        return self
