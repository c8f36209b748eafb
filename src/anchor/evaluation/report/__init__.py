"""Turn finished evaluation run directories into a Markdown report with PNG plots.

Each run directory holds ``config.json`` (:class:`RunConfig`) and ``metrics.json`` (:class:`MetricsReport`),
as written by ``anchor eval``. :func:`build_report` reads any number of them, of any kind, and writes
``report.md`` with tables laid out like the paper's:

* pairwise F1 per dataset (the paper's Table 1), plus the same scores on covered pairs only;
* decision accuracy / fact-check balanced accuracy with coverage, one column per dataset, the four
  fact-checking sets first in the paper's order (ExpertQA, XSum, COVID, CNN) (Table 2);
* ablation variants against the full ANCHOR run on the same dataset and model (Table 3);
* LLM cost per stage and per instance (the cost-analysis figure), and calibration numbers.

Two plots go next to it: ``cost_per_stage.png`` and ``reliability.png``. A plot with no data behind it is
not drawn; the Markdown says so (and a stale file of that name from an earlier report is removed).

Honesty markers that every table carries: runs on the embedded 135M model are tagged (§) and announced in
bold at the top, because their numbers only show that the pipeline runs; the Factor-based baseline is an
oracle (†) and is flagged as an unfair comparison; direct-decision baselines carry ⋆ as in the paper; the
bundled ExpertQA set, an approximation of the paper's, carries ‡ and its caveat wherever its numbers appear.

Plots are drawn on :class:`matplotlib.figure.Figure` objects rendered by the Agg canvas directly, without
``pyplot``: nothing is registered in pyplot's global figure list (so nothing can leak or pop up), the
process-wide backend is left untouched, and no display is ever needed.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from anchor.evaluation.cost.phases import phase_of
from anchor.evaluation.datasets import PAPER_FACTCHECK_SETS
from anchor.evaluation.methods.registry import DIRECT_METHODS, METHODS, ORACLE_METHODS
from anchor.evaluation.report.transplant import transplant_section
from anchor.evaluation.results import (
    CostSummary,
    MetricsReport,
    RunConfig,
)
from anchor.plots import colours, new_figure, save_figure

__all__ = [
    "COST_PLOT",
    "RELIABILITY_PLOT",
    "REPORT_FILE",
    "LoadedRun",
    "ReportError",
    "ReportResult",
    "build_report",
    "display_name",
    "format_delta",
    "format_mean_std",
    "load_run",
]

REPORT_FILE = "report.md"
COST_PLOT = "cost_per_stage.png"
RELIABILITY_PLOT = "reliability.png"

DASH = "–"  # en dash: the cell of a missing (null) value
MINUS = "−"  # proper minus sign for negative deltas
SMALL_MARK = "§"
ORACLE_MARK = "†"
DIRECT_MARK = "⋆"
SMALL_WARNING = (
    "numbers from a 135M-parameter embedded model: they show the pipeline works, not the method's accuracy"
)
APPROX_MARK = "‡"
#: Datasets that stand in for the paper's and must say so wherever their numbers appear.
APPROXIMATE_DATASETS: dict[str, str] = {
    "expertqa": "expertqa is built from the ExpertQA release (claims with their cited evidence); it approximates, "
                "but is not, the LLM-AggreFact ExpertQA subset the paper most likely used (its evidence averages "
                "922 characters against the paper's 2,399), so its numbers are not comparable with the paper's.",
}

METHOD_NAMES: dict[str, str] = {
    "anchor": "ANCHOR",
    "vanilla": "Vanilla",
    "vanilla-direct": "Vanilla" + DIRECT_MARK,
    "cot": "CoT",
    "cot-direct": "CoT" + DIRECT_MARK,
    "logits": "Logits",
    "compare": "Compare",
    "factor-based": "Factor-based",
    "bird": "BIRD (strict)",
    "bird-relaxed": "BIRD (relaxed)",
    "bird-on-anchor": "BIRD (relaxed) on ANCHOR",
}
ABLATION_NAMES: dict[str, str] = {
    "no-cbn": "w/o cbn",
    "no-nb": "w/o nb",
    "no-cluster": "w/o cluster",
    "no-hierarchy": "w/o hierarchy",
    "no-pe-llm": "w/o pe-llm",
    "bma": "BMA",
}
ABLATION_ORDER = tuple(ABLATION_NAMES)
#: Row order in the tables: baselines first, then ANCHOR variants, then full ANCHOR (as in the paper).
METHOD_ORDER = (
    "vanilla", "vanilla-direct", "cot", "cot-direct", "logits", "compare", "factor-based", "bird", "bird-relaxed",
    "bird-on-anchor", "anchor",
)
#: Stage order in the cost table and plot (paper order: construction, mapping, inference).
STAGE_ORDER = (
    "abduction.generate",
    "abduction.extract",
    "abduction.validate",
    "voting",
    "themes",
    "mapping.select",
    "mapping.reflect",
    "inference.phi",
    "inference.latents",
    "inference.latent_params",
)
PAIRWISE_F1 = (("f1_context1", "Context1"), ("f1_context2", "Context2"), ("f1_same", "Same"),
               ("f1_micro", "Average"))
HEADLINE_METRIC = {"pairwise": "f1_micro", "decision": "accuracy", "factcheck": "balanced_accuracy"}
METRIC_WORDS = {
    "f1_micro": "F1 Avg (micro)", "accuracy": "accuracy", "balanced_accuracy": "balanced accuracy",
}


class ReportError(ValueError):
    """A run directory cannot be reported on (missing, unfinished, or malformed files)."""


@dataclass(frozen=True)
class LoadedRun:
    """One finished run directory: its configuration, its metrics and where it lives."""

    config: RunConfig
    metrics: MetricsReport
    path: Path


@dataclass(frozen=True)
class ReportResult:
    """What :func:`build_report` produced: the Markdown text, the ``report.md`` path and the PNGs written."""

    markdown: str
    path: Path
    pngs: list[Path] = field(default_factory=list)
    #: Plot file names that were not drawn, with the reason (also stated in the Markdown).
    skipped_plots: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------- loading


def _read_model(path: Path, model: type[RunConfig] | type[MetricsReport]) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "the file may be truncated or hand-edited"
        ) from exc
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}"
            for err in exc.errors()[:5]
        )
        more = f" (+{exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
        raise ReportError(
            f"{path}: does not match {model.__name__} ({problems}{more}); "
            "was it written by a different version of anchor?"
        ) from exc


def load_run(dir: Path) -> LoadedRun:  # noqa: A002 - the name is part of the agreed API
    """Read ``config.json`` and ``metrics.json`` from a run directory.

    Raises :class:`ReportError` naming the offending file when the directory or a file is missing (a
    missing ``metrics.json`` next to a ``config.json`` means the run has not finished), when a file is not
    JSON, or when it does not match the models of :mod:`anchor.evaluation.results`.
    """
    path = Path(dir)
    if not path.exists():
        raise ReportError(f"{path}: no such run directory")
    if not path.is_dir():
        raise ReportError(f"{path}: not a directory (pass the run directory, not a file inside it)")
    config_path, metrics_path = path / "config.json", path / "metrics.json"
    if not config_path.exists() and not metrics_path.exists():
        raise ReportError(
            f"{path}: not an evaluation run directory (no config.json and no metrics.json); "
            "pass directories written by `anchor eval`"
        )
    if not metrics_path.exists():
        done = _count_lines(path / "predictions.jsonl")
        so_far = f" ({done} prediction{'s' if done != 1 else ''} written so far)" if done else ""
        raise ReportError(
            f"{metrics_path}: no metrics.json yet — the run has not finished{so_far}; "
            "rerun `anchor eval` with the same arguments to resume"
        )
    if not config_path.exists():
        raise ReportError(
            f"{config_path}: missing, although metrics.json is there; the run directory is incomplete "
            "(was config.json deleted or moved?)"
        )
    config = _read_model(config_path, RunConfig)
    metrics = _read_model(metrics_path, MetricsReport)
    if config.kind != metrics.kind:
        raise ReportError(
            f"{path}: config.json says kind {config.kind!r} but metrics.json says {metrics.kind!r}; "
            "the two files come from different runs"
        )
    return LoadedRun(config=config, metrics=metrics, path=path)


def _count_lines(path: Path) -> int:
    try:
        with path.open("rb") as fh:
            return sum(1 for line in fh if line.strip())
    except OSError:
        return 0


# --------------------------------------------------------------------------- formatting helpers


def _num(value: Any) -> float | None:
    """A finite float, or None for null / NaN / anything non-numeric."""
    if value is None or isinstance(value, bool):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def format_mean_std(mean: Any, std: Any = None, *, percent: bool = False, show_std: bool = True) -> str:
    """``"0.606 ± 0.012"`` (3 decimals), ``"99.95 ± 0.04%"`` with ``percent``; ``"–"`` for a null mean.

    The ``± std`` part is left out when ``show_std`` is false or the std is null.
    """
    m = _num(mean)
    if m is None:
        return DASH
    s = _num(std) if show_std else None
    if percent:
        return f"{m * 100:.2f}%" if s is None else f"{m * 100:.2f} ± {s * 100:.2f}%"
    return f"{m:.3f}" if s is None else f"{m:.3f} ± {s:.3f}"


def format_delta(value: Any, reference: Any) -> str:
    """``"0.558 (−0.014)"``: a value with its difference from a reference (rounded to 3 decimals)."""
    v = _num(value)
    if v is None:
        return DASH
    r = _num(reference)
    if r is None:
        return f"{v:.3f} (Δ {DASH})"
    d = round(v - r, 3)
    sign = MINUS if d < 0 else "+" if d > 0 else "±"
    return f"{v:.3f} ({sign}{abs(d):.3f})"


def display_name(method: str, ablations: Sequence[str] = (), oracle: bool = False) -> str:
    """The paper's name for a method (``Vanilla⋆``, ``Factor-based†``, ``ANCHOR (w/o cbn)``)."""
    name = METHOD_NAMES.get(method, method)
    if ablations:
        name += " (" + ", ".join(ABLATION_NAMES.get(a, a) for a in ablations) + ")"
    if (oracle or method in ORACLE_METHODS) and not name.endswith(ORACLE_MARK):
        name += ORACLE_MARK
    return name


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(
    header: Sequence[str], rows: Iterable[Sequence[str]], align: Sequence[str] | None = None
) -> list[str]:
    align = align or ["l"] + ["r"] * (len(header) - 1)
    marks = {"l": ":--", "r": "--:", "c": ":-:"}
    out = ["| " + " | ".join(_md_escape(h) for h in header) + " |",
           "|" + "|".join(marks[a] for a in align) + "|"]
    out += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows]
    return out


