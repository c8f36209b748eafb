"""The report's sections of results: each of the paper's tables and figures, our cell beside the
paper's with the difference, and the settings in which ours differs from the paper's.

Every table is laid out one cell per line (row, column, ours, the paper's, the difference), so that
each of our numbers stands next to the number it reproduces, with its note. A measured time (Table
4's Time/B, the cost figure's time ratio) says "wall time" on its line: it is the one kind of
number that differs between two executions of the same runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from anchor.analysis.clustering import ClusteringAnalysis
from anchor.analysis.common import TaskScores
from anchor.analysis.retrieval import RetrievalAnalysis
from anchor.evaluation.cost.compare_plot import plot as plot_cost
from anchor.llm.ledger import recorded_requests
from anchor.reproduce.cells import ESTIMATOR_TABLES, TIMED_METRICS, Ours, Value
from anchor.reproduce.document import Document
from anchor.reproduce.published import PublishedCell, PublishedNumbers, PublishedSource
from anchor.reproduce.selection import PAPER_MAIN_MODEL, PAPER_RUNS, QUICK_BIRD_SAMPLES, Selection
from anchor.rundir import RunDirectory

MINUS = "−"
DASH = "–"
FIGURES_FOLDER = "figures"


def fmt_value(v: Value | None, cell: PublishedCell) -> str:
    """Our value as the paper prints the cell: its decimals, ± std over runs, a % sign."""
    if v is None or v.value is None:
        return DASH
    out = f"{v.value:.{cell.decimals}f}"
    if v.std is not None and v.runs > 1:
        out += f" ± {v.std:.{cell.decimals}f}"
    return out + ("%" if cell.unit == "percent" else "")


def fmt_delta(v: Value | None, cell: PublishedCell) -> str:
    """Ours minus the paper's, in the cell's unit and decimals."""
    if v is None or v.value is None:
        return DASH
    d = round(v.value - cell.value, cell.decimals)
    sign = MINUS if d < 0 else "+" if d > 0 else "±"
    return f"{sign}{abs(d):.{cell.decimals}f}" + (" points" if cell.unit == "percent" else "")


def pick_cells(cells: Sequence[PublishedCell], preferred: str) -> list[PublishedCell]:
    """One paper cell per (row, dataset, metric): the preferred model's, else the paper's main model's,
    else the first printed. In the estimator tables the model is a role, so every one is kept."""
    groups: dict[tuple[str, ...], list[PublishedCell]] = {}
    for c in cells:
        role = c.model if c.table in ESTIMATOR_TABLES else ""
        groups.setdefault((c.row, c.dataset, c.metric, role), []).append(c)
    out = []
    for group in groups.values():
        by_model = {c.model: c for c in group}
        out.append(by_model.get(preferred) or by_model.get(PAPER_MAIN_MODEL) or group[0])
    return out


def cell_rows(cells: Sequence[PublishedCell], ours: Ours, selection: Selection) -> list[list[str]]:
    """One line per cell: row, column, ours, the paper's, the difference, a note."""
    rows = []
    for cell in pick_cells(cells, selection.paper_model):
        v = ours.value(cell)
        paper = cell.text() + ("" if cell.model in (selection.paper_model, "") or cell.table in ESTIMATOR_TABLES
                               else f" ({cell.model})")
        notes = []
        if v is not None and v.value is None and v.absent:
            notes.append(v.absent)
        elif v is None or v.value is None:
            notes.append(ours.why_missing(cell))
        elif v.note:
            notes.append(v.note)
        if cell.note:
            notes.append(f"paper: {cell.note}")
        column = cell.column_label + (" (wall time)" if cell.metric in TIMED_METRICS else "")
        rows.append([cell.row_label, column, fmt_value(v, cell), paper, fmt_delta(v, cell), "; ".join(notes)])
    return rows


def _runs_note(source: PublishedSource, ours: Ours, names: Sequence[str]) -> str:
    counts = sorted({ours.runs[n].metrics.n_runs for n in names if n in ours.runs})
    mine = "/".join(str(c) for c in counts) or "no finished"
    five = source.id in ("tab:main-results", "tab:combined_comparison")
    paper = f"mean ± std over {PAPER_RUNS} runs where a std is printed" if five else "no run count given"
    fewer = " (so no ± where the paper prints one)" if five and counts and max(counts) < 2 else ""
    return f"Runs: ours {mine} of every method (seeds seed, seed + 1, ...){fewer}; the paper: {paper}."


