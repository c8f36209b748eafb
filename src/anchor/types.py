"""Typed domain model shared by every stage.

These pydantic models are what the stages hand to each other and what is written to disk as
JSON. They hold data only; the algorithms live in the stage modules.
"""

from __future__ import annotations

import base64
import hashlib
import json
from enum import StrEnum
from typing import Literal

import numpy as np
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from anchor.settings.inference import AggregationMethod, InferenceRule
from anchor.settings.space import BuildParams, with_legacy_build
from anchor.text import same_text

FACTOR_SPACE_SCHEMA_VERSION = 1
class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, validate_assignment=True)


# --------------------------------------------------------------------------- problem


class Scenario(_Model):
    """A scenario with its two competing outcomes (the neutral reasoning space)."""

    text: str = Field(default="", description="High-level scenario; may be empty (fact checking).")
    outcome1: str = Field(min_length=1, description="First outcome, O1.")
    outcome2: str = Field(min_length=1, description="Second, competing outcome, O2.")

    @field_validator("text", "outcome1", "outcome2")
    @classmethod
    def _strip(cls, value: str) -> str:
        return " ".join(value.split())

    @field_validator("outcome1", "outcome2")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        # Checked after the whitespace clean-up: "   " passes min_length but says nothing.
        if not value:
            raise ValueError("is empty (only whitespace)")
        return value

    @model_validator(mode="after")
    def _distinct(self) -> Scenario:
        if same_text(self.outcome1, self.outcome2):
            raise ValueError("outcome1 and outcome2 must differ (they read the same, ignoring case, Unicode "
                             "normalisation and invisible characters)")
        return self

    def swapped(self) -> Scenario:
        return Scenario(text=self.text, outcome1=self.outcome2, outcome2=self.outcome1)


