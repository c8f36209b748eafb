"""The live pages: ``/`` (jobs with their progress, the spaces, the latest answers with links to their
explanations) and ``/jobs/{id}`` (one job and its answered rows, each linking to its explanation page).

Rendered on the server with every text escaped; a small script fetches the same page again every few
seconds and swaps its ``<main>`` in (without JavaScript, the page reloads itself instead). Nothing is
loaded from elsewhere.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from anchor.audit.markup import esc, page, pct
from anchor.serve.body import JsonBodyRoute
from anchor.serve.engine import prediction_lines
from anchor.serve.errors import ApiError
from anchor.serve.routes import check_id, service_of
from anchor.serve.service import Service

router = APIRouter(route_class=JsonBodyRoute)
#: Rows of a job listed on its page (the results have them all).
ROWS_SHOWN = 1000
EXTRA_CSS = ("<style>progress{width:12em;vertical-align:middle} td.num{text-align:right;font-variant-numeric:"
             "tabular-nums} .state-running{color:#2c5d8f;font-weight:600} .state-failed{color:#a33} "
             "main table{border-collapse:collapse;width:100%} main td,main th{padding:3px 8px;border-bottom:"
             "1px solid #e3e6ea;text-align:left}</style>")
SCRIPT = """
(function(){var every=%d;function tick(){fetch(location.href,{headers:{'Accept':'text/html'}})
.then(function(r){return r.ok?r.text():null}).then(function(t){if(!t)return;
var doc=new DOMParser().parseFromString(t,'text/html');var fresh=doc.querySelector('main');
var old=document.querySelector('main');if(fresh&&old){old.replaceWith(fresh)}}).catch(function(){})
.then(function(){setTimeout(tick,every)})}setTimeout(tick,every)})();
"""


def _document(title: str, main: str, refresh: float) -> str:
    noscript = f'<noscript><meta http-equiv="refresh" content="{max(1, round(refresh))}"></noscript>'
    body = f"{noscript}{EXTRA_CSS}<header><h1>{esc(title)}</h1></header><main>{main}</main>"
    return page(title, body, script=SCRIPT % int(refresh * 1000))


def _link(href: str | None, text: str) -> str:
    return f'<a href="{esc(href)}">{esc(text)}</a>' if href else "–"


def _number(value: Any) -> str:
    return "–" if value is None else f"{value:,}" if isinstance(value, int) else esc(value)


def _job_row(view: dict[str, Any]) -> str:
    p = view["progress"]
    done, total = p.get("rows_done") or 0, p.get("rows_total") or 0
    left = p.get("seconds_left")
    jid = esc(view["id"])
    return (f'<tr data-job="{jid}"><td><a href="/jobs/{jid}">{jid}</a></td>'
            f'<td class="state-{esc(view["state"])}" data-field="state">{esc(view["state"])}</td>'
            f'<td data-field="progress"><progress value="{done}" max="{max(total, 1)}"></progress> '
            f'{done:,} / {total:,} rows</td><td class="num" data-field="requests">{_number(p.get("requests"))}</td>'
            f'<td class="num" data-field="tokens">{_number(p.get("tokens"))}</td>'
            f'<td class="num" data-field="left">{"–" if left is None else f"{left:,.0f} s"}</td>'
            f'<td>{esc(view["method"])}</td><td><a href="{esc(view["links"]["results"])}">JSONL</a> · '
            f'<a href="{esc(view["links"]["results_csv"])}">CSV</a></td></tr>')


def _whose(service: Service) -> str:
    """With --workers N, the status line's figures are the process's that shows the page: it says so."""
    n = service.settings.workers
    return f" by this process, one of {n}" if n > 1 else ""


def live_main(service: Service, answers: list[dict[str, Any]], pending: list[Any]) -> str:
    """The live page's content; ``answers`` and ``pending`` were taken on the event loop (which changes them)."""
    jobs = [service.jobs.view(j) for j in reversed(service.jobs.ids())]
    b = service.budget
    status = (f'<p class="muted" data-field="status">{esc(service.engine.model)} · anchor {esc(service.describe()["version"])}'
              f" · LLM requests in flight {b.in_flight} of {b.limit}, waiting {b.waiting()} · online cases waiting "
              f"{len(service.online.pending)} · answered {service.online.answered:,} since the start{_whose(service)}</p>")
    head = "<tr><th>job</th><th>state</th><th>progress</th><th>requests</th><th>tokens</th><th>time left</th>" \
           "<th>method</th><th>results</th></tr>"
    job_rows = "".join(_job_row(v) for v in jobs) or '<tr><td colspan="8" class="muted">no job yet</td></tr>'
    parts = [status, f'<h2 id="jobs">Jobs</h2><table id="job-table">{head}{job_rows}</table>']
    rows = []
    for rec in answers:
        link = rec.get("links", {}).get("explanation")
        aid = esc(rec["id"])
        p1 = rec.get("p_outcome1")
        rows.append(f'<tr data-answer="{aid}"><td><a href="/v1/predictions/{aid}">{aid}</a></td>'
                    f'<td class="num">{pct(p1) if p1 is not None else "unknown"}</td><td>{esc(rec.get("status", rec["state"]))}</td>'
                    f'<td>{esc(rec["case"]["condition"][:120])}</td>'
                    f'<td>{_link(link, "explanation")}</td></tr>')
    pending = [f'<tr><td>{esc(e.id)}</td><td class="num">…</td><td>pending ({esc(e.phase)})</td>'
               f'<td>{esc(e.request["condition"][:120])}</td><td>–</td></tr>' for e in pending]
    parts.append('<h2 id="answers">Latest predictions</h2><table><tr><th>id</th><th>P(O1)</th><th>status</th>'
                 f'<th>condition</th><th>explanation</th></tr>{"".join(pending + rows) or "<tr><td colspan=5 class=muted>none yet</td></tr>"}'
                 "</table>")
    listing = service.spaces.listing(50, 0)
    space_rows = "".join(
        f'<tr><td><a href="{esc(s["links"]["page"])}">{esc(s["id"])}</a></td>'
        f'<td>{esc((s["scenario"] or {}).get("text", "")[:100])}</td><td>{esc((s["scenario"] or {}).get("outcome1", "")[:60])}'
        f' / {esc((s["scenario"] or {}).get("outcome2", "")[:60])}</td><td class="num">{s["n_factors"]}</td>'
        f'<td>{esc(s["model"] or "")}</td></tr>' for s in listing["spaces"])
    building = "".join(f'<tr><td>{esc(b_["id"])}</td><td colspan="4">building…</td></tr>' for b_ in listing["building"])
    parts.append(f'<h2 id="spaces">Factor spaces ({listing["total"]:,} stored)</h2><table><tr><th>space</th>'
                 f'<th>scenario</th><th>outcomes</th><th>factors</th><th>model</th></tr>{building}'
                 f'{space_rows or "<tr><td colspan=5 class=muted>none stored</td></tr>"}</table>')
    return "".join(parts)