def source_section(doc: Document, source: PublishedSource, published: PublishedNumbers, ours: Ours,
                   selection: Selection, notes: Sequence[str], out_dir: Path) -> None:
    """One table or figure of the paper: its notes, then its cells beside ours, then its figure."""
    doc.heading(1, f"{source.label}: {source.title}", anchor=source.id.replace(":", "-"))
    cells = published.table(source.id)
    names = [n for n in (ours.run_for(c) for c in cells) if n]
    extra = [_runs_note(source, ours, list(dict.fromkeys(names)))] if names else []
    doc.bullets([*notes, *extra, *([f"Paper: {source.note}"] if source.note else [])])
    if cells:
        doc.table(["Row", "Column", f"Ours ({ours.model_name})", f"Paper ({selection.paper_model})", "Δ ours − paper",
                   "Note"], cell_rows(cells, ours, selection), "llrrrl")
    if source.id == "fig:time_token_api_cost_left":
        _cost_figure(doc, ours, out_dir)
    elif source.id == "fig:time_token_api_cost_right":
        _factor_figure(doc, ours)
    elif source.id == "fig:retrieval_k_compare":
        _retrieval_figure(doc, ours)
    elif source.id == "fig:clustering_comparison":
        _clustering_figure(doc, ours)
    elif source.id == "fig:factor-calibration":
        _figure(doc, ours, "estimator", "estimator.png", "Smoothed phi densities of the two estimators")
    if source.missing:
        doc.para("Not in the paper's text (image only): " + "; ".join(source.missing) + ".")


def _figure(doc: Document, ours: Ours, analysis: str, png: str, alt: str) -> None:
    names = [n for n in ours.analyses if n.startswith(f"{analysis}-") or n == analysis]
    for name in sorted(names):
        path = ours.out_dir / FIGURES_FOLDER / f"{name}.png"
        source = ours.out_dir / "analyses" / name / png
        if source.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(source.read_bytes())
            doc.image(f"{FIGURES_FOLDER}/{name}.png", f"{alt} ({name})")


def _cost_figure(doc: Document, ours: Ours, out_dir: Path) -> None:
    cost = ours.cost_comparison()
    if cost is None:
        doc.para(f"No cost comparison: {ours.missing.get('cost') or 'the BIRD† and ANCHOR runs are not both finished'}.")
        return
    total = cost["per_scenario"]["total"]
    a, b = total["a"], total["b"]
    doc.table(["Per scenario", "BIRD† (A)", "ANCHOR (B)", "B/A"], [
        ["requests", f"{a['requests']:,.1f}", f"{b['requests']:,.1f}", _ratio(total["ratio"]["requests"])],
        ["attempts (retries included)", f"{a['attempts']:,.1f}", f"{b['attempts']:,.1f}", DASH],
        ["tokens", f"{a['tokens']:,.0f}", f"{b['tokens']:,.0f}", _ratio(total["ratio"]["tokens"])],
        ["seconds (wall time)", f"{a['seconds']:,.2f}", f"{b['seconds']:,.2f}", _ratio(total["ratio"]["seconds"])],
    ], "lrrr")
    # Answers a run found in the cache that it had not asked for itself (a kill and resume leaves hits on
    # its own answers, which its ledger already counts).
    hits = []
    for side in ("a", "b"):
        # Strictly, as `anchor cost` read it for the figures above.
        foreign, unrecorded = recorded_requests(RunDirectory(cost[side]["dir"]).call_log())
        if foreign or unrecorded:
            hits.append(side)
    notes = [f"From `anchor cost` of the two runs ({cost['slice']['scenarios']} scenario(s) x {cost['slice']['runs']} "
             f"run(s)); up to {cost['a']['concurrency']} requests at once, which the time depends on.",
             "Requests are logical requests: each request a run asked for counted once, however many attempts it "
             "took; the attempts add every retry after a transient failure (HTTP 429 or 5xx, a time-out) and every "
             "request format the server refused. The calls ratio is of requests, so a server's faults do not "
             "move it; they add attempts and wall time."]
    if hits:
        notes.append("Some answers came from the response cache (asked for by another run): they are not in these "
                     "figures. Delete the reproduction's cache folder and the two runs to measure them afresh.")
    doc.bullets(notes)
    path = out_dir / FIGURES_FOLDER / "cost.png"
    plot_cost(cost, path)
    doc.image(f"{FIGURES_FOLDER}/cost.png", "Time, tokens and requests per scenario, BIRD† and ANCHOR, by phase")


def _ratio(x: float | None) -> str:
    return DASH if x is None else f"{x:.2f}x"


def _pct(x: float | None) -> str:
    return DASH if x is None else f"{100 * x:.1f}%"


def _num(x: float | None) -> str:
    return DASH if x is None else f"{x:.3f}"


#: The columns of an analysis cell's scores (factor count and retrieval), in ``_score_cells``'s order.
SCORE_COLUMNS = ("unknown rate", "score", "F1 Context1", "F1 Context2", "F1 Same")


def _score_cells(scores: TaskScores) -> list[str]:
    return [_pct(scores.unknown_rate), _num(scores.score),
            *(_num(scores.per_class_f1.get(k)) for k in ("Context1", "Context2", "Same"))]


def _factor_figure(doc: Document, ours: Ours) -> None:
    result = ours.factor_result()
    if result is None:
        return
    doc.table(["N factors", *SCORE_COLUMNS], [[str(p.n_factors), *_score_cells(p.scores)] for p in result.points],
              "rrrrrr")
    doc.bullets(result.notes)
    _figure(doc, ours, "factors", "factors.png", "Unknown rate and F1 against the number of factors")


