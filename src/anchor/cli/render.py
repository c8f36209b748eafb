"""Readable (rich) views of spaces, results and costs, for people. Machines get JSON instead."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from anchor.llm.ledger import merge_costs
from anchor.types import FactorLabel, FactorSpace, InferenceResult, StageCost

LABEL_STYLE = {FactorLabel.OUTCOME1: "green", FactorLabel.OUTCOME2: "red", FactorLabel.NEUTRAL: "bright_black"}
LABEL_SHORT = {FactorLabel.OUTCOME1: "O1", FactorLabel.OUTCOME2: "O2", FactorLabel.NEUTRAL: "neutral"}


def cost_table(costs: Sequence[StageCost], title: str = "LLM cost per stage") -> Table:
    # Stage names are kept whole (at 80 columns a cut made three rows read "abducti…"); the numeric
    # headers go on two short lines and the cells share their padding, so that a build's table with
    # seven-digit token counts still fits 80 columns. The request durations added up are given for
    # the total only (in the caption), which leaves room for requests and attempts apart.
    table = Table(title=title, title_justify="left", caption_justify="left", show_edge=False, header_style="bold",
                  pad_edge=False, collapse_padding=True)
    rows = list(costs)
    widest = max((len(c.stage) for c in rows), default=5)
    table.add_column("stage", justify="left", no_wrap=True, min_width=max(widest, 5))
    for col in ("reqs", "tries", "fail", "cache\nhits", "prompt\ntokens", "compl.\ntokens", "wall\ns"):
        table.add_column(col, justify="right", no_wrap=True)
    total = merge_costs(rows, label="total")
    for c in rows + total:
        style = "bold" if c.stage == "total" else ""
        table.add_row(c.stage, "–" if c.logical_requests is None else str(c.logical_requests), str(c.llm_calls),
                      str(c.failed_attempts), str(c.cache_hits), str(c.prompt_tokens), str(c.completion_tokens),
                      f"{c.wall_seconds:.1f}", style=style)
    summed = f"{total[0].llm_seconds:.1f} s" if total else "0 s"
    table.caption = ("reqs = requests, each once however many tries it took; tries = attempts, retries after a "
                     "server fault and failed ones (fail) included; compl. = completion; wall s = time with a "
                     "request of the stage in flight (the total row adds the stages' wall times); the requests' "
                     f"durations add up to {summed} (more than the wall time when requests run in parallel)")
    return table


def _factor_line(text: str, label: FactorLabel) -> Text:
    return Text(text, style=LABEL_STYLE[label])


def space_view(space: FactorSpace) -> RenderableType:
    """Themes with their factors (coloured by voted label), like the paper's factor-space table."""
    s = space.scenario
    head = Text.assemble(("Scenario: ", "bold"), s.text or "(none)", "\n", ("Outcome 1: ", "bold green"), s.outcome1,
                         "\n", ("Outcome 2: ", "bold red"), s.outcome2)
    table = Table(show_edge=False, header_style="bold", expand=True)
    table.add_column("theme", style="bold", no_wrap=True)
    table.add_column("factors  (green: favours O1, red: favours O2, grey: neutral)")
    by_id = space.by_id()
    for cluster in space.clusters:
        parts = Text()
        for i, fid in enumerate(cluster.factor_ids):
            if i:
                parts.append("; ")
            parts.append_text(_factor_line(by_id[fid].text, by_id[fid].label))
        table.add_row(cluster.theme, parts)
    if space.unclustered:
        parts = Text()
        for i, fid in enumerate(space.unclustered):
            if i:
                parts.append("; ")
            parts.append_text(_factor_line(by_id[fid].text, by_id[fid].label))
        table.add_row(Text("(unclustered)", style="italic"), parts)
    pruned = [p for c in space.clusters for p in c.pruned]
    st = space.clustering
    facts = Text.assemble(
        f"{len(space.factors)} factors in {len(space.rounds)} round(s); stopped: {space.stop_reason.value}; ",
        f"{len(space.rounds_beyond_stop)} more round(s) had started and ran, not merged; "
        if space.rounds_beyond_stop else "",
        f"clustering: {st.method}, {st.n_clusters} cluster(s), {st.n_unclustered} unclustered",
        f", silhouette {st.silhouette:.3f}" if st.silhouette is not None else "",
        f"; {len(pruned)} pruned as redundant" if pruned else "",
        f"\nLLM: {space.llm.model} ({space.llm.backend})", style="bright_black",
    )
    return Group(head, table, facts, cost_table(space.cost))