def scenario_key(s: Scenario) -> str:
    """Stable 16-hex-digit id of a scenario: the key of the factor space built for it.

    A hash of (text, outcome1, outcome2) after the whitespace clean-up, the same in every run and
    process. The outcome order matters (``swapped()`` gives another key): a space labels its factors
    relative to outcome1 and outcome2.
    """
    payload = json.dumps([s.text, s.outcome1, s.outcome2], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


class Condition(_Model):
    """A downstream condition u whose effect on the outcomes we estimate."""

    text: str = Field(min_length=1)

    @field_validator("text")
    @classmethod
    def _strip(cls, value: str) -> str:
        value = " ".join(value.split())
        if not value:
            raise ValueError("condition text is empty")
        return value


# --------------------------------------------------------------------------- factors


class FactorLabel(StrEnum):
    """Which outcome a factor argues for, decided by self-consistent voting."""

    OUTCOME1 = "outcome1"
    OUTCOME2 = "outcome2"
    NEUTRAL = "neutral"


class LabelVotes(_Model):
    outcome1: int = Field(default=0, ge=0)
    outcome2: int = Field(default=0, ge=0)
    neutral: int = Field(default=0, ge=0)

    @property
    def total(self) -> int:
        return self.outcome1 + self.outcome2 + self.neutral

    def majority(self) -> FactorLabel:
        """Majority label; ties (and no votes) resolve to neutral."""
        counts = {
            FactorLabel.OUTCOME1: self.outcome1,
            FactorLabel.OUTCOME2: self.outcome2,
            FactorLabel.NEUTRAL: self.neutral,
        }
        best = max(counts.values())
        winners = [label for label, n in counts.items() if n == best]
        return winners[0] if len(winners) == 1 and best > 0 else FactorLabel.NEUTRAL


class Factor(_Model):
    id: str = Field(pattern=r"^f\d+$")
    text: str = Field(min_length=1)
    label: FactorLabel = FactorLabel.NEUTRAL
    votes: LabelVotes = Field(default_factory=LabelVotes)
    cluster_id: int | None = Field(default=None, description="None means unclustered (HDBSCAN noise).")
    round: int = Field(default=0, ge=0, description="Abduction round that produced it (1-based).")


class PrunedFactor(_Model):
    """A factor removed by the theme/pruning pass, kept for the audit trail."""

    factor_id: str
    text: str
    reason: str
    duplicate_of: str | None = None


class Cluster(_Model):
    id: int = Field(ge=0)
    theme: str
    factor_ids: list[str]
    pruned: list[PrunedFactor] = Field(default_factory=list)


class RejectedCandidate(_Model):
    text: str
    reason: Literal["duplicate", "near_duplicate", "irrelevant", "invalid", "example_echo"]
    similar_to: str | None = None
    similarity: float | None = None
    at_merge: bool = Field(default=False, description=(
        "Rejected when the round merged, against a factor merged after the round was validated "
        "(only with several rounds in flight)."))


class AbductionRound(_Model):
    round: int
    sentences: list[str]
    extracted: list[str]
    added: list[str]
    rejected: list[RejectedCandidate] = Field(default_factory=list)
    known_through: int | None = Field(default=None, ge=0, description=(
        "The round started once the rounds up to this one had merged (0: at the start); it was validated "
        "against their factors and re-checked at merge time against later ones. None in spaces from before "
        "pipelined abduction, where it is always the previous round."))
    shown: list[str] | None = Field(default=None, description=(
        "The factors its sentence-generation prompt listed as already covered (None: not recorded, a space "
        "from before pipelined abduction, whose prompts listed the latest factors found before the round)."))
    reasked: list[str] = Field(default_factory=list, description=(
        "Candidates put to the LLM again at merge time because a factor merged after the round was "
        "validated is a new borderline neighbour."))


class StopReason(StrEnum):
    TARGET_REACHED = "target_reached"
    MAX_ROUNDS = "max_rounds"
    SATURATED = "saturated"  # k consecutive rounds added nothing new


class ClusteringStats(_Model):
    method: Literal["umap+hdbscan", "flat", "tiny-fallback"]
    n_factors: int
    n_clusters: int
    n_unclustered: int
    silhouette: float | None = None
    umap_n_components: int | None = None
    umap_n_neighbors: int | None = None
    hdbscan_min_cluster_size: int | None = None
    seed: int = 0
    note: str = ""


class StageCost(_Model):
    """LLM cost of one stage (or ``stage="total"``), summed over its calls, as run directories record it."""

    stage: str
    llm_calls: int = Field(default=0, description="Attempts with a known outcome (answered, or failed), retries "
                                                 "included; interrupted requests are counted apart.")
    logical_requests: int | None = Field(default=None, description=(
        "Requests as asked for, each once however many attempts it took (anchor.llm.ledger): a server's faults "
        "do not change them. None in costs recorded before they were counted."))
    failed_attempts: int = Field(default=0, description="Of the attempts, how many failed (HTTP error, bad answer).")
    interrupted: int = Field(default=0, description=(
        "Requests sent when the process was killed, before an answer came: the server may or may not have "
        "received (and answered) them; not in llm_calls, and their tokens are unknown."))
    interrupted_prompt_tokens: int = Field(default=0, description=(
        "The client's estimate of the prompt tokens of the interrupted requests (not in prompt_tokens)."))
    samples: int = Field(default=0, description="Answers the backend returned to those requests; more than the "
                                                "requests when one request asked for several samples (n).")
    cache_hits: int = Field(default=0, description="Answers served from the cache (no request made).")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_seconds: float = Field(default=0.0, validation_alias=AliasChoices("llm_seconds", "request_seconds"),
                               description="Request time summed over requests (overlapping ones each in full); "
                                           "request_seconds in older metrics.json.")
    wall_seconds: float = Field(default=0.0, description="Elapsed time during which at least one request of "
                                                         "this stage was in flight.")


class CriticalPath(_Model):
    """The longest chain of requests that had to wait for one another: however many requests the
    server takes at once, the work takes at least these seconds."""

    requests: int = Field(default=0, description="Requests in the chain, each sent after the one before answered.")
    seconds: float = Field(default=0.0, description="Their request times added up.")


class LLMIdentity(_Model):
    backend: str
    model: str


class EmbeddingMatrix(_Model):
    """Float32 vectors stored as base64 so the JSON stays exact and compact."""

    model: str
    dim: int
    data: str = Field(description="base64 of little-endian float32, row-major")
    rows: int

    @classmethod
    def from_array(cls, model: str, array: np.ndarray) -> EmbeddingMatrix:
        arr = np.ascontiguousarray(array, dtype="<f4")
        if arr.ndim != 2:
            raise ValueError("embedding matrix must be 2-D")
        return cls(model=model, dim=int(arr.shape[1]), rows=int(arr.shape[0]),
                   data=base64.b64encode(arr.tobytes()).decode("ascii"))

    def to_array(self) -> np.ndarray:
        raw = base64.b64decode(self.data.encode("ascii"))
        arr = np.frombuffer(raw, dtype="<f4")
        if arr.size != self.rows * self.dim:
            raise ValueError(f"embedding payload holds {arr.size} floats, expected {self.rows}x{self.dim}")
        return arr.reshape(self.rows, self.dim).astype(np.float32)


class SpaceEmbeddings(_Model):
    factor_ids: list[str]
    factors: EmbeddingMatrix
    cluster_ids: list[int]
    themes: EmbeddingMatrix | None = None


class BaseRate(_Model):
    """The scenario's base rate P(O1 | S), before any condition, as the consistent estimator counts it."""

    p_outcome1: float = Field(gt=0, lt=1, description="The value used: kept inside [eps, 1 - eps].")
    p_raw: float = Field(ge=0, le=1, description="As stated (elicited, or given by the user).")
    source: Literal["elicited", "given"] = Field(description=(
        "'elicited': asked of the probability estimator once per scenario; 'given': set by the user."))
    model: str | None = Field(default=None, description="The model that stated it (None when given).")
    samples: list[float] = Field(default_factory=list, description=(
        "Each value the model stated (self-consistency); p_raw pools them (the mean of their log-odds)."))


class FactorSpace(_Model):
    """The stored stage-1 artefact: built once per scenario, reused for every condition."""

    schema_version: int = FACTOR_SPACE_SCHEMA_VERSION
    scenario: Scenario
    factors: list[Factor]
    clusters: list[Cluster] = Field(default_factory=list)
    unclustered: list[str] = Field(default_factory=list, description="Factor ids outside every cluster.")
    stop_reason: StopReason
    rounds: list[AbductionRound] = Field(default_factory=list)
    params: BuildParams
    clustering: ClusteringStats
    cost: list[StageCost] = Field(default_factory=list)
    critical_path: CriticalPath | None = Field(default=None, description=(
        "The build's longest chain of dependent requests (None in spaces built before it was recorded)."))
    compute_seconds: dict[str, float] = Field(default_factory=dict)
    llm: LLMIdentity
    embedding_model: str
    embeddings: SpaceEmbeddings | None = None
    base_rate: BaseRate | None = Field(default=None, description=(
        "The scenario's base rate, elicited when the space was built for the consistent estimator (None: "
        "elicited at inference time when needed)."))
    rounds_beyond_stop: list[AbductionRound] = Field(default_factory=list, description=(
        "Rounds that had started (several rounds in flight) when the stop was decided: run to the end, "
        "cached and paid for (their requests are in the abduction cost), but not merged."))

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: object) -> object:
        # A space written before the abduction window existed was built one round at a time.
        if isinstance(data, dict) and "params" in data:
            data = {**data, "params": with_legacy_build(data["params"])}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> FactorSpace:
        ids = [f.id for f in self.factors]
        if len(set(ids)) != len(ids):
            raise ValueError("factor ids must be unique")
        known = set(ids)
        placed: list[str] = list(self.unclustered)
        for cluster in self.clusters:
            placed.extend(cluster.factor_ids)
        unknown = [fid for fid in placed if fid not in known]
        if unknown:
            raise ValueError(f"clusters reference unknown factors: {unknown[:5]}")
        if len(set(placed)) != len(placed):
            raise ValueError("a factor appears in more than one cluster or also as unclustered")
        return self

    # Convenience lookups (not serialised).
    def factor(self, factor_id: str) -> Factor:
        for f in self.factors:
            if f.id == factor_id:
                return f
        raise KeyError(factor_id)

    def by_id(self) -> dict[str, Factor]:
        return {f.id: f for f in self.factors}

    def theme_of(self, factor_id: str) -> str | None:
        for cluster in self.clusters:
            if factor_id in cluster.factor_ids:
                return cluster.theme
        return None

    def active_factor_ids(self) -> list[str]:
        """Factors that survived pruning: cluster members plus unclustered ones."""
        out = list(self.unclustered)
        for cluster in self.clusters:
            out.extend(cluster.factor_ids)
        return out


