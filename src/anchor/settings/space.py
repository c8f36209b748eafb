"""Stage-1 settings, in a module of their own: the command line reads them (for its help and checks)
without importing the build, and the domain model (:class:`anchor.types.FactorSpace`) records the
settings a space was built with, so this module imports nothing of anchor's."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: Default abduction window (``BuildParams.abduction_window``); see docs/speed.md for the measurements.
ABDUCTION_WINDOW = 20
#: How stage 1 ran before the abduction window existed: what a stored space or run configuration
#: that does not name these settings was built with.
LEGACY_BUILD = {"abduction_window": 1, "abduction_steering": "merged"}


def with_legacy_build(build: object) -> object:
    """A build-settings dict read from disk, completed with ``LEGACY_BUILD`` where it predates them."""
    if isinstance(build, dict):
        return {**LEGACY_BUILD, **build}
    return build


class BuildParams(BaseModel):
    """Stage-1 hyperparameters (paper Appendix B; 80/10/20 for Common2Sense and Plasma)."""

    model_config = ConfigDict(extra="forbid", frozen=False, validate_assignment=True)

    n_target: int = Field(default=80, ge=1)
    batch_size: int = Field(default=10, ge=1, description="b: sentences generated per round.")
    max_rounds: int = Field(default=20, ge=1)
    patience: int = Field(default=3, ge=1, description="Stop after this many rounds that add nothing.")
    dedup_threshold: float = Field(
        default=0.9, gt=0, le=1, description="Cosine similarity at or above which a candidate is a duplicate."
    )
    borderline_threshold: float = Field(
        default=0.75, gt=0, le=1, description="Cosine similarity from which the LLM judges duplicates."
    )
    check_relevance: bool = Field(default=False, description=(
        "Also ask the LLM, in a request of its own each round, whether every candidate bears on the "
        "scenario. Off by default: the extraction prompt already leaves out what does not, and the "
        "validation request is then sent only for borderline duplicates."))
    vote_samples: int = Field(default=3, ge=1, description="m: self-consistency samples per factor label.")
    vote_batch_size: int = Field(default=8, ge=1, description="Factors labelled per LLM call.")
    # Sampling temperatures (not given in the paper): abduction high enough that successive rounds
    # keep finding new factors, votes moderate so that the m samples can disagree.
    abduction_temperature: float = Field(default=0.9, ge=0, le=2,
                                         description="Temperature of the sentence generation in each abduction round.")
    vote_temperature: float = Field(default=0.7, ge=0, le=2, description="Temperature of the m label votes.")
    cluster: bool = True
    prune: bool = True
    seed: int = 0
    abduction_window: int = Field(default=ABDUCTION_WINDOW, ge=1, description=(
        "Abduction rounds in flight at once: a round starts when the one this many rounds before it has "
        "merged; rounds still merge one by one, in order. 1 = one round at a time; max_rounds or more = all "
        "rounds at once."))
    abduction_steering: Literal["merged", "none"] = Field(default="none", description=(
        "What a round's sentence-generation prompt listed as already covered. 'none': nothing, every round "
        "independent of the others, as in the paper's Algorithm 1; the only setting this version builds with. "
        "'merged': the factors merged when the round started, in spaces and runs of earlier versions built "
        "with a window below max_rounds (with a wider window every round started before any merge and "
        "listed nothing, so those read as 'none')."))

    @model_validator(mode="after")
    def _thresholds(self) -> BuildParams:
        if self.borderline_threshold > self.dedup_threshold:
            raise ValueError("borderline_threshold must not exceed dedup_threshold")
        if self.abduction_steering == "merged" and self.abduction_window >= self.max_rounds:
            # Every round started at once, before any merge: its prompt listed nothing. The same build as
            # 'none', read so, so that such a space or run compares equal to today's.
            self.abduction_steering = "none"
        return self


#: Paper Appendix B: factor-generation sizes per dataset group.
BUILD_SIZES: dict[str, dict[str, int]] = {
    "large": {"n_target": 80, "batch_size": 10, "max_rounds": 20},  # Common2Sense, Plasma
    "small": {"n_target": 40, "batch_size": 5, "max_rounds": 10},  # Today, fact checking
    # For the embedded 135M model, which adds a factor or two per round at best: a paper-size
    # build takes ~3 minutes per scenario there and yields no better a space.
    "quick": {"n_target": 16, "batch_size": 4, "max_rounds": 4},
}


def default_build_params(dataset: str, seed: int = 0, sizes: str = "paper") -> BuildParams:
    """The paper's per-dataset sizes (``sizes="paper"``) or the quick ones (``"quick"``)."""
    if sizes == "quick":
        return BuildParams(**BUILD_SIZES["quick"], seed=seed)
    if sizes != "paper":
        raise ValueError(f"unknown build sizes {sizes!r}; use 'paper' or 'quick'")
    size = BUILD_SIZES["large" if dataset in ("common2sense-pairwise", "common2sense", "plasma") else "small"]
    return BuildParams(**size, seed=seed)