def _int(n: int | float) -> str:
    return f"{int(n):,}"


def _secs(s: float) -> str:
    return f"{s:.1f}" if s >= 10 else f"{s:.2f}"


# --------------------------------------------------------------------------- run bookkeeping


@dataclass
class _Run:
    """A loaded run plus the names the report uses for it."""

    loaded: LoadedRun
    tag: str  # unique short name of the directory
    name: str  # paper-style method name with ⋆ / † marks and the ablation variant

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
        return _num(self.m.mean.get(key))

    def std(self, key: str) -> float | None:
        return _num(self.m.std.get(key))

    def cell(self, key: str, *, percent: bool = False) -> str:
        return format_mean_std(self.mean(key), self.std(key), percent=percent, show_std=self.m.n_runs > 1)

    def sort_key(self) -> tuple[int, int, tuple[int, ...], str, str]:
        method = self.method if self.method in METHOD_ORDER else "anchor"
        order = METHOD_ORDER.index(method)
        # Within ANCHOR: ablation variants first, in the paper's order, and the full model last.
        variant = tuple(ABLATION_ORDER.index(a) if a in ABLATION_ORDER else len(ABLATION_ORDER)
                        for a in self.ablations)
        return (order, 0 if self.ablations else 1, variant, self.model, self.tag)


