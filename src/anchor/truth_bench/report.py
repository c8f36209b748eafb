"""``table.md`` of ``anchor truth bench`` and the lines it prints: the verdicts, what the bench can tell (its
power), the scores of every method at the default errors, the map, each sweep's error to the truth by
level, the crossovers, and what was not run."""

from __future__ import annotations

from anchor.truth.scores import Figure
from anchor.truth_bench.plan import DEFAULT, METHODS, SWEEP_TITLES, SWEEPS
from anchor.truth_bench.results import BenchResults, CellResult, MapCell

FIGURE_FILES = {
    **{sweep: f"sweep-{sweep}.png" for sweep in SWEEPS},
    "map": "map.png",
    "reliability": "reliability.png",
}


def _num(f: Figure | None, digits: int = 3) -> str:
    return "–" if f is None or f.value is None else f"{f.value:.{digits}f}"


def _pct(f: Figure | None) -> str:
    return "–" if f is None or f.value is None else f"{100 * f.value:.0f}%"


def _row(cell: CellResult) -> list[str]:
    s = cell.scores
    if s is None:
        return [cell.method, *(["–"] * 10), f"not run: {cell.not_run}"]
    cost = cell.cost
    return [cell.method, _pct(s.coverage), _pct(cell.unknown_with_factors), _pct(cell.answered_nothing), _num(s.mae),
            _num(s.rmse), _num(s.kl), _num(cell.ece_truth), _num(s.ece_labels), _pct(s.decision_accuracy),
            f"{cost.answers:,}" if cost else "–", f"answers of {cell.answered_by}" if cell.answered_by else ""]


DEFAULT_HEADER = ["method", "coverage", "unknown (cases with factors)", "answered 'nothing'", "MAE", "RMSE", "KL",
                  "ECE vs truth", "ECE vs labels", "Bayes decision", "LLM answers", "note"]


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
            *("| " + " | ".join(r) + " |" for r in rows)]


def _group_title(results: BenchResults, name: str) -> str:
    g = results.groups[name]
    prior = "each network at its own prior" if g.prior is None else f"P(O1) = {g.prior:g}"
    return f"{name} ({g.structure}, {prior}; {len(g.worlds)} worlds, {len(results.cases[name])} cases)"


def default_tables(results: BenchResults) -> list[str]:
    out = []
    for g in results.groups:
        cells = [c for c in results.cells if c.group == g and c.setting == DEFAULT]
        out += [f"### {_group_title(results, g)}", "", *_table(DEFAULT_HEADER, [_row(c) for c in cells]), ""]
    return out


def sweep_table(results: BenchResults, sweep: str) -> list[str]:
    levels = results.plan.levels.get(sweep, ())  # type: ignore[call-overload]
    header = ["group", "method", *(f"t={t:g}" for t in levels)]
    rows = []
    for g in results.groups:
        for m in results.plan.methods:
            cells = [results.cell(g, results.plan.setting_of(sweep, t), m) for t in levels]  # type: ignore[arg-type]
            if sum(c is not None and c.scores is not None for c in cells) < 2:
                continue
            rows.append([g, m, *(_num(c.scores.mae if c and c.scores else None) for c in cells)])
    return _table(header, rows)


def map_table(results: BenchResults) -> list[str]:
    levels = results.plan.levels.get("factor", ())
    header = ["group", "direct level d", *(f"factor f={f:g}" for f in levels)]
    rows = []
    for g in results.groups:
        for d in results.plan.levels.get("direct", ()):
            cells = {c.factor: c for c in results.map if c.group == g and c.direct == d}
            if not cells:
                continue
            rows.append([g, f"{d:g}", *(_map_entry(cells.get(f)) for f in levels)])
    return _table(header, rows)


def _map_entry(c: MapCell | None) -> str:
    if c is None or c.diff is None:
        return "–"
    mark = " **closer**" if c.better else " farther" if c.worse else ""
    span = "" if c.low is None or c.high is None else f" [{c.low:+.3f}, {c.high:+.3f}]"
    return f"{c.diff:+.3f}{span}{mark}"


def power_lines(results: BenchResults) -> list[str]:
    rows = [[p.group, str(p.worlds), str(p.n), "–" if p.half_width is None else f"±{p.half_width:.3f}",
             "–" if p.detectable is None else f"{p.detectable:.3f}"] for p in results.power]
    return ["ANCHOR against vanilla at the default errors, per group: the 95% interval's half-width (resampling "
            "worlds, then cases) and the smallest difference in MAE found with 80% power (2.8 standard errors).",
            "", *_table(["group", "worlds", "cases", "half-width", "detectable difference"], rows)]


