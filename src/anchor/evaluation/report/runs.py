"""The runs of a report: each loaded run with the names the report gives it, and labels that keep
two runs apart wherever they would read the same."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anchor.evaluation.report.loading import LoadedRun
from anchor.evaluation.report.markdown import format_mean_std, number
from anchor.evaluation.report.names import (
    ABLATION_ORDER,
    APPROX_MARK,
    APPROXIMATE_DATASETS,
    SMALL_MARK,
)
from anchor.evaluation.report.shared import SharedInstances
from anchor.methods.registry import ORACLE_METHODS, table_order
from anchor.rundir.records import MetricsReport


@dataclass
class ReportedRun:
    """A loaded run plus the names the report uses for it."""

    loaded: LoadedRun
    tag: str  # unique short name of the directory
    name: str  # paper-style method name with ⋆ / † marks and the ablation variant
    shared: SharedInstances | None = None
    """Set when the runs of this run's (kind, dataset) scored different instances: its scores in the report are
    then over the instances they share (metrics.json's cost figures stay its own)."""

    @property
    def m(self) -> MetricsReport:
        return self.loaded.metrics

    @property
    def method(self) -> str:
        return self.m.method

    @property
    def ablations(self) -> list[str]:
        return list(self.m.ablations or self.loaded.config.ablations)

    @property
    def dataset(self) -> str:
        return self.m.dataset

    @property
    def dataset_label(self) -> str:
        """The dataset name, marked when it only approximates the paper's set."""
        return self.dataset + (APPROX_MARK if self.dataset in APPROXIMATE_DATASETS else "")

    @property
    def kind(self) -> str:
        return self.m.kind

    @property
    def oracle(self) -> bool:
        return bool(self.m.oracle) or self.method in ORACLE_METHODS

    @property
    def small(self) -> bool:
        return bool(self.m.small_model)

    @property
    def llm(self) -> dict[str, Any]:
        return self.m.llm or self.loaded.config.llm or {}

    @property
    def model(self) -> str:
        name = self.llm.get("model")
        if name:
            return str(name)
        # The runner leaves the model unset when it is implied: the bundled model, or the server's default.
        if self.small or self.llm.get("backend") == "embedded":
            return "SmolLM2-135M-Instruct (embedded)"
        return "server's default model"

    @property
    def model_cell(self) -> str:
        return f"{self.model} {SMALL_MARK}" if self.small else self.model

    @property
    def llm_key(self) -> tuple[str, str, str]:
        llm = self.llm
        return (self.model, str(llm.get("backend") or "unknown backend"), str(llm.get("base_url") or ""))

    def mean(self, key: str) -> float | None:
        return number(self.m.mean.get(key))

    def std(self, key: str) -> float | None:
        return number(self.m.std.get(key))

    def cell(self, key: str, *, percent: bool = False) -> str:
        return format_mean_std(self.mean(key), self.std(key), percent=percent, show_std=self.m.n_runs > 1)

    def sort_key(self) -> tuple[int, int, tuple[int, ...], str, str]:
        rows = table_order()
        order = rows.index(self.method if self.method in rows else "anchor")
        # Within ANCHOR: ablation variants first, in the paper's order, and the full model last.
        variant = tuple(ABLATION_ORDER.index(a) if a in ABLATION_ORDER else len(ABLATION_ORDER)
                        for a in self.ablations)
        return (order, 0 if self.ablations else 1, variant, self.model, self.tag)


def shared_line(runs: Sequence[ReportedRun]) -> str | None:
    """One sentence saying on which instances the scores of ``runs`` (one kind and dataset, or a part
    of one) are given, when their runs scored different instances; None when each scored the same."""
    shared = next((r.shared for r in runs if r.shared is not None), None)
    if shared is None:
        return None
    tags = {r.loaded.path.resolve(): r.tag for r in runs}
    own = {p: n for p, n in shared.own.items() if p in tags}
    return (f"Scored on the {shared.n_shared} instance(s) of {shared.dataset} that every run of it in this report "
            f"scored, not on each run's own ({', '.join(f'`{tags[p]}` {n}' for p, n in own.items())}): runs of "
            "different instances do not stand side by side. metrics.json holds each run's scores on its own.")


def unique_tags(paths: Sequence[Path]) -> list[str]:
    tags = [p.name or str(p) for p in paths]
    counts = Counter(tags)
    tags = [
        f"{p.parent.name}/{t}" if counts[t] > 1 and p.parent.name else t
        for p, t in zip(paths, tags, strict=True)
    ]
    seen: Counter[str] = Counter()
    out = []
    for t in tags:
        seen[t] += 1
        out.append(t if seen[t] == 1 else f"{t}#{seen[t]}")
    return out


def row_labels(runs: Sequence[ReportedRun], key: Callable[[ReportedRun], Any]) -> dict[int, str]:
    """Row label per run (by id): the method name, plus ``[dir]`` when two runs would share a row."""
    counts = Counter(key(r) for r in runs)
    return {id(r): (f"{r.name} [{r.tag}]" if counts[key(r)] > 1 else r.name) for r in runs}


def global_labels(runs: Sequence[ReportedRun]) -> dict[int, str]:
    """A label per run that is unique across the whole report (cost table, plots)."""
    several_models = len({r.model for r in runs}) > 1
    base = {id(r): f"{r.name} · {r.dataset_label}" + (f" · {r.model}" if several_models else "")
            + (f" {SMALL_MARK}" if r.small else "") for r in runs}
    counts = Counter(base.values())
    return {id(r): (f"{base[id(r)]} [{r.tag}]" if counts[base[id(r)]] > 1 else base[id(r)]) for r in runs}