def _unique_tags(paths: Sequence[Path]) -> list[str]:
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


def _row_labels(runs: Sequence[_Run], key: Callable[[_Run], Any]) -> dict[int, str]:
    """Row label per run (by id): the method name, plus ``[dir]`` when two runs would share a row."""
    counts = Counter(key(r) for r in runs)
    return {id(r): (f"{r.name} [{r.tag}]" if counts[key(r)] > 1 else r.name) for r in runs}


def _global_labels(runs: Sequence[_Run]) -> dict[int, str]:
    """A label per run that is unique across the whole report (cost table, plots)."""
    several_models = len({r.model for r in runs}) > 1
    base = {id(r): f"{r.name} · {r.dataset_label}" + (f" · {r.model}" if several_models else "")
            + (f" {SMALL_MARK}" if r.small else "") for r in runs}
    counts = Counter(base.values())
    return {id(r): (f"{base[id(r)]} [{r.tag}]" if counts[base[id(r)]] > 1 else base[id(r)]) for r in runs}


# --------------------------------------------------------------------------- sections


def _header(runs: Sequence[_Run]) -> list[str]:
    lines = ["# ANCHOR evaluation report", ""]
    lines.append(f"Generated from {len(runs)} run director{'y' if len(runs) == 1 else 'ies'}.")
    lines.append("")
    llms: dict[tuple[str, str, str], list[_Run]] = {}
    for r in runs:
        llms.setdefault(r.llm_key, []).append(r)
    lines.append("**LLM" + ("s" if len(llms) > 1 else "") + " used:**")
    lines.append("")
    for (model, backend, base_url), group in llms.items():
        where = f" at {base_url}" if base_url else ""
        small = f" {SMALL_MARK} (embedded 135M model)" if any(r.small for r in group) else ""
        lines.append(f"- `{model}` — {backend} backend{where}{small}; {len(group)} run director"
                     f"{'y' if len(group) == 1 else 'ies'}")
    lines.append("")
    small = [r for r in runs if r.small]
    if small:
        which = "All runs in this report" if len(small) == len(runs) else f"Runs marked {SMALL_MARK}"
        lines.append(f"**⚠ {which} — {SMALL_WARNING}.**")
        lines.append("")
    for dataset in sorted({r.dataset for r in runs if r.dataset in APPROXIMATE_DATASETS}):
        lines.append(f"**{APPROX_MARK} {APPROXIMATE_DATASETS[dataset]}**")
        lines.append("")
    if any(r.oracle for r in runs):
        lines.append(f"**{ORACLE_MARK} Factor-based is an oracle baseline: it is handed the gold-aligned "
                     "factor, information no real method has. Its numbers are an unfair upper reference, "
                     "not a competitor.**")
        lines.append("")
    return lines


