"""BIRD (Feng et al., ICLR 2025) as a baseline method beside ANCHOR, and the parts that transplant
its CPT training onto ANCHOR's factor space.

Per scenario, ``build_bird_model`` (or ``BirdMethod.prepare``) runs forward abduction (factors with
mutually exclusive values), labels and prunes the values, has the LLM judge 128 complete
assignments on a seven-level verbal scale and fits the CPT. Per condition,
``BirdMethod.estimate`` maps the condition onto values (strict, or relaxed with a closest-value
fallback) and averages the CPT over the consistent completions. See docs/bird.md for
where this follows the reference code and where it departs from it.
"""

from anchor.bird.builder import build_bird_model
from anchor.bird.inference import marginal_probability
from anchor.bird.io import BirdModelFileError, load_model, load_transplant_model, save_model
from anchor.bird.mapping import MappingSlot, RelaxedMappingFailed, map_condition
from anchor.bird.method import BirdMethod
from anchor.bird.transplant import (
    map_condition_on_space,
    pool_with_anchor,
    sample_structured_assignments,
    train_on_space,
    transplant_probability,
)
from anchor.bird.types import (
    BIRD_MODEL_SCHEMA_VERSION,
    BirdConfig,
    BirdEstimate,
    BirdFactor,
    BirdMappingTrace,
    BirdModel,
    BirdValue,
    MappedValue,
    TransplantModel,
)
from anchor.bird.verbal import VerbalLevel, VerbalParseError, parse_level, reconcile

__all__ = [
    "BIRD_MODEL_SCHEMA_VERSION", "BirdConfig", "BirdEstimate", "BirdFactor", "BirdMappingTrace", "BirdMethod",
    "BirdModel", "BirdModelFileError", "BirdValue", "MappedValue", "MappingSlot", "RelaxedMappingFailed",
    "TransplantModel", "VerbalLevel", "VerbalParseError", "build_bird_model", "load_model", "load_transplant_model",
    "map_condition",
    "map_condition_on_space", "marginal_probability", "parse_level", "pool_with_anchor", "reconcile",
    "sample_structured_assignments", "save_model", "train_on_space", "transplant_probability",
]
