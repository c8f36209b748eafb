"""The BIRD-on-ANCHOR table of ``anchor report`` (laid out like the paper's Table 4).

Rows: the BIRD relaxed baseline (``--method bird-relaxed``), then ``bird-on-anchor`` at ``--stage
factors`` (+ ANCHOR's factors), ``mapping`` (+ ANCHOR's mapping) and ``pool`` (+ NB and CBN pooled),
for each (dataset, model) that has at least one transplant run. Columns: the headline metric (F1
Avg for pairwise data), coverage, and the mapping stage's tokens and time per prediction relative to
the baseline's (Tok./B, Time/B).

Mapping tokens are the prompt + completion tokens of the mapping stages (BIRD's value choice,
reflection and relaxed pass; ANCHOR's selection and reflection), including the mapping a transplant
does while preparing a scenario; mapping time is the wall time during which at least one mapping
request was in flight, read from the run's ``calls.jsonl`` (the sum of the stages' wall times when
that file is missing).

A mapping answered from the response cache made no request. Its cost is then the recorded cost of
the cached answers (``CallRecord.recorded``: the tokens and the time span of the request that first
produced each answer, in this run or another one), so that ``+ ANCHOR mapping`` run after ``anchor``
on the same cache does not read as free. Every row says where its cost comes from (:class:`MappingCost`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anchor.evaluation.cost.phases import phase_of
from anchor.evaluation.report.loading import ReportError
from anchor.llm.ledger import busy_seconds, recorded_requests
from anchor.rundir import RunDirectory, Skipped
from anchor.rundir.records import MetricsReport, RunConfig

BASELINE = "bird-relaxed"
TRANSPLANT = "bird-on-anchor"
SETTINGS = {"factors": "+ ANCHOR-generated factors", "mapping": "+ ANCHOR mapping",
            "pool": "+ NB and CBN pooled (LOP)"}
HEADLINE = {"pairwise": ("f1_micro", "Avg. F1"), "decision": ("accuracy", "Acc."),
            "factcheck": ("balanced_accuracy", "Bal. acc.")}


@dataclass(frozen=True)
class MappingCost:
    """The mapping stage's cost in one run, and where it comes from."""

    tokens: int
    seconds: float
    made: int | None
    """Mapping requests the run made: logical requests, each once however many attempts it took (from
    calls.jsonl; None from a metrics.json written before they were counted)."""
    attempts: int | None = None
    """The attempts they took (retries after a transient failure included); None when not known."""
    recorded: int = 0
    """Mapping requests behind cached answers whose cost the cache recorded (made elsewhere)."""
    unrecorded: int = 0
    """Cached mapping answers with no recorded cost (cached by an earlier version): not counted."""
    from_log: bool = True
    """False when the run has no calls.jsonl (tokens from metrics.json, time summed over stages)."""
    damaged: int = 0
    """Lines of calls.jsonl that could not be read: left out of these figures (the table says so)."""

    @property
    def source(self) -> str:
        """Where the figures come from, in a few words."""
        if not self.from_log:
            return "metrics.json (no calls.jsonl)"
        made = "an unknown number of" if self.made is None else str(self.made)
        attempts = f" ({self.attempts} attempt(s))" if self.attempts is not None else ""
        parts = [f"{made} request(s) made{attempts}"]
        if self.recorded:
            parts.append(f"recorded cost of {self.recorded} cached")
        if self.unrecorded:
            parts.append(f"{self.unrecorded} cached without a recorded cost, not counted")
        if self.damaged:
            parts.append(f"{self.damaged} damaged line(s) of calls.jsonl left out")
        return "; ".join(parts)