# --------------------------------------------------------------------------- mapping


class RetrievedFactor(_Model):
    factor_id: str
    text: str
    distance: float = Field(description="Smaller is closer; a lexical (BM25) retriever gives its negated score.")
    source: str = Field(description="'cluster:<id>', 'unclustered' or 'flat'")


class ClusterHit(_Model):
    cluster_id: int
    theme: str
    distance: float = Field(description="Smaller is closer; a lexical (BM25) retriever gives its negated score.")


class TextTruncation(_Model):
    """A text cut short so that the prompt carrying it fits the model's context window.

    The kept part is the beginning of the text, followed by a marker saying how many characters
    were left out.
    """

    original_chars: int = Field(ge=0)
    kept_chars: int = Field(ge=0, description="Characters of the original text that reached the model.")
    context_tokens: int = Field(gt=0, description="The context window the prompt was fitted to.")
    counted: Literal["exact", "estimate"] = Field(
        description="'exact': tokens counted with the model's tokenizer; 'estimate': from characters.")
    stages: list[str] = Field(default_factory=list, description="Prompts (stages) in which the text was cut.")

    @property
    def omitted_chars(self) -> int:
        return self.original_chars - self.kept_chars


class ConditionEmbedding(_Model):
    """How a condition was turned into one retrieval vector."""

    method: Literal["single", "chunk-mean", "embedder"] = Field(
        description="'single': one pass, the text fits the embedding model; 'chunk-mean': token-weighted "
                    "mean of the chunk vectors, re-normalised; 'embedder': the embedder's own encode "
                    "(it has no chunking, so it may keep only the start of a long text).")
    chunks: int = Field(default=1, ge=1)
    tokens: int | None = Field(default=None, description="Word pieces in the text, when counted.")
    chunk_tokens: int | None = Field(default=None, description="Most word pieces per chunk (model limit).")