def settings_lines(results: BenchResults) -> list[str]:
    d = results.settings[DEFAULT]
    curve = lambda c: f"slope {c['slope']:g}, bias {c['bias']:g}, noise {c['noise']:g}, step {c['step']:g}"  # noqa: E731
    return [
        f"Defaults (level 1 of every sweep): factor_recall {d['factor_recall']:g}, hallucination_rate "
        f"{d['hallucination_rate']:g}, vote_flip_rate {d['vote_flip_rate']:g}, map_recall {d['map_recall']:g}, "
        f"map_false_rate {d['map_false_rate']:g}, reflect_catch {d['reflect_catch']:g}, grouping_error "
        f"{d['grouping_error']:g}, factor_curve ({curve(d['factor_curve'])}), base_rate_curve "
        f"({curve(d['base_rate_curve'])}), direct_curve ({curve(d['direct_curve'])}), direct_miss_rate "
        f"{d['direct_miss_rate']:g}, direct_invent_rate {d['direct_invent_rate']:g}, phi_reading {d['phi_reading']}.",
        *(f"- `{sw}` sweep, levels {', '.join(f'{t:g}' for t in results.plan.levels[sw])}: {SWEEP_TITLES[sw]}"
          f"{'' if sw in results.plan.uneven_sweeps else ' (at even odds only)'}."
          for sw in SWEEPS if sw in results.plan.levels),
    ]


def verdict_lines(results: BenchResults) -> list[str]:
    out = []
    for v in results.verdicts:
        out.append(f"{v.claim}. {v.title}: **{v.verdict.upper()}**. {v.summary}")
        if v.where_held:
            out.append(f"   Held where: {'; '.join(v.where_held)}.")
    return out


def table_md(results: BenchResults) -> str:
    p = results.plan
    n_cases = sum(len(c) for c in results.cases.values())
    titles = {m.name: m.title for m in METHODS}
    lines = [
        "# anchor truth bench", "",
        f"{'Quick' if p.quick else 'Full'} plan, seed {p.seed}: {len(results.groups)} groups of worlds "
        f"({', '.join(results.groups)}), {p.worlds_per_group} generated worlds a group with {p.conditions_per_world} "
        f"conditions each{f', and {len(p.networks)} published networks' if p.networks else ''} ({n_cases} cases), "
        f"anchor {results.anchor_version}. Every cell is `anchor predict` on the group's cases file, in process, "
        "with the simulated LLM as its backend; scores are against the true P(outcome1). What this shows is the "
        "methods' statistics under a stated model of LLM error, not any real LLM.", "",
        *settings_lines(results), "",
        "## Verdicts", "", *verdict_lines(results), "",
        "## What the bench can tell", "", *power_lines(results), "",
        "## At the default errors", "",
        "Coverage: share of cases answered. *Unknown (cases with factors)*: share of the cases that state at "
        "least one factor left unknown or failed; *answered 'nothing'*: share of the cases that state no factor "
        "(truth = the prior) answered anyway. MAE, RMSE, KL: to the true probability over the answered cases. "
        "*ECE vs truth*: mean |mean estimate - mean truth| over ten bins of the estimate; *ECE vs labels*: the "
        "usual ECE against the sampled labels. *Bayes decision*: agreement with the truth's side of 0.5. *LLM "
        "answers*: every answer the method used (asked for, cached, or inside a shared factor space).", "",
        *default_tables(results),
        "## Where ANCHOR wins: the map", "",
        "ANCHOR (at factor-error level f) minus vanilla (at direct-error level d), error to the truth, paired, with "
        "its 95% interval over worlds and cases; **closer** where the whole interval is below 0. Read off the row of "
        "your model's direct error and the column of its factor-level error.", "",
        *map_table(results), "", f"![map]({FIGURE_FILES['map']})", "",
    ]
    for sweep in SWEEPS:
        if sweep not in p.levels:
            continue
        lines += [f"## Sweep `{sweep}`: MAE to the truth by level", "", f"{SWEEP_TITLES[sweep]}; t = 1 is the "
                  "defaults. A method whose prompts read none of the swept parameters has the same answers at "
                  "every level (one run).", "", *sweep_table(results, sweep), "",
                  f"![{sweep} sweep]({FIGURE_FILES[sweep]})", ""]
    lines += ["## Crossovers", "", "Paired difference ANCHOR minus the other method's error to the truth at each "
              "level (below 0: ANCHOR closer).", ""]
    for c in results.crossovers:
        diffs = ", ".join("–" if d is None else f"{d:+.3f}" for d in c.diffs)
        lines.append(f"- {c.group}, `{c.sweep}` sweep, {c.a} vs {c.b} ({diffs}): {c.note}.")
    lines += ["", "## Reliability against the truth (default errors)", "",
              f"![reliability]({FIGURE_FILES['reliability']})", "", "## Methods", ""]
    for name in p.methods:
        not_run = next((c.not_run for c in results.cells if c.method == name and c.not_run), None)
        lines.append(f"- `{name}`: {titles.get(name, name)}" + (f". Not run: {not_run}" if not_run else "."))
    lines += [*(["", "## Notes", ""] + [f"- {n}" for n in results.notes] if results.notes else []), ""]
    return "\n".join(lines)


def console_lines(results: BenchResults) -> list[str]:
    """What the command prints at the end: the verdicts, what the bench can tell, the default-error tables."""
    return ["Verdicts:", *verdict_lines(results), "", *power_lines(results), "", "At the default errors:",
            *default_tables(results)]
