"""``EvalRunner``: ``anchor eval``'s thin driver over the run engine (:class:`~anchor.runs.session.RunSession`).

What is the benchmark's is here: which instances a run scores (the data file, the paper's seeded
sample, ``--limit``: :mod:`anchor.evaluation.datasets.selection`), ``sample.json`` and
``instances.jsonl``, the claims negated by the LLM (``--negation llm``), the fact-check decision
threshold, and the scores of ``metrics.json`` (:mod:`anchor.scoring.scorer`). Everything every run
has (clients, lock, logs, workers, progress, resumption) is the session's.

Starting the same command again skips every (run, instance) already answered; an instance whose
prediction *failed* (the model could not answer in schema, the server could not be reached) is tried
again, and its new record replaces the old one. Metrics are computed from the predictions sorted by
(run, id), so an interrupted-and-resumed run ends with the same numbers as an uninterrupted one given
the same LLM answers (which the response cache provides).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from anchor.evaluation.datasets.factcheck import FactcheckData
from anchor.evaluation.datasets.negation import negate_with_llm
from anchor.evaluation.datasets.selection import data_summary, select_instances
from anchor.llm.ledger import CallRecord
from anchor.methods.registry import METHODS
from anchor.progress import Reporter, silent
from anchor.rundir.instances import Instance, PairwiseInstance
from anchor.rundir.records import MetricsReport, Prediction, RunConfig, SampleRecord
from anchor.runs.errors import RunError
from anchor.runs.session import RunOptions, RunSession
from anchor.runs.worker import DecisionRule, Work, WorkerSetup
from anchor.scoring.attribution import run_scenarios
from anchor.scoring.scorer import RunScorer
from anchor.types import scenario_key


def decision_rule(config: RunConfig) -> DecisionRule:
    """A fact check supports its claim only above the run's threshold; other data decide at 0.5, a tie
    being no decision."""
    if config.kind == "factcheck":
        return DecisionRule(config.decision_threshold, tie_unknown=False)
    return DecisionRule()


class EvalRunner:
    """Evaluates a method on a benchmark's instances into a run directory (``anchor eval``)."""

    def __init__(
        self,
        config: RunConfig,
        out_dir: Path,
        options: RunOptions,
        *,
        report: Reporter = silent,
        retry_failed: bool = True,
    ) -> None:
        spec = METHODS.get(config.method)
        if spec is not None and spec.pairwise_only and config.kind != "pairwise":
            raise RunError(f"method {config.method!r} compares two conditions and only applies to "
                            "common2sense-pairwise")
        self.config = config
        self.out_dir = Path(out_dir)
        self.report = report
        self.retry_failed = retry_failed
        self.session = RunSession(config, self.out_dir, options)
        self.spec = self.session.spec
        self.anchor_config = options.anchor_config
        self.data: FactcheckData | None = None
        """The data file as read, for formats that skip bad rows (set by load_instances)."""
        self.sample_record: SampleRecord | None = None
        """The seeded sample drawn by load_instances (None when the run scores the whole file)."""

    @property
    def directory(self):  # noqa: ANN201 - the session's RunDirectory
        return self.session.directory

    def load_instances(self) -> list[Instance]:
        # The sample is drawn before --limit, which then takes its first N (see datasets/selection.py).
        instances, self.data, self.sample_record = select_instances(self.config)
        return instances

    async def run(self, instances: list[Instance] | None = None) -> MetricsReport:
        """Evaluate ``instances`` (default: ``load_instances()``) and write the run directory."""
        if instances is None:
            instances = self.load_instances()
        session, c, d = self.session, self.config, self.session.directory
        session.progress.report = self.report
        async with session.opened():
            if self.sample_record is not None:
                d.record_sample(self.sample_record)
            d.write_instances(instances)  # the run's readers take them from here
            done = d.latest_predictions()
            d.traces.read()  # every line checked before the run adds to the file
            d.calls.read()
            if c.negation == "llm" and c.kind == "factcheck":
                assert session.client is not None
                instances = await negate_with_llm(session.client, instances)  # type: ignore[arg-type]
            pending = [Work(r, inst, scenario_key(inst.scenario)) for r in range(c.runs) for inst in instances
                       if (r, inst.id) not in done or (self.retry_failed and done[(r, inst.id)].status == "failed")]
            self._expect(instances, done, pending)
            groups = len({scenario_key(inst.scenario) for inst in instances})
            async with session.started(self.worker_setup(instances), groups=groups):
                async for _ in session.answer(pending):
                    pass
            report = self.compute_metrics(instances, d.latest_predictions(), d.call_records())
            d.write_metrics(report)
            return report

    def worker_setup(self, instances: Sequence[Instance]) -> WorkerSetup:
        """What a worker needs to answer ``instances`` (every condition of each scenario, for a method that
        learns from them all first; the run's decision rule)."""
        return self.session.worker_setup(self._conditions(instances), decision_rule(self.config))

    def _expect(self, instances: Sequence[Instance], done: dict[tuple[int, str], Prediction],
                pending: Sequence[Work]) -> None:
        c = self.config
        again = {(w.run, w.instance.id) for w in pending}
        wanted = {(r, inst.id) for r in range(c.runs) for inst in instances}
        kept = [p for key, p in done.items() if key in wanted and key not in again]
        self.session.progress.expect(len(instances) * c.runs, done=len(instances) * c.runs - len(pending),
                                     unknown=sum(p.unknown for p in kept),
                                     failed=sum(p.status == "failed" for p in kept))

    def _conditions(self, instances: Sequence[Instance]) -> dict[str, list[str]]:
        """Every condition of each scenario, for a method that learns from them all before answering any."""
        if not self.spec.trains_on_conditions:
            return {}
        out: dict[str, list[str]] = {}
        for inst in instances:
            bucket = out.setdefault(scenario_key(inst.scenario), [])
            bucket.extend(c for c in _conditions_of(inst) if c not in bucket)
        return out

    def compute_metrics(self, instances: Sequence[Instance], done: dict[tuple[int, str], Prediction],
                        calls: Iterable[CallRecord] = ()) -> MetricsReport:
        """The run's ``MetricsReport`` (see :mod:`anchor.scoring.scorer`): ``done`` holds the latest
        prediction of each (run, id), ``calls`` the call log as written."""
        pool = self.session.pool
        stores = pool.stores() if pool is not None else {}
        scorer = RunScorer(self.config, self.spec, self.anchor_config, stores, data_summary(self.data),
                           self.sample_record)
        ids = [inst.id for inst in instances]
        scenarios, scenario_of = run_scenarios(instances, self.config.runs)
        return scorer.report(lambda r: (done[(r, i)] for i in ids if (r, i) in done), calls,
                             instances=len(ids), scenarios=scenarios, scenario_of=scenario_of,
                             labels=(getattr(inst, "label", None) for inst in instances))


def _conditions_of(inst: Instance) -> Iterator[str]:
    if isinstance(inst, PairwiseInstance):
        yield from (inst.condition1, inst.condition2)
    else:
        yield inst.condition
