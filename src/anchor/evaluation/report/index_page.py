"""The run index page (``index.html`` of a run directory) and the head of each instance's page.

:mod:`.run_index` reads a run directory into :class:`IndexRow` objects, one per instance and run;
this module turns them into HTML (with the page parts of :mod:`anchor.audit`). Every outside string (ids, conditions, claims, reasons, model
names) goes through ``esc``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from anchor.audit.markup import esc, num, page, table
from anchor.audit.pages import footer
from anchor.rundir.records import Kind, RunCalibration, RunConfig

# "answered": a prediction with no label to score it against (a user's unlabelled case).
Status = Literal["correct", "wrong", "unknown", "answered"]
STATUSES: tuple[Status, ...] = ("correct", "wrong", "unknown", "answered")


class IndexRow(BaseModel):
    """One row of the run index: an instance in one run."""

    run: int
    id: str
    kind: Kind
    conditions: list[str] = Field(default_factory=list, description="One, or two for a pairwise instance.")
    claim: str | None = Field(default=None, description="Fact checking: the claim checked (outcome 1); the "
                                                        "condition is its evidence.")
    gold: str
    prediction: str
    probabilities: list[tuple[str, float | None]] = Field(default_factory=list,
                                                           description="(what, value) pairs, for display.")
    unknown: bool = False
    state: Literal["ok", "abstained", "failed"] = Field(
        default="ok", description="The prediction's own status: abstained (the method said unknown) or failed "
                                  "(no usable answer, e.g. the server was unreachable).")
    error: str | None = Field(default=None, description=(
        "Why there is no answer: the method's reason when it abstained, the error when it failed."))
    fallback: str | None = Field(default=None, description=(
        "The method that answered instead after this one said unknown (BIRD's CoT fallback), if any."))
    status: Status
    page: str | None = Field(default=None, description="Relative link to the explanation page, if any.")


FILTER_SCRIPT = """(function(){
var box=document.getElementById("filters"),rows=document.querySelectorAll("#rows tbody tr"),
shown=document.getElementById("shown"),boxes=box.querySelectorAll("input[type=checkbox]");
function fromHash(){var h=location.hash.slice(1);
if(h==="correct"||h==="wrong"||h==="unknown"||h==="answered"){boxes.forEach(function(b){b.checked=b.value===h;});}}
function apply(){var on={},n=0;boxes.forEach(function(b){on[b.value]=b.checked;});
rows.forEach(function(r){var show=on[r.getAttribute("data-status")]===true;r.hidden=!show;if(show){n++;}});
shown.textContent=n+" of "+rows.length+" rows shown";}
box.hidden=false;fromHash();apply();
box.addEventListener("change",apply);
window.addEventListener("hashchange",function(){fromHash();apply();});
})();"""


MISSING = '<span class="muted">–</span>'


def _run_summary(config: RunConfig) -> str:
    llm = config.llm or {}
    data = ("cases file", config.data_path or "?") if config.kind == "cases" else ("dataset", config.dataset)
    items = [data, ("task", config.kind), ("method", config.method),
             ("ablations", ", ".join(config.ablations) or "none"), ("runs", str(config.runs)),
             ("seed", str(config.seed)),
             ("LLM", f"{llm.get('model', '?')} ({llm.get('backend', '?')})"),
             ("anchor", config.anchor_version)]
    if config.kind == "factcheck":
        items.append(("support threshold", f"{config.decision_threshold:g}"))
    return '<ul class="stats">' + "".join(f"<li>{esc(k)}: <b>{esc(v)}</b></li>" for k, v in items) + "</ul>"


def _state_cell(row: IndexRow) -> str:
    """The 'unknown' column: why there is no answer (abstained, failed), or 'yes' for an unknown
    without a recorded status; a fallback answer after an abstention shows the state too."""
    if row.fallback:
        return f'<span class="state abstained">abstained</span> <span class="muted">answered by {esc(row.fallback)}</span>'
    if row.state != "ok":
        return f'<span class="state {row.state}">{row.state}</span>'
    return "yes" if row.unknown and row.status == "unknown" else ""


def _unknown_split(rows: Sequence[IndexRow]) -> str:
    failed = sum(1 for r in rows if r.status == "unknown" and r.state == "failed")
    abstained = sum(1 for r in rows if r.status == "unknown" and r.state != "failed")
    if not failed:
        return ""
    return f' <span class="muted">(of the unknown: {failed} failed, {abstained} abstained)</span>'


def calibration_html(cal: RunCalibration) -> str:
    """The run's held-out calibration figures (``DIR/calibration.json``, from ``anchor calibrate report``)."""
    names = {"none": "raw (before)"}
    rows = [[esc(names.get(r.calibrator, r.calibrator)), num(r.brier), num(r.log_loss), num(r.ece),
             num(r.ece_equal_mass), num(r.decision)] for r in cal.rows]
    folds = f"{cal.n_folds} folds grouped by scenario" if cal.n_folds else "not cross-validated (too few scenarios)"
    small = " Numbers from the embedded 135M model: a pipeline check only." if cal.small_model else ""
    aurc = (f"<p>Risk–coverage of this run: AURC <b>{num(cal.aurc)}</b> up to coverage "
            f"<b>{num(cal.max_coverage)}</b>.</p>") if cal.aurc is not None else ""
    notes = "".join(f'<p class="muted small note">{esc(n)}</p>' for n in cal.notes)
    plots = ", ".join(esc(p) for p in cal.plots)
    return (f'<section class="calibration"><h2>Calibration, held out</h2>'
            f"<p>{esc(cal.method)} with model {esc(cal.model)} on {esc(cal.dataset)}: {cal.n_answered} of {cal.n} "
            f"instance(s) answered; {esc(folds)}; decision metric: {esc(cal.decision_metric)}.{esc(small)}</p>"
            + table(["calibrator", "Brier", "log loss", "ECE", "ECE (equal mass)", "decision"], rows,
                    numeric=range(1, 6))
            + aurc + notes
            + f'<p class="muted small">From {esc(cal.report)} ({esc(cal.generated)}); plots: {plots}.</p></section>')


