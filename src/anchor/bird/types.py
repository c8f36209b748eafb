"""BIRD's configuration and artefacts: the per-scenario model, the mapping trace and the estimate.

``BirdModel`` is built once per scenario (abduction, value labels, pruning, CPT data, training)
and reused for every condition; it is saved as JSON (``anchor.bird.io``) and loads back equal.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from anchor.bird.verbal import ReconciliationRule, VerbalLevel
from anchor.types import FactorLabel, LLMIdentity, Scenario, StageCost

BIRD_MODEL_SCHEMA_VERSION = 1


class _Model(BaseModel):
    # NaN/inf parameters (possible only with unconstrained training) must survive a save and load.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, ser_json_inf_nan="constants")


# --------------------------------------------------------------------------- configuration


class BirdTemperatures(_Model):
    """Sampling temperature per call (the reference code's values)."""

    sentences: float = Field(default=1.0, ge=0, le=2)
    factors: float = Field(default=0.15, ge=0, le=2, description="Factor summary, extension and reranking.")
    values: float = Field(default=0.15, ge=0, le=2, description="Value completeness.")
    labels: float = Field(default=0.7, ge=0, le=2)
    cpt_data: float = Field(default=0.7, ge=0, le=2)
    mapping: float = Field(default=0.7, ge=0, le=2, description="Strict mapping and the relaxed fallback.")
    reflect: float = Field(default=0.15, ge=0, le=2)


#: Fields of ``BirdConfig`` that only matter when estimating a condition; a stored model built with
#: other values of these is still valid.
MAPPING_FIELDS = frozenset({"mapping_rounds", "mapping_votes", "reflection"})


class BirdConfig(_Model):
    """Every BIRD knob, with the reference code's numbers as defaults.

    The four ``*`` switches at the end choose between a fix (default) and the reference
    behaviour; ``BirdConfig.strict_replication()`` turns all four to the reference behaviour.
    """

    # abduction
    sentences_per_call: int = Field(default=5, ge=1, le=20)
    sentence_calls_per_side: int = Field(default=2, ge=1, le=10)
    extend_factors: bool = Field(default=True, description="Run the three follow-up turns on the factor structure.")
    max_factors: int = Field(default=7, ge=1, le=12, description="The reranking turn keeps at most this many.")
    max_values_per_factor: int = Field(default=6, ge=2, le=12, description="Longer value lists are cut (with a note).")
    value_completion: Literal["as_needed", "opposites"] = Field(
        default="as_needed",
        description="'opposites': add the opposite of every value (the reference code does this for Common2Sense).")
    label_rounds: int = Field(default=3, ge=1, le=10)
    label_accept_ratio: float = Field(default=2 / 3, gt=0.5, le=1,
                                      description="Share of a value's recorded votes its label needs.")
    # CPT data and training
    samples: int = Field(default=128, ge=1, le=4096, description="Complete assignments judged by the LLM.")
    epochs: int = Field(default=20, ge=1, le=10_000)
    lr: float = Field(default=0.01, gt=0, le=10)
    batch_size: int = Field(default=4, ge=1, le=4096)
    margin_weight: float = Field(default=10.0, ge=0)
    init_outcome1: float = Field(default=0.75, gt=0, lt=1)
    init_outcome2: float = Field(default=0.25, gt=0, lt=1)
    init_neutral: float = Field(default=0.5, gt=0, lt=1)
    param_eps: float = Field(default=1e-3, gt=0, lt=0.5,
                             description="Constrained training projects every parameter into [eps, 1-eps].")
    margin_max_configs: int = Field(
        default=65_536, ge=1,
        description="The margin term averages over the full product up to this size, else over a seeded sample.")
    # mapping
    mapping_rounds: int = Field(default=3, ge=1, le=10)
    mapping_votes: int = Field(default=2, ge=1, description="Rounds that must pick a value for it to be kept.")
    reflection: bool = True
    temperatures: BirdTemperatures = Field(default_factory=BirdTemperatures)
    seed: int = 0
    # fixes (default) vs the reference code's behaviour
    case_sensitive_labels: bool = Field(default=False, description="* Reference: capitalised levels only, else neutral.")
    reconciliation: ReconciliationRule = Field(default="balanced", description="* Reference: 'original'.")
    constrain_parameters: bool = Field(default=True, description="* Reference: False (parameters unconstrained).")
    seeded_sampling: bool = Field(default=True, description="* Reference: False (assignments and batches unseeded).")

    @model_validator(mode="after")
    def _votes(self) -> BirdConfig:
        if self.mapping_votes > self.mapping_rounds:
            raise ValueError(f"mapping_votes ({self.mapping_votes}) cannot exceed mapping_rounds "
                             f"({self.mapping_rounds})")
        return self

    @classmethod
    def strict_replication(cls, **overrides: object) -> BirdConfig:
        """The reference code's behaviour, bugs included (see docs/bird.md)."""
        values: dict[str, object] = {"case_sensitive_labels": True, "reconciliation": "original",
                                     "constrain_parameters": False, "seeded_sampling": False}
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]

    def build_settings(self) -> dict[str, object]:
        """The settings a stored model depends on (everything except the mapping knobs)."""
        exclude: dict[str, object] = {name: True for name in MAPPING_FIELDS}
        exclude["temperatures"] = {"mapping": True, "reflect": True}
        return self.model_dump(mode="json", exclude=exclude)  # type: ignore[arg-type]

    def init_for(self, label: FactorLabel) -> float:
        return {FactorLabel.OUTCOME1: self.init_outcome1, FactorLabel.OUTCOME2: self.init_outcome2,
                FactorLabel.NEUTRAL: self.init_neutral}[label]