def _runs_section(runs: Sequence[_Run]) -> list[str]:
    lines = ["## Runs", ""]
    rows = []
    for r in runs:
        spec = METHODS.get(r.loaded.config.method)
        spaces = str(r.loaded.config.spaces) if spec is not None and spec.per_scenario_artefact else DASH
        rows.append([r.tag, r.kind, r.dataset_label, r.name, r.model_cell, str(r.m.n_instances), str(r.m.n_runs), spaces,
                     str(r.m.n_abstained), str(r.m.n_failed)])
    lines += _table(["Directory", "Kind", "Dataset", "Method", "Model", "Instances", "Runs", "Spaces", "Unknown",
                     "Failed"], rows, ["l", "l", "l", "l", "l", "r", "r", "l", "r", "r"])
    if any(r.m.n_failed for r in runs):
        lines += ["", "Unknown counts predictions where the method abstained; Failed counts predictions the run "
                      "could not make (no usable answer from the LLM, or the server unreachable). Both count as "
                      "unknown in the metrics; failed ones are retried when `anchor eval` is run again."]
    fallback = [r for r in runs if r.m.fallback]
    if fallback:
        lines += ["", "Fallbacks (the method said 'unknown' and another answered, as the paper does for BIRD on "
                      "decision data; counted as that method's answer in the metrics):", ""]
        lines += [f"- `{r.tag}`: {r.m.n_fallback} of {r.m.n_instances * r.m.n_runs} prediction(s) answered by "
                  f"{r.m.fallback}" for r in fallback]
    notes = [(r, n) for r in runs for n in r.m.notes]
    if notes:
        lines += ["", "Notes recorded by the runs:", ""]
        lines += [f"- `{r.tag}`: {n}" for r, n in notes]
    lines.append("")
    return lines


def _marks_footnotes(runs: Sequence[_Run]) -> list[str]:
    notes = []
    if any(r.method in DIRECT_METHODS for r in runs):
        notes.append(f"{DIRECT_MARK} direct decision: the method states a choice, not a probability.")
    if any(r.oracle for r in runs):
        notes.append(f"{ORACLE_MARK} oracle baseline (sees the gold-aligned factor): unfair comparison, "
                     "shown for reference only.")
    if any(r.method == "compare" for r in runs):
        notes.append("Compare reads both contexts in one prompt, an advantage the other methods do not have.")
    if any(r.small for r in runs):
        notes.append(f"{SMALL_MARK} embedded 135M-parameter model: a pipeline check, not the method's "
                     "accuracy.")
    return notes


def _pairwise_section(runs: Sequence[_Run]) -> list[str]:
    pair = [r for r in runs if r.kind == "pairwise"]
    if not pair:
        return []
    lines = ["## Pairwise F1 (cf. the paper's Table 1)", ""]
    for dataset in sorted({r.dataset for r in pair}):
        group = sorted((r for r in pair if r.dataset == dataset), key=_Run.sort_key)
        labels = _row_labels(group, lambda r: (r.name, r.model))
        lines += [f"### {dataset}", ""]
        header = ["Method", "Model", *(title for _, title in PAIRWISE_F1), "Coverage", "Runs"]
        rows = [[labels[id(r)], r.model_cell, *(r.cell(k) for k, _ in PAIRWISE_F1),
                 r.cell("coverage", percent=True), str(r.m.n_runs)] for r in group]
        lines += _table(header, rows, ["l", "l"] + ["r"] * (len(header) - 2))
        lines += ["", "F1 on covered pairs only (both sides had a probability):", ""]
        header = ["Method", "Model", *(title for _, title in PAIRWISE_F1), "Coverage"]
        rows = [[labels[id(r)], r.model_cell, *(r.cell(f"covered_{k}") for k, _ in PAIRWISE_F1),
                 r.cell("coverage", percent=True)] for r in group]
        lines += _table(header, rows, ["l", "l"] + ["r"] * (len(header) - 2))
        lines.append("")
        scopes = sorted({r.m.scope for r in group if r.m.scope})
        notes = [
            "Cells are mean ± sample std over the runs (no ± with a single run); "
            f"{DASH} means no value (e.g. every pair unknown). Average is the micro-averaged F1 over the "
            "three classes; Coverage is the share of pairs with a prediction (no unknown side)."
        ]
        notes += [f"Scope (from metrics.json): {s}" for s in scopes]
        notes += _marks_footnotes(group)
        lines += [f"- {n}" for n in notes]
        lines.append("")
    return lines


