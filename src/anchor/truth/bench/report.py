"""``table.md`` of ``anchor truth bench`` and the lines it prints: the verdicts, the scores of every method at
the default errors, each sweep's error to the truth by level, the crossovers, and what was not run."""

from __future__ import annotations

from anchor.truth.bench.plan import METHODS, SWEEP_TITLES, SWEEPS
from anchor.truth.bench.results import BenchResults, CellResult
from anchor.truth.scores import Figure

FIGURE_FILES = {
    "direct": "sweep-direct.png",
    "factor": "sweep-factor.png",
    "factor_curve": "sweep-factor_curve.png",
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


def default_tables(results: BenchResults) -> list[str]:
    out = []
    for s in results.plan.structures:
        cells = [c for c in results.cells if c.structure == s and c.setting == "default"]
        n = len(results.cases[s])
        out += [f"### {s} ({len(results.worlds[s])} worlds, {n} cases)", "", *_table(DEFAULT_HEADER,
                                                                                       [_row(c) for c in cells]), ""]
    return out


def sweep_table(results: BenchResults, sweep: str) -> list[str]:
    levels = results.plan.levels[sweep]  # type: ignore[index]
    header = ["structure", "method", *(f"t={t:g}" for t in levels)]
    rows = []
    for s in results.plan.structures:
        for m in results.plan.methods:
            cells = [results.cell(s, results.plan.setting_of(sweep, t), m) for t in levels]  # type: ignore[arg-type]
            if all(c is None or c.scores is None for c in cells):
                continue
            rows.append([s, m, *(_num(c.scores.mae if c and c.scores else None) for c in cells)])
    return _table(header, rows)


def settings_lines(results: BenchResults) -> list[str]:
    d = results.settings["default"]
    curve = lambda c: f"slope {c['slope']:g}, bias {c['bias']:g}, noise {c['noise']:g}, step {c['step']:g}"  # noqa: E731
    return [
        f"Defaults (level 1 of every sweep): factor_recall {d['factor_recall']:g}, hallucination_rate "
        f"{d['hallucination_rate']:g}, vote_flip_rate {d['vote_flip_rate']:g}, map_recall {d['map_recall']:g}, "
        f"map_false_rate {d['map_false_rate']:g}, reflect_catch {d['reflect_catch']:g}, factor_curve "
        f"({curve(d['factor_curve'])}), direct_curve ({curve(d['direct_curve'])}), phi_reading {d['phi_reading']}, "
        f"grouping_error {d['grouping_error']:g}.",
        *(f"- `{sw}` sweep, levels {', '.join(f'{t:g}' for t in results.plan.levels[sw])}: {SWEEP_TITLES[sw]}."
          for sw in SWEEPS),
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
        f"{'Quick' if p.quick else 'Full'} plan, seed {p.seed}: {p.worlds_per_structure} worlds per structure "
        f"({', '.join(p.structures)}), {p.conditions_per_world} conditions each ({n_cases} cases), anchor "
        f"{results.anchor_version}. Every cell is `anchor predict` on the structure's cases file, in process, "
        "with the simulated LLM as its backend; scores are against the true P(outcome1). What this shows is "
        "the methods' statistics under a stated model of LLM error, not any real LLM.", "",
        *settings_lines(results), "",
        "## Verdicts", "", *verdict_lines(results), "",
        "## At the default errors", "",
        "Coverage: share of cases answered. *Unknown (cases with factors)*: share of the cases that state at "
        "least one factor left unknown or failed; *answered 'nothing'*: share of the cases that state no factor "
        "(truth = the prior) answered anyway. MAE, RMSE, KL: to the true probability over the answered cases. "
        "*ECE vs truth*: mean |mean estimate - mean truth| over ten bins of the estimate; *ECE vs labels*: the "
        "usual ECE against the sampled labels. *Bayes decision*: agreement with the truth's side of 0.5. *LLM "
        "answers*: every answer the method used (asked for, cached, or inside a shared factor space).", "",
        *default_tables(results),
    ]
    for sweep in SWEEPS:
        lines += [f"## Sweep `{sweep}`: MAE to the truth by level", "", f"{SWEEP_TITLES[sweep]}; t = 1 is the "
                  "defaults. A method whose prompts read none of the swept parameters has the same answers at "
                  "every level (one run).", "", *sweep_table(results, sweep), "",
                  f"![{sweep} sweep]({FIGURE_FILES[sweep]})", ""]
    for name, setting in results.settings.items():
        if name == "default" or setting.get("sweep"):
            continue
        changed = ", ".join(f"{k} {setting[k]}" for k in setting if k not in ("sweep", "level")
                            and setting[k] != results.settings["default"][k])
        header = ["structure", *results.plan.methods]
        rows = []
        for s in results.plan.structures:
            cells = [results.cell(s, name, m) for m in results.plan.methods]
            rows.append([s, *(_num(c.scores.mae if c and c.scores else None) for c in cells)])
        lines += [f"## Setting `{name}`: MAE to the truth", "", f"The defaults with {changed}.", "",
                  *_table(header, rows), ""]
    lines += ["## Crossovers", "", "Paired difference ANCHOR minus the other method's error to the truth at each "
              "level (below 0: ANCHOR closer).", ""]
    for c in results.crossovers:
        diffs = ", ".join("–" if d is None else f"{d:+.3f}" for d in c.diffs)
        lines.append(f"- {c.structure}, `{c.sweep}` sweep, {c.a} vs {c.b} ({diffs}): {c.note}.")
    lines += ["", "## Reliability against the truth (default errors, all structures)", "",
              f"![reliability]({FIGURE_FILES['reliability']})", "", "## Methods", ""]
    for name in p.methods:
        not_run = next((c.not_run for c in results.cells if c.method == name and c.not_run), None)
        lines.append(f"- `{name}`: {titles.get(name, name)}" + (f". Not run: {not_run}" if not_run else "."))
    lines += [*(["", "## Notes", ""] + [f"- {n}" for n in results.notes] if results.notes else []), ""]
    return "\n".join(lines)


def console_lines(results: BenchResults) -> list[str]:
    """What the command prints at the end: the verdicts, then the default-error tables."""
    return ["Verdicts:", *verdict_lines(results), "", "At the default errors:", *default_tables(results)]
