"""What ``metrics.json`` says about a run: per-run metrics, mean and std over runs, calibration, cost
(every request once, from ``calls.jsonl``, plus the recorded cost of reused artefacts), the critical
path per scenario, and notes on what the numbers mean.

Metrics are computed from the predictions in (run, id) order, so an interrupted-and-resumed run ends
with the same numbers as an uninterrupted one given the same LLM answers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from anchor.artefacts import ArtefactStore, reused_artefacts
from anchor.config import AnchorConfig
from anchor.llm.ledger import CallRecord, CostTally, merge_costs
from anchor.methods.contract import MethodSpec
from anchor.rundir.names import SAMPLE
from anchor.rundir.records import MetricsReport, Prediction, RunConfig, SampleRecord
from anchor.scoring.attribution import ScenarioPaths, ScopeScenarios
from anchor.scoring.scores import score_runs
from anchor.settings.space import default_build_params
from anchor.types import StageCost

#: Failed predictions listed (run, id and reason) in metrics.json; all of them are counted.
MAX_LISTED_FAILURES = 50


@dataclass
class RunScorer:
    """Scores the predictions of one run directory into its ``MetricsReport``."""

    config: RunConfig
    spec: MethodSpec
    anchor_config: AnchorConfig | None
    stores: dict[str, ArtefactStore[Any]]
    """The run's per-scenario artefact stores (to find the cost of artefacts reused from elsewhere)."""
    data: dict[str, Any] | None = None
    """What the data file's reader says of it (rows read, usable, skipped and the first reasons), for formats
    that skip bad rows; ``metrics.json`` records it as ``data``."""
    sample_record: SampleRecord | None = None
    """The seeded sample the run scores (None when it scores the whole file)."""

    def report(self, predictions: Callable[[int], Iterable[Prediction]], calls: Iterable[CallRecord], *,
               instances: int, scenarios: Sequence[str], scenario_of: ScopeScenarios,
               labels: Iterable[int | None] = ()) -> MetricsReport:
        """The report of a run of ``instances`` instances: ``predictions(run)`` gives the latest prediction
        of each instance of repetition ``run`` in instance order (read once a run); ``calls`` is the call
        log as written (read once); ``scenarios`` the scenario keys, ``scenario_of`` the scenario a request's
        scope served (for the critical paths); ``labels`` the instances' labels (decision data).

        Nothing here holds a prediction or a request record longer than it takes to count it: a run of a
        million rows is scored in the memory of the columns its metrics need."""
        c = self.config
        seen = _Seen(self.config.spaces_from is not None)
        scores = score_runs(c.kind, ((r, c.seed + r, seen.watch(predictions(r))) for r in range(c.runs)),
                            pairwise_only=self.spec.pairwise_only, threshold=c.decision_threshold)
        costs, paths = CostTally(), ScenarioPaths(scenario_of)
        for record in calls:
            costs.add(record)
            paths.add(record)
        cost, reused, cost_scope = self._cost(seen.artefacts, costs)
        per_inst = None
        if seen.n:
            t = cost["total"]
            n = seen.n
            per_inst = StageCost(
                stage="total", llm_calls=round(t.llm_calls / n), failed_attempts=round(t.failed_attempts / n),
                logical_requests=None if t.logical_requests is None else round(t.logical_requests / n),
                samples=round(t.samples / n),
                cache_hits=round(t.cache_hits / n), prompt_tokens=round(t.prompt_tokens / n),
                completion_tokens=round(t.completion_tokens / n), llm_seconds=round(t.llm_seconds / n, 4),
                wall_seconds=round(t.wall_seconds / n, 4))
        llm = dict(c.llm)
        small = not llm.get("base_url")
        return MetricsReport(
            dataset=c.dataset, kind=c.kind, method=c.method, ablations=list(c.ablations), llm=llm, small_model=small,
            oracle=self.spec.oracle, n_instances=instances, n_runs=c.runs, scope=self._scope(), runs=scores.runs,
            mean=scores.mean, std=scores.std, n_failed=seen.failed, n_abstained=seen.abstained,
            n_unknown=seen.unknown, failures=seen.listed,
            calibration=scores.calibration, cost=cost, cost_scope=cost_scope, cost_reused=reused,
            cost_per_instance=per_inst, critical_path=paths.report(scenarios),
            notes=self._notes(seen, small) + self._label_notes(labels, instances)
            + self._fallback_notes(seen.fallbacks, seen.n) + self._data_notes(seen, instances),
            stage=c.stage, n_fallback=seen.fallbacks, fallback=self._fallback_name(),
            data=self.data, sample=sample_summary(self.sample_record, instances),
            n_truncated=seen.truncated,
        )

    def _fallback_name(self) -> str | None:
        return self.spec.fallback if self.spec.fallback and self.config.kind in self.spec.fallback_kinds else None

    def _fallback_notes(self, fallbacks: int, n: int) -> list[str]:
        name = self._fallback_name()
        if name is None:
            return []
        return [f"{fallbacks} of {n} prediction(s): {self.config.method} said 'unknown' and {name} answered "
                "instead (as the paper does on decision data); its calls are in the cost under their own stages."]

    def _scope(self) -> str:
        c = self.config
        failed = "a failed prediction counts as unknown"
        if c.kind == "pairwise":
            return ("f1_* and f1_micro over all pairs, an unknown side scored as p = 0.5; 'covered' (covered_f1_*) "
                    f"over pairs where both sides are known; coverage = share of such pairs; {failed}")
        if c.kind == "factcheck":
            return (f"balanced accuracy with 'support' iff P(claim) > {c.decision_threshold}; unknown counts as "
                    f"'not support'; coverage = share of instances with a probability; {failed}")
        if c.kind == "cases":
            return ("the rows with a label only (runs[].labelled of runs[].n): accuracy and balanced accuracy with "
                    "outcome 1 decided above 0.5 and outcome 2 below (unknown or a tie at 0.5 is not a correct "
                    "decision); accuracy_covered over labelled rows with a probability; coverage = share of "
                    f"labelled rows with a probability; Brier, log loss and ECE over labelled rows with one; {failed}")
        return ("accuracy over all instances (unknown or a tie at 0.5 is not a correct decision); "
                f"accuracy_covered over instances with a probability; {failed}")

    def _notes(self, seen: _Seen, small: bool) -> list[str]:
        c = self.config
        notes = []
        if self.spec.oracle:
            notes.append("Factor-based is an oracle: its factors are generated knowing the gold outcome; "
                         "not a fair comparison.")
        if self.spec.direct:
            notes.append("Direct-choice method: its choice is scored as probability 1 or 0.")
        if small:
            notes.append("Numbers from the embedded SmolLM2-135M model: they show the pipeline runs, not the "
                         "method's accuracy.")
        if c.calibrator:
            fitted = c.calibrator.get("fitted_on") or {}
            notes.append(f"Every P(O1) went through the {c.calibrator.get('kind')} calibrator {c.calibrator.get('path')} "
                         f"(fitted on {fitted.get('method')} with model {fitted.get('model')!r}, n={fitted.get('n')}); "
                         "these metrics score the calibrated probabilities, the method's own are p_outcome1_raw in "
                         "predictions.jsonl.")
        if self.spec.uses_anchor_config and self.anchor_config is not None:
            b = self.anchor_config.build
            paper = default_build_params(c.dataset)
            if (b.n_target, b.batch_size, b.max_rounds) != (paper.n_target, paper.batch_size, paper.max_rounds):
                notes.append(f"Factor spaces built with n_target={b.n_target}, b={b.batch_size}, "
                             f"T_max={b.max_rounds} (the paper uses {paper.n_target}/{paper.batch_size}/"
                             f"{paper.max_rounds} here).")
            if c.max_factors is not None:
                notes.append(f"Every factor space truncated to its first {c.max_factors} factors by abduction order.")
            if c.estimator:
                notes.append(f"phi and the latent parameters elicited by {c.estimator.get('model')!r} "
                             f"({c.estimator.get('backend')}); the space and the mapping by {c.llm.get('model')!r}.")
            if c.kind == "cases":
                where = f"the store {c.spaces_from}" if c.spaces_from else "this run directory"
                notes.append(f"Factor spaces: one per scenario, named by its scenario and build settings, kept in "
                             f"{where}; the build cost of spaces an earlier run made is under cost_reused.")
            else:
                notes.append("Factor spaces: " + ("built separately for every run (seed + run), so the std over "
                                                  "runs includes stage 1." if c.spaces == "per-run" else
                                                  "built once per scenario and shared by all runs, so the std over "
                                                  "runs reflects stages 2-3 only."))
        return notes + self._failure_notes(seen)

    def _failure_notes(self, seen: _Seen) -> list[str]:
        notes = []
        if seen.failed:
            top, n_top = seen.reasons.most_common(1)[0]
            notes.append(f"{seen.failed} prediction(s) failed (no usable answer from the LLM, or the server could not "
                         f"be reached); they count as unknown in these metrics and are retried when this command is "
                         f"run again. Most common reason ({n_top}x): {top}")
        return notes

    def _label_notes(self, labels: Iterable[int | None], instances: int) -> list[str]:
        """Said when it is true of the instances read (as of the bundled Plasma and Today files, not
        of every file in their format): one gold outcome for all, which always answering it scores
        100% on."""
        labels = set(labels)
        if self.config.kind != "decision" or len(labels) != 1:
            return []
        gold = labels.pop()
        hint = "" if self.config.balance_outcomes else "; consider --balance-outcomes"
        return [f"Every one of the {instances} instance(s) scored has outcome {gold} as its gold outcome, so "
                f"always answering outcome {gold} scores 100%{hint}."]

    def _data_notes(self, seen: _Seen, used: int) -> list[str]:
        """What the data, the sample and long conditions did to the instances scored."""
        notes = []
        if self.data and self.data.get("skipped"):
            first = (self.data.get("skipped_rows") or [{}])[0]
            notes.append(f"{self.data['skipped']} of {self.data.get('rows')} rows of {self.data.get('source')} were "
                         f"skipped as unusable (listed under data.skipped_rows); first: line {first.get('line')}: "
                         f"{first.get('problem')}")
        rec = self.sample_record
        if rec is not None:
            what = "every usable instance" if rec.requested == "all" else f"a sample of {len(rec.ids)}"
            notes.append(f"Scored on {what} of {rec.population} in the seeded order (seed {rec.seed}); the ids are in "
                         f"sample.json" + (f"; --limit kept the first {used}" if used < len(rec.ids) else "") + ".")
            if rec.note:
                notes.append(f"Sample: {rec.note}.")
        if seen.truncated:
            notes.append(f"{seen.truncated} prediction(s) had a condition cut to fit the {seen.context_tokens:,}-token "
                         f"context (it kept its beginning, at least {seen.kept_chars:,} characters; the longest was "
                         f"{seen.longest_chars:,}); see 'truncated' in predictions.jsonl.")
        return notes

    def _cost(self, used: set[str], costs: CostTally) -> tuple[dict[str, StageCost], dict[str, StageCost], str]:
        """Cost from the call log (every request once), plus the recorded cost of reused artefacts (those of
        ``used``)."""
        total = [costs.total()]
        cost = {s.stage: _rounded(s) for s in [*costs.stages(), *total]}
        reused: dict[str, StageCost] = {}
        reused_keys: list[str] = []
        if self.config.spaces_from:
            found = reused_artefacts(self.stores, used)
            reused_keys = [key for key, _ in found]
            rows: list[StageCost] = [c for _, item in found if item is not None for c in item.cost]
            if rows:
                reused = {s.stage: _rounded(s) for s in [*merge_costs(rows), *merge_costs(rows, label="total")]}
        t = total[0]
        scope = (f"every LLM request made for this run directory, counted once each from calls.jsonl across "
                 f"interruptions and resumes, including the builds of per-scenario artefacts (factor spaces) made "
                 f"for it: {t.logical_requests} logical request(s) (each once, however many attempts it took) "
                 f"made in {t.llm_calls} attempt(s) with a known outcome (llm_calls; {t.failed_attempts} of them "
                 f"failed: retries after a transient failure are attempts, not requests), {t.interrupted} "
                 f"interrupted by a kill (outcome unknown: the server may or may not have received them; not in "
                 f"llm_calls; their prompts about {t.interrupted_prompt_tokens} tokens by the "
                 f"client's estimate), and {t.cache_hits} cache hit(s) (no request); tokens are those the server "
                 "reported in its answers, so a request it received but never answered (time-out, dropped "
                 "connection, kill) adds none")
        if reused_keys:
            scope += (f"; {len(reused_keys)} artefact(s) reused from {self.config.spaces_from} are not included "
                      "(their recorded build cost is under cost_reused)")
        return cost, reused, scope