def _retrieval_figure(doc: Document, ours: Ours) -> None:
    result = next((r for r in ours.analyses.values() if isinstance(r, RetrievalAnalysis)), None)
    if result is None:
        return
    rows = [[c.retriever, f"({c.k1}, {c.k2})", *_score_cells(c.scores)] for c in result.cells]
    doc.table(["Retriever", "(K1, K2)", *SCORE_COLUMNS], rows, "llrrrrr")
    doc.bullets(result.notes)
    _figure(doc, ours, "retrieval", "retrieval.png", "Unknown rate and per-class F1 per backend and (K1, K2)")


def _clustering_figure(doc: Document, ours: Ours) -> None:
    result = next((r for r in ours.analyses.values() if isinstance(r, ClusteringAnalysis)), None)
    if result is None:
        return
    rows = [[s.dataset, s.algorithm, str(s.n_spaces), _num(s.silhouette_mean), f"{s.clusters_mean:.1f}",
             f"{s.clusters_min}-{s.clusters_max}"] for s in result.summary]
    doc.table(["Dataset", "Algorithm", "Spaces", "Silhouette (mean)", "Clusters (mean)", "Clusters (range)"], rows,
              "llrrrr")
    doc.bullets(result.notes)
    _figure(doc, ours, "clustering", "clustering.png", "Silhouette and number of clusters by dataset and algorithm")


def settings_notes(source_id: str, selection: Selection, ours: Ours, estimator: str | None) -> list[str]:
    """Where the reproduction's setting differs from the paper's, for one table or figure."""
    n_pairs = {lr.metrics.n_instances for n, lr in ours.runs.items() if lr.metrics.dataset == "common2sense-pairwise"}
    pairs = "/".join(str(n) for n in sorted(n_pairs)) or "no finished run's"
    c2s = (f"Data: {pairs} Common2Sense pairs from the bundled test split of 350; the paper expanded the split "
           "to 530 with contrasting conditions, which are not public.")
    out: list[str] = [f"Model: ours is {ours.model_name or 'not known yet'}; the paper's cells shown are "
                      f"{selection.paper_model}'s where it has them (another model is named on its cell)."]
    if source_id in ("tab:main-results", "tab:ablation_results", "tab:bird_on_harbor", "fig:time_token_api_cost_left",
                     "fig:time_token_api_cost_right", "fig:retrieval_k_compare"):
        out.append(c2s)
    if source_id in ("tab:main-results", "tab:combined_comparison", "tab:ablation_results", "tab:bird_on_harbor",
                     "fig:time_token_api_cost_left"):
        out.append("Spaces: every run builds its own factor spaces and BIRD models (--spaces per-run, our reading "
                   "of the paper's runs), except where a run reuses another's, as said here.")
    if source_id == "tab:main-results":
        out.append("Random is the chance level of three classes; nothing is run for it. Logits needs a server that "
                   "returns log-probabilities.")
    if source_id == "tab:combined_comparison":
        covid = selection.data.get("covid")
        out.append("Data: ExpertQA is an approximation built from the ExpertQA release, not the LLM-AggreFact subset "
                   "the paper most likely used; its numbers are not comparable with the paper's.")
        out.append(f"Data: COVID-Fact from {covid.name if covid else 'the bundled 12-row sample (give --data covid=FILE for the full set)'}.")
        out.append("Sample: each fact-checking set is scored on the paper's seeded sample of 100 (seed 42)"
                   + (", of which --quick keeps the first" if selection.quick else "") + "; Today and Plasma are "
                   "scored whole" + (" (--quick: their first instances)" if selection.quick else "") +
                   ", with O1/O2 swapped for about half the scenarios (the bundled copies state every condition "
                   "for O1). BIRD's unknowns are answered by CoT, as in the paper.")
    if source_id == "tab:ablation_results":
        out.append("The full model is Table 1's ANCHOR run; the variants of stages 2-3 reuse its factor spaces, "
                   "w/o cluster builds its own (it changes the build).")
    if source_id == "tab:bird_on_harbor":
        out.append("BIRD‡ reuses BIRD†'s models; the transplant rows reuse the ANCHOR run's factor spaces. These four "
                   "runs each have a response cache of their own, so their mapping cost is that of requests they made "
                   "themselves.")
    if source_id == "fig:time_token_api_cost_left":
        out.append("Which BIRD the paper compares is not said; ours is BIRD† (strict mapping), whose run builds its "
                   "own models, as the ANCHOR run builds its spaces.")
    if source_id in ESTIMATOR_TABLES or source_id == "fig:factor-calibration":
        out.append(f"Estimator: {estimator or 'none given'} elicits phi and the latent parameters; the paper's is "
                   "GPT-4o-mini, against Qwen2.5-72B. The paper gives no sample size or run count.")
    if selection.quick:
        out.append(f"--quick: a tiny slice, the quick build sizes (16/4/4) and BIRD's CPT from {QUICK_BIRD_SAMPLES} "
                   "judged assignments (the paper's: 128); the numbers show the reproduction working, nothing about "
                   "the method.")
    return out

