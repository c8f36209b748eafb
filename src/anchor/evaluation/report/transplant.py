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
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from anchor.evaluation.cost.phases import phase_of
from anchor.evaluation.results import MetricsReport, RunConfig
from anchor.llm.ledger import CallRecord, busy_seconds, collapse_sent

BASELINE = "bird-relaxed"
TRANSPLANT = "bird-on-anchor"
SETTINGS = {"factors": "+ ANCHOR-generated factors", "mapping": "+ ANCHOR mapping",
            "pool": "+ NB and CBN pooled (LOP)"}
HEADLINE = {"pairwise": ("f1_micro", "Avg. F1"), "decision": ("accuracy", "Acc."),
            "factcheck": ("balanced_accuracy", "Bal. acc.")}


def mapping_cost(config: RunConfig, metrics: MetricsReport, path: Path) -> tuple[int, float, bool]:
    """(mapping tokens, mapping wall seconds, whether the time came from calls.jsonl) of one run."""
    tokens = sum(c.prompt_tokens + c.completion_tokens for s, c in metrics.cost.items()
                 if s != "total" and phase_of(s) == "mapping")
    tokens += sum(c.prompt_tokens + c.completion_tokens for s, c in metrics.cost_reused.items()
                  if s != "total" and phase_of(s) == "mapping")
    calls = path / "calls.jsonl"
    if calls.exists():
        records = []
        for line in calls.read_text(encoding="utf-8").splitlines():
            try:
                records.append(CallRecord.model_validate_json(line))
            except ValidationError:
                continue
        mapping = [r for r in collapse_sent(records) if r.outcome != "cache_hit" and phase_of(r.stage) == "mapping"]
        return tokens, busy_seconds(mapping), True
    seconds = sum(c.wall_seconds for s, c in metrics.cost.items() if s != "total" and phase_of(s) == "mapping")
    return tokens, seconds, False


def _fmt(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def transplant_section(runs: Sequence[tuple[RunConfig, MetricsReport, Path, str]]) -> list[str]:
    """Markdown lines of the table; ``runs`` are (config, metrics, directory, label) of every run in the
    report. Empty when there is no transplant run."""
    if not any(m.method == TRANSPLANT for _, m, _, _ in runs):
        return []
    groups: dict[tuple[str, str], list[tuple[RunConfig, MetricsReport, Path, str]]] = {}
    for run in runs:
        config, metrics, _, _ = run
        if metrics.method in (BASELINE, TRANSPLANT):
            groups.setdefault((metrics.dataset, str(metrics.llm.get("model") or config.llm.get("model"))), []).append(run)
    lines = ["## BIRD on ANCHOR's factor space (cf. the paper's Table 4)", ""]
    for (dataset, model), group in sorted(groups.items()):
        if not any(m.method == TRANSPLANT for _, m, _, _ in group):
            continue
        kind = group[0][1].kind
        key, title = HEADLINE[kind]
        def rank(run: tuple[RunConfig, MetricsReport, Path, str]) -> tuple[int, str]:
            order = [BASELINE, *(f"{TRANSPLANT}:{s}" for s in SETTINGS)]
            m = run[1]
            name = m.method if m.method == BASELINE else f"{m.method}:{m.stage}"
            return (order.index(name) if name in order else len(order), run[3])

        group = sorted(group, key=rank)
        base = next((r for r in group if r[1].method == BASELINE), None)
        base_cost = None
        if base is not None:
            tok, secs, _ = mapping_cost(base[0], base[1], base[2])
            n = max(base[1].n_instances * base[1].n_runs, 1)
            base_cost = (tok / n, secs / n)
        rows = []
        from_log = True
        for config, metrics, path, label in group:
            tok, secs, logged = mapping_cost(config, metrics, path)
            from_log = from_log and logged
            n = max(metrics.n_instances * metrics.n_runs, 1)
            per_tok, per_secs = tok / n, secs / n
            setting = "BIRD‡ baseline (bird-relaxed)" if metrics.method == BASELINE else \
                SETTINGS.get(metrics.stage or "", f"stage {metrics.stage}")
            tok_b = per_tok / base_cost[0] if base_cost and base_cost[0] else None
            time_b = per_secs / base_cost[1] if base_cost and base_cost[1] else None
            cov = metrics.mean.get("coverage")
            rows.append([setting, _fmt(metrics.mean.get(key)), "–" if cov is None else f"{cov * 100:.2f}%",
                         _fmt(tok_b, 2), _fmt(time_b, 2), f"{per_tok:,.0f}", f"{per_secs:.2f}", label])
        lines += [f"### {dataset} · {model}", "",
                  f"| Setting | {title} | Cov. | Tok./B | Time/B | Mapping tokens / pred. | Mapping s / pred. | Run |",
                  "|:--|--:|--:|--:|--:|--:|--:|:--|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        notes = ["Each '+' row adds to the row above. Tok./B and Time/B: the mapping stage's tokens and wall time "
                 "per prediction, divided by the BIRD‡ baseline's (mapping done while a transplant prepares a "
                 "scenario included)."]
        if base is None:
            notes.append("No bird-relaxed run of this dataset and model in the report: no baseline to divide by "
                         "(add one to fill Tok./B and Time/B).")
        if not from_log:
            notes.append("Some runs have no calls.jsonl: their mapping time is the sum of the stages' wall times.")
        if any(m.cost.get("total") and m.cost["total"].cache_hits and not m.cost["total"].llm_calls
               for _, m, _, _ in group):
            notes.append("A run answered entirely from the response cache made no request: its tokens and time are "
                         "0, not a measurement (run it with its own --cache-dir to measure).")
        lines += [""] + [f"- {n}" for n in notes] + [""]
    return lines