class _Seen:
    """What the metrics say of the predictions besides their scores, counted as they are read."""

    def __init__(self, artefacts: bool) -> None:
        self.n = self.failed = self.abstained = self.unknown = self.fallbacks = self.truncated = 0
        self.listed: list[dict[str, Any]] = []
        self.reasons: Counter[str] = Counter()
        self.keep_artefacts = artefacts
        self.artefacts: set[str] = set()
        self.context_tokens = 0
        self.kept_chars: int | None = None
        self.longest_chars = 0

    def watch(self, predictions: Iterable[Prediction]) -> Iterator[Prediction]:
        for p in predictions:
            self.note(p)
            yield p

    def note(self, p: Prediction) -> None:
        self.n += 1
        self.unknown += p.unknown
        if p.status == "failed":
            self.failed += 1
            if len(self.listed) < MAX_LISTED_FAILURES:
                self.listed.append({"run": p.run, "id": p.id, "reason": p.error})
            self.reasons[(p.error or "unknown reason").split(";")[0][:160]] += 1
        elif p.status == "abstained":
            self.abstained += 1
        self.fallbacks += any(s.fallback and s.status == "ok" for s in p.sides)
        if p.truncated:
            cut = [s.truncated for s in p.sides if s.truncated is not None]
            if cut and not self.truncated:
                self.context_tokens = cut[0].context_tokens
            self.truncated += 1
            for t in cut:
                self.kept_chars = t.kept_chars if self.kept_chars is None else min(self.kept_chars, t.kept_chars)
                self.longest_chars = max(self.longest_chars, t.original_chars)
        if self.keep_artefacts:
            self.artefacts.update(s.artefact for s in p.sides if s.artefact)


def _rounded(c: StageCost) -> StageCost:
    """A stage's cost as metrics.json records it: seconds to 0.1 ms."""
    return c.model_copy(update={"llm_seconds": round(c.llm_seconds, 4), "wall_seconds": round(c.wall_seconds, 4)})


def sample_summary(record: SampleRecord | None, used: int) -> dict[str, Any] | None:
    """What ``metrics.json`` says about the sample (the ids themselves are in sample.json)."""
    if record is None:
        return None
    return {"seed": record.seed, "requested": record.requested, "population": record.population,
            "size": len(record.ids), "used": used, "file": SAMPLE, "note": record.note}
