"""How many requests and tokens each planned run needs: counted in the ledger of a finished run,
extrapolated from the ledger of a started one.

A run's cost has two parts that grow differently. Building a per-scenario artefact (a factor
space, a BIRD model) costs about the same for every scenario, once per scenario (and per run with
``--spaces per-run``); everything else (mapping, inference, a baseline's call) costs about the same
for every prediction. So from what a run has done so far (its ``calls.jsonl`` and
``predictions.jsonl``), the rest is::

    requests = construction requests / builds done x builds in all
             + other requests / predictions done x predictions in all

and likewise for tokens. Requests are logical requests (``anchor.llm.ledger``: each once, however
many attempts a server's faults made it take), so a pilot against a flaky server estimates what a
clean one would; the attempts are counted too, for the record. Only requests the run made count: an answer it found in the response
cache (asked for by another run) is free, and so it is in the estimate too. A started run is what
the reproduction's pilot leaves: the first scenario of every run, done before the rest.

Analyses are not piloted; their cells are estimated from the ANCHOR run of their dataset, as if no
cell found an answer in the cache (an upper bound: cells share many answers).

The ledgers are read leniently: a damaged line (not the unfinished last line a kill leaves, which is
no damage) is left out of the figures, counted in ``Spent.damaged``, and the estimate's note says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from anchor.evaluation.cost.phases import phase_of
from anchor.llm.ledger import CallRecord
from anchor.rundir import RunDirectory, Skipped
from anchor.rundir.names import CALLS
from anchor.types import scenario_key

Source = Literal["counted", "extrapolated", "derived", "none"]
#: The pilot's unit: every instance of the slice's first scenario, in every run.
PILOT_SCENARIOS = 1


class Spent(BaseModel):
    """Requests made and tokens reported (prompt + completion): the logical requests, each once however
    many attempts it took (what ``--budget-requests`` caps), and the attempts (retries included: what
    the server received; 0 in estimates, which do not predict a server's faults)."""

    model_config = ConfigDict(frozen=True)

    requests: int = 0
    tokens: int = 0
    attempts: int = 0
    damaged: int = Field(default=0, description="Damaged ledger lines left out of these figures.")

    def __add__(self, other: Spent) -> Spent:
        return Spent(requests=self.requests + other.requests, tokens=self.tokens + other.tokens,
                     attempts=self.attempts + other.attempts, damaged=self.damaged + other.damaged)


class CostEstimate(BaseModel):
    """What one planned run or analysis needs in all, and what it has already spent."""

    model_config = ConfigDict(frozen=True)

    name: str
    requests: int | None
    tokens: int | None
    spent: Spent = Spent()
    source: Source
    note: str = ""

    @property
    def left(self) -> Spent | None:
        """What is still to spend (None: no estimate)."""
        if self.requests is None or self.tokens is None:
            return None
        return Spent(requests=max(0, self.requests - self.spent.requests),
                     tokens=max(0, self.tokens - self.spent.tokens))


def made(records: Sequence[CallRecord]) -> list[CallRecord]:
    """Attempts that reached (or tried to reach) the server: not cache hits, not cut off by a kill."""
    return [r for r in records if r.outcome_known]


def spent_of(records: Sequence[CallRecord], damaged: int = 0) -> Spent:
    """The requests, tokens and attempts of ``records`` (attempts with a known outcome)."""
    return Spent(requests=sum(r.ends_request for r in records), attempts=len(records),
                 tokens=sum(r.prompt_tokens + r.completion_tokens for r in records), damaged=damaged)


def spent_in(folder: Path) -> Spent:
    """What every run directory at or under ``folder`` spent (its calls.jsonl files)."""
    total = Spent()
    for path in sorted(folder.rglob(CALLS)) if folder.is_dir() else []:
        damaged = Skipped()
        total += spent_of(made(RunDirectory(path.parent).call_log(skipped=damaged)), damaged.count)
    return total


class Rates(BaseModel):
    """A run's cost per artefact build and per prediction, from what it has done."""

    model_config = ConfigDict(frozen=True)

    per_build: Spent
    per_prediction: Spent
    per_prediction_inference: Spent
    spent: Spent
    scenarios: int = 0
    """Scenarios with a prediction so far: what the rates were measured on."""


def rates(run_dir: Path, instances: Sequence[Any], per_run_builds: bool) -> Rates | None:
    """The run's rates, or None when it has finished no prediction yet."""
    damaged = Skipped()
    run = RunDirectory(run_dir)
    done = run.latest_predictions(skipped=damaged)
    by_id = {inst.id: inst for inst in instances}
    done = {k: p for k, p in done.items() if k[1] in by_id}
    if not done:
        return None
    records = made(run.call_log(skipped=damaged))
    builds = {(r if per_run_builds else 0, scenario_key(by_id[i].scenario)) for r, i in done}
    build = [r for r in records if phase_of(r.stage) == "construction"]
    rest = [r for r in records if phase_of(r.stage) != "construction"]
    inference = [r for r in rest if phase_of(r.stage) == "inference"]

    def per(rs: Sequence[CallRecord], n: int) -> Spent:
        return Spent(requests=round(sum(r.ends_request for r in rs) * 1000 / n),
                     tokens=round(sum(r.prompt_tokens + r.completion_tokens for r in rs) * 1000 / n))

    return Rates(per_build=per(build, len(builds)), per_prediction=per(rest, len(done)),
                 per_prediction_inference=per(inference, len(done)),
                 spent=spent_of(records, damaged.count),
                 scenarios=len({scenario_key(by_id[i].scenario) for _, i in done}))


def extrapolate(rate: Rates, *, builds: int, predictions: int) -> Spent:
    """Rates are kept per thousand, so that small per-prediction costs do not round to 0."""
    return Spent(requests=round((rate.per_build.requests * builds + rate.per_prediction.requests * predictions) / 1000),
                 tokens=round((rate.per_build.tokens * builds + rate.per_prediction.tokens * predictions) / 1000))


def said(estimate: CostEstimate) -> CostEstimate:
    """The estimate, its note saying how many damaged ledger lines its figures leave out (if any)."""
    if not estimate.spent.damaged:
        return estimate
    damage = f"{estimate.spent.damaged} damaged ledger line(s) could not be read and are left out"
    return estimate.model_copy(update={"note": f"{estimate.note}; {damage}" if estimate.note else damage})


def estimate_run(name: str, run_dir: Path, instances: Sequence[Any], runs: int, *, finished: bool,
                 per_run_builds: bool = True) -> tuple[CostEstimate, Rates | None]:
    """The estimate of one run (counted when finished, else extrapolated from its ledger so far)."""
    found, rate = _estimate_run(name, run_dir, instances, runs, finished=finished, per_run_builds=per_run_builds)
    return said(found), rate


def _estimate_run(name: str, run_dir: Path, instances: Sequence[Any], runs: int, *, finished: bool,
                  per_run_builds: bool) -> tuple[CostEstimate, Rates | None]:
    rate = rates(run_dir, instances, per_run_builds)
    if rate is None:
        spent = spent_in(run_dir)
        return CostEstimate(name=name, requests=None, tokens=None, spent=spent, source="none",
                        note="not started: run the pilot (--plan) for an estimate"), None
    if finished:
        return CostEstimate(name=name, requests=rate.spent.requests, tokens=rate.spent.tokens, spent=rate.spent,
                        source="counted"), rate
    scenarios = {scenario_key(inst.scenario) for inst in instances}
    builds = len(scenarios) * (runs if per_run_builds else 1)
    total = extrapolate(rate, builds=builds, predictions=len(instances) * runs)
    return CostEstimate(name=name, requests=max(total.requests, rate.spent.requests),
                        tokens=max(total.tokens, rate.spent.tokens), spent=rate.spent, source="extrapolated",
                        note=f"from {rate.scenarios} of {len(scenarios)} scenario(s)"), rate


def derived_estimate(name: str, cells: int, predictions: int, rate: Rates | None, *, inference_only: int = 0,
                     spent: Spent | None = None, finished: bool = False, what: str = "") -> CostEstimate:
    """An analysis: ``cells`` cells of ``predictions`` each at ``rate``'s per-prediction cost, plus
    ``inference_only`` cells that only elicit (the estimator's), as if none were cached."""
    return said(_derived_estimate(name, cells, predictions, rate, inference_only=inference_only, spent=spent,
                                  finished=finished, what=what))


def _derived_estimate(name: str, cells: int, predictions: int, rate: Rates | None, *, inference_only: int,
                      spent: Spent | None, finished: bool, what: str) -> CostEstimate:
    spent = spent or Spent()
    if finished:
        return CostEstimate(name=name, requests=spent.requests, tokens=spent.tokens, spent=spent, source="counted")
    if cells == 0 and not inference_only:
        return CostEstimate(name=name, requests=0, tokens=0, spent=spent, source="derived", note="no LLM request")
    if rate is None:
        return CostEstimate(name=name, requests=None, tokens=None, spent=spent, source="none",
                        note=f"no estimate: no ANCHOR run {what}to derive it from")
    per, inf = rate.per_prediction, rate.per_prediction_inference
    requests = round((per.requests * cells + inf.requests * inference_only) * predictions / 1000)
    tokens = round((per.tokens * cells + inf.tokens * inference_only) * predictions / 1000)
    return CostEstimate(name=name, requests=max(requests, spent.requests), tokens=max(tokens, spent.tokens), spent=spent,
                    source="derived", note="upper bound: as if no cell found an answer in the cache")
