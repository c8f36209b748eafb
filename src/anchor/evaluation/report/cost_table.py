"""The report's cost section: LLM requests (and the attempts they took), tokens and time per stage and
per instance of each run."""

from __future__ import annotations

from collections.abc import Sequence

from anchor.evaluation.cost.phases import phase_of
from anchor.evaluation.report.markdown import int_cell, md_table, seconds_cell
from anchor.evaluation.report.names import DASH, SMALL_MARK
from anchor.evaluation.report.runs import ReportedRun
from anchor.llm.ledger import empty_cost, merge_costs
from anchor.types import StageCost

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


def stage_sort_key(stage: str) -> tuple[int, str]:
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


def stage_costs(r: ReportedRun) -> list[tuple[str, StageCost]]:
    return sorted(((s, c) for s, c in r.m.cost.items() if s != "total"), key=lambda sc: stage_sort_key(sc[0]))


def total_cost(r: ReportedRun) -> StageCost:
    """The run's total, or (a report without one) its stages added up."""
    if "total" in r.m.cost:
        return r.m.cost["total"]
    stages = [c for _, c in stage_costs(r)]
    return merge_costs(stages, label="total")[0] if stages else empty_cost("total")


def tokens_of(c: StageCost) -> int:
    return c.prompt_tokens + c.completion_tokens


def requests_cell(c: StageCost) -> str:
    """Logical requests, or a dash where the report was written before they were counted."""
    return DASH if c.logical_requests is None else int_cell(c.logical_requests)


def cost_section(runs: Sequence[ReportedRun], glabels: dict[int, str]) -> list[str]:
    lines = ["## Cost (cf. the paper's cost analysis)", ""]
    with_cost = [r for r in runs if r.m.cost]
    without = [r for r in runs if not r.m.cost]
    if with_cost:
        header = ["Run", "Phase", "Stage", "Requests", "Attempts", "Failed", "Interrupted", "Cache hits",
                  "Tokens (prompt + completion)", "Wall s", "Request s"]
        rows = []
        for r in with_cost:
            for stage, c in stage_costs(r):
                rows.append([glabels[id(r)], _phase(stage), stage, requests_cell(c), int_cell(c.llm_calls),
                             int_cell(c.failed_attempts),
                             int_cell(c.interrupted), int_cell(c.cache_hits),
                             f"{int_cell(tokens_of(c))} ({int_cell(c.prompt_tokens)} + {int_cell(c.completion_tokens)})",
                             seconds_cell(c.wall_seconds), seconds_cell(c.llm_seconds)])
            t = total_cost(r)
            rows.append([f"**{glabels[id(r)]}**", "", "**total**", f"**{requests_cell(t)}**", int_cell(t.llm_calls),
                         int_cell(t.failed_attempts), int_cell(t.interrupted), int_cell(t.cache_hits),
                         f"**{int_cell(tokens_of(t))}**", f"**{seconds_cell(t.wall_seconds)}**",
                         f"**{seconds_cell(t.llm_seconds)}**"])
        lines += md_table(header, rows, ["l", "l", "l", "r", "r", "r", "r", "r", "r", "r", "r"])
        lines.append("")
        lines += ["Per instance:", ""]
        rows = []
        for r in with_cost:
            per, how = _per_instance(r)
            if per is None:
                rows.append([glabels[id(r)], str(r.m.n_instances), DASH, DASH, DASH, DASH, how])
                continue
            requests, attempts, tokens, seconds = per
            rows.append([glabels[id(r)], str(r.m.n_instances), DASH if requests is None else f"{requests:.1f}",
                         f"{attempts:.1f}", f"{tokens:,.0f}", seconds_cell(seconds), how])
        lines += md_table(["Run", "Instances", "Requests / inst.", "Attempts / inst.", "Tokens / inst.",
                           "Request s / inst.", "Source"], rows, ["l", "r", "r", "r", "r", "r", "l"])
        lines.append("")
        notes = ["Requests are logical requests: each request the run asked the LLM for, counted once however "
                 "many attempts the transport needed (a re-ask after an unusable answer is a request of its own). "
                 "Attempts count every request sent whose outcome is known, retries after a transient failure "
                 "(HTTP 429 or 5xx, a time-out, a dropped connection) and refused request formats included; Failed "
                 "are the attempts that failed. A server's faults add attempts, not requests, so per-request "
                 "figures and ratios use Requests. Interrupted are requests cut off by a kill, in neither: the "
                 "server may or may not have received them, and their tokens are unknown. A cache hit made no "
                 "request and is listed apart. Each attempt is counted once, from the run's calls.jsonl. "
                 "Wall s is the time during which at least one request of "
                 "the stage was in flight; Request s adds up the requests' durations, so it exceeds the wall "
                 "time when requests ran in parallel. Factor-space stages are paid once per scenario (and run, "
                 "with --spaces per-run) and shared by its instances, so the per-instance figures spread that "
                 "cost over them."]
        reused = [r for r in with_cost if r.m.cost_reused]
        if reused:
            notes.append("Factor spaces reused from another run directory are not in these totals; their recorded "
                         "build cost: " + "; ".join(f"{glabels[id(r)]}: {requests_cell(r.m.cost_reused['total'])} "
                                                     f"requests ({int_cell(r.m.cost_reused['total'].llm_calls)} "
                                                     "attempts)" for r in reused if "total" in r.m.cost_reused)
                         + ".")
        older = [glabels[id(r)] for r in with_cost if total_cost(r).logical_requests is None]
        if older:
            notes.append("Requests not known (–) for: " + "; ".join(older) + ": their metrics.json was written before "
                         "requests were counted apart from attempts; the same `anchor eval` command run again rewrites it "
                         "from calls.jsonl, making no prediction again.")
        cached = [glabels[id(r)] for r in with_cost if total_cost(r).llm_calls == 0]
        if cached:
            notes.append("No LLM requests were made by: " + "; ".join(cached) + " (every answer came from the "
                         "response cache, or nothing was asked); their costs are zero, not missing.")
        if any(r.small for r in with_cost):
            notes.append(f"{SMALL_MARK} costs of the embedded 135M model say nothing about a real server's "
                         "cost.")
        lines += [f"- {n}" for n in notes]
    if without:
        lines.append(f"- No cost recorded for: {'; '.join(glabels[id(r)] for r in without)}.")
    lines.append("")
    return lines


def _per_instance(r: ReportedRun) -> tuple[tuple[float | None, float, float, float] | None, str]:
    """(requests, attempts, tokens, seconds) per instance prediction and how they were obtained (requests
    None when the report was written before they were counted).

    Computed from the totals rather than read from ``cost_per_instance``, which the runner rounds to whole
    calls and tokens (2.55 calls would show as 3). For a finished run both use the same denominator.
    """
    runs = max(r.m.n_runs, 1)
    n = r.m.n_instances * runs
    if n <= 0:
        return None, "no instances"
    t = total_cost(r)
    requests = None if t.logical_requests is None else t.logical_requests / n
    return (requests, t.llm_calls / n, tokens_of(t) / n, t.llm_seconds / n), (
        f"total ÷ ({r.m.n_instances} instances × {runs} run{'s' if runs != 1 else ''})"
    )