# --------------------------------------------------------------------------- abduction


class FactorDraft(_Model):
    """One factor of a draft structure, as the LLM proposed it (after tidying)."""

    name: str
    values: list[str]


class ValueVotes(_Model):
    """Label votes one value received over the labelling rounds."""

    outcome1: int = Field(default=0, ge=0)
    outcome2: int = Field(default=0, ge=0)
    both: int = Field(default=0, ge=0, description="'Both statements': counted as neutral.")
    neither: int = Field(default=0, ge=0)
    unreadable: int = Field(default=0, ge=0, description="Answers naming no option (dropped, as in the reference).")

    @property
    def recorded(self) -> int:
        return self.outcome1 + self.outcome2 + self.both + self.neither


class BirdValue(_Model):
    text: str = Field(min_length=1)
    label: FactorLabel
    votes: ValueVotes = Field(default_factory=ValueVotes)


class BirdFactor(_Model):
    name: str = Field(min_length=1)
    values: list[BirdValue] = Field(min_length=1)

    def value_texts(self) -> list[str]:
        return [v.text for v in self.values]


class PruneRecord(_Model):
    """Something removed between the draft structure and the final factors, and why."""

    factor: str
    value: str | None = Field(default=None, description="None when the whole factor was dropped.")
    reason: Literal["no_accepted_label", "single_label", "no_values", "over_limit", "labelling_failed"]
    detail: str = ""


class AbductionRecord(_Model):
    sentences_outcome1: list[str] = Field(default_factory=list)
    sentences_outcome2: list[str] = Field(default_factory=list)
    drafts: dict[str, list[FactorDraft]] = Field(
        default_factory=dict, description="Structure after each turn: initial, extended, reranked, completed.")
    failures: list[str] = Field(default_factory=list, description="Turns whose answer was unusable.")


# --------------------------------------------------------------------------- CPT data and training


class JudgedAssignment(_Model):
    """A complete assignment the LLM judged in words, and the training target its judgement gave; what is
    assigned is the subclass's (BIRD's factor values, or the ANCHOR factors a transplant marks present)."""

    index: int = Field(ge=0)
    copy_index: int = Field(default=0, ge=0, description="Which repeat of this assignment (small products cycle).")
    reasoning: str = ""
    raw_outcome1: str | None = None
    raw_outcome2: str | None = None
    level1: VerbalLevel | None = None
    level2: VerbalLevel | None = None
    reconciled1: VerbalLevel | None = None
    reconciled2: VerbalLevel | None = None
    target: float | None = Field(default=None, ge=0, le=1)
    used: bool = False
    note: str | None = None