def _decision_section(runs: Sequence[_Run]) -> list[str]:
    dec = [r for r in runs if r.kind in ("decision", "factcheck")]
    if not dec:
        return []
    # One column per (dataset, kind): fact-check datasets first, the paper's four in its order.
    columns = sorted({(r.kind, r.dataset) for r in dec}, key=_column_order)
    labels = _row_labels(dec, lambda r: (r.name, r.model, r.kind, r.dataset))
    rows_by_key: dict[tuple[str, str], dict[tuple[str, str], _Run]] = {}
    order: dict[tuple[str, str], tuple[Any, ...]] = {}
    for r in sorted(dec, key=_Run.sort_key):
        key = (labels[id(r)], r.model_cell)
        rows_by_key.setdefault(key, {})[(r.kind, r.dataset)] = r
        order.setdefault(key, r.sort_key())
    header = ["Method", "Model"] + [
        f"{ds}{APPROX_MARK if ds in APPROXIMATE_DATASETS else ''} ({'bal. acc.' if kind == 'factcheck' else 'acc.'})"
        for kind, ds in columns
    ]
    rows = []
    for key in sorted(rows_by_key, key=lambda k: order[k]):
        cells = []
        for col in columns:
            r = rows_by_key[key].get(col)
            if r is None:
                cells.append("")
                continue
            cell = r.cell(HEADLINE_METRIC[r.kind])
            cov = r.mean("coverage")
            # Fact checking always states its coverage, as the paper's protocol asks.
            if cov is not None and (cov < 1.0 or r.kind == "factcheck"):
                cell += f" (cov. {cov * 100:.1f}%)"
            cells.append(cell)
        rows.append([key[0], key[1], *cells])
    lines = ["## Decisions and fact checking (cf. the paper's Table 2)", ""]
    lines += _table(header, rows, ["l", "l"] + ["r"] * (len(header) - 2))
    lines.append("")
    fc = [ds for kind, ds in columns if kind == "factcheck"]
    dc = [ds for kind, ds in columns if kind == "decision"]
    notes = []
    if fc:
        notes.append("bal. acc. = balanced accuracy of the fact-check decision (support only above the "
                     f"decision threshold), with the share of instances that got a probability (cov.): "
                     f"{', '.join(fc)}.")
    notes += [f"{APPROX_MARK} {APPROXIMATE_DATASETS[ds]}" for ds in fc if ds in APPROXIMATE_DATASETS]
    if dc:
        notes.append("acc. = accuracy of picking the more probable outcome, unknowns counted as wrong: "
                     f"{', '.join(dc)}.")
    notes.append("Cells are mean ± sample std over the runs (no ± with a single run); an empty cell means "
                 f"the method was not run on that dataset, {DASH} that it has no value; 'cov.' is shown when "
                 "some instances got no probability.")
    notes += _marks_footnotes(dec)
    lines += [f"- {n}" for n in notes]
    lines.append("")
    return lines


def _column_order(column: tuple[str, str]) -> tuple[bool, int, str]:
    kind, dataset = column
    paper = PAPER_FACTCHECK_SETS.index(dataset) if dataset in PAPER_FACTCHECK_SETS else len(PAPER_FACTCHECK_SETS)
    return (kind != "factcheck", paper, dataset)


def _ablation_section(runs: Sequence[_Run]) -> list[str]:
    anchor_runs = [r for r in runs if r.method == "anchor"]
    groups: dict[tuple[str, str, str], list[_Run]] = {}
    for r in anchor_runs:
        groups.setdefault((r.kind, r.dataset, r.model), []).append(r)
    lines: list[str] = []
    unmatched: list[str] = []
    for (kind, dataset, model), group in sorted(groups.items()):
        variants = sorted((r for r in group if r.ablations), key=_Run.sort_key)
        fulls = [r for r in group if not r.ablations]
        if not variants:
            continue
        if not fulls:
            unmatched.append(f"{dataset} ({model})")
            continue
        full = fulls[0]
        metric = HEADLINE_METRIC[kind]
        labels = _row_labels(variants, lambda r: r.name)
        if kind == "pairwise":
            header = ["Variant", "Context1", "Context2", "Same", "Average (Δ vs full)", "Coverage"]

            def row(r: _Run, label: str, ref: _Run | None) -> list[str]:
                avg = format_delta(r.mean("f1_micro"), ref.mean("f1_micro")) if ref else r.cell("f1_micro")
                return [label, *(r.cell(k) for k in ("f1_context1", "f1_context2", "f1_same")), avg,
                        r.cell("coverage", percent=True)]
        else:
            header = ["Variant", f"{METRIC_WORDS[metric].capitalize()} (Δ vs full)", "Coverage"]

            def row(r: _Run, label: str, ref: _Run | None, metric: str = metric) -> list[str]:
                value = format_delta(r.mean(metric), ref.mean(metric)) if ref else r.cell(metric)
                return [label, value, r.cell("coverage", percent=True)]

        rows = [row(r, labels[id(r)], full) for r in variants]
        rows.append(row(full, "ANCHOR (full)", None))
        small = f" {SMALL_MARK}" if any(r.small for r in group) else ""
        approx = APPROX_MARK if dataset in APPROXIMATE_DATASETS else ""
        lines += [f"### {dataset}{approx} — {model}{small}", ""]
        lines += _table(header, rows)
        lines.append("")
        lines.append(f"- Δ = variant mean minus the full model's mean ({METRIC_WORDS[metric]}), from "
                     f"`{full.tag}`; {MINUS} is a drop, + a gain. Other cells are mean ± std over runs.")
        if len(fulls) > 1:
            lines.append(f"- {len(fulls)} full ANCHOR runs match; the reference is the first given, "
                         f"`{full.tag}`.")
        if any(r.small for r in group):
            lines.append(f"- {SMALL_MARK} {SMALL_WARNING}.")
        if dataset in APPROXIMATE_DATASETS:
            lines.append(f"- {APPROX_MARK} {APPROXIMATE_DATASETS[dataset]}")
        lines.append("")
    if not lines and not unmatched:
        return []
    out = ["## Ablations (cf. the paper's Table 3)", ""] + lines
    if unmatched:
        out += [f"Ablation runs without a full ANCHOR run on the same dataset and model (no deltas): "
                f"{'; '.join(unmatched)}.", ""]
    return out


