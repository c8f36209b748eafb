"""anchor: calibrated, auditable probabilities for two competing outcomes from LLM judgments.

An implementation of ANCHOR (abductive factor spaces, hierarchical mapping, Naive Bayes plus a
latent causal Bayesian network). The command line is ``anchor --help``; in Python::

    from anchor import Anchor, Scenario
    engine = Anchor()   # embedded model; Anchor(settings=LLMSettings(base_url=..., model=...)) for a server
    space = engine.build(Scenario(text="...", outcome1="...", outcome2="..."))
    [result] = engine.infer(space, "a condition")
    result.p_outcome1, result.factors, result.latents
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from anchor.lazy import lazy_exports
from anchor.settings.space import BuildParams

# Light types are imported eagerly; the pipeline (which pulls in numpy, scikit-learn and the
# LLM stack) only when first used, so `import anchor` stays cheap.
from anchor.types import (
    Condition,
    Factor,
    FactorLabel,
    FactorSpace,
    InferenceResult,
    Latent,
    MappingTrace,
    Scenario,
)
from anchor.version import __version__ as __version__  # re-exported: anchor.__version__

_LAZY = {
    "Anchor": "anchor.pipeline",
    "AnchorConfig": "anchor.config",
    "ABLATIONS": "anchor.config",
    "MappingConfig": "anchor.settings.mapping",
    "InferenceConfig": "anchor.settings.inference",
    "LLMSettings": "anchor.llm.settings",
    "LLMClient": "anchor.llm.client",
    "load_space": "anchor.space.io",
    "save_space": "anchor.space.io",
}

if TYPE_CHECKING:
    from anchor.config import ABLATIONS, AnchorConfig
    from anchor.llm.client import LLMClient
    from anchor.llm.settings import LLMSettings
    from anchor.pipeline import Anchor
    from anchor.settings.inference import InferenceConfig
    from anchor.settings.mapping import MappingConfig
    from anchor.space.io import load_space, save_space


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "ABLATIONS", "Anchor", "AnchorConfig", "BuildParams", "Condition", "Factor", "FactorLabel", "FactorSpace",
    "InferenceConfig", "InferenceResult", "LLMClient", "LLMSettings", "Latent", "MappingConfig", "MappingTrace",
    "Scenario", "load_space", "save_space",
]
