"""Running the bench: worlds, their cases files, and every (group, error setting, method) cell through
``anchor predict``'s own runner, in process, with the simulated LLM handed to it as its backend.

Layout of DIR::

    worlds.json                 the worlds of every group (generated ones, then the published networks)
    cases/<group>.csv           each group's cases, with p_true (latent-p150.csv, networks.csv, ...)
    runs/<setting>/<group>-<method>/   a run directory of anchor predict (anchor truth score, anchor report)
    cache/                      the response cache every run shares
    spaces/                     the store of factor spaces and BIRD models every run shares (named by content)
    plan.json                   what the bench runs (written first: a rerun into DIR must match it)
    results.json, table.md, *.png, timings.json

Every setting has its own simulated LLM (model ``sim-<digest of worlds, errors, seed>``), so the cache
and the store never give one setting's answers to another. A cell whose setting differs from one
already run for the same group and method only in error parameters that no prompt of that run reads is
answered by that run (:func:`anchor.truth.simulate.reads.same_answers`): its answers would be the same,
request by request, so it is not run again.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from anchor import prompts
from anchor.config import AnchorConfig
from anchor.errors import AnchorError
from anchor.extras import extra_hint, extra_installed
from anchor.files import write_text_atomic
from anchor.llm.settings import LLMSettings
from anchor.predict.config import CasesInput, make_predict_config
from anchor.predict.runner import PredictRunner
from anchor.rundir import RunDirectory
from anchor.runs.session import RunOptions
from anchor.scoring.truth import run_truth_scores
from anchor.settings.space import default_build_params
from anchor.truth.cases import write_cases
from anchor.truth.generate import generate_groups
from anchor.truth.settings import GenerationSettings
from anchor.truth.simulate import SimulatedBackend, SimulatedLLM
from anchor.truth.simulate.reads import same_answers
from anchor.truth.world import World, WorldFile, save_worlds
from anchor.truth_bench.compare import ece_truth, share
from anchor.truth_bench.plan import BenchMethod, BenchPlan, Group, Setting
from anchor.truth_bench.results import BenchResults, CaseInfo, CellResult, Cost, GroupInfo
from anchor.version import __version__

Say = Callable[[str], None]
BASE_RATE_STAGE = prompts.ELICIT_BASE_RATE.stage


class BenchError(AnchorError):
    """The bench cannot run as asked (a DIR holding another bench)."""


class OneBackend:
    """The backend factory handed to the runner: the simulated LLM of the cell's setting, whatever the
    settings name (picklable, so it would travel to helper processes too)."""

    def __init__(self, backend: SimulatedBackend) -> None:
        self.backend = backend

    def __call__(self, settings: LLMSettings) -> SimulatedBackend:
        return self.backend


@dataclass
class _Done:
    """A run already made for one (group, method): its setting, the stages it sent, its cell."""

    setting: Setting
    stages: frozenset[str]
    cell: CellResult


def bench_worlds(plan: BenchPlan) -> tuple[WorldFile, dict[str, list[World]]]:
    """The worlds of every group (one file; scenarios and condition texts distinct across it)."""
    settings = GenerationSettings(n_worlds=plan.worlds_per_group, seed=plan.seed,
                                  n_conditions=plan.conditions_per_world)
    generated = [g for g in plan.groups() if g.prior is not None]
    worlds = list(generate_groups([(g.structure, g.prior) for g in generated], settings).worlds)  # type: ignore[misc]
    n = plan.worlds_per_group  # generate_groups gives each group's worlds in turn
    by_group: dict[str, list[World]] = {g.name: worlds[k * n:(k + 1) * n] for k, g in enumerate(generated)}
    if plan.networks:
        from anchor.truth.networks import network_worlds

        nets = list(network_worlds(list(plan.networks), seed=plan.seed, n_conditions=plan.network_conditions).worlds)
        worlds += nets
        by_group[next(g.name for g in plan.groups() if g.prior is None)] = nets
    return WorldFile(generator={"generator": "anchor truth bench", **plan.model_dump(mode="json")},
                     worlds=worlds), by_group


def stages_read(directory: RunDirectory) -> frozenset[str]:
    """The stages whose answers a run's figures rest on: its own requests, and those of the factor spaces and
    BIRD models it took from the shared store (another run asked them, under this same setting)."""
    reused = directory.read_metrics().cost_reused
    return frozenset(r.stage for r in directory.call_log()) | frozenset(s for s in reused if s != "total")


class BenchRunner:
    """Runs a :class:`BenchPlan` into ``out`` and returns its :class:`BenchResults` (without verdicts)."""

    def __init__(self, plan: BenchPlan, out: Path, *, say: Say = lambda line: None, reuse: bool = True) -> None:
        self.plan = plan
        self.out = Path(out)
        self.say = say
        self.reuse = reuse
        """Answer a cell from an earlier run where the simulator's answers are provably the same (False: run
        every cell; the figures are the same either way, only slower)."""
        self.timings: dict[str, float] = {}

    # ------------------------------------------------------------------ the worlds

    def check_out(self) -> None:
        """Refuse a DIR that holds a bench of another plan; the same plan goes on where it stopped (its
        finished runs are kept, as ``anchor predict`` resumes). The plan is written first, as plan.json."""
        found = self.out / "plan.json"
        if found.is_file():
            try:
                old = json.loads(found.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                raise BenchError(f"--out {self.out}: plan.json there is not readable; give another directory") from None
            if old != self.plan.model_dump(mode="json"):
                raise BenchError(f"--out {self.out} holds a bench with other settings (--quick, --seed or the "
                                 "levels); give another directory, or the same settings to run it again")
        elif self.out.is_dir() and any(self.out.iterdir()):
            raise BenchError(f"--out {self.out}: not empty and holds no bench (plan.json); give an empty or new "
                             "directory")
        self.out.mkdir(parents=True, exist_ok=True)
        write_text_atomic(found, json.dumps(self.plan.model_dump(mode="json"), indent=2) + "\n")

    def make_worlds(self) -> tuple[WorldFile, dict[str, list[World]]]:
        worlds, by_group = bench_worlds(self.plan)
        save_worlds(worlds, self.out / "worlds.json")
        for group in self.plan.groups():
            write_cases(WorldFile(worlds=by_group[group.name]), self.cases_path(group))
        return worlds, by_group

    def cases_path(self, group: Group) -> Path:
        return self.out / "cases" / f"{group.slug}.csv"

    # ------------------------------------------------------------------ the sweep

    def run(self) -> BenchResults:
        started = time.perf_counter()
        self.check_out()
        worlds, by_group = self.make_worlds()
        p = self.plan
        groups = p.groups()
        cases = {g.name: [CaseInfo(id=c.id, world=w.id, kind=c.kind, p_true=c.p_true, label=c.label)
                          for w in by_group[g.name] for c in w.conditions] for g in groups}
        settings = p.settings()
        methods = p.bench_methods()
        done: dict[tuple[str, str], list[_Done]] = {}
        cells: list[CellResult] = []
        plan = [(s, g, m) for s in settings for g in groups if p.runs_in(s, g) for m in methods
                if p.method_runs(m, s, g)]
        backends: dict[str, SimulatedBackend] = {}
        for setting, group, method in plan:
            backend = backends.get(setting.name)
            if backend is None:
                backend = backends[setting.name] = SimulatedBackend(SimulatedLLM(worlds, setting.errors, seed=p.seed))
            cell = self._cell(setting, group, method, backend, cases[group.name], done)
            cells.append(cell)
            how = ("not run" if cell.not_run else f"answers of {cell.answered_by}" if cell.answered_by
                   else f"{self.timings.get(cell.run or '', 0.0):.1f} s")
            self.say(f"[{len(cells)}/{len(plan)}] {setting.name} {group.name} {method.name}: {how}")
        self.timings["total"] = time.perf_counter() - started
        notes = []
        if not p.networks and not extra_installed("networks"):
            notes.append(f"The published networks' group was not run: {extra_hint('networks', 'it')}.")
        return BenchResults(
            anchor_version=__version__, plan=p,
            settings={s.name: {"sweep": s.sweep, "level": s.level, **s.errors.model_dump(mode="json")}
                      for s in settings},
            groups={g.name: GroupInfo(structure=g.structure, prior=g.prior, cases_file=f"cases/{g.slug}.csv",
                                      worlds=[w.id for w in by_group[g.name]]) for g in groups},
            cases=cases, cells=cells, notes=notes)

    def _cell(self, setting: Setting, group: Group, method: BenchMethod, backend: SimulatedBackend,
              cases: list[CaseInfo], done: dict[tuple[str, str], list[_Done]]) -> CellResult:
        base = CellResult(group=group.name, setting=setting.name, method=method.name, run=None)
        reason = method.not_run
        if reason is not None:
            return base.model_copy(update={"not_run": reason})
        earlier = done.setdefault((group.name, method.name), [])
        for prior in earlier if self.reuse else []:
            if same_answers(prior.setting.errors, setting.errors, prior.stages):
                return prior.cell.model_copy(update={"setting": setting.name, "answered_by": prior.setting.name})
        run_dir = Path("runs") / setting.name / f"{group.slug}-{method.name}"
        t0 = time.perf_counter()
        self._predict(method, group, backend, self.out / run_dir)
        self.timings[str(run_dir)] = time.perf_counter() - t0
        directory = RunDirectory(self.out / run_dir)
        cell = self._read(base.model_copy(update={"run": str(run_dir)}), directory, cases)
        stages = stages_read(directory)
        if method.inference_config().rule == "paper":
            stages -= {BASE_RATE_STAGE}  # a base rate in a space another run built is never read by this rule
        earlier.append(_Done(setting, stages, cell))
        return cell

    def _predict(self, method: BenchMethod, group: Group, backend: SimulatedBackend, run_dir: Path) -> None:
        """``anchor predict CASES --method M [--ablation A] [--inference R ...] --out RUN_DIR --spaces
        DIR/spaces``, in process."""
        p = self.plan
        settings = LLMSettings(model=backend.model, cache_dir=self.out / "cache", seed=p.seed)
        source = CasesInput.of(self.cases_path(group))
        anchor_config = None
        if method.method == "anchor":
            anchor_config = AnchorConfig(build=default_build_params("cases", p.seed, p.build_sizes),
                                         inference=method.inference_config()).with_ablations(method.ablations)
        command = " ".join(["anchor predict", str(self.cases_path(group)), "--method", method.method,
                            *(f"--ablation {a}" for a in method.ablations),
                            *(f"--{k.replace('_', '-')} {v}" for k, v in method.inference.items()),
                            "--out", str(run_dir), "--spaces", str(self.out / "spaces"),
                            f"(anchor truth bench: {backend.model})"])
        config = make_predict_config(cases=source, method=method.method, settings=settings,
                                     anchor_config=anchor_config, ablations=list(method.ablations),
                                     spaces=self.out / "spaces", command=command)
        runner = PredictRunner(config, run_dir, RunOptions(settings, anchor_config, backends=OneBackend(backend)),
                               cases=source)
        runner.check_input()
        asyncio.run(runner.run())

    def _read(self, cell: CellResult, directory: RunDirectory, cases: list[CaseInfo]) -> CellResult:
        """The cell's estimates in case order, its scores against the truth, and its cost."""
        latest = {pred.id: pred for pred in directory.iter_predictions(without_cost=True)}
        p: list[float | None] = []
        status: list[str] = []
        for case in cases:
            pred = latest.get(case.id)
            ok = pred is not None and pred.status != "failed" and pred.p_outcome1 is not None
            p.append(pred.p_outcome1 if ok else None)  # type: ignore[union-attr]
            status.append("ok" if ok else "failed" if pred is None or pred.status == "failed" else "unknown")
        truth = [c.p_true for c in cases]
        with_factors = [s != "ok" for s, c in zip(status, cases, strict=True) if c.kind != "nothing"]
        nothing = [s == "ok" for s, c in zip(status, cases, strict=True) if c.kind == "nothing"]
        metrics = directory.read_metrics()
        total = metrics.cost.get("total")
        reused = metrics.cost_reused.get("total")
        answers = sum((c.samples + c.cache_hits) for c in (total, reused) if c is not None)
        cost = Cost(answers=answers, requests=(total.logical_requests or 0) if total else 0,
                    tokens=(total.prompt_tokens + total.completion_tokens) if total else 0)
        return cell.model_copy(update={
            "p": p, "status": status, "scores": run_truth_scores(directory), "ece_truth": ece_truth(p, truth),
            "unknown_with_factors": share(with_factors, "no case states a factor"),
            "answered_nothing": share(nothing, "no case states nothing"), "cost": cost})

    def write_timings(self) -> Path:
        path = self.out / "timings.json"
        write_text_atomic(path, json.dumps({"seconds": {k: round(v, 2) for k, v in self.timings.items()},
                                            "note": "wall-clock seconds; not part of results.json, which the same "
                                                    "command reproduces exactly"}, indent=2) + "\n")
        return path