def result_view(result: InferenceResult, space: FactorSpace) -> RenderableType:
    """One condition: the answer, then why (mapping, factor strengths, latents), then the cost."""
    parts: list[RenderableType] = []
    if result.unknown:
        verdict = Text.assemble(("UNKNOWN", "bold yellow"), f"  ({result.unknown_reason})")
    else:
        p1 = result.p_outcome1 or 0.0
        verdict = Text.assemble(("P(O1) = ", "bold"), (f"{p1:.3f}", "bold green"), "   ", ("P(O2) = ", "bold"),
                                (f"{1 - p1:.3f}", "bold red"))
        cal = result.calibration
        if cal is not None:
            verdict.append(f"   calibrated by {cal.kind}; raw P(O1) = {cal.p_raw:.3f}, P(O2) = {1 - cal.p_raw:.3f}",
                           style="bright_black")
        models = []
        if result.nb is not None:
            models.append(f"Naive Bayes {result.nb:.3f}")
        if result.cbn is not None:
            models.append(f"latent CBN {result.cbn:.3f}")
        if models:
            weights = ", ".join(f"{k} {v:.2f}" for k, v in result.weights.items())
            verdict.append(f"\n{' | '.join(models)}  -> {result.aggregation.value.upper()} ({weights})",
                           style="bright_black")
    base = result.base_rate
    if base is not None:
        where = f"stated by {base.model}" if base.source == "elicited" else "given"
        verdict.append(f"\n{result.rule} rule: base rate P(O1 | scenario) = {base.p_outcome1:.3f} ({where}), "
                       "counted once", style="bright_black")
    parts.append(verdict)
    m = result.mapping
    if m is not None:
        by_id = space.by_id()
        removed = ", ".join(by_id[f].text for f in m.reflection_removed) or "none"
        clusters = ", ".join(f"{h.theme} ({h.distance:.2f})" for h in m.clusters) or "-"
        parts.append(Text(
            f"mapping: {len(m.candidates)} candidates ({m.retrieval}; clusters: {clusters}); "
            f"{len(m.voted)} passed the vote (>= {m.vote_threshold} of {len(m.selection_rounds)}); "
            f"reflection removed: {removed}"
            + (f"; {m.invalid_selections} selections named no candidate" if m.invalid_selections else ""),
            style="bright_black"))
    if result.factors:
        table = Table(show_edge=False, header_style="bold")
        table.add_column("mapped factor")
        table.add_column("theme")
        table.add_column("vote")
        table.add_column("phi = P(O1|f)", justify="right")
        for f in result.factors:
            table.add_row(f.text, f.theme or "-", Text(LABEL_SHORT[f.label], style=LABEL_STYLE[f.label]),
                          f"{f.phi:.2f}")
        parts.append(table)
    if result.latents:
        table = Table(show_edge=False, header_style="bold")
        table.add_column("latent")
        table.add_column("P(L|O1)", justify="right")
        table.add_column("P(L|O2)", justify="right")
        table.add_column("factors")
        names = {f.factor_id: f.text for f in result.factors}
        for lat in result.latents:
            table.add_row(lat.name, f"{lat.p_given_o1:.2f}", f"{lat.p_given_o2:.2f}",
                          "; ".join(names.get(fid, fid) for fid in lat.factor_ids))
        parts.append(table)
        if result.latent_repairs:
            parts.append(Text("latent repairs: " + "; ".join(result.latent_repairs), style="bright_black"))
    total = merge_costs(result.cost, label="total")
    if total:
        t = total[0]
        requests = "?" if t.logical_requests is None else str(t.logical_requests)
        parts.append(Text(f"cost: {requests} LLM requests in {t.llm_calls} attempts ({t.failed_attempts} failed, "
                          f"{t.cache_hits} cached), "
                          f"{t.prompt_tokens}+{t.completion_tokens} tokens, {t.llm_seconds:.1f} s of requests",
                          style="bright_black"))
    return Panel(Group(*parts), title=Text(result.condition, style="bold"), title_align="left")