class TrainingSample(JudgedAssignment):
    """One complete assignment of BIRD's factors, the LLM's verbal judgement of it, and the target it gave."""

    values: list[int] = Field(description="Index of the chosen value, one per factor (factor order).")


class TrainedValue(_Model):
    factor: str
    value: str
    label: FactorLabel
    init: float
    p: float = Field(description="Trained parameter; may leave (0, 1) only with constrain_parameters=False.")


class TrainingRecord(_Model):
    trained: bool = Field(description="False when no usable judgement was left to train on.")
    seed: int = Field(description="Seed of the assignment draw and the batch order (drawn at random when unseeded).")
    seeded: bool
    epochs: int
    lr: float
    batch_size: int
    margin_weight: float
    constrained: bool
    param_eps: float | None
    reconciliation: ReconciliationRule
    case_sensitive_labels: bool
    product_size: int | None = Field(
        default=None, ge=0, description="Complete assignments in the product (None for the transplant's open pool).")
    cycled: bool = Field(description="True when the product was smaller than the sample budget and was repeated.")
    n_samples: int
    n_used: int
    n_dropped: int
    margin_configs: int = Field(description="Assignments the margin term averages over.")
    margin_sampled: bool = Field(description="True when those were a seeded sample of a product too large to use.")
    steps: int
    loss_per_epoch: list[float] = Field(default_factory=list)


class BirdModel(_Model):
    """The stored per-scenario BIRD artefact."""

    schema_version: int = BIRD_MODEL_SCHEMA_VERSION
    scenario: Scenario
    config: BirdConfig
    factors: list[BirdFactor] = Field(default_factory=list, description="After labelling and pruning.")
    pruned: list[PruneRecord] = Field(default_factory=list)
    abduction: AbductionRecord = Field(default_factory=AbductionRecord)
    samples: list[TrainingSample] = Field(default_factory=list)
    parameters: list[TrainedValue] = Field(default_factory=list, description="Flattened in factor, value order.")
    training: TrainingRecord | None = None
    notes: list[str] = Field(default_factory=list, description="What happened while building, for the record.")
    warnings: list[str] = Field(default_factory=list,
                                description="Problems that qualify every estimate (copied into each one).")
    cost: list[StageCost] = Field(default_factory=list)
    compute_seconds: dict[str, float] = Field(default_factory=dict)
    llm: LLMIdentity

    @model_validator(mode="after")
    def _consistent(self) -> BirdModel:
        names = [f.name for f in self.factors]
        if len(set(names)) != len(names):
            raise ValueError("factor names must be unique")
        flat = [(f.name, v.text) for f in self.factors for v in f.values]
        if self.parameters and [(p.factor, p.value) for p in self.parameters] != flat:
            raise ValueError("parameters must list every factor value, in factor order")
        sizes = [len(f.values) for f in self.factors]
        for s in self.samples:
            if len(s.values) != len(sizes) or any(not 0 <= i < n for i, n in zip(s.values, sizes, strict=True)):
                raise ValueError(f"training sample {s.index} does not fit the factors")
        return self

    @property
    def usable(self) -> bool:
        """True when conditions can be estimated: factors exist and the CPT was trained."""
        return bool(self.factors) and self.training is not None and self.training.trained

    def parameter_matrix(self) -> list[list[float]]:
        """Trained parameters grouped per factor."""
        out: list[list[float]] = []
        i = 0
        for f in self.factors:
            out.append([self.parameters[i + j].p for j in range(len(f.values))])
            i += len(f.values)
        return out


# --------------------------------------------------------------------------- mapping and estimates


class MappedValue(_Model):
    factor: str
    value: str


class MappingRound(_Model):
    round: int = Field(ge=0)
    answers: dict[str, str | None] = Field(
        default_factory=dict, description="Factor -> the raw answer (None when the call failed).")
    chosen: dict[str, str | None] = Field(
        default_factory=dict, description="Factor -> the listed value it named, or None ('none' or invalid).")
    invalid: list[str] = Field(default_factory=list, description="Factors whose answer named no listed value.")


