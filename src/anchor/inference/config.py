"""Stage-3 settings, in a module of their own so that reading them (the command line does, for its
help and checks) does not import the inference stack."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

from anchor.types import AggregationMethod


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

    @model_validator(mode="after")
    def _models(self) -> InferenceConfig:
        if not (self.use_nb or self.use_cbn):
            raise ValueError("at least one of Naive Bayes and the CBN must be used")
        if self.use_nb and self.use_cbn and self.aggregation == AggregationMethod.LOP and self.w_nb + self.w_cbn <= 0:
            raise ValueError("LOP weights must not both be zero")
        return self