def _stage_sort(stage: str) -> tuple[int, str]:
    if stage in STAGE_ORDER:
        return (STAGE_ORDER.index(stage), stage)
    if stage.startswith("baseline."):
        return (len(STAGE_ORDER), stage)
    return (len(STAGE_ORDER) + 1, stage)


def _phase(stage: str) -> str:
    """The stage's phase as ``anchor cost`` classifies it (BIRD's stages included), with the
    construction phase called by what it builds."""
    phase = phase_of(stage)
    return "factor space" if phase == "construction" else phase


def _stages(r: _Run) -> list[tuple[str, CostSummary]]:
    return sorted(((s, c) for s, c in r.m.cost.items() if s != "total"), key=lambda sc: _stage_sort(sc[0]))


def _total(r: _Run) -> CostSummary:
    if "total" in r.m.cost:
        return r.m.cost["total"]
    tot = CostSummary()
    for _, c in _stages(r):
        tot.llm_calls += c.llm_calls
        tot.failed_attempts += c.failed_attempts
        tot.interrupted += c.interrupted
        tot.cache_hits += c.cache_hits
        tot.prompt_tokens += c.prompt_tokens
        tot.completion_tokens += c.completion_tokens
        tot.request_seconds += c.request_seconds
        tot.wall_seconds += c.wall_seconds
    return tot


def _tokens(c: CostSummary) -> int:
    return c.prompt_tokens + c.completion_tokens


def _cost_section(runs: Sequence[_Run], glabels: dict[int, str]) -> list[str]:
    lines = ["## Cost (cf. the paper's cost analysis)", ""]
    with_cost = [r for r in runs if r.m.cost]
    without = [r for r in runs if not r.m.cost]
    if with_cost:
        header = ["Run", "Phase", "Stage", "Calls", "Failed", "Interrupted", "Cache hits",
                  "Tokens (prompt + completion)", "Wall s", "Request s"]
        rows = []
        for r in with_cost:
            for stage, c in _stages(r):
                rows.append([glabels[id(r)], _phase(stage), stage, _int(c.llm_calls), _int(c.failed_attempts),
                             _int(c.interrupted), _int(c.cache_hits), f"{_int(_tokens(c))} ({_int(c.prompt_tokens)} + "
                             f"{_int(c.completion_tokens)})", _secs(c.wall_seconds), _secs(c.request_seconds)])
            t = _total(r)
            rows.append([f"**{glabels[id(r)]}**", "", "**total**", f"**{_int(t.llm_calls)}**",
                         _int(t.failed_attempts), _int(t.interrupted), _int(t.cache_hits), f"**{_int(_tokens(t))}**",
                         f"**{_secs(t.wall_seconds)}**", f"**{_secs(t.request_seconds)}**"])
        lines += _table(header, rows, ["l", "l", "l", "r", "r", "r", "r", "r", "r", "r"])
        lines.append("")
        lines += ["Per instance:", ""]
        rows = []
        for r in with_cost:
            per, how = _per_instance(r)
            if per is None:
                rows.append([glabels[id(r)], str(r.m.n_instances), DASH, DASH, DASH, how])
                continue
            calls, tokens, seconds = per
            rows.append([glabels[id(r)], str(r.m.n_instances), f"{calls:.1f}", f"{tokens:,.0f}",
                         _secs(seconds), how])
        lines += _table(["Run", "Instances", "Calls / inst.", "Tokens / inst.", "Request s / inst.", "Source"],
                        rows, ["l", "r", "r", "r", "r", "l"])
        lines.append("")
        notes = ["Calls count every request sent to the LLM whose outcome is known, failed attempts included "
                 "(they are also shown apart under Failed); Interrupted are requests cut off by a kill, not in "
                 "Calls: the server may or may not have received them, and their tokens are unknown. A cache hit "
                 "made no request and is listed apart. Each request is counted once, from the run's calls.jsonl. "
                 "Wall s is the time during which at least one request of "
                 "the stage was in flight; Request s adds up the requests' durations, so it exceeds the wall "
                 "time when requests ran in parallel. Factor-space stages are paid once per scenario (and run, "
                 "with --spaces per-run) and shared by its instances, so the per-instance figures spread that "
                 "cost over them."]
        reused = [r for r in with_cost if r.m.cost_reused]
        if reused:
            notes.append("Factor spaces reused from another run directory are not in these totals; their recorded "
                         "build cost: " + "; ".join(f"{glabels[id(r)]}: {_int(r.m.cost_reused['total'].llm_calls)} "
                                                     "calls" for r in reused if "total" in r.m.cost_reused) + ".")
        cached = [glabels[id(r)] for r in with_cost if _total(r).llm_calls == 0]
        if cached:
            notes.append("No LLM calls were made by: " + "; ".join(cached) + " (every answer came from the "
                         "response cache, or nothing was asked); their costs are zero, not missing.")
        if any(r.small for r in with_cost):
            notes.append(f"{SMALL_MARK} costs of the embedded 135M model say nothing about a real server's "
                         "cost.")
        lines += [f"- {n}" for n in notes]
    if without:
        lines.append(f"- No cost recorded for: {'; '.join(glabels[id(r)] for r in without)}.")
    lines.append("")
    return lines


