"""Running a plan: every planned run through the run engine, every analysis through the
analysis runner, in this process, with one progress view, resumable, under an optional budget.

Two passes over the runs. The **pilot** evaluates the first scenario of every run (all of its
instances, in every run), in the plan's order; the **rest** then completes each run. The pilot is
real work in the run's own directory, not a trial beside it: the rest resumes from it, so nothing
is asked twice, and the runs end as they would in one pass. What it leaves in each ledger is what the
estimates (:mod:`anchor.reproduce.estimate`) extrapolate: ``--plan`` stops after it, a budget
checks each run against them, and the progress view gives the time left from them.

A run is finished when its ``metrics.json`` covers every instance of the slice in every run
(and, unless failed predictions are kept, none failed): it is never run again. A killed
reproduction resumes with the same command: each run where it stopped (see the run engine),
the finished ones skipped. A run that stops with an error is reported and the others go on; the
runs that reuse its spaces wait for the next attempt.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from anchor.analysis.runs import EvalSlice
from anchor.config import AnchorConfig
from anchor.embedding.server import check_embedder
from anchor.errors import AnchorError
from anchor.evaluation.driver import EvalRunner
from anchor.evaluation.run_config import make_run_config
from anchor.extras import EXTRAS, MissingExtra, extra_hint, extra_installed
from anchor.files import write_atomic
from anchor.llm.settings import LLMSettings, make_client
from anchor.methods.registry import METHODS
from anchor.progress import ProgressEvent, Reporter, silent
from anchor.reproduce import estimate as est
from anchor.reproduce.analyses import analysis_done, no_result, run_analysis
from anchor.reproduce.plan import (
    ANALYSES_FOLDER,
    CACHE_FOLDER,
    OWN_CACHES_FOLDER,
    RUNS_FOLDER,
    Plan,
    PlannedAnalysis,
    PlannedRun,
)
from anchor.reproduce.selection import QUICK_BIRD_SAMPLES
from anchor.rundir import DirectoryBusy, DirectoryLock, RunDirectory, RunDirError, Skipped
from anchor.rundir.records import RunConfig
from anchor.runs.errors import RunError
from anchor.runs.identity import check_resumable, identity_difference
from anchor.runs.session import RunOptions
from anchor.secrets import scrub
from anchor.settings.space import default_build_params
from anchor.types import scenario_key

#: "empty": an analysis that ran to its end with nothing to compare (its folder says why); "stopped": not
#: started when the budget stopped the reproduction; "paused": started (its pilot ran), then stopped so.
State = Literal["finished", "empty", "started", "new", "failed", "waiting", "stopped", "paused"]


class Budget(BaseModel):
    """Caps on the whole reproduction directory: requests made (logical: each once, whatever its attempts)
    and tokens reported, all runs together."""

    model_config = ConfigDict(frozen=True)

    requests: int | None = None
    tokens: int | None = None

    def crossed_by(self, spent: est.Spent, expected: est.Spent) -> str | None:
        """Why spending ``expected`` more after ``spent`` would cross a cap (None when it would not)."""
        for what, cap in (("requests", self.requests), ("tokens", self.tokens)):
            if cap is None:
                continue
            now, more = getattr(spent, what), getattr(expected, what)
            if now >= cap:
                return f"the {now:,} {what} spent already reach the {cap:,} allowed by --budget-{what}"
            if now + more > cap:
                return (f"it is expected to need about {more:,} {what}, and {now:,} of the {cap:,} allowed by "
                        f"--budget-{what} are spent ({max(0, cap - now):,} left)")
        return None


@dataclasses.dataclass
class Outcome:
    """What a pass over the plan left: each run's and analysis's state, and why one stopped."""

    states: dict[str, State]
    errors: dict[str, str]
    estimates: list[est.CostEstimate]
    spent: est.Spent
    stopped: str | None = None
    interrupted: bool = False
    """Ctrl-C ended the pass: the runs it left unfinished resume with the same command."""

    @property
    def complete(self) -> bool:
        return (self.stopped is None and not self.interrupted
                and all(s in ("finished", "empty") for s in self.states.values()))


async def resolve_model(settings: LLMSettings) -> LLMSettings:
    """``settings`` with the model named: the server's first listed model when none was given (one
    request for the model list, no completion), so every run records the same name."""
    if settings.model is not None and settings.uses_server:
        return settings
    client = make_client(settings.model_copy(update={"use_cache": False}))
    try:
        await client.ensure_ready()
        return settings.model_copy(update={"model": client.backend.model})
    finally:
        await client.aclose()


@contextmanager
def hold(out_dir: Path) -> Iterator[None]:
    """The reproduction's folder for this process alone: a second ``anchor reproduce`` on it is refused
    at once (the lock ends with the process, however it ends)."""
    lock = DirectoryLock(Path(out_dir))
    try:
        lock.__enter__()
    except DirectoryBusy as exc:
        raise RunError(f"--out {out_dir} is in use by another anchor reproduce"
                        + (f" (pid {exc.pid})" if exc.pid else "") + "; wait for it to end, or use another --out") \
            from None
    try:
        yield
    finally:
        lock.__exit__(None, None, None)


class Reproduction:
    """The plan's runs and analyses under ``out_dir`` (see the module docstring)."""

    def __init__(self, plan: Plan, out_dir: Path, *, settings: LLMSettings, estimator: LLMSettings | None = None,
                 report: Reporter = silent, command: str = "", retry_failed: bool = True,
                 budget: Budget | None = None, workers: int = 1, ray: str | None = None) -> None:
        self.plan = plan
        self.workers = workers
        self.ray = ray
        self.out_dir = Path(out_dir)
        self.settings = settings
        self.estimator = estimator
        self.report = report
        self.command = command
        self.retry_failed = retry_failed
        self.budget = budget or Budget()
        self.errors: dict[str, str] = {}
        self._instances: dict[str, list[Any]] = {}
        self._started = time.monotonic()
        self._spent = est.Spent()
        self._live = est.Spent()
        self._session = est.Spent()
        self._done_units = 0
        self._estimates: dict[str, est.CostEstimate] = {}
        self._configs: dict[str, tuple[RunConfig, AnchorConfig | None]] = {}

    # ------------------------------------------------------------------ what to know first

    @property
    def second_estimator(self) -> bool:
        """The estimator analysis has a second model to compare (not the main model at another seed)."""
        return self.estimator is not None and self.estimator.model != self.settings.model

    def notes(self) -> list[str]:
        """What the user should know before anything runs."""
        out = []
        if self.plan.analyses and any(a.analysis == "estimator" for a in self.plan.analyses) \
                and not self.second_estimator:
            out.append(f"the estimator analysis compares {self.settings.model} with itself (seed {self.settings.seed} "
                       f"against {self.settings.seed + 1}): Tables 8 and 9 show the analysis working, and their "
                       "claims will be 'not checked'; give --estimator-base-url (and --estimator-model) for a "
                       "second model")
        return out

    def interrupted(self) -> Outcome:
        """Where an interrupted pass left the reproduction."""
        return dataclasses.replace(self._outcome(None), interrupted=True)

    # ------------------------------------------------------------------ where things are

    def run_dir(self, name: str) -> Path:
        return self.out_dir / RUNS_FOLDER / name

    def analysis_dir(self, name: str) -> Path:
        return self.out_dir / ANALYSES_FOLDER / name

    def settings_for(self, run: PlannedRun | None = None) -> LLMSettings:
        """The LLM settings of a run: the shared cache, or the run's own."""
        folder = self.out_dir / (OWN_CACHES_FOLDER + "/" + run.name if run is not None and run.own_cache
                                 else CACHE_FOLDER)
        return self.settings.model_copy(update={"cache_dir": folder, "use_cache": True})

    def anchor_config(self, dataset: str, ablations: Sequence[str] = ()) -> AnchorConfig:
        sizes = "quick" if self.plan.selection.quick or not self.settings.uses_server else "paper"
        return AnchorConfig(build=default_build_params(dataset, self.settings.seed, sizes)).with_ablations(ablations)

    def run_config(self, run: PlannedRun) -> tuple[RunConfig, AnchorConfig | None]:
        """The run's configuration as ``anchor eval`` would record it (made once)."""
        if run.name not in self._configs:
            self._configs[run.name] = self._make_config(run)
        config, anchor = self._configs[run.name]
        return config.model_copy(deep=True), anchor

    def _make_config(self, run: PlannedRun) -> tuple[RunConfig, AnchorConfig | None]:
        spec = METHODS[run.method]
        anchor = self.anchor_config(run.dataset, run.ablations) if spec.uses_anchor_config else None
        source = self.run_dir(run.spaces_from) if run.spaces_from else None
        if source is not None:
            source.mkdir(parents=True, exist_ok=True)  # checked to exist; filled by the run it belongs to
        # Recorded from the run's own directory ("../<run>"): the reproduction's folder can be moved or copied.
        config = make_run_config(
            dataset=run.dataset, method=run.method, data_path=run.data_path, ablations=run.ablations,
            limit=run.limit, runs=run.runs, seed=self.settings.seed, settings=self.settings_for(run),
            anchor_config=anchor, balance_outcomes=run.balance_outcomes, spaces_from=source,
            spaces_relative_to=self.run_dir(run.name) if source is not None else None, stage=run.stage,
            command=self.command)
        config.llm["model"] = self.settings.model
        if self.plan.selection.quick and config.method_config and "samples" in config.method_config:
            config.method_config["samples"] = QUICK_BIRD_SAMPLES  # BIRD's counterpart of the quick build sizes
        return config, anchor

    def _runner(self, run: PlannedRun) -> EvalRunner:
        config, anchor = self.run_config(run)

        return EvalRunner(config, self.run_dir(run.name),
                          RunOptions(self.settings_for(run), anchor, workers=self.workers, ray=self.ray),
                          report=self._relabelled(run.name), retry_failed=self.retry_failed)

    def instances(self, run: PlannedRun) -> list[Any]:
        """The run's instances (read once; a broken data file fails here, before any request)."""
        if run.name not in self._instances:
            self._instances[run.name] = self._runner(run).load_instances()
        return self._instances[run.name]

    # ------------------------------------------------------------------ state

    def finished(self, run: PlannedRun) -> bool:
        folder = self.run_dir(run.name)
        directory = RunDirectory(folder)
        try:
            metrics = directory.read_metrics()
            stored = directory.read_config()
        except RunDirError:
            return False  # unfinished, or not a run this version reads (check_resumable says which)
        planned, _ = self.run_config(run)
        if identity_difference(stored.model_dump(mode="json"), planned.model_dump(mode="json"), folder) is not None:
            return False
        complete = metrics.n_instances == len(self.instances(run)) and metrics.n_runs == run.runs
        return complete and (metrics.n_failed == 0 or not self.retry_failed)

    def check_resumable(self) -> None:
        """Refuse, before any request, a directory whose runs were made with other settings."""
        for run in self.plan.runs:
            directory = RunDirectory(self.run_dir(run.name), error=RunError)
            if directory.is_run():
                directory.schema_version()  # a newer layout is refused as such, not as other settings
                planned, _ = self.run_config(run)
                try:
                    check_resumable(self.run_dir(run.name), planned.model_dump(mode="json"))
                except RunError as exc:
                    raise RunError(f"--out {self.out_dir} holds a reproduction with other settings ({exc})") from None
        for run in self.plan.runs:
            self.instances(run)
        self.check_installed()

    def check_installed(self) -> None:
        """Refuse, before any request, unfinished work that needs a package not installed: BIRD's runs
        torch (an extra), ANCHOR's runs and the analyses the bundled MiniLM when nothing else embeds."""
        unfinished = [r for r in self.plan.runs if not self.finished(r)]
        if any(METHODS[r.method].uses_anchor_config for r in unfinished) or not all(
                self.analysis_finished(a) for a in self.plan.analyses):
            check_embedder(self.settings)
        for extra in dict.fromkeys(x for r in unfinished if (x := METHODS[r.method].extra) and not extra_installed(x)):
            runs = [r for r in unfinished if METHODS[r.method].extra == extra]
            parts = ", ".join(dict.fromkeys(p for r in runs for p in r.parts))
            raise MissingExtra(extra_hint(extra, f"{EXTRAS[extra][1]}, used by {len(runs)} run(s) of the selected parts "
                                                 f"({parts}: {', '.join(r.name for r in runs)}),"))

    def state(self, run: PlannedRun) -> State:
        if run.name in self.errors:
            return "failed"
        if self.finished(run):
            return "finished"
        return "started" if RunDirectory(self.run_dir(run.name)).predictions.exists() else "new"

    # ------------------------------------------------------------------ analyses

    def clustering_inputs(self) -> list[str]:
        """The finished full ANCHOR runs whose factor spaces the clustering comparison reads."""
        return [r.name for r in self.plan.runs if r.method == "anchor" and not r.ablations
                and self.state(r) == "finished"]

    def analysis_marker(self, a: PlannedAnalysis) -> dict[str, Any]:
        """What an analysis was made for: recorded with it, compared to recognise it as finished."""
        llm: dict[str, Any] = {"model": self.settings.model, "seed": self.settings.seed}
        if a.analysis == "estimator" and self.estimator is not None:
            llm["estimator"] = {"model": self.estimator.model, "seed": self.estimator.seed}
        return {"analysis": a.model_dump(mode="json"), "llm": llm, "quick": self.plan.selection.quick,
                "inputs": self.clustering_inputs() if a.analysis == "clustering" else []}

    def analysis_finished(self, a: PlannedAnalysis) -> bool:
        return analysis_done(self.analysis_dir(a.name), a, self.analysis_marker(a))

    async def _analyse(self, a: PlannedAnalysis) -> None:
        marker = self.analysis_marker(a)
        data = None
        if a.dataset is not None:
            data = EvalSlice(dataset=a.dataset, settings=self.settings_for(), anchor_config=self.anchor_config(a.dataset),
                             data_path=a.data_path, limit=a.limit, runs=a.runs, balance_outcomes=a.balance_outcomes,
                             retry_failed=self.retry_failed, command=self.command)
        estimator = None
        if self.estimator is not None:
            estimator = self.estimator.model_copy(update={"cache_dir": self.settings_for().cache_dir, "use_cache": True})
        await run_analysis(self.analysis_dir(a.name), a, marker, data=data,
                           inputs=[self.run_dir(n) for n in marker["inputs"]], estimator=estimator,
                           report=self._relabelled(a.name))

    def estimates(self) -> list[est.CostEstimate]:
        """The estimate of every run and analysis, from what their ledgers hold now."""
        out: list[est.CostEstimate] = []
        rates: dict[str, est.Rates | None] = {}
        for run in self.plan.runs:
            found, rate = est.estimate_run(run.name, self.run_dir(run.name), self.instances(run), run.runs,
                                           finished=self.finished(run))
            out.append(found)
            if run.method == "anchor" and not run.ablations:
                rates[run.dataset] = rate
        for a in self.plan.analyses:
            out.append(self._analysis_estimate(a, rates))
        self._estimates = {e.name: e for e in out}
        return out

    def _analysis_estimate(self, a: PlannedAnalysis, rates: dict[str, est.Rates | None]) -> est.CostEstimate:
        folder = self.analysis_dir(a.name)
        spent = est.spent_in(folder)
        finished = self.analysis_finished(a)
        if a.analysis == "clustering":
            return est.derived_estimate(a.name, 0, 0, None, spent=spent, finished=finished)
        predictions = (a.limit or self._full_size(a)) * a.runs
        cells = {"factors": a.points or 8, "retrieval": 9, "estimator": 1}[a.analysis]
        return est.derived_estimate(a.name, cells, predictions, rates.get(a.dataset or ""),
                                    inference_only=1 if a.analysis == "estimator" else 0, spent=spent,
                                    finished=finished, what=f"on {a.dataset} ")

    def _full_size(self, a: PlannedAnalysis) -> int:
        same = next((r for r in self.plan.runs if r.dataset == a.dataset), None)
        return len(self.instances(same)) if same is not None else 0

    # ------------------------------------------------------------------ passes

    async def pilot(self) -> Outcome:
        """Evaluate the first scenario of every unfinished run, in the plan's order; the estimates follow.

        A run killed before it finished its first scenario completes it here too, before the runs after
        it start theirs: so every run asks its questions in the same order as in one uninterrupted pass,
        and a request two runs share is paid by the same run (the one that comes first)."""
        self._spent = est.spent_in(self.out_dir)
        largest = est.Spent()
        for run in self.plan.runs:
            if self.state(run) in ("finished", "failed") or self._first_scenario_done(run):
                continue
            if not self._ready(run):
                continue
            stop = self.budget.crossed_by(self._spent, largest)
            if stop:
                so_far = (f"the largest pilot so far spent {largest.requests:,} requests and {largest.tokens:,} "
                          "tokens, and " if largest.requests else "")
                return self._outcome(f"stopped before the pilot of {run.name}: {so_far}{stop}")
            before = self._spent
            await self._evaluate(run, self._first_scenario(run))
            self._spent = est.spent_in(self.out_dir)
            used = est.Spent(requests=self._spent.requests - before.requests, tokens=self._spent.tokens - before.tokens)
            largest = max(largest, used, key=lambda s: (s.requests, s.tokens))
        return self._outcome(None)

    async def run_all(self) -> Outcome:
        """The pilot, then every run to its end, then the analyses; stops before crossing the budget."""
        outcome = await self.pilot()
        if outcome.stopped:
            return outcome
        self.estimates()
        total = len(self.plan.runs) + len(self.plan.analyses)
        self._done_units = 0
        for run in self.plan.runs:
            if self.state(run) == "finished":
                self._done_units += 1
                continue
            if run.name in self.errors or not self._ready(run):
                continue  # it stopped with an error in the pilot: once per attempt is enough
            left = self._estimates[run.name].left
            stop = self.budget.crossed_by(self._spent, left) if left is not None else None
            if stop:
                return self._outcome(f"stopped before {run.name}: {stop}")
            await self._evaluate(run, self.instances(run))
            self._spent = est.spent_in(self.out_dir)
            self._estimates[run.name], _ = est.estimate_run(run.name, self.run_dir(run.name), self.instances(run),
                                                            run.runs, finished=self.finished(run))
            self._done_units += 1
            self._progress(total)
        for analysis in self.plan.analyses:
            if self.analysis_finished(analysis):
                self._done_units += 1
                continue
            left = self._estimates[analysis.name].left
            stop = self.budget.crossed_by(self._spent, left) if left is not None else None
            if stop:
                return self._outcome(f"stopped before the analysis {analysis.name}: {stop}")
            try:
                await self._analyse(analysis)
            except AnchorError as exc:
                self.errors[analysis.name] = scrub(str(exc)).splitlines()[0][:500]
            self._spent = est.spent_in(self.out_dir)
            self._estimates[analysis.name] = est.CostEstimate(name=analysis.name, requests=0, tokens=0,
                                                              source="counted")
            self._done_units += 1
            self._progress(total)
        return self._outcome(None)

    def _ready(self, run: PlannedRun) -> bool:
        """False (and the reason noted) when the run reuses the spaces of a run that stopped with an error."""
        if run.spaces_from and run.spaces_from in self.errors:
            self.errors[run.name] = f"waits for {run.spaces_from}, whose spaces it reuses and which did not finish"
            return False
        return True

    def _first_scenario_done(self, run: PlannedRun) -> bool:
        # Leniently: a damaged line leaves its instance undone here, and the run, resumed, names the line.
        done = RunDirectory(self.run_dir(run.name)).latest_predictions(skipped=Skipped())
        wanted = [(r, inst.id) for r in range(run.runs) for inst in self._first_scenario(run)]
        return all(k in done and (done[k].status != "failed" or not self.retry_failed) for k in wanted)

    def _first_scenario(self, run: PlannedRun) -> list[Any]:
        instances = self.instances(run)
        first = scenario_key(instances[0].scenario) if instances else None
        return [i for i in instances if scenario_key(i.scenario) == first]

    async def _evaluate(self, run: PlannedRun, instances: list[Any]) -> None:
        self._live = est.Spent()
        try:
            await self._runner(run).run(instances)
        except AnchorError as exc:
            self.errors[run.name] = scrub(str(exc)).splitlines()[0][:500]
        finally:
            self._session = self._session + self._live
            self._live = est.Spent()

    def _relabelled(self, name: str) -> Reporter:
        """The runner's events on the one 'current run' line, named after the run (the requests and tokens
        go to the reproduction's line, and a retry note stays)."""
        def relabel(event: ProgressEvent) -> None:
            info = dict(event.info)
            self._live = est.Spent(requests=int(info.get("requests", 0) or 0), tokens=int(info.get("tokens", 0) or 0))
            kept = {k: v for k, v in info.items() if k == "retry" or (k == "failed" and v)}
            where = name if event.stage == "instances" else f"{name}: {event.stage}"
            self.report(dataclasses.replace(event, stage="current run", message=where, info=kept))
            self._progress()
        return relabel

    def _progress(self, total: int | None = None) -> None:
        """The reproduction's own line: runs done of all (the bar), elapsed, the time left (once the pilot
        has given estimates), and the requests and tokens spent."""
        total = total or len(self.plan.runs) + len(self.plan.analyses)
        spent = self._spent + self._live
        eta = self._time_left()
        parts = [*([f"{eta} left"] if eta else []), f"{spent.requests:,} requests", f"{spent.tokens:,} tokens"]
        self.report(ProgressEvent("reproduction", self._done_units, total, ", ".join(parts)))

    def _time_left(self) -> str | None:
        """From the estimates of what is left and the rate of requests so far in this process."""
        made = (self._session + self._live).requests
        left = [e.left for e in self._estimates.values()]
        if not made or not self._estimates or any(x is None for x in left):
            return None
        rate = made / max(time.monotonic() - self._started, 1e-6)
        seconds = max(0, sum(x.requests for x in left if x is not None) - self._live.requests) / rate
        return f"~{seconds / 60:.0f} min" if seconds >= 90 else f"~{seconds:.0f} s"

    def _outcome(self, stopped: str | None) -> Outcome:
        states: dict[str, State] = {r.name: self.state(r) for r in self.plan.runs}
        for a in self.plan.analyses:
            done = self.analysis_finished(a)
            states[a.name] = ("failed" if a.name in self.errors else "new" if not done
                              else "empty" if no_result(self.analysis_dir(a.name)) is not None else "finished")
        for name in self.errors:
            if name in states and states[name] != "finished" and "waits for" in self.errors[name]:
                states[name] = "waiting"
        if stopped:
            moved = {"new": "stopped", "started": "paused"}
            states = {k: moved.get(v, v) for k, v in states.items()}
        return Outcome(states=states, errors=dict(self.errors), estimates=self.estimates(),
                       spent=est.spent_in(self.out_dir), stopped=stopped)


#: The layout of ``DIR/state.json`` (docs/schemas.md).
STATE_SCHEMA_VERSION = 1


def write_state(out_dir: Path, outcome: Outcome) -> None:
    """``DIR/state.json``: where the reproduction stands (for scripts; the report says the same)."""
    doc = {"schema_version": STATE_SCHEMA_VERSION, "complete": outcome.complete, "stopped": outcome.stopped, "interrupted": outcome.interrupted,
           "states": outcome.states,
           "errors": outcome.errors, "spent": outcome.spent.model_dump(),
           "estimates": [e.model_dump(mode="json") for e in outcome.estimates]}
    write_atomic(out_dir / "state.json", json.dumps(doc, indent=2))
