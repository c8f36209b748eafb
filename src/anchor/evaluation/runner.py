"""Evaluation runs: resumable, repeatable over seeds, with metrics and costs on disk.

A run directory holds ``config.json`` (written first), ``predictions.jsonl`` (one line appended
and flushed per finished instance), ``spaces/`` (ANCHOR's factor spaces, one per scenario, built
once and shared by every run and condition) and finally ``metrics.json``. Starting the same
command again skips every (run, instance) already in ``predictions.jsonl``; a partly written last
line, left by a killed process, is dropped. Metrics are computed from the predictions file sorted
by (run, id), so an interrupted-and-resumed run ends with the same numbers as an uninterrupted one
given the same LLM answers (which the response cache provides).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anchor import __version__, prompts
from anchor.embed import MiniLMEmbedder
from anchor.evaluation import baselines
from anchor.evaluation.datasets import (
    DecisionInstance,
    PairwiseInstance,
    balance_outcome_order,
    bundled_file,
    load_dataset,
    load_factcheck,
    scenario_key,
)
from anchor.evaluation.metrics import (
    brier_score,
    decision_accuracy,
    expected_calibration_error,
    factcheck_metrics,
    mean_std,
    pairwise_metrics,
    pairwise_prediction,
    reliability_bins,
)
from anchor.evaluation.results import (
    DIRECT_METHODS,
    METHODS,
    METRIC_KEYS,
    ORACLE_METHODS,
    PAIRWISE_ONLY_METHODS,
    CostSummary,
    Kind,
    MetricsReport,
    Prediction,
    RunConfig,
)
from anchor.llm.client import LLMClient
from anchor.llm.errors import AnchorError, LLMOutputError
from anchor.llm.ledger import merge_costs, summarize
from anchor.llm.settings import LLMSettings, make_client
from anchor.pipeline import Anchor, AnchorConfig
from anchor.progress import ProgressEvent, Reporter, silent
from anchor.space.io import SpaceFileError, load_space, save_space
from anchor.types import BuildParams, FactorSpace, Scenario, StageCost

Instance = DecisionInstance | PairwiseInstance

#: Paper Appendix B: factor-generation sizes per dataset group.
BUILD_SIZES: dict[str, dict[str, int]] = {
    "large": {"n_target": 80, "batch_size": 10, "max_rounds": 20},  # Common2Sense, Plasma
    "small": {"n_target": 40, "batch_size": 5, "max_rounds": 10},  # Today, fact checking
    # For the embedded 135M model, which adds a factor or two per round at best: a paper-size
    # build takes ~3 minutes per scenario there and yields no better a space.
    "quick": {"n_target": 16, "batch_size": 4, "max_rounds": 4},
}


class EvalError(AnchorError):
    """An evaluation that cannot start or go on (bad arguments, a directory holding another run)."""


def dataset_kind(name: str) -> Kind:
    if name == "common2sense-pairwise":
        return "pairwise"
    if name == "factcheck":
        return "factcheck"
    return "decision"


def default_build_params(dataset: str, seed: int = 0, sizes: str = "paper") -> BuildParams:
    """The paper's per-dataset sizes (``sizes="paper"``) or the quick ones (``"quick"``)."""
    if sizes == "quick":
        return BuildParams(**BUILD_SIZES["quick"], seed=seed)
    if sizes != "paper":
        raise EvalError(f"unknown build sizes {sizes!r}; use 'paper' or 'quick'")
    size = BUILD_SIZES["large" if dataset in ("common2sense-pairwise", "common2sense", "plasma") else "small"]
    return BuildParams(**size, seed=seed)


def file_sha256(dataset: str, path: Path | None) -> str:
    data = Path(path).read_bytes() if path is not None else bundled_file(dataset).read_bytes()
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- predictions file


