"""From a selection to the runs that reproduce it: which ``anchor eval`` runs and ``anchor analyze``
analyses, in which order, and what they share.

Every planned run is an ordinary evaluation run directory, ``DIR/runs/<name>``, named like
``anchor eval``'s default (dataset, method, stage, ablations); every analysis an ordinary analysis
folder, ``DIR/analyses/<name>``. A run is planned once, whatever number of parts need it (ANCHOR
on Common2Sense serves Tables 1, 3 and 4 and the cost figure), and lists those parts.

What is shared, and what is not:

* **Factor spaces.** Ablations of stages 2-3 (all but ``no-cluster``, which changes the build) and
  the three BIRD-on-ANCHOR stages reuse the spaces of the full ANCHOR run (``spaces_from``), so
  they differ from it only in what they vary.
* **BIRD models.** BIRD‡ (``bird-relaxed``) reuses the models of BIRD† (``bird``): the two differ
  only in mapping.
* **Answers.** Every run reads and writes one response cache, ``DIR/cache``: a request two runs
  make alike (the same prompt and seed) is answered once, and both read the same answer.
* **Not shared: the mapping cost of Table 4.** BIRD‡ and the three transplant runs each have their own
  cache (``DIR/caches/<name>``): the cost those rows report is that of requests each run made,
  not answers another run paid for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from anchor.config import ABLATIONS, AnchorConfig
from anchor.evaluation.run_config import dataset_kind
from anchor.methods.registry import paper_table, table_order
from anchor.reproduce.selection import (
    DECISION_SETS,
    ESTIMATOR_SETS,
    PAIRWISE,
    QUICK_ANALYSIS_LIMIT,
    Selection,
    SelectionError,
)

RUNS_FOLDER = "runs"
ANALYSES_FOLDER = "analyses"
CACHE_FOLDER = "cache"
OWN_CACHES_FOLDER = "caches"

#: Table 3's variants in the paper's row order (the order of ``ABLATIONS``). The methods of Tables 1
#: and 2 are on their registry entries (``MethodSpec.paper_tables``).
TABLE3_ABLATIONS = tuple(ABLATIONS)
TRANSPLANT_STAGES = ("factors", "mapping", "pool")
#: Decision sets whose bundled copies state every condition for outcome 1: the runs swap O1/O2 for about
#: half the scenarios, so that always answering O1 does not score 100%.
BALANCED_SETS = ("today", "plasma")


class _Planned(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PlannedRun(_Planned):
    """One ``anchor eval`` run of the reproduction."""

    name: str = Field(description="Its directory under DIR/runs/.")
    dataset: str
    method: str
    stage: str | None = None
    ablations: tuple[str, ...] = ()
    data_path: Path | None = None
    limit: int | None = None
    runs: int = 1
    balance_outcomes: bool = False
    spaces_from: str | None = Field(default=None, description="The planned run whose spaces or BIRD models it reuses.")
    own_cache: bool = Field(default=False, description="A response cache of its own (DIR/caches/<name>).")
    parts: tuple[str, ...] = Field(default=(), description="The tables and figures that show it.")

    @property
    def kind(self) -> str:
        return dataset_kind(self.dataset)

    @property
    def label(self) -> str:
        """``method``, ``method --stage S`` or ``method + ablations``, as anchor eval would be asked."""
        out = self.method + (f" --stage {self.stage}" if self.stage else "")
        return out + (" + " + ", ".join(self.ablations) if self.ablations else "")


class PlannedAnalysis(_Planned):
    """One ``anchor analyze`` analysis of the reproduction."""

    name: str = Field(description="Its folder under DIR/analyses/.")
    analysis: Literal["factors", "retrieval", "clustering", "estimator"]
    dataset: str | None = None
    data_path: Path | None = None
    limit: int | None = None
    runs: int = 1
    balance_outcomes: bool = False
    points: int | None = Field(default=None, description="factors: grid points.")
    parts: tuple[str, ...] = ()


class Plan(_Planned):
    """Everything a selection needs, in the order it runs (every run after the runs it reuses)."""

    selection: Selection
    runs: tuple[PlannedRun, ...]
    analyses: tuple[PlannedAnalysis, ...] = ()

    def run(self, name: str) -> PlannedRun:
        for r in self.runs:
            if r.name == name:
                return r
        raise KeyError(f"no planned run {name!r}")

    def find(self, dataset: str, method: str, stage: str | None = None,
             ablations: tuple[str, ...] = ()) -> PlannedRun | None:
        return next((r for r in self.runs if (r.dataset, r.method, r.stage, r.ablations)
                     == (dataset, method, stage, ablations)), None)


def run_name(dataset: str, method: str, stage: str | None = None, ablations: tuple[str, ...] = ()) -> str:
    return "-".join([dataset, method, *([stage] if stage else []), *ablations])


def changes_the_build(ablation: str) -> bool:
    """True for an ablation whose factor spaces differ from the full model's (so it builds its own)."""
    base = AnchorConfig()
    return base.with_ablations([ablation]).build != base.build


