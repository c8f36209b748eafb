"""ANCHOR's configuration: the three stages' settings in one object, and the paper's ablations by name.

Kept apart from ``anchor.pipeline`` so that the command line can read defaults and ranges without
importing the embedding and retrieval stacks.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, Field

from anchor.settings.inference import AggregationMethod, InferenceConfig
from anchor.settings.mapping import MappingConfig
from anchor.settings.space import BuildParams

#: Ablations of the paper (Table "Ablation results") and the BMA variant, by CLI name.
ABLATIONS: dict[str, str] = {
    "no-cbn": "aggregate Naive Bayes only ('w/o cbn')",
    "no-nb": "aggregate the latent CBN only ('w/o nb')",
    "no-cluster": "one flat factor group, no UMAP/HDBSCAN ('w/o cluster'; affects the build)",
    "no-hierarchy": "flat KNN over all factors, no prototypes ('w/o hierarchy')",
    "no-pe-llm": "factor and latent parameters from voting labels, not elicited ('w/o pe-llm')",
    "bma": "Bayesian model averaging instead of the linear opinion pool",
}


class AnchorConfig(BaseModel):
    build: BuildParams = Field(default_factory=BuildParams)
    mapping: MappingConfig = Field(default_factory=MappingConfig)
    inference: InferenceConfig = Field(default_factory=InferenceConfig)

    def with_ablations(self, names: Iterable[str]) -> AnchorConfig:
        """A copy with the named ablations switched on (see ``ABLATIONS``)."""
        cfg = self.model_copy(deep=True)
        for name in names:
            if name not in ABLATIONS:
                raise ValueError(f"unknown ablation {name!r}; choose from {', '.join(ABLATIONS)}")
            if name == "no-cbn":
                cfg.inference.use_cbn = False
            elif name == "no-nb":
                cfg.inference.use_nb = False
            elif name == "no-cluster":
                cfg.build.cluster = False
            elif name == "no-hierarchy":
                cfg.mapping.hierarchical = False
            elif name == "no-pe-llm":
                cfg.inference.llm_parameters = False
            elif name == "bma":
                cfg.inference.aggregation = AggregationMethod.BMA
        InferenceConfig.model_validate(cfg.inference.model_dump())  # e.g. no-nb + no-cbn together
        return cfg

    def active_ablations(self) -> list[str]:
        out = []
        if not self.inference.use_cbn:
            out.append("no-cbn")
        if not self.inference.use_nb:
            out.append("no-nb")
        if not self.build.cluster:
            out.append("no-cluster")
        if not self.mapping.hierarchical:
            out.append("no-hierarchy")
        if not self.inference.llm_parameters:
            out.append("no-pe-llm")
        if self.inference.aggregation == AggregationMethod.BMA:
            out.append("bma")
        return out