class PredictionLog:
    """Append-only JSON lines; tolerant of a torn last line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done: dict[tuple[int, str], Prediction] = {}
        if path.exists():
            self._load()
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._lock = asyncio.Lock()

    def _load(self) -> None:
        raw = self.path.read_bytes()
        good = raw
        if raw and not raw.endswith(b"\n"):
            good = raw[: raw.rfind(b"\n") + 1]  # drop the line a killed process was writing
        for n, line in enumerate(good.decode("utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                pred = Prediction.model_validate_json(line)
            except ValueError as exc:
                raise EvalError(f"{self.path}, line {n}: not a prediction record ({exc}); "
                                "move the file away to start the run afresh") from exc
            self.done[(pred.run, pred.id)] = pred
        if len(good) != len(raw):
            with open(self.path, "r+b") as fh:
                fh.truncate(len(good))

    async def append(self, pred: Prediction) -> None:
        async with self._lock:
            self._fh.write(pred.model_dump_json() + "\n")
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self.done[(pred.run, pred.id)] = pred

    def close(self) -> None:
        self._fh.close()


# --------------------------------------------------------------------------- the runner


class EvalRunner:
    def __init__(
        self,
        config: RunConfig,
        out_dir: Path,
        *,
        settings: LLMSettings,
        anchor_config: AnchorConfig | None = None,
        report: Reporter = silent,
    ) -> None:
        if config.method not in METHODS:
            raise EvalError(f"unknown method {config.method!r}; choose from {', '.join(METHODS)}")
        if config.method in PAIRWISE_ONLY_METHODS and config.kind != "pairwise":
            raise EvalError(f"method {config.method!r} compares two conditions and only applies to "
                            "common2sense-pairwise")
        if config.ablations and config.method != "anchor":
            raise EvalError("ablations apply to --method anchor only")
        if config.runs < 1:
            raise EvalError("--runs must be at least 1")
        self.config = config
        self.out_dir = Path(out_dir)
        self.settings = settings
        self.anchor_config = anchor_config
        self.report = report
        self.client: LLMClient | None = None
        self._space_locks: dict[str, asyncio.Lock] = {}
        self._spaces: dict[str, FactorSpace] = {}
        self._space_errors: dict[str, str] = {}
        self._unknown = 0
        self._done = 0
        self._total = 0

    # ------------------------------------------------------------------ setup

    def load_instances(self) -> list[Instance]:
        c = self.config
        path = Path(c.data_path) if c.data_path else None
        if c.dataset == "factcheck":
            instances: list[Any] = load_factcheck(path)
        else:
            instances = load_dataset(c.dataset, path)
        if c.balance_outcomes:
            instances = balance_outcome_order(instances)
        if c.limit is not None:
            instances = instances[: c.limit]
        return instances

    def prepare_dir(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / "config.json"
        new = _comparable(self.config.model_dump(mode="json"))
        if path.exists():
            try:
                old = _comparable(json.loads(path.read_text(encoding="utf-8")))
            except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as exc:
                raise EvalError(f"{path} is not a run configuration ({exc}); move it away to start afresh") from exc
            if old != new:
                diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
                raise EvalError(f"{self.out_dir} holds a run with other settings (differs in: {', '.join(diff)}); "
                                "use another --out, or the same arguments to resume it")
        else:
            path.write_text(self.config.model_dump_json(indent=2), encoding="utf-8")

    # ------------------------------------------------------------------ main loop

    async def run(self) -> MetricsReport:
        instances = self.load_instances()
        self.prepare_dir()
        log = PredictionLog(self.out_dir / "predictions.jsonl")
        self.client = make_client(self.settings)
        await self.client.ensure_ready()
        if self.config.negation == "llm" and self.config.kind == "factcheck":
            instances = await self._llm_negations(instances)  # type: ignore[arg-type]
        try:
            c = self.config
            pending = [(r, inst) for r in range(c.runs) for inst in instances if (r, inst.id) not in log.done]
            self._total = len(instances) * c.runs
            self._done = self._total - len(pending)
            self._unknown = sum(1 for p in log.done.values() if p.unknown)
            self._tick()
            engines = [self._engine(self.client.with_seed(c.seed + r)) for r in range(c.runs)]
            limit = asyncio.Semaphore(max(1, min(self.settings.max_concurrency, self.client.backend.max_parallel * 2)))

            async def one(r: int, inst: Instance) -> None:
                async with limit:
                    pred = await self._evaluate(r, inst, engines[r])
                await log.append(pred)
                self._done += 1
                self._unknown += int(pred.unknown)
                self._tick()

            # Scenario by scenario keeps at most a few spaces being built at once.
            await asyncio.gather(*(one(r, inst) for r, inst in pending))
            report = self.compute_metrics(instances, log.done)
            (self.out_dir / "metrics.json").write_text(report.model_dump_json(indent=2), encoding="utf-8")
            return report
        finally:
            log.close()
            await self.client.aclose()

    def _tick(self) -> None:
        total = self.client.ledger.total() if self.client else StageCost(stage="total")
        self.report(ProgressEvent("instances", self._done, self._total, "", {
            "unknown": self._unknown, "calls": total.llm_calls, "cached": total.cache_hits,
            "tokens": total.prompt_tokens + total.completion_tokens}))

    def _engine(self, client: LLMClient) -> Any:
        if self.config.method != "anchor":
            return client
        return Anchor(client=client, embedder=self._embedder, config=self.anchor_config or AnchorConfig())

    async def _llm_negations(self, instances: list[DecisionInstance]) -> list[DecisionInstance]:
        assert self.client is not None

        async def negate(inst: DecisionInstance) -> DecisionInstance:
            answer = await self.client.ask(prompts.NEGATE_CLAIM, claim=inst.scenario.outcome1)
            scen = Scenario(text=inst.scenario.text, outcome1=inst.scenario.outcome1, outcome2=answer.negation)
            return inst.model_copy(update={"scenario": scen})

        return list(await asyncio.gather(*(negate(i) for i in instances)))

    # ------------------------------------------------------------------ spaces

    async def _space(self, scenario: Scenario) -> FactorSpace | None:
        key = scenario_key(scenario)
        if key in self._spaces:
            return self._spaces[key]
        if key in self._space_errors:
            return None
        lock = self._space_locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key in self._spaces:
                return self._spaces[key]
            path = self.out_dir / "spaces" / f"{key}.json"
            space = None
            if path.exists():
                try:
                    space = load_space(path)
                except SpaceFileError:
                    space = None  # a damaged file is rebuilt (its LLM calls come from the cache)
            if space is None:
                assert self.client is not None
                builder = Anchor(client=self.client, embedder=self._embedder,
                                 config=self.anchor_config or AnchorConfig())
                try:
                    space = await builder.abuild(scenario)
                except LLMOutputError as exc:
                    self._space_errors[key] = str(exc)
                    return None
                save_space(space, path)
            self._spaces[key] = space
            return space

    @functools.cached_property
    def _embedder(self) -> MiniLMEmbedder:
        """One embedder (and vector cache) for every space and run; MiniLM loads on first use."""
        return MiniLMEmbedder(cache_path=self.settings.vector_cache_path)

    # ------------------------------------------------------------------ one instance

    async def _estimate(self, engine: Any, scenario: Scenario, condition: str, gold: int | None
                        ) -> tuple[float | None, int | None, str | None]:
        """P(O1) (None = unknown), number of mapped factors (ANCHOR), and a note."""
        if self.config.method == "anchor":
            space = await self._space(scenario)
            if space is None:
                return None, None, f"factor space could not be built: {self._space_errors.get(scenario_key(scenario))}"
            result = await engine.ainfer_one(space, condition)
            return (None if result.unknown else result.p_outcome1), len(result.factors), result.unknown_reason
        estimate = await baselines.ESTIMATORS[self.config.method](engine, scenario, condition, gold)
        return estimate.p_outcome1, None, estimate.note

    async def _evaluate(self, run: int, inst: Instance, engine: Any) -> Prediction:
        c = self.config
        assert self.client is not None
        started = time.perf_counter()
        pred = Prediction(run=run, id=inst.id, seed=c.seed + run, kind=c.kind)
        with self.client.ledger.scope() as records:
            try:
                if isinstance(inst, PairwiseInstance):
                    pred.human, pred.gold = inst.human, inst.gold
                    if c.method == "compare":
                        gold_text = inst.scenario.outcome1 if inst.gold == 1 else inst.scenario.outcome2
                        pred.choice = await baselines.compare(engine, inst.scenario, gold_text, inst.condition1,
                                                              inst.condition2)
                        pred.prediction = pred.choice
                    else:
                        (p1a, na, note_a), (p1b, nb, note_b) = await asyncio.gather(
                            self._estimate(engine, inst.scenario, inst.condition1, inst.gold),
                            self._estimate(engine, inst.scenario, inst.condition2, inst.gold))
                        pred.p_gold_1 = None if p1a is None else (p1a if inst.gold == 1 else 1.0 - p1a)
                        pred.p_gold_2 = None if p1b is None else (p1b if inst.gold == 1 else 1.0 - p1b)
                        pred.prediction = pairwise_prediction(pred.p_gold_1, pred.p_gold_2)
                        pred.unknown = pred.prediction is None
                        if na is not None or nb is not None:
                            pred.n_factors = [na or 0, nb or 0]
                        notes = [n for n in (note_a, note_b) if n and pred.unknown]
                        pred.error = "; ".join(notes) or None
                else:
                    pred.label = inst.label
                    p1, n, note = await self._estimate(engine, inst.scenario, inst.condition, inst.label)
                    pred.p_outcome1 = p1
                    pred.unknown = p1 is None
                    pred.n_factors = [n] if n is not None else None
                    if p1 is not None:
                        pred.prediction = 1 if p1 > 0.5 else 2 if p1 < 0.5 else None
                    pred.error = note if pred.unknown else None
            except LLMOutputError as exc:
                # One instance the model could not answer in schema: record it and go on.
                pred.unknown, pred.error, pred.prediction = True, str(exc)[:500], None
        pred.cost = [c_.model_dump() for c_ in summarize(records)]
        pred.seconds = round(time.perf_counter() - started, 4)
        return pred

    # ------------------------------------------------------------------ metrics

    def compute_metrics(self, instances: Sequence[Instance], done: dict[tuple[int, str], Prediction]
                        ) -> MetricsReport:
        c = self.config
        ids = [inst.id for inst in instances]
        runs: list[dict[str, Any]] = []
        cal_labels: list[int] = []
        cal_probs: list[float | None] = []
        per_run_cal: list[tuple[float | None, float | None]] = []
        for r in range(c.runs):
            preds = [done[(r, i)] for i in ids if (r, i) in done]
            entry: dict[str, Any] = {"run": r, "seed": c.seed + r, "n": len(preds),
                                     "unknown": sum(p.unknown for p in preds)}
            labels: list[int] = []
            probs: list[float | None] = []
            if c.kind == "pairwise":
                human = [p.human for p in preds]
                if c.method == "compare":
                    all_pred = covered = [p.choice for p in preds]
                else:
                    all_pred = [pairwise_prediction(p.p_gold_1, p.p_gold_2, unknown_as=0.5) for p in preds]
                    covered = [pairwise_prediction(p.p_gold_1, p.p_gold_2) for p in preds]
                    for p in preds:
                        for pg in (p.p_gold_1, p.p_gold_2):
                            labels.append(p.gold)
                            probs.append(None if pg is None else (pg if p.gold == 1 else 1.0 - pg))
                m_all = pairwise_metrics(human, all_pred)
                m_cov = pairwise_metrics(human, covered)
                entry.update({k: m_all[k] for k in METRIC_KEYS["pairwise"]})
                entry["coverage"] = m_cov["coverage"]
                entry["covered"] = {k: m_cov[k] for k in ("f1_context1", "f1_context2", "f1_same", "f1_micro")}
                entry["n_covered"] = m_cov["n_covered"]
            else:
                labels = [p.label for p in preds]
                probs = [p.p_outcome1 for p in preds]
                if c.kind == "factcheck":
                    m = factcheck_metrics(labels, probs, threshold=c.decision_threshold)
                else:
                    m = decision_accuracy(labels, probs)
                entry.update({k: m.get(k) for k in METRIC_KEYS[c.kind]})
            if labels:
                b = brier_score(labels, probs)
                e = expected_calibration_error(labels, probs)
                per_run_cal.append((b["brier"], e["ece"]))
                entry["brier"], entry["ece"] = b["brier"], e["ece"]
                cal_labels.extend(labels)
                cal_probs.extend(probs)
            runs.append(entry)

        keys = list(METRIC_KEYS[c.kind])
        flat_runs = [dict(r) for r in runs]
        if c.kind == "pairwise":
            for fr in flat_runs:
                for k, v in fr.get("covered", {}).items():
                    fr[f"covered_{k}"] = v
            keys += ["covered_f1_context1", "covered_f1_context2", "covered_f1_same", "covered_f1_micro"]
        mean: dict[str, float | None] = {}
        std: dict[str, float | None] = {}
        for k in keys:
            vals = [fr.get(k) for fr in flat_runs]
            vals = [v for v in vals if v is not None]
            if vals:
                mean[k], std[k] = mean_std(vals)
            else:
                mean[k] = std[k] = None

        calibration = None
        if cal_labels:
            briers = [b for b, _ in per_run_cal if b is not None]
            eces = [e for _, e in per_run_cal if e is not None]
            bins = reliability_bins(cal_labels, cal_probs)
            calibration = {
                "event": "outcome1" if c.kind != "pairwise" else "the gold outcome, per condition (as P(outcome1))",
                "brier": sum(briers) / len(briers) if briers else None,
                "ece": sum(eces) / len(eces) if eces else None,
                "n_skipped": sum(1 for p in cal_probs if p is None),
                "reliability": [{"lo": b["lo"], "hi": b["hi"], "count": b["count"],
                                 "mean_confidence": b["mean_confidence"], "observed": b["observed_frequency"]}
                                for b in bins],
            }

        cost = self._cost(done, ids)
        n_preds = sum(1 for r in range(c.runs) for i in ids if (r, i) in done)
        per_inst = None
        if n_preds:
            t = cost["total"]
            per_inst = CostSummary(
                llm_calls=round(t.llm_calls / n_preds), failed_attempts=round(t.failed_attempts / n_preds),
                cache_hits=round(t.cache_hits / n_preds), prompt_tokens=round(t.prompt_tokens / n_preds),
                completion_tokens=round(t.completion_tokens / n_preds), wall_seconds=round(t.wall_seconds / n_preds, 4))
        llm = dict(c.llm)
        small = not llm.get("base_url")
        notes = []
        if c.method in ORACLE_METHODS:
            notes.append("Factor-based is an oracle: its factors are generated knowing the gold outcome; "
                         "not a fair comparison.")
        if c.method in DIRECT_METHODS:
            notes.append("Direct-choice method: its choice is scored as probability 1 or 0.")
        if small:
            notes.append("Numbers from the embedded SmolLM2-135M model: they show the pipeline runs, not the "
                         "method's accuracy.")
        if c.kind == "decision" and c.dataset in ("plasma", "today") and not c.balance_outcomes:
            notes.append("In the bundled Plasma/Today files every condition supports outcome 1, so always "
                         "answering outcome 1 scores 100%; consider --balance-outcomes.")
        if c.method == "anchor" and self.anchor_config is not None:
            b = self.anchor_config.build
            paper = default_build_params(c.dataset)
            if (b.n_target, b.batch_size, b.max_rounds) != (paper.n_target, paper.batch_size, paper.max_rounds):
                notes.append(f"Factor spaces built with n_target={b.n_target}, b={b.batch_size}, "
                             f"T_max={b.max_rounds} (the paper uses {paper.n_target}/{paper.batch_size}/"
                             f"{paper.max_rounds} here).")
        if self._space_errors:
            notes.append(f"{len(self._space_errors)} factor space(s) could not be built; their instances are unknown.")
        if c.kind == "pairwise":
            scope = ("f1_* and f1_micro over all pairs, an unknown side scored as p = 0.5; 'covered' (covered_f1_*) "
                     "over pairs where both sides are known; coverage = share of such pairs")
        elif c.kind == "factcheck":
            scope = (f"balanced accuracy with 'support' iff P(claim) > {c.decision_threshold}; unknown counts as "
                     "'not support'; coverage = share of instances with a probability")
        else:
            scope = ("accuracy over all instances (unknown or a tie at 0.5 is not a correct decision); "
                     "accuracy_covered over instances with a probability")
        return MetricsReport(
            dataset=c.dataset, kind=c.kind, method=c.method, ablations=list(c.ablations), llm=llm, small_model=small,
            oracle=c.method in ORACLE_METHODS, n_instances=len(ids), n_runs=c.runs, scope=scope, runs=runs,
            mean=mean, std=std, calibration=calibration, cost=cost, cost_per_instance=per_inst, notes=notes,
        )

    def _cost(self, done: dict[tuple[int, str], Prediction], ids: list[str]) -> dict[str, CostSummary]:
        rows: list[StageCost] = []
        wanted = set(ids)
        for (_, iid), pred in done.items():
            if iid in wanted:
                rows.extend(StageCost.model_validate(x) for x in pred.cost)
        spaces_dir = self.out_dir / "spaces"
        if spaces_dir.exists():
            for path in sorted(spaces_dir.glob("*.json")):
                try:
                    rows.extend(load_space(path).cost)
                except SpaceFileError:
                    continue
        merged = merge_costs(rows) + (merge_costs(rows, label="total") or [StageCost(stage="total")])
        return {c.stage: CostSummary(llm_calls=c.llm_calls, failed_attempts=c.failed_attempts,
                                     cache_hits=c.cache_hits, prompt_tokens=c.prompt_tokens,
                                     completion_tokens=c.completion_tokens, wall_seconds=round(c.llm_seconds, 4))
                for c in merged}


def _comparable(config: dict[str, Any]) -> dict[str, Any]:
    """The parts of a run configuration that must match to resume (not the command line or cache path)."""
    out = {k: v for k, v in config.items() if k != "command"}
    out["llm"] = {k: v for k, v in (out.get("llm") or {}).items() if k != "cache"}
    return out


def make_run_config(
    *, dataset: str, method: str, data_path: Path | None, ablations: Sequence[str], limit: int | None, runs: int,
    seed: int, settings: LLMSettings, anchor_config: AnchorConfig | None, negation: str = "template",
    decision_threshold: float = 0.9, balance_outcomes: bool = False, command: str = "",
) -> RunConfig:
    if data_path is not None and not Path(data_path).exists():
        raise EvalError(f"--data {data_path}: no such file")
    if dataset not in ("common2sense-pairwise", "common2sense", "plasma", "today", "factcheck"):
        raise EvalError(f"unknown dataset {dataset!r}")
    return RunConfig(
        anchor_version=__version__, dataset=dataset, data_path=str(data_path) if data_path else None,
        data_sha256=file_sha256(dataset, Path(data_path) if data_path else None), kind=dataset_kind(dataset),
        method=method, ablations=list(ablations), limit=limit, runs=runs, seed=seed, negation=negation,  # type: ignore[arg-type]
        decision_threshold=decision_threshold, balance_outcomes=balance_outcomes,
        llm=settings.describe(), anchor_config=anchor_config.model_dump(mode="json") if anchor_config else None,
        command=command,
    )