class MappingTrace(_Model):
    """Everything stage 2 did for one condition."""

    condition: str
    retrieval: Literal["hierarchical", "flat"]
    condition_embedding: ConditionEmbedding | None = None
    condition_truncated: TextTruncation | None = Field(
        default=None, description="Set when the condition was cut to fit a mapping prompt into the context.")
    retriever: str = Field(default="knn", description="Candidate-search backend: knn, faiss-flat, faiss-hnsw, bm25.")
    clusters: list[ClusterHit] = Field(default_factory=list)
    candidates: list[RetrievedFactor] = Field(default_factory=list)
    selection_rounds: list[list[str]] = Field(default_factory=list, description="Factor ids per LLM selection.")
    votes: dict[str, int] = Field(default_factory=dict)
    vote_threshold: int = 0
    invalid_selections: int = Field(default=0, description="Selected strings that matched no candidate.")
    voted: list[str] = Field(default_factory=list)
    reflection_removed: list[str] = Field(default_factory=list)
    reflection_invalid: int = 0
    mapped: list[str] = Field(default_factory=list)


# --------------------------------------------------------------------------- inference


class FactorEvidence(_Model):
    factor_id: str
    text: str
    theme: str | None
    label: FactorLabel
    phi: float = Field(ge=0, le=1, description="P(O1 | f), smoothed into [eps, 1-eps].")
    phi_raw: float | None = Field(default=None, description="Value before clipping, as elicited.")


class Latent(_Model):
    name: str
    factor_ids: list[str]
    p_given_o1: float = Field(ge=0, le=1, description="P(L=1 | O1); L=1 means the concept leans towards O1")
    p_given_o2: float = Field(ge=0, le=1, description="P(L=1 | O2)")


class Posterior(_Model):
    p_outcome1: float = Field(ge=0, le=1)

    @property
    def p_outcome2(self) -> float:
        return 1.0 - self.p_outcome1


class CalibratedProbability(_Model):
    """P(O1) before and after a fitted calibrator (``anchor calibrate fit``) was applied."""

    p_raw: float = Field(ge=0, le=1, description="The method's own P(O1).")
    p_calibrated: float = Field(ge=0, le=1)
    kind: str = Field(description="platt, isotonic, beta or temperature.")
    fitted_on: str = Field(default="", description="The method, model and data it was fitted on, in one line.")


class InferenceResult(_Model):
    """The answer for one condition, with its full audit trail."""

    condition: str
    p_outcome1: float | None = Field(description="None when unknown.")
    p_outcome2: float | None
    unknown: bool
    unknown_reason: str | None = None
    factors: list[FactorEvidence] = Field(default_factory=list)
    nb: float | None = Field(default=None, description="Naive Bayes P(O1 | E)")
    cbn: float | None = Field(default=None, description="Latent CBN P(O1 | E)")
    latents: list[Latent] = Field(default_factory=list)
    latent_repairs: list[str] = Field(default_factory=list)
    aggregation: AggregationMethod = AggregationMethod.LOP
    weights: dict[str, float] = Field(default_factory=dict)
    rule: InferenceRule = Field(default="paper", description="How the elicited numbers were read (see "
                                                               "InferenceRule).")
    base_rate: BaseRate | None = Field(default=None, description="The base rate counted (consistent rule only).")
    mapping: MappingTrace | None = None
    cost: list[StageCost] = Field(default_factory=list)
    critical_path: CriticalPath | None = Field(default=None, description=(
        "The longest chain of dependent requests made to answer this condition (mapping and inference)."))
    compute_seconds: dict[str, float] = Field(default_factory=dict)
    variant: list[str] = Field(default_factory=list, description="Ablations that were active.")
    calibration: CalibratedProbability | None = Field(default=None, description=(
        "Set when a calibrator was applied: p_outcome1/p_outcome2 are then the calibrated ones."))
