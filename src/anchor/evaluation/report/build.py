"""``build_report``: every run directory given, loaded and written out as ``report.md`` and its plots."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from anchor.evaluation.report.cost_plot import plot_cost
from anchor.evaluation.report.cost_table import cost_section
from anchor.evaluation.report.loading import ReportError, load_run
from anchor.evaluation.report.names import display_name
from anchor.evaluation.report.reliability_plot import plot_reliability
from anchor.evaluation.report.runs import ReportedRun, global_labels, unique_tags
from anchor.evaluation.report.shared import on_shared_instances
from anchor.evaluation.report.tables import (
    ablation_section,
    calibration_section,
    cases_section,
    decision_section,
    header_section,
    pairwise_section,
    runs_section,
)
from anchor.evaluation.report.transplant import transplant_section
from anchor.evaluation.report.truth_table import truth_section

REPORT_FILE = "report.md"
COST_PLOT = "cost_per_stage.png"
RELIABILITY_PLOT = "reliability.png"


@dataclass(frozen=True)
class ReportResult:
    """What :func:`build_report` produced: the Markdown text, the ``report.md`` path and the PNGs written."""

    markdown: str
    path: Path
    pngs: list[Path] = field(default_factory=list)
    #: Plot file names that were not drawn, with the reason (also stated in the Markdown).
    skipped_plots: dict[str, str] = field(default_factory=dict)


def build_report(dirs: Sequence[Path], out_dir: Path) -> ReportResult:
    """Load every run directory, write ``out_dir/report.md`` and the PNG plots, and return what was written.

    Directories may mix kinds (pairwise, decision, factcheck), datasets and models; the same directory given
    twice is reported once. Runs of one kind and dataset that scored different instances are scored on the
    instances they share (:mod:`.shared`). Raises :class:`ReportError` when no directory is given, one cannot
    be loaded, or runs of one dataset cannot stand side by side (other data, no instance in common).
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
    loaded, shared = on_shared_instances([load_run(d) for d in unique])
    shared_by_group = {(s.kind, s.dataset): s for s in shared}
    tags = unique_tags([lr.path.resolve() for lr in loaded])
    runs: list[ReportedRun] = []
    for lr, tag in zip(loaded, tags, strict=True):
        name = display_name(lr.metrics.method, lr.metrics.ablations or lr.config.ablations, lr.metrics.oracle)
        if lr.metrics.stage or lr.config.stage:
            name += f" [{lr.metrics.stage or lr.config.stage}]"
        runs.append(ReportedRun(loaded=lr, tag=tag, name=name,
                                shared=shared_by_group.get((lr.config.kind, lr.config.dataset))))
    glabels = global_labels(runs)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    lines = header_section(runs)
    lines += runs_section(runs)
    lines += pairwise_section(runs)
    lines += decision_section(runs)
    lines += cases_section(runs)
    lines += truth_section(runs)
    lines += ablation_section(runs)
    lines += transplant_section([(r.loaded.config, r.m, r.loaded.path, r.tag) for r in runs])
    lines += cost_section(runs, glabels)
    lines += calibration_section(runs, glabels)

    pngs: list[Path] = []
    skipped: dict[str, str] = {}
    lines += ["## Plots", ""]
    for name, title, draw in (
        (COST_PLOT, "LLM cost per stage", plot_cost),
        (RELIABILITY_PLOT, "Reliability diagram", plot_reliability),
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