def _per_instance(r: _Run) -> tuple[tuple[float, float, float] | None, str]:
    """(calls, tokens, seconds) per instance prediction and how they were obtained.

    Computed from the totals rather than read from ``cost_per_instance``, which the runner rounds to whole
    calls and tokens (2.55 calls would show as 3). For a finished run both use the same denominator.
    """
    runs = max(r.m.n_runs, 1)
    n = r.m.n_instances * runs
    if n <= 0:
        return None, "no instances"
    t = _total(r)
    return (t.llm_calls / n, _tokens(t) / n, t.request_seconds / n), (
        f"total ÷ ({r.m.n_instances} instances × {runs} run{'s' if runs != 1 else ''})"
    )


def _calibration_section(runs: Sequence[_Run], glabels: dict[int, str]) -> list[str]:
    cal = [r for r in runs if r.m.calibration]
    if not cal:
        return ["## Calibration", "", "No run recorded calibration data.", ""]
    lines = ["## Calibration", ""]
    for r in cal:
        c = r.m.calibration or {}
        brier, ece = _num(c.get("brier")), _num(c.get("ece"))
        used = sum(int(b.get("count") or 0) for b in c.get("reliability") or [])
        skipped = c.get("n_skipped")
        parts = [f"Brier {brier:.3f}" if brier is not None else f"Brier {DASH}",
                 f"ECE {ece:.3f}" if ece is not None else f"ECE {DASH}"]
        extra = f"{used} probabilities binned" if used else "no probabilities binned"
        if skipped:
            extra += f", {skipped} unknown skipped"
        if c.get("event"):
            extra += f"; event: {c['event']}"
        lines.append(f"- {glabels[id(r)]}: {', '.join(parts)} ({extra})")
    lines += ["", "Lower is better for both. Unknowns are left out, so a method that abstains often is "
              "scored on fewer, possibly easier, instances. With few instances per bin (and pairwise data, "
              "whose comparisons are local to a scenario) the ECE is noisy; read it together with the "
              "reliability diagram's bin counts.", ""]
    return lines


# --------------------------------------------------------------------------- plots