def job_main(service: Service, job_id: str) -> str:
    view = service.jobs.view(job_id)
    jid = esc(job_id)
    head = "<tr><th>job</th><th>state</th><th>progress</th><th>requests</th><th>tokens</th><th>time left</th>" \
           "<th>method</th><th>results</th></tr>"
    parts = [f'<p><a href="/">the service</a></p><table>{head}{_job_row(view)}</table>']
    if view.get("error"):
        parts.append(f'<p class="state-failed">{esc(view["error"])}</p>')
    if view.get("note"):
        parts.append(f'<p class="muted">{esc(view["note"])}</p>')
    rows = []
    for line in prediction_lines(service.state.run_dir(job_id)):
        if len(rows) >= ROWS_SHOWN:
            break
        rec = json.loads(line)
        rid = str(rec.get("id", ""))
        p1 = rec.get("p_outcome1")
        link = f"/v1/jobs/{jid}/rows/{esc(quote(rid, safe=''))}/explanation"
        why = rec.get("error") or ""
        rows.append(f'<tr data-row="{esc(rid)}"><td>{esc(rid)}</td><td class="num">{pct(p1) if p1 is not None else "unknown"}</td>'
                    f'<td>{esc(rec.get("status", ""))}</td><td>{esc(why[:160])}</td>'
                    f'<td><a href="{link}">explanation</a></td></tr>')
    parts.append(f'<h2 id="rows">Rows answered ({len(rows):,} shown)</h2><table><tr><th>id</th><th>P(O1)</th>'
                 f'<th>status</th><th>why unknown</th><th>explanation</th></tr>{"".join(rows)}</table>')
    return "".join(parts)


@router.get("/", response_class=HTMLResponse, tags=["pages"])
async def live(request: Request) -> HTMLResponse:
    """The live page: jobs with their progress, the spaces, the latest predictions."""
    service = service_of(request)
    await service.jobs.refresh()  # the jobs sent to the other processes too
    answers = (await asyncio.to_thread(service.state.latest_answers, 50) if service.shared  # every process's
               else list(reversed(service.online.recent.values()))[:50])
    pending = list(service.online.pending.values())[:50]
    main = await asyncio.to_thread(live_main, service, answers, pending)
    return HTMLResponse(_document("anchor serve", main, service.settings.page_refresh))


@router.get("/jobs/{job_id}", response_class=HTMLResponse, tags=["pages"])
async def job_page(job_id: str, request: Request) -> HTMLResponse:
    """One job's page: its progress and the rows answered so far, each linking to its explanation."""
    service = service_of(request)
    check_id(job_id)
    if not service.jobs.known(job_id):
        raise ApiError(404, f"no job {job_id!r}", field="id")
    main = await asyncio.to_thread(job_main, service, job_id)
    return HTMLResponse(_document(f"Job {job_id}", main, service.settings.page_refresh))