class BirdMappingTrace(_Model):
    """Everything the mapping did for one condition."""

    condition: str
    mode: Literal["strict", "relaxed"]
    rounds: list[MappingRound] = Field(default_factory=list)
    votes: dict[str, dict[str, int]] = Field(default_factory=dict, description="Factor -> value -> rounds.")
    vote_threshold: int = 0
    invalid_answers: int = Field(default=0, description="Answers naming no listed value (discarded).")
    failed_calls: int = Field(default=0, description="Calls that never produced a valid answer.")
    voted: list[MappedValue] = Field(default_factory=list)
    conflicts: list[str] = Field(default_factory=list, description="Factors with several values voted in (dropped).")
    reflection_ran: bool = False
    reflection_answer: list[str] = Field(default_factory=list)
    reflection_removed: list[MappedValue] = Field(default_factory=list)
    reflection_invalid: int = Field(default=0, description="Reflection answers naming no voted value (discarded).")
    reflection_failed: bool = False
    relaxed_used: bool = Field(default=False, description="The strict pass mapped nothing and the fallback ran.")
    relaxed_answer: str | None = None
    mapped: list[MappedValue] = Field(default_factory=list)


EstimateStatus = Literal["ok", "abstained", "failed"]


class BirdEstimate(_Model):
    """BIRD's answer for one condition.

    ``abstained`` covers BIRD's 'unknown': nothing mapped (``p_outcome1`` None) or a model output
    of exactly 0.5 (``p_outcome1`` 0.5 is kept, since the pairwise protocol still scores it when
    the mapping is not empty). ``failed`` means no estimate could be made (for example the model
    has no usable factor or the relaxed fallback got no valid answer).
    """

    condition: str
    p_outcome1: float | None = Field(default=None, ge=0, le=1)
    status: EstimateStatus
    reason: str | None = None
    n_values: int = Field(default=0, ge=0, description="Values the condition was mapped to.")
    n_assignments: int = Field(default=0, ge=0, description="Complete assignments averaged over.")
    notes: list[str] = Field(default_factory=list)
    trace: BirdMappingTrace | None = None
    cost: list[StageCost] = Field(default_factory=list)

    @property
    def p_outcome2(self) -> float | None:
        return None if self.p_outcome1 is None else 1.0 - self.p_outcome1


# --------------------------------------------------------------------------- BIRD on ANCHOR's factor space


class PresenceParameter(_Model):
    """One ANCHOR factor as a binary 'present' variable of the transplanted CPT."""

    factor_id: str
    text: str
    label: FactorLabel
    init: float
    p: float
    n_samples: int = Field(ge=0, description="Training assignments that contained it (0 = left at its prior).")


class TransplantSample(JudgedAssignment):
    """One complete assignment of ANCHOR factors (a mapped base set and random extras), judged as BIRD's are."""

    base: list[str] = Field(description="Factor ids of the mapped base set it completes.")
    factor_ids: list[str] = Field(description="The complete assignment: base plus random extra factors.")


class TransplantModel(_Model):
    """BIRD's CPT trained on an ANCHOR factor space by the structured Monte-Carlo scheme."""

    schema_version: int = BIRD_MODEL_SCHEMA_VERSION
    scenario: Scenario
    config: BirdConfig
    max_length: int = Field(ge=1, description="L: most factors in one complete assignment.")
    base_sets: list[list[str]] = Field(default_factory=list)
    samples: list[TransplantSample] = Field(default_factory=list)
    parameters: list[PresenceParameter] = Field(default_factory=list)
    training: TrainingRecord | None = None
    notes: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    cost: list[StageCost] = Field(default_factory=list)
    compute_seconds: dict[str, float] = Field(default_factory=dict)
    llm: LLMIdentity

    @property
    def usable(self) -> bool:
        return bool(self.parameters) and self.training is not None and self.training.trained