class _Builder:
    """Collects planned runs once each, merging the parts that need them."""

    def __init__(self, selection: Selection) -> None:
        self.selection = selection
        self.runs: dict[str, PlannedRun] = {}

    def add(self, part: str, dataset: str, method: str, *, stage: str | None = None,
            ablations: tuple[str, ...] = (), spaces_from: str | None = None, own_cache: bool = False) -> str:
        name = run_name(dataset, method, stage, ablations)
        found = self.runs.get(name)
        if found is not None:
            if part not in found.parts:
                self.runs[name] = found.model_copy(update={"parts": (*found.parts, part)})
            return name
        s = self.selection
        self.runs[name] = PlannedRun(
            name=name, dataset=dataset, method=method, stage=stage, ablations=ablations,
            data_path=s.data.get(dataset), limit=s.limit(dataset_kind(dataset)), runs=s.runs,
            balance_outcomes=dataset in BALANCED_SETS, spaces_from=spaces_from, own_cache=own_cache, parts=(part,))
        return name

    def anchor(self, part: str, dataset: str) -> str:
        return self.add(part, dataset, "anchor")

    def bird(self, part: str, dataset: str) -> str:
        return self.add(part, dataset, "bird")

    def bird_relaxed(self, part: str) -> str:
        source = self.bird(part, PAIRWISE)
        # Its own cache: its strict pass asks what BIRD's did, and Table 4 reports its mapping cost.
        return self.add(part, PAIRWISE, "bird-relaxed", spaces_from=source, own_cache=True)


def make_plan(selection: Selection) -> Plan:
    """The runs and analyses ``selection`` needs, each once, in an order where every run comes after
    the run whose spaces or BIRD models it reuses."""
    b = _Builder(selection)
    if "1" in selection.tables:
        for method in paper_table("1"):
            if method == "bird-relaxed":
                b.bird_relaxed("1")
            else:
                b.add("1", PAIRWISE, method)
    if "2" in selection.tables:
        for dataset in DECISION_SETS:
            for method in paper_table("2"):
                b.add("2", dataset, method)
    if "3" in selection.tables:
        full = b.anchor("3", PAIRWISE)
        for ablation in TABLE3_ABLATIONS:
            reuse = None if changes_the_build(ablation) else full
            b.add("3", PAIRWISE, "anchor", ablations=(ablation,), spaces_from=reuse)
    if "4" in selection.tables:
        b.bird_relaxed("4")
        full = b.anchor("4", PAIRWISE)
        for stage in TRANSPLANT_STAGES:
            b.add("4", PAIRWISE, "bird-on-anchor", stage=stage, spaces_from=full, own_cache=True)
    if "cost" in selection.figures:
        b.bird("cost", PAIRWISE)
        b.anchor("cost", PAIRWISE)
    analyses = _analyses(selection, b)
    read = {r.dataset for r in b.runs.values()} | {a.dataset for a in analyses if a.dataset}
    unread = [name for name in selection.data if name not in read]
    if unread:
        raise SelectionError(f"--data {unread[0]}={selection.data[unread[0]]}: none of the selected parts reads "
                             f"{unread[0]} (they read {', '.join(sorted(read))}); select a part that does, or leave "
                             "it out")
    return Plan(selection=selection, runs=tuple(_ordered(b.runs)), analyses=tuple(analyses))


def _analyses(selection: Selection, b: _Builder) -> list[PlannedAnalysis]:
    s = selection
    limit = QUICK_ANALYSIS_LIMIT if s.quick else None
    out: list[PlannedAnalysis] = []

    def add(analysis: str, dataset: str | None, part: str, **extra: object) -> None:
        out.append(PlannedAnalysis(
            name=f"{analysis}-{dataset}" if dataset else analysis, analysis=analysis,  # type: ignore[arg-type]
            dataset=dataset, data_path=s.data.get(dataset) if dataset else None, limit=limit, runs=s.runs,
            balance_outcomes=dataset in BALANCED_SETS, parts=(part,), **extra))  # type: ignore[arg-type]

    if "factors" in s.figures:
        add("factors", PAIRWISE, "factors", points=4 if s.quick else 8)
    if "retrieval" in s.appendix:
        add("retrieval", PAIRWISE, "retrieval")
    if "estimator" in s.appendix:
        for dataset in ESTIMATOR_SETS:
            add("estimator", dataset, "estimator")
    if "clustering" in s.appendix:
        # It clusters the factor spaces the ANCHOR runs built; without any, the one of Common2Sense.
        if not any(r.method == "anchor" and not r.ablations for r in b.runs.values()):
            b.anchor("clustering", PAIRWISE)
        add("clustering", None, "clustering")
    return out


def _ordered(runs: dict[str, PlannedRun]) -> list[PlannedRun]:
    """Datasets in the paper's order (Common2Sense first), and within one the tables' row order
    (``table_order``), with every run after the one it reuses: the transplant runs after ANCHOR's."""
    datasets = [PAIRWISE, *DECISION_SETS]
    methods = table_order()

    def key(r: PlannedRun) -> tuple[int, int, int, int]:
        d = datasets.index(r.dataset) if r.dataset in datasets else len(datasets)
        if r.method == "bird-on-anchor":
            return (d, len(methods) + 1, TRANSPLANT_STAGES.index(r.stage or "factors"), 0)
        m = methods.index(r.method) if r.method in methods else len(methods)
        a = TABLE3_ABLATIONS.index(r.ablations[0]) + 1 if r.ablations else 0
        return (d, m, a, 0)

    ordered = sorted(runs.values(), key=key)
    names = [r.name for r in ordered]
    for r in ordered:  # the order above puts sources first; keep it so if a later edit does not
        assert r.spaces_from is None or names.index(r.spaces_from) < names.index(r.name), r.name
    return ordered
