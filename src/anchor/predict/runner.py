"""``PredictRunner``: ``anchor predict``'s thin driver over the run engine
(:class:`~anchor.runs.session.RunSession`), feeding it a user's cases file read as a stream.

A predict run is a run of kind ``cases`` (same run directory, same methods, same resumption and cost
accounting as ``anchor eval``) that differs in how it meets its instances:

* The file is read twice, one row at a time: once to check it (counts, groups, bad rows: nothing is
  asked of the LLM before the file is known to be usable), once to answer it. A row is taken only when
  a slot is free, so memory does not grow with the file. With helper processes each helper reads the
  file for the second pass itself and answers the rows of its own scenario groups
  (:mod:`anchor.predict.shares`): no row passes through the runner, whose own work then hardly grows
  with the rows while they are answered.
* Rows are answered in any order, and ``predictions.jsonl`` grows in that order; when the run ends
  it is rewritten in input order (:meth:`~anchor.rundir.RunDirectory.order_predictions`).
* Each bad row is written to ``rejected.jsonl`` with its line and reason; ``--strict`` stops before
  any request at the first one. Each row scored is written to ``instances.jsonl`` (in the file's
  order, put in place when the pass ends), so the run's readers need not find the cases file again.
* Per-scenario artefacts (factor spaces, BIRD models) are named by their content and can live in a
  store shared with other runs (``RunConfig.spaces_from``): a run publishes what it builds there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from anchor.cases import BadCaseRow, CaseCheck, CaseRow, CasesError, check_cases
from anchor.llm.ledger import CallRecord
from anchor.predict.config import CASES_THRESHOLD, CasesInput
from anchor.predict.export import TableFormat, carries_truth, write_table
from anchor.predict.shares import CaseShares
from anchor.progress import Reporter, silent
from anchor.rundir import RunDirectory, Skipped
from anchor.rundir.names import REJECTED
from anchor.rundir.records import MetricsReport, RunConfig
from anchor.runs.pool import Tally
from anchor.runs.progress import RunProgress
from anchor.runs.session import RunOptions, RunSession
from anchor.runs.worker import DecisionRule, WorkerSetup
from anchor.scoring import attribution
from anchor.scoring.scorer import RunScorer


class PredictRunner:
    """Answers every good row of a cases file with the run's method and writes the run directory."""

    def __init__(
        self,
        config: RunConfig,
        out_dir: Path,
        options: RunOptions,
        *,
        cases: CasesInput,
        report: Reporter = silent,
        retry_failed: bool = True,
        strict: bool = False,
        table: TableFormat = "jsonl",
    ) -> None:
        self.config = config
        self.out_dir = Path(out_dir)
        self.cases = cases
        self.strict = strict
        self.table = table
        self.retry_failed = retry_failed
        self.anchor_config = options.anchor_config
        self.calibrator = options.calibrator
        self.session = RunSession(config, self.out_dir, options, progress=RunProgress(report, "rows", self._info))
        self.spec = self.session.spec
        self.summary: CaseCheck | None = None
        """What the check pass found (set by :meth:`check_input`)."""
        self.rejected = 0
        self.table_path: Path | None = None
        self._groups: list[str] = []
        """Each group's key, in the order the groups first come."""
        self._group_of: dict[str, int] = {}
        """The group of every row the run scores, by its id (the group's place in ``_groups``), in the file's
        order: to say which scenario each request served (the critical paths), and to put the predictions
        back in that order. The one thing held per row."""

    @property
    def report(self) -> Reporter:
        return self.session.progress.report

    @report.setter
    def report(self, value: Reporter) -> None:
        self.session.progress.report = value

    @property
    def directory(self) -> RunDirectory:
        return self.session.directory

    # ------------------------------------------------------------------ the input

    def check_input(self) -> CaseCheck:
        """Read the file once, checking every row; nothing is asked of the LLM. Refuses a file with no
        usable row, and under ``strict`` one with a bad row (naming its line)."""
        summary = check_cases(self.cases.path, format=self.cases.format, columns=self.cases.columns,
                              limits=self.cases.limits)
        if self.strict and summary.rejected:
            raise BadCaseRow(str(self.cases.path), summary.rejected[0])
        if not summary.good:
            raise CasesError(f"{self.cases.path}: no usable row ({summary.rows} read, {summary.bad} bad)")
        self.summary = summary
        return summary

    @property
    def total(self) -> int:
        good = self.summary.good if self.summary is not None else 0
        return good if self.config.limit is None else min(good, self.config.limit)

    # ------------------------------------------------------------------ the run

    async def run(self) -> MetricsReport:
        """Answer the file's rows (those not answered yet) and write the run directory."""
        if self.summary is None:
            self.check_input()
        assert self.summary is not None
        session, d = self.session, self.session.directory
        async with session.opened():
            await self._answer_rows()
            d.order_predictions({row_id: place for place, row_id in enumerate(self._group_of)})  # the file's order
            truth = carries_truth(self.summary.columns_used)
            self.table_path = write_table(d, self.table, calibrated=self.calibrator is not None, truth=truth)
            # Leniently: the run's answers are all in; a damaged line of the call log costs its figures only,
            # and metrics.json says so.
            damaged = Skipped()
            report = self._score(d.call_records(skipped=damaged))
            if damaged:
                report.notes.append(f"Cost: {damaged.note()}.")
            d.write_metrics(report)
            return report

    async def _answer_rows(self) -> None:
        """The pass that answers the rows: read by each worker for itself, its own share of the groups
        (:class:`~anchor.predict.shares.CaseShares`); then instances.jsonl and rejected.jsonl put in place.
        (What it holds per row, the statuses of an earlier start, is let go before the run is scored.)"""
        session, d = self.session, self.session.directory
        assert self.summary is not None
        status = d.prediction_statuses()
        again = self.retry_failed
        session.progress.expect(self.total, done=sum(1 for s in status.values() if s != "failed" or not again))
        shares = CaseShares(self.cases, self.out_dir, self.config.dataset, strict=self.strict,
                            limit=self.config.limit, retry_failed=self.retry_failed, sha256=self.config.data_sha256,
                            statuses=status,  # read once here: a share read in this process uses them
                            duplicates=self.summary.duplicate_rows)  # so that no share holds every id
        shares.clear()
        async with session.started(self.worker_setup(), groups=self.summary.groups):
            async for _ in session.answer_source(shares):
                pass
        collected = shares.collect(d, expected=self.total)
        self._groups, self._group_of, self.rejected = collected.groups, collected.group_of, collected.rejected

    def worker_setup(self) -> WorkerSetup:
        """What a worker needs to answer this run's rows (every condition of each group for a method that
        learns from them all first)."""
        conditions = self._conditions_by_group() if self.spec.trains_on_conditions else None
        return self.session.worker_setup(conditions, DecisionRule(CASES_THRESHOLD))

    def _conditions_by_group(self) -> dict[str, list[str]]:
        """Every condition of every group, for a method that learns from them all before answering any."""
        out: dict[str, list[str]] = {}
        with self.cases.open() as stream:
            for item in stream:
                if isinstance(item, CaseRow):
                    bucket = out.setdefault(item.group, [])
                    if item.condition not in bucket:
                        bucket.append(item.condition)
        return out

    # ------------------------------------------------------------------ progress and scores

    def _info(self, counts: Counter[str], tally: Tally) -> dict[str, object]:
        return {**({"spaces": tally.built} if self.spec.per_scenario_artefact else {}),
                "req": _short(tally.requests), "tok": _short(tally.tokens)}

    def _score(self, calls: Iterable[CallRecord]) -> MetricsReport:
        """``metrics.json`` of the rows the run scored: its predictions read back in input order (one line a
        row, as ``order_predictions`` left them), without the per-stage cost of each (the run's cost comes
        from ``calls``), one at a time."""
        pool = self.session.pool
        scorer = RunScorer(self.config, self.spec, self.anchor_config, pool.stores() if pool is not None else {})
        groups, group_of = self._groups, self._group_of

        def scenario_of(scope: str) -> str:
            kind, _, rest = scope.partition(":")
            if kind == "instance":
                place = group_of.get(rest.partition(":")[2])
                if place is not None:
                    return groups[place]
            return attribution.scenario_of(scope, {})

        report = scorer.report(lambda r: self.directory.iter_predictions(without_cost=True), calls,
                               instances=len(group_of), scenarios=groups, scenario_of=scenario_of)
        report.data = self.data_summary()
        return report

    def data_summary(self) -> dict[str, Any]:
        s = self.summary
        assert s is not None
        return {"source": s.source, "format": s.format, "rows": s.rows, "usable": s.good, "skipped": s.bad,
                "labelled": s.labelled, "groups": s.groups, "rejected_file": REJECTED,
                "skipped_rows": [{"line": r.line, "problem": r.reason} for r in s.rejected]}


def _short(n: int) -> str:
    """A count in at most four characters: 950, 12k, 3.4M."""
    if n < 1000:
        return str(n)
    if n < 100_000:
        return f"{n / 1000:.1f}k" if n < 10_000 else f"{n // 1000}k"
    return f"{n / 1_000_000:.1f}M" if n < 10_000_000 else f"{n // 1_000_000}M"
