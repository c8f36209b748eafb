"""The public entry point: ``Anchor`` builds factor spaces and answers conditions.

    from anchor import Anchor, Scenario
    anchor = Anchor()                                   # embedded model; or Anchor(settings=LLMSettings(...))
    space = anchor.build(Scenario(text=..., outcome1=..., outcome2=...))
    results = anchor.infer(space, ["You are at a high altitude."])
    results[0].p_outcome1

Every method has an ``a``-prefixed coroutine twin for use inside an event loop.

``Anchor(calibrator="cal.json")`` (a file from ``anchor calibrate fit``, or a ``FileCalibrator``)
passes every answered P(O1) through that calibrator: ``p_outcome1``/``p_outcome2`` are then the
calibrated values and ``result.calibration`` keeps the raw one beside them. "Unknown" is decided
before calibration, as without one (nothing mapped, or the raw max posterior below ``tau``): the
calibrator maps answers and never turns one into "unknown" or back. A calibrator fitted on another
model or method is applied all the same, with a ``CalibratorMismatchWarning`` naming both.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import warnings
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from anchor.answering import answered
from anchor.artefacts import INSTANCE_FAILURES, ArtefactFailed, ArtefactStore, content_key
from anchor.calibration.contract import CalibratorMismatchWarning, method_label
from anchor.calibration.registry import FileCalibrator, read_calibrator
from anchor.cases import CaseLimits, CasePrediction, CaseRow, CaseSource, RejectedRow, read_cases
from anchor.compute import offload
from anchor.config import AnchorConfig
from anchor.embedding.embed import Embedder, embedder_identity
from anchor.embedding.server import make_embedder
from anchor.files import write_text_atomic
from anchor.inference.engine import InferenceEngine
from anchor.llm import chain
from anchor.llm.client import LLMClient
from anchor.llm.ledger import merge_costs, summarize
from anchor.llm.settings import LLMSettings, make_client
from anchor.llm.sync import iterate_sync, run_sync
from anchor.mapping.mapper import ConditionMapper
from anchor.mapping.retrievers import Retriever, make_retriever
from anchor.progress import ProgressEvent, Reporter, silent
from anchor.secrets import scrub
from anchor.settings.inference import USER_RULE, InferenceConfig
from anchor.space.builder import FactorSpaceBuilder
from anchor.space.io import load_space, save_space, space_settings
from anchor.space.structure import Clusterer, Reducer
from anchor.types import (
    CalibratedProbability,
    Condition,
    CriticalPath,
    FactorSpace,
    InferenceResult,
    Scenario,
)

MAX_CACHED_SPACES = 64

__all__ = ["Anchor"]


class Anchor:
    """Configured once (LLM client, embedder, hyperparameters); reused for many scenarios."""

    def __init__(
        self,
        client: LLMClient | None = None,
        *,
        settings: LLMSettings | None = None,
        embedder: Embedder | None = None,
        config: AnchorConfig | None = None,
        reducer: Reducer | None = None,
        clusterer: Clusterer | None = None,
        retriever: Retriever | None = None,
        estimator: LLMClient | None = None,
        calibrator: FileCalibrator | str | Path | None = None,
    ) -> None:
        if client is not None and settings is not None:
            raise ValueError("pass either a client or settings, not both")
        self.settings = settings or LLMSettings.from_env()
        self.embedder = embedder if embedder is not None else make_embedder(self.settings)
        # Every use embeds (a condition, a space's factors): start loading the model now, in its
        # helper process, while this process sets up the LLM client and reads the space.
        offload.warm_up(self.embedder)
        self.client = client if client is not None else make_client(self.settings)
        # Without a configuration it answers as `anchor predict` does (the rule of anchor.settings.inference.USER_RULE).
        self.config = config or AnchorConfig(inference=InferenceConfig(rule=USER_RULE))
        self.reducer = reducer
        self.clusterer = clusterer
        # Stage-2 candidate search (the one named by config.mapping.retriever unless an object is
        # given) and, optionally, a second model that elicits phi and the latent parameters while
        # ``client`` does everything else.
        self.retriever = retriever if retriever is not None else make_retriever(self.config.mapping.retriever)
        self.estimator = estimator
        # Read now, so that a bad file fails here rather than after the LLM work.
        self.calibrator = (read_calibrator(calibrator, "calibrator") if isinstance(calibrator, str | Path)
                           else calibrator)
        self._calibrator_checked = False
        # Per-space stages (each holds the space's retrieval index), most recently used last.
        self._mappers: OrderedDict[int, tuple[FactorSpace, ConditionMapper, InferenceEngine]] = OrderedDict()

    # ------------------------------------------------------------------ stage 1

    async def abuild(self, scenario: Scenario, report: Reporter = silent) -> FactorSpace:
        builder = FactorSpaceBuilder(self.client, self.embedder, self.config.build,
                                     reducer=self.reducer, clusterer=self.clusterer)
        space = await builder.build(scenario, report)
        inference = self.config.inference
        if inference.rule == "consistent" and inference.base_rate is None:
            # Stored with the space (and its request with the space's cost), so that answering its
            # conditions later needs no request for it.
            engine = InferenceEngine(self.client, space, inference, estimator=self.estimator)
            with self.client.ledger.scope() as records:
                base_rate = await engine.base_rate()
            space = space.model_copy(update={"base_rate": base_rate,
                                             "cost": merge_costs([*space.cost, *summarize(records)])})
        return space

    def build(self, scenario: Scenario, report: Reporter = silent) -> FactorSpace:
        return self._run(self.abuild(scenario, report))

    # ------------------------------------------------------------------ stages 2 and 3

    def _stages(self, space: FactorSpace) -> tuple[ConditionMapper, InferenceEngine]:
        # Keyed by identity: the retrieval index is built once per space object. Only the most
        # recently used spaces are kept, so a long evaluation does not hold every index alive.
        entry = self._mappers.get(id(space))
        if entry is None or entry[0] is not space:
            entry = (space, ConditionMapper(self.client, self.embedder, space, self.config.mapping,
                                            retriever=self.retriever),
                     InferenceEngine(self.client, space, self.config.inference, estimator=self.estimator))
            self._mappers[id(space)] = entry
            while len(self._mappers) > MAX_CACHED_SPACES:
                self._mappers.popitem(last=False)
        self._mappers.move_to_end(id(space))
        return entry[1], entry[2]

    async def ainfer_one(self, space: FactorSpace, condition: str | Condition) -> InferenceResult:
        text = condition.text if isinstance(condition, Condition) else Condition(text=condition).text
        mapper, engine = self._stages(space)
        started = time.perf_counter()
        timings: dict[str, float] = {}
        before = chain.current()
        with self.client.ledger.scope() as records:
            trace = await mapper.map(text, timings)
            result = InferenceResult(condition=text, p_outcome1=None, p_outcome2=None, unknown=False,
                                     mapping=trace, variant=self.config.active_ablations())
            result.compute_seconds.update(timings)
            result = await engine.infer(trace, result)
        if self.calibrator is not None:
            self._calibrate(result)
        if mapper.index_seconds:
            result.compute_seconds["index_build"] = round(mapper.index_seconds, 6)
        result.compute_seconds["total_wall"] = round(time.perf_counter() - started, 6)
        result.cost = summarize(records)
        result.critical_path = CriticalPath(**chain.since(before)._asdict())
        return result

    def _calibrate(self, result: InferenceResult) -> None:
        """Replace the answered P(O1) by the calibrated one, keeping the raw one in ``result.calibration``."""
        assert self.calibrator is not None
        if not self._calibrator_checked:
            self._calibrator_checked = True
            mismatch = self.calibrator.mismatch(model=self.client.backend.model,
                                                method=method_label("anchor", None, self.config.active_ablations()))
            if mismatch:
                warnings.warn(CalibratorMismatchWarning(mismatch), stacklevel=4)
        if result.unknown or result.p_outcome1 is None:
            return
        raw = result.p_outcome1
        p = self.calibrator.calibrate(raw)
        result.calibration = CalibratedProbability(p_raw=raw, p_calibrated=p, kind=self.calibrator.kind,
                                                   fitted_on=self.calibrator.file.fitted_on.summary())
        result.p_outcome1, result.p_outcome2 = p, 1.0 - p

    async def ainfer(self, space: FactorSpace, conditions: Sequence[str | Condition],
                     report: Reporter = silent) -> list[InferenceResult]:
        done = 0
        total = len(conditions)
        report(ProgressEvent("conditions", 0, total))

        async def one(cond: str | Condition) -> InferenceResult:
            nonlocal done
            res = await self.ainfer_one(space, cond)
            done += 1
            report(ProgressEvent("conditions", done, total, res.condition[:60]))
            return res

        return list(await chain.gather(*(one(c) for c in conditions)))

    def infer(self, space: FactorSpace, conditions: Sequence[str | Condition] | str,
              report: Reporter = silent) -> list[InferenceResult]:
        if isinstance(conditions, str):
            conditions = [conditions]
        return self._run(self.ainfer(space, conditions, report))

    # ------------------------------------------------------------------ many cases

    async def apredict(
        self,
        cases: CaseSource | Iterable[CaseRow],
        *,
        spaces: Path | str | None = None,
        columns: Mapping[str, str] | None = None,
        format: str | None = None,
        limits: CaseLimits | None = None,
    ) -> AsyncIterator[CasePrediction]:
        """Answer every row of a cases file (a path, or rows already read), yielding each
        :class:`~anchor.cases.CasePrediction` as it finishes, bad rows included (status ``rejected``).

        Rows with the same scenario and outcomes share one factor space, built once. ``spaces`` is
        a folder of spaces kept between calls (and shared with ``anchor predict --spaces``): a space
        is found there by its scenario and build settings, and what is built is added. Without it the
        spaces live in a temporary folder for the call. ``columns``, ``format`` and ``limits`` read
        the file as ``anchor predict``'s ``--column``, ``--input-format`` and limits do.
        """
        rows = cases if not isinstance(cases, str | Path) and not hasattr(cases, "read") else \
            read_cases(cases, format=format, columns=columns, limits=limits)  # type: ignore[arg-type]
        with tempfile.TemporaryDirectory(prefix="anchor-spaces-") as scratch:
            folder = Path(spaces) / "spaces" if spaces is not None else Path(scratch)
            store: ArtefactStore[FactorSpace] = ArtefactStore(folder, load=load_space, save=save_space)
            await self.client.ensure_ready()
            settings = space_settings(self.config.build, self.client.backend.model,
                                      (await asyncio.to_thread(embedder_identity, self.embedder)).model_dump())

            async def answer(item: CaseRow | RejectedRow) -> CasePrediction:
                if isinstance(item, RejectedRow):
                    return CasePrediction(line=item.line, row=item.row, id=item.id, status="rejected",
                                          reason=item.reason)
                return await self._predict_case(item, store, settings)

            # Two cases per request slot keep the server busy (as a run does: anchor.runs.session).
            async for _, prediction in answered(rows, answer, slots=max(2, 2 * self.client.concurrency)):
                yield prediction

    async def _predict_case(self, row: CaseRow, store: ArtefactStore[FactorSpace],
                            settings: dict[str, object]) -> CasePrediction:
        scenario = row.to_scenario()
        answer = CasePrediction(line=row.line, row=row.row, id=row.id, label=row.label, group=row.group, status="ok")
        try:
            space = await store.get(content_key(scenario, settings), lambda: self.abuild(scenario))
            result = await self.ainfer_one(space, row.condition)
        except (ArtefactFailed, *INSTANCE_FAILURES) as exc:
            return answer.model_copy(update={"status": "failed", "reason": scrub(str(exc))[:800]})
        return answer.model_copy(update={"result": result, "status": "unknown" if result.unknown else "ok",
                                         "reason": result.unknown_reason})

    def predict(
        self,
        cases: CaseSource | Iterable[CaseRow],
        *,
        spaces: Path | str | None = None,
        columns: Mapping[str, str] | None = None,
        format: str | None = None,
        limits: CaseLimits | None = None,
    ) -> Iterator[CasePrediction]:
        """:meth:`apredict` for synchronous code: an iterator of the rows' answers as they finish."""
        return iterate_sync(self.apredict(cases, spaces=spaces, columns=columns, format=format, limits=limits),
                            self.client)

    # ------------------------------------------------------------------ audit

    async def aexplain(self, space: FactorSpace, conditions: Sequence[str | Condition] | str,
                       path: Path | str | None = None, report: Reporter = silent) -> str:
        """Answer ``conditions`` and return a self-contained HTML page explaining each answer
        (retrieval funnel, phi per factor, latent network, posteriors) next to the factor space;
        with ``path``, also write it there."""
        if isinstance(conditions, str):
            conditions = [conditions]
        # Imported here: the page machinery costs 0.07 s of CPU that `anchor infer` (no page) should not pay.
        from anchor.audit.pages import explain_html

        results = await self.ainfer(space, conditions, report)
        page = explain_html(space, results)
        if path is not None:
            write_text_atomic(path, page)
        return page

    def explain(self, space: FactorSpace, conditions: Sequence[str | Condition] | str,
                path: Path | str | None = None, report: Reporter = silent) -> str:
        return self._run(self.aexplain(space, conditions, path, report))

    # ------------------------------------------------------------------ plumbing

    def _run(self, coro):  # noqa: ANN001, ANN202 - small sync bridge
        estimator = self.estimator
        if estimator is None or estimator is self.client:
            return run_sync(coro, self.client)

        async def closing_estimator():  # noqa: ANN202 - the estimator's connections belong to this loop too
            try:
                return await coro
            finally:
                await estimator.aclose()

        return run_sync(closing_estimator(), self.client)