def mapping_cost(config: RunConfig, metrics: MetricsReport, path: Path) -> MappingCost:
    """The mapping stage's tokens and wall seconds in one run: its own requests, plus the recorded cost
    of the answers it took from the response cache (and of reused artefacts, from metrics.json)."""
    reused = sum(c.prompt_tokens + c.completion_tokens for s, c in metrics.cost_reused.items()
                 if s != "total" and phase_of(s) == "mapping")
    run = RunDirectory(path, error=ReportError)
    if not run.calls.exists():
        tokens = sum(c.prompt_tokens + c.completion_tokens for s, c in metrics.cost.items()
                     if s != "total" and phase_of(s) == "mapping")
        seconds = sum(c.wall_seconds for s, c in metrics.cost.items() if s != "total" and phase_of(s) == "mapping")
        stages = [c for s, c in metrics.cost.items() if s != "total" and phase_of(s) == "mapping"]
        made = None if any(c.logical_requests is None for c in stages) else sum(c.logical_requests or 0
                                                                                 for c in stages)
        return MappingCost(tokens=tokens + reused, seconds=seconds, made=made,
                           attempts=sum(c.llm_calls for c in stages), from_log=False)
    # Leniently: a damaged line of a finished run's log costs its own figures, and the row says so.
    damaged = Skipped()
    mapping = [r for r in run.call_log(skipped=damaged) if phase_of(r.stage) == "mapping"]
    made = [r for r in mapping if r.outcome_known]
    behind, unrecorded = recorded_requests(mapping)
    tokens = sum(r.prompt_tokens + r.completion_tokens for r in (*made, *behind))
    return MappingCost(tokens=tokens + reused, seconds=busy_seconds([*made, *behind]),
                       made=sum(r.ends_request for r in made), attempts=len(made),
                       recorded=len(behind), unrecorded=unrecorded, damaged=damaged.count)


@dataclass(frozen=True)
class TransplantRow:
    """One row of the table: a run, its score and coverage, its mapping cost and the ratios to the baseline."""

    setting: str
    name: str
    """``bird-relaxed`` or ``bird-on-anchor:<stage>``."""
    metrics: MetricsReport
    label: str
    cost: MappingCost
    tokens_per_prediction: float
    seconds_per_prediction: float
    tokens_ratio: float | None
    seconds_ratio: float | None


def transplant_groups(runs: Sequence[tuple[RunConfig, MetricsReport, Path, str]]
                      ) -> dict[tuple[str, str], list[TransplantRow]]:
    """The table's rows per (dataset, model) that has a transplant run, in the paper's order; the ratios are
    None where there is no baseline run (or its mapping cost is 0)."""
    groups: dict[tuple[str, str], list[tuple[RunConfig, MetricsReport, Path, str]]] = {}
    for run in runs:
        config, metrics, _, _ = run
        if metrics.method in (BASELINE, TRANSPLANT):
            groups.setdefault((metrics.dataset, str(metrics.llm.get("model") or config.llm.get("model"))), []).append(run)
    order = [BASELINE, *(f"{TRANSPLANT}:{s}" for s in SETTINGS)]

    def name(m: MetricsReport) -> str:
        return m.method if m.method == BASELINE else f"{m.method}:{m.stage}"

    out: dict[tuple[str, str], list[TransplantRow]] = {}
    for key, group in sorted(groups.items()):
        if not any(m.method == TRANSPLANT for _, m, _, _ in group):
            continue
        group = sorted(group, key=lambda r: (order.index(name(r[1])) if name(r[1]) in order else len(order), r[3]))
        costs = [mapping_cost(c, m, p) for c, m, p, _ in group]
        per = [max(m.n_instances * m.n_runs, 1) for _, m, _, _ in group]
        base = next((i for i, r in enumerate(group) if r[1].method == BASELINE), None)
        base_tok = costs[base].tokens / per[base] if base is not None else 0.0
        base_sec = costs[base].seconds / per[base] if base is not None else 0.0
        rows = []
        for (_, metrics, _, label), cost, n in zip(group, costs, per, strict=True):
            setting = "BIRD‡ baseline (bird-relaxed)" if metrics.method == BASELINE else \
                SETTINGS.get(metrics.stage or "", f"stage {metrics.stage}")
            tok, sec = cost.tokens / n, cost.seconds / n
            rows.append(TransplantRow(setting=setting, name=name(metrics), metrics=metrics, label=label, cost=cost,
                                      tokens_per_prediction=tok, seconds_per_prediction=sec,
                                      tokens_ratio=tok / base_tok if base_tok else None,
                                      seconds_ratio=sec / base_sec if base_sec else None))
        out[key] = rows
    return out