def run_index_html(
    rows: Sequence[IndexRow],
    *,
    title: str = "ANCHOR evaluation run",
    config: RunConfig | None = None,
    notes: Sequence[str] = (),
    calibration: RunCalibration | None = None,
) -> str:
    """The run index as one self-contained page. Rows carry ``data-status`` (correct, wrong or
    unknown); the only script shows the filter boxes and hides unticked rows; ``index.html#wrong``
    opens with one status ticked. Without JavaScript every row shows and the boxes stay hidden."""
    counts = {s: sum(1 for r in rows if r.status == s) for s in STATUSES}
    multi_run = len({r.run for r in rows}) > 1
    pairwise = any(r.kind == "pairwise" for r in rows)
    factcheck = any(r.kind == "factcheck" for r in rows)
    # Fact checking: the claim is what is checked, the condition is its evidence. "reason" holds why
    # there is no answer (an abstention's reason or a failure's error).
    heads = (["run"] if multi_run else []) + ["id", *(["claim", "evidence"] if factcheck else
                                                      ["conditions" if pairwise else "condition"]),
                                               "gold", "prediction", "probabilities", "unknown", "reason", "result", ""]
    body_rows = []
    for r in rows:
        if r.conditions:
            if len(r.conditions) > 1:
                conds = "".join(f'<div><span class="muted">u{i}:</span> {esc(c)}</div>'
                                for i, c in enumerate(r.conditions, 1))
            else:
                conds = esc(r.conditions[0])
        else:
            conds = MISSING
        probs = "<br>".join(f'<span class="muted">{esc(k)}</span> {num(v)}' for k, v in r.probabilities) or "–"
        link = f'<a href="{esc(r.page)}">explain</a>' if r.page else '<span class="muted">–</span>'
        claim = ([f'<td class="cond-text">{esc(r.claim) if r.claim else MISSING}</td>'] if factcheck else [])
        cells = ([f'<td class="num">{r.run}</td>'] if multi_run else []) + [
            f"<td>{esc(r.id)}</td>", *claim, f'<td class="cond-text">{conds}</td>', f"<td>{esc(r.gold)}</td>",
            f"<td>{esc(r.prediction)}</td>", f'<td class="num">{probs}</td>',
            f"<td>{_state_cell(r)}</td>", f'<td class="err {r.state}">{esc(r.error) if r.error else ""}</td>',
            f'<td><span class="status {r.status}">{r.status}</span></td>', f"<td>{link}</td>"]
        body_rows.append(f'<tr class="{r.status}" data-status="{r.status}" data-state="{r.state}">'
                         f'{"".join(cells)}</tr>')
    head = "".join(f'<th{" class=num" if h in ("run", "probabilities") else ""}>{esc(h)}</th>' for h in heads)
    filters = (
        '<div class="filters" id="filters" hidden>Show: '
        + "".join(f'<label><input type="checkbox" value="{s}" checked> {s} ({counts[s]})</label>' for s in STATUSES
                  if s != "answered" or counts[s])
        + ' <span id="shown" class="muted"></span></div>')
    summary = (f'<p class="counts"><b>{len(rows)}</b> row(s): <span class="status correct">{counts["correct"]} '
               f'correct</span> <span class="status wrong">{counts["wrong"]} wrong</span> '
               f'<span class="status unknown">{counts["unknown"]} unknown</span>{_unknown_split(rows)}'
               + (f' <span class="status answered">{counts["answered"]} answered without a label</span>'
                  if counts["answered"] else "") + "</p>")
    note_html = ("".join(f'<p class="muted small note">{esc(n)}</p>' for n in notes)) if notes else ""
    table_html = (f'<table class="runs" id="rows"><thead><tr>{head}</tr></thead>'
                  f'<tbody>{"".join(body_rows)}</tbody></table>' if rows
                  else '<p class="muted">No predictions yet.</p>')
    parts = [f"<header><h1>{esc(title)}</h1>", _run_summary(config) if config else "", "</header>", summary,
             note_html, calibration_html(calibration) if calibration else "", filters, table_html, footer()]
    return page(title, "".join(parts), script=FILTER_SCRIPT if rows else "")


def instance_intro(row: IndexRow, index_href: str) -> str:
    """The head of an instance's explanation page: what was asked, the answer, and why there is none."""
    probs = " · ".join(f"{esc(k)} {num(v)}" for k, v in row.probabilities)
    why = "Error" if row.state == "failed" else "Reason"
    err = f'<p class="small">{why}: {esc(row.error)}</p>' if row.error else ""
    claim = f"<li>claim: <b>{esc(row.claim)}</b></li>" if row.claim else ""
    return (f'<p><a href="{esc(index_href)}">← back to the run index</a></p>'
            f'<ul class="stats"><li>instance <b>{esc(row.id)}</b></li><li>run <b>{row.run}</b></li>{claim}'
            f"<li>gold: <b>{esc(row.gold)}</b></li><li>prediction: <b>{esc(row.prediction)}</b></li>"
            f"<li>{probs}</li>"
            f'<li><span class="status {row.status}">{row.status}</span> {_state_cell(row)}</li></ul>{err}')
