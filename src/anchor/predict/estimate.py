"""How many requests and tokens a predict run should need, from the file's check alone (no request).

The method's :class:`~anchor.methods.contract.CostShape` gives its usual requests per
scenario group (building its artefact) and per row; the file's check gives the groups, the rows and
their lengths. Tokens follow from the texts each request carries, at four characters a token, plus the method's own allowance for a prompt's instructions and for the answer.
Requests a response cache already holds are counted too: the estimate is of the work, not the bill.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from anchor.cases import CaseCheck
from anchor.config import AnchorConfig
from anchor.methods.contract import MethodSpec

#: Characters a token in English text, on average (the context fitting counts 3, to be safe).
CHARS_PER_TOKEN = 4
#: How far the figures can be off, either way: stops that come early, answers asked again, fallbacks.
UNCERTAINTY = 2.0


class PredictEstimate(BaseModel):
    """Requests and tokens a predict run should need, and how the figures were made."""

    model_config = ConfigDict(frozen=True)

    method: str
    rows: int
    groups: int
    requests: int
    tokens: int
    basis: str
    uncertainty: float = UNCERTAINTY

    def line(self) -> str:
        return (f"estimate for --method {self.method}: about {self.requests:,} requests and {self.tokens:,} tokens "
                f"for {self.rows:,} rows in {self.groups:,} groups (from the method's usual shape: {self.basis}; "
                f"it can be off by a factor of {self.uncertainty:g} either way, and answers already in the response "
                "cache cost nothing)")


def estimate_predict(summary: CaseCheck, spec: MethodSpec, config: AnchorConfig | None,
                     limit: int | None = None) -> PredictEstimate:
    """The estimate for answering the good rows of ``summary`` (the first ``limit`` of them) with ``spec``."""
    rows = summary.good if limit is None else min(summary.good, limit)
    share = rows / summary.good if summary.good else 0.0
    # With --limit the groups the first rows touch are not known without reading them: assume they
    # are as many as the rows allow, at most all of them.
    groups = min(summary.groups, rows) if limit is None else min(rows, max(1, math.ceil(summary.groups * share)))
    shape = spec.cost_shape(config)
    scenario_tokens = summary.scenario_chars / max(1, summary.groups) / CHARS_PER_TOKEN
    condition_tokens = summary.condition_chars / max(1, summary.good) / CHARS_PER_TOKEN
    group_requests = shape.group_requests * groups
    row_requests = shape.row_requests * rows
    per_request = shape.prompt_tokens + scenario_tokens + shape.answer_tokens
    tokens = group_requests * per_request + row_requests * (per_request + condition_tokens)
    return PredictEstimate(method=spec.name, rows=rows, groups=groups, requests=round(group_requests + row_requests),
                           tokens=round(tokens), basis=shape.basis)