def _fmt(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def transplant_section(runs: Sequence[tuple[RunConfig, MetricsReport, Path, str]]) -> list[str]:
    """Markdown lines of the table; ``runs`` are (config, metrics, directory, label) of every run in the
    report. Empty when there is no transplant run."""
    if not any(m.method == TRANSPLANT for _, m, _, _ in runs):
        return []
    lines = ["## BIRD on ANCHOR's factor space (cf. the paper's Table 4)", ""]
    for (dataset, model), rows in transplant_groups(runs).items():
        key, title = HEADLINE[rows[0].metrics.kind]
        lines += [f"### {dataset} · {model}", "",
                  f"| Setting | {title} | Cov. | Tok./B | Time/B | Mapping tokens / pred. | Mapping s / pred. | "
                  "Cost from | Run |",
                  "|:--|--:|--:|--:|--:|--:|--:|:--|:--|"]
        for r in rows:
            cov = r.metrics.mean.get("coverage")
            cells = [r.setting, _fmt(r.metrics.mean.get(key)), "–" if cov is None else f"{cov * 100:.2f}%",
                     _fmt(r.tokens_ratio, 2), _fmt(r.seconds_ratio, 2), f"{r.tokens_per_prediction:,.0f}",
                     f"{r.seconds_per_prediction:.2f}", r.cost.source, r.label]
            lines.append("| " + " | ".join(cells) + " |")
        lines += [""] + [f"- {n}" for n in transplant_notes(rows)] + [""]
    return lines


def transplant_notes(rows: Sequence[TransplantRow]) -> list[str]:
    """What a reader of the table needs to know about these rows' figures."""
    notes = ["Each '+' row adds to the row above. Tok./B and Time/B: the mapping stage's tokens and wall time "
             "per prediction, divided by the BIRD‡ baseline's (mapping done while a transplant prepares a "
             "scenario included). Cost from: the mapping requests the run made, each counted once however many "
             "attempts it took (the attempts in brackets include retries after a server's transient failure, "
             "which add no tokens)."]
    if not any(r.metrics.method == BASELINE for r in rows):
        notes.append("No bird-relaxed run of this dataset and model: no baseline to divide by (add one to fill "
                     "Tok./B and Time/B).")
    if any(not r.cost.from_log for r in rows):
        notes.append("Some runs have no calls.jsonl: their mapping tokens come from metrics.json and their time "
                     "is the sum of the stages' wall times.")
    if any(r.cost.recorded for r in rows):
        notes.append("'recorded cost of N cached': those mapping answers came from the response cache (asked "
                     "for by another run, e.g. the ANCHOR run whose spaces were reused); their tokens and time "
                     "are those the cache recorded for the requests that produced them (without failed "
                     "attempts before them). Give a run its own --cache-dir to measure requests it makes itself.")
    damaged = [r for r in rows if r.cost.damaged]
    if damaged:
        notes.append("Some lines of " + ", ".join(f"{r.label}'s calls.jsonl ({r.cost.damaged})" for r in damaged)
                     + " are damaged and could not be read: those rows leave their requests out, so they "
                     "understate the mapping cost.")
    if any(r.cost.unrecorded for r in rows):
        notes.append("Some cached mapping answers have no recorded cost (cached by an earlier version of "
                     "anchor): they are not counted, so those rows understate the mapping cost.")
    return notes