def _plot_cost(runs: Sequence[_Run], glabels: dict[int, str], path: Path) -> str | None:
    """Grouped bars per stage (calls, tokens, seconds), one colour per run. Returns a skip reason or None."""
    data = [(r, dict(_stages(r))) for r in runs if _stages(r)]
    if not any(c.llm_calls or _tokens(c) or c.wall_seconds for _, st in data for c in st.values()):
        return "no run recorded any LLM calls, tokens or time per stage (no cost data, or fully cached runs)"
    stages = sorted({s for _, st in data for s in st}, key=_stage_sort)
    metrics: list[tuple[str, Callable[[CostSummary], float]]] = [
        ("LLM calls", lambda c: c.llm_calls),
        ("tokens (prompt + completion)", lambda c: _tokens(c)),
        ("wall seconds", lambda c: c.wall_seconds),
    ]
    n = len(data)
    width = 0.8 / n
    fig = new_figure(max(7.0, 0.9 * len(stages) + 2.5), 8.5)
    axes = fig.subplots(3, 1, sharex=True)
    palette = colours(n)
    xs = list(range(len(stages)))
    for ax, (title, get) in zip(axes, metrics, strict=True):
        for i, (r, st) in enumerate(data):
            heights = [float(get(st[s])) if s in st else 0.0 for s in stages]
            offset = (i - (n - 1) / 2) * width
            label = glabels[id(r)] + (" (135M embedded)" if r.small else "")
            ax.bar([x + offset for x in xs], heights, width=width, color=palette[i], label=label)
        ax.set_ylabel(title)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    axes[-1].set_xticks(xs)
    axes[-1].set_xticklabels(stages, rotation=35, ha="right")
    title = "LLM cost per stage"
    if any(r.small for r, _ in data):
        title += f"\n({SMALL_MARK} embedded 135M-model runs: pipeline check only)"
    axes[0].set_title(title)
    axes[0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    save_figure(fig, path)
    return None


def _bins(r: _Run) -> list[tuple[float, float, int]]:
    """(mean confidence, observed frequency, count) of the non-empty reliability bins."""
    out = []
    for b in (r.m.calibration or {}).get("reliability") or []:
        conf = _num(b.get("mean_confidence"))
        obs = _num(b.get("observed", b.get("observed_frequency")))
        count = int(b.get("count") or 0)
        if conf is not None and obs is not None and count > 0:
            out.append((conf, obs, count))
    return out


def _plot_reliability(runs: Sequence[_Run], glabels: dict[int, str], path: Path) -> str | None:
    data = [(r, _bins(r)) for r in runs]
    data = [(r, b) for r, b in data if b]
    if not data:
        return "no run has reliability bins with data (no calibration recorded, or every prediction unknown)"
    fig = new_figure(7.5, 6.0)
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="perfect calibration")
    palette = colours(len(data))
    biggest = max(c for _, b in data for _, _, c in b)
    for i, (r, bins) in enumerate(data):
        conf, obs, counts = zip(*sorted(bins), strict=True)
        cal = r.m.calibration or {}
        ece = _num(cal.get("ece"))
        label = glabels[id(r)] + (f" (ECE {ece:.3f})" if ece is not None else "")
        if r.small:
            label += " (135M embedded)"
        ax.plot(conf, obs, color=palette[i], linewidth=1.2, alpha=0.8)
        sizes = [20 + 180 * c / biggest for c in counts]
        ax.scatter(conf, obs, s=sizes, color=palette[i], alpha=0.8, edgecolors="black", linewidths=0.4,
                   label=label)
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.03, 1.03)
    ax.set_aspect("equal")
    ax.set_xlabel("mean predicted probability in bin")
    ax.set_ylabel("observed frequency in bin")
    title = "Reliability diagram (marker area ∝ instances in bin)"
    if any(r.small for r, _ in data):
        title += f"\n{SMALL_MARK} includes embedded 135M-model runs: pipeline check only"
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    save_figure(fig, path)
    return None


# --------------------------------------------------------------------------- entry point


def build_report(dirs: Sequence[Path], out_dir: Path) -> ReportResult:
    """Load every run directory, write ``out_dir/report.md`` and the PNG plots, and return what was written.

    Directories may mix kinds (pairwise, decision, factcheck), datasets and models; the same directory given
    twice is reported once. Raises :class:`ReportError` when no directory is given or one cannot be loaded.
    """
    if not dirs:
        raise ReportError("no run directories given; pass one or more directories written by `anchor eval`")
    unique: list[Path] = []
    seen: set[Path] = set()
    for d in dirs:
        key = Path(d).resolve()
        if key not in seen:
            seen.add(key)
            unique.append(Path(d))
    loaded = [load_run(d) for d in unique]
    tags = _unique_tags([lr.path.resolve() for lr in loaded])
    runs: list[_Run] = []
    for lr, tag in zip(loaded, tags, strict=True):
        name = display_name(lr.metrics.method, lr.metrics.ablations or lr.config.ablations, lr.metrics.oracle)
        if lr.metrics.stage or lr.config.stage:
            name += f" [{lr.metrics.stage or lr.config.stage}]"
        runs.append(_Run(loaded=lr, tag=tag, name=name))
    glabels = _global_labels(runs)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    lines = _header(runs)
    lines += _runs_section(runs)
    lines += _pairwise_section(runs)
    lines += _decision_section(runs)
    lines += _ablation_section(runs)
    lines += transplant_section([(r.loaded.config, r.m, r.loaded.path, r.tag) for r in runs])
    lines += _cost_section(runs, glabels)
    lines += _calibration_section(runs, glabels)

    pngs: list[Path] = []
    skipped: dict[str, str] = {}
    lines += ["## Plots", ""]
    for name, title, draw in (
        (COST_PLOT, "LLM cost per stage", _plot_cost),
        (RELIABILITY_PLOT, "Reliability diagram", _plot_reliability),
    ):
        path = out / name
        reason = draw(runs, glabels, path)
        if reason is None:
            pngs.append(path)
            lines += [f"![{title}]({name})", ""]
        else:
            skipped[name] = reason
            path.unlink(missing_ok=True)  # do not leave a stale plot from an earlier report next to this one
            lines += [f"_{title} not drawn: {reason}._", ""]

    markdown = "\n".join(lines).rstrip() + "\n"
    report_path = out / REPORT_FILE
    report_path.write_text(markdown, encoding="utf-8")
    return ReportResult(markdown=markdown, path=report_path, pngs=pngs, skipped_plots=skipped)
