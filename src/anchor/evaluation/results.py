"""The files an evaluation run writes, as typed models.

``DIR/config.json``      ``RunConfig``: everything needed to rerun (no secrets).
``DIR/predictions.jsonl`` one ``Prediction`` per line, appended as instances finish.
``DIR/metrics.json``     ``MetricsReport``: per-run metrics, mean and std over runs, calibration, cost.
``DIR/spaces/*.json``    factor spaces (ANCHOR only), built once per scenario and reused.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Kind = Literal["pairwise", "decision", "factcheck"]

METHODS = ("anchor", "vanilla", "vanilla-direct", "cot", "cot-direct", "logits", "compare", "factor-based")
#: Methods that output a choice rather than a probability (the paper's starred rows).
DIRECT_METHODS = ("vanilla-direct", "cot-direct")
#: Methods that see information a fair method does not (flagged in every report).
ORACLE_METHODS = ("factor-based",)
#: Methods that compare two conditions jointly (only meaningful for pairwise data).
PAIRWISE_ONLY_METHODS = ("compare",)

METRIC_KEYS: dict[Kind, tuple[str, ...]] = {
    "pairwise": ("f1_context1", "f1_context2", "f1_same", "f1_micro", "coverage"),
    "decision": ("accuracy", "accuracy_covered", "coverage"),
    "factcheck": ("balanced_accuracy", "accuracy", "coverage"),
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class RunConfig(_Model):
    anchor_version: str
    dataset: str
    data_path: str | None = None
    data_sha256: str
    kind: Kind
    method: str
    ablations: list[str] = Field(default_factory=list)
    limit: int | None = None
    runs: int
    seed: int
    negation: Literal["template", "llm"] = "template"
    decision_threshold: float = 0.9
    balance_outcomes: bool = False
    llm: dict[str, Any] = Field(default_factory=dict, description="LLMSettings.describe(): no secrets")
    anchor_config: dict[str, Any] | None = None
    command: str = ""


class Prediction(_Model):
    run: int
    id: str
    seed: int
    kind: Kind
    # decision / factcheck
    label: int | None = None
    p_outcome1: float | None = None
    # pairwise
    human: int | None = None
    gold: int | None = None
    p_gold_1: float | None = None
    p_gold_2: float | None = None
    choice: int | None = Field(default=None, description="Compare baseline: 1, 2 or 3 (same).")
    prediction: int | None = None
    unknown: bool = False
    error: str | None = None
    n_factors: list[int] | None = None
    cost: list[dict[str, Any]] = Field(default_factory=list)
    seconds: float = 0.0


class CostSummary(_Model):
    llm_calls: int = 0
    failed_attempts: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_seconds: float = Field(default=0.0, description="Wall time spent waiting for the LLM, summed over calls.")


class MetricsReport(_Model):
    dataset: str
    kind: Kind
    method: str
    ablations: list[str] = Field(default_factory=list)
    llm: dict[str, Any] = Field(default_factory=dict)
    small_model: bool = Field(description="True when the numbers come from the embedded 135M model.")
    oracle: bool = False
    n_instances: int
    n_runs: int
    scope: str = Field(description="What the headline metrics are computed over.")
    runs: list[dict[str, Any]]
    mean: dict[str, float | None]
    std: dict[str, float | None]
    calibration: dict[str, Any] | None = None
    cost: dict[str, CostSummary] = Field(default_factory=dict, description="Per stage, plus 'total'.")
    cost_per_instance: CostSummary | None = None
    notes: list[str] = Field(default_factory=list)
