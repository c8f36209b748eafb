"""``DIR/report.md`` and ``DIR/report.html``: the reproduction, with the paper's numbers beside ours.

The report is made from what the run directories hold (their ``config.json``, ``metrics.json`` and
``calls.jsonl``) and the analyses' results, never from the process that ran them: running the same
command again on a finished reproduction rewrites it byte for byte, and a reproduction that was
killed and resumed ends with the report of one that was not, apart from the measured times (each
marked "wall time"), which no two executions share. It holds no date, no duration and no server
address.

Sections: what was run and how it differs from the paper; the paper's claims checked on our numbers
(:mod:`anchor.reproduce.claims`); each selected table and figure, one cell per line beside the
paper's (:mod:`anchor.reproduce.sections`); and the runs, with their state and cost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from pydantic import BaseModel

from anchor.analysis.clustering import ClusteringAnalysis
from anchor.analysis.estimator import EstimatorAnalysis
from anchor.analysis.factors import FactorCountAnalysis
from anchor.analysis.retrieval import RetrievalAnalysis
from anchor.files import write_atomic
from anchor.reproduce import estimate as est
from anchor.reproduce.cells import Ours
from anchor.reproduce.claims import FACTOR_TREND, ClaimCheck, check_claim, check_factor_trend
from anchor.reproduce.document import Document, to_html, to_markdown
from anchor.reproduce.plan import ANALYSES_FOLDER, RUNS_FOLDER, Plan
from anchor.reproduce.published import PublishedCell, PublishedNumbers, load_published
from anchor.reproduce.sections import DASH, settings_notes, source_section
from anchor.reproduce.selection import PAIRWISE

FACTORS = f"factors-{PAIRWISE}"
REPORT_MD = "report.md"
REPORT_HTML = "report.html"
LOADERS: dict[str, Callable[[Path], BaseModel]] = {
    "factors": lambda p: FactorCountAnalysis.model_validate_json(p.read_text(encoding="utf-8")),
    "retrieval": lambda p: RetrievalAnalysis.model_validate_json(p.read_text(encoding="utf-8")),
    "clustering": lambda p: ClusteringAnalysis.model_validate_json(p.read_text(encoding="utf-8")),
    "estimator": lambda p: EstimatorAnalysis.model_validate_json(p.read_text(encoding="utf-8")),
}
STATE_WORDS = {"finished": "finished", "empty": "finished, with nothing to compare (its cells say why)",
               "started": "not finished (run the command again to go on)", "new": "not run yet",
               "stopped": "not run: the budget stopped the reproduction before it",
               "paused": "started (its pilot ran), then the budget stopped the reproduction; run again with a larger "
                         "budget to finish it",
               "failed": "stopped with an error", "waiting": "not run: it reuses a run that stopped with an error"}


class ReportFiles(BaseModel):
    markdown: Path
    html: Path


def _reasons(states: Mapping[str, str], errors: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for name, state in states.items():
        if state not in ("finished", "empty"):
            out[name] = STATE_WORDS.get(state, state) + (f": {errors[name]}" if name in errors else "")
    return out


def _chance(cell: PublishedCell) -> float | None:
    return cell.value if cell.method == "random" else None


def check_claims(plan: Plan, published: PublishedNumbers, ours: Ours,
                 others: Mapping[str, Ours] | None = None) -> list[ClaimCheck]:
    """The claims of the selected tables and figures, checked on our numbers (headline claims first), and on
    ``others``: reproductions of other paper models (by model), for the claims that compare two."""
    sources = set(plan.selection.sources)
    lookups = {model: ours.lookup_in(other, model) for model, other in (others or {}).items()}
    out = []
    for claim in sorted((c for c in published.claims if c.source in sources), key=lambda c: not c.headline):
        factors = ours.factor_result()
        if claim.id == FACTOR_TREND and factors is not None:
            out.append(check_factor_trend(claim, [(p.n_factors, p.scores.unknown_rate, p.scores.score)
                                                  for p in factors.points], f"{ANALYSES_FOLDER}/{FACTORS}"))
        else:
            out.append(check_claim(claim, published, ours.value, plan.selection.runs, _chance,
                                   model=plan.selection.paper_model, others=lookups))
    return out


def _claims_section(doc: Document, checks: list[ClaimCheck]) -> None:
    doc.heading(1, "The paper's claims, on these numbers", anchor="claims")
    if not checks:
        doc.para("The selected tables and figures state no claim.")
        return
    doc.para("Each claim as the paper states it, checked on the means over our runs (and run by run where there "
             "are several). A comparison within one of the paper's models is made on our model; one across two "
             "models needs runs standing for both, and is not checked without them. A size ('about 0.74x') is "
             "checked against the paper's figure with the tolerance shown. 'Indicative' marks a claim whose table "
             "the paper based on more runs than ours.")
    for headline in (True, False):
        rows = [[c.claim.statement, c.paper, c.ours, c.verdict, c.compared or DASH,
                 "; ".join(x for x in (c.caveat, "uses a measured time (wall time)" if c.timed else "",
                                        c.claim.note) if x)]
                for c in checks if c.claim.headline == headline]
        if rows:
            doc.heading(2, "Headline claims" if headline else "Other claims")
            doc.table(["Claim", "Paper", "Ours", "Verdict", "Compared", "Note"], rows, "llllll")


def _runs_section(doc: Document, plan: Plan, out_dir: Path, ours: Ours, states: Mapping[str, str],
                  errors: Mapping[str, str]) -> None:
    doc.heading(1, "Runs", anchor="runs")
    rows = []
    for run in plan.runs:
        loaded = ours.runs.get(run.name)
        spent = est.spent_in(out_dir / RUNS_FOLDER / run.name)
        size = f"{loaded.metrics.n_instances} x {loaded.metrics.n_runs}" if loaded else "–"
        reuse = f"spaces of {run.spaces_from}" if run.spaces_from else ""
        if run.own_cache:
            reuse = ", ".join(x for x in (reuse, "own cache") if x)
        state = STATE_WORDS.get(states.get(run.name, "new"), "")
        if run.name in errors:
            state += f": {errors[run.name]}"
        rows.append([f"{RUNS_FOLDER}/{run.name}", run.label, ", ".join(run.parts), size, reuse or "–", state,
                     f"{spent.requests:,}", f"{spent.attempts:,}", f"{spent.tokens:,}"])
    for a in plan.analyses:
        spent = est.spent_in(out_dir / ANALYSES_FOLDER / a.name)
        state = STATE_WORDS.get(states.get(a.name, "new"), "")
        if a.name in errors:
            state += f": {errors[a.name]}"
        rows.append([f"{ANALYSES_FOLDER}/{a.name}", f"anchor analyze {a.analysis}", ", ".join(a.parts),
                     f"{a.limit or 'all'} x {a.runs}", "shared cache", state,
                     f"{spent.requests:,}", f"{spent.attempts:,}", f"{spent.tokens:,}"])
    doc.table(["Directory", "What", "For", "Instances x runs", "Reuses", "State", "Requests", "Attempts", "Tokens"],
              rows, "llllllrrr")
    total = est.spent_in(out_dir)
    doc.bullets([
        f"In all: {total.requests:,} requests in {total.attempts:,} attempts and {total.tokens:,} tokens "
        "(prompt + completion, as the server reported them), from the ledgers (calls.jsonl) of the runs. A request "
        "is counted once however many attempts it took (what --budget-requests caps); the attempts add the "
        "retries after a server's transient failure (HTTP 429 or 5xx, a time-out) and refused request formats.",
        "A request that an earlier run had already made was answered from the reproduction's response cache "
        "(DIR/cache) and is not counted again; each run directory can be reported, costed or explained on its own "
        "(anchor report, anchor cost, anchor explain).",
        "Measured times (marked 'wall time') are the one kind of number that differs between two executions "
        "of the same runs: the rest of this report is the same for a reproduction run in one go or killed and "
        "resumed.",
    ])


def build_report(plan: Plan, out_dir: Path, *, model: str, small: bool, states: Mapping[str, str],
                 errors: Mapping[str, str] | None = None, estimator: str | None = None) -> ReportFiles:
    """Write ``report.md``, ``report.html`` and the figures of the reproduction in ``out_dir``."""
    errors = dict(errors or {})
    out_dir = Path(out_dir)
    published = load_published()
    ours = Ours.read(plan, out_dir, _reasons(states, errors), LOADERS)
    ours.model_name = model + (" §" if small else "")
    s = plan.selection
    doc = Document(title=f"ANCHOR reproduced on {model}")
    if small:
        doc.para("§ Numbers from the embedded 135M-parameter model: they show the reproduction working, not "
                 "whether the method's claims hold. Point --base-url at a real model for that.", strong=True)
    picked = ", ".join(published.source(x).label for x in s.sources)
    doc.para(f"Reproduced: {picked}. Model: {model}. Runs: {s.runs} of every method. Slice: "
             + ("--quick (a few instances per dataset)." if s.quick else "the paper's (see each table's notes).")
             + f" Paper cells: those of {s.paper_model} unless the cell names another model."
             + "".join(f" Claims comparing two models also read {m}'s runs from {d}."
                       for m, d in s.model_runs.items()))
    doc.bullets([f"{name}: {STATE_WORDS.get(state, state)}" for name, state in states.items()
                 if state != "finished"][:20])
    others = {model: Ours.read(plan, folder, loaders=LOADERS) for model, folder in s.model_runs.items()}
    checks = check_claims(plan, published, ours, others)
    _claims_section(doc, checks)
    for source_id in s.sources:
        source = published.source(source_id)
        source_section(doc, source, published, ours, s, settings_notes(source_id, s, ours, estimator), out_dir)
    _runs_section(doc, plan, out_dir, ours, states, errors)
    md = out_dir / REPORT_MD
    html = out_dir / REPORT_HTML
    write_atomic(md, to_markdown(doc))
    write_atomic(html, to_html(doc, out_dir))
    return ReportFiles(markdown=md, html=html)
