"""Small HTML building blocks shared by the audit pages: escaping, number formats, the page shell
with its inline stylesheet, and the cost table.

Everything here returns strings. Every piece of text that came from outside the program (a
scenario, a factor, a condition, a theme, a file name, an error message) goes through ``esc``.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from anchor.llm.ledger import merge_costs
from anchor.types import FactorLabel, StageCost

LABEL_SHORT = {FactorLabel.OUTCOME1: "O1", FactorLabel.OUTCOME2: "O2", FactorLabel.NEUTRAL: "neutral"}
LABEL_CLASS = {FactorLabel.OUTCOME1: "o1", FactorLabel.OUTCOME2: "o2", FactorLabel.NEUTRAL: "neu"}

#: Colours for the two outcomes (text, SVG strokes) and for neutral.
O1_COLOUR = "#1a7a3c"
O2_COLOUR = "#b3311f"
NEUTRAL_COLOUR = "#6b6f76"


def esc(text: object) -> str:
    """Text for an HTML text node or a quoted attribute value.

    Besides the usual escaping, ``://`` is written as ``&#58;//``: the browser shows the same
    characters, but the file then holds no literal ``http://`` string, so a page stays clean for a
    plain search for external references even when a factor or an error message quotes a URL.
    """
    return html.escape(str(text), quote=True).replace("://", "&#58;//")


def num(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def pct(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{100 * value:.{digits}f}%"


def label_chip(label: FactorLabel) -> str:
    return f'<span class="lab {LABEL_CLASS[label]}">{LABEL_SHORT[label]}</span>'


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, cls: str = "", caption: str = "",
          numeric: Iterable[int] = (), attrs: str = "") -> str:
    """A table from already-escaped cells; ``numeric`` lists the columns to right-align."""
    right = set(numeric)
    head = "".join(f'<th{" class=num" if i in right else ""}>{h}</th>' for i, h in enumerate(headers))
    body = []
    for row in rows:
        body.append("<tr>" + "".join(f'<td{" class=num" if i in right else ""}>{c}</td>'
                                     for i, c in enumerate(row)) + "</tr>")
    cap = f"<caption>{caption}</caption>" if caption else ""
    klass = f' class="{cls}"' if cls else ""
    return f"<table{klass}{attrs}>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def cost_table(costs: Sequence[StageCost], caption: str = "LLM cost per stage", ident: str = "") -> str:
    rows = list(costs)
    if not rows:
        return f'<p class="muted" data-cost="{esc(ident)}">{esc(caption)}: no LLM calls recorded.</p>'
    out = []
    for c in rows + merge_costs(rows, label="total"):
        cells = [esc(c.stage), "–" if c.logical_requests is None else str(c.logical_requests), str(c.llm_calls),
                 str(c.failed_attempts), str(c.cache_hits), str(c.prompt_tokens), str(c.completion_tokens),
                 f"{c.llm_seconds:.2f}"]
        if c.stage == "total":
            cells = [f"<b>{cell}</b>" for cell in cells]
        out.append(cells)
    return table(["stage", "requests", "attempts", "failed", "cache hits", "prompt tokens", "completion tokens",
                  "LLM s"], out, cls="cost", caption=esc(caption), numeric=range(1, 8), attrs=f' data-cost="{esc(ident)}"')


def prob_bar(p: float | None) -> str:
    """A horizontal bar split at P(O1): the O1 share on the left, the O2 share on the right."""
    if p is None:
        return '<div class="bar empty" aria-hidden="true"></div>'
    return (f'<div class="bar" aria-hidden="true"><span class="b1" style="width:{100 * p:.1f}%"></span>'
            f'<span class="b2" style="width:{100 * (1 - p):.1f}%"></span></div>')


CSS = f"""
:root{{--o1:{O1_COLOUR};--o2:{O2_COLOUR};--neu:{NEUTRAL_COLOUR};--ink:#1d2127;--muted:#5d646e;--line:#d7dbe0;
--soft:#f4f6f8;--accent:#2c5d8f}}
*{{box-sizing:border-box}}
html{{-webkit-print-color-adjust:exact;print-color-adjust:exact}}
body{{margin:0 auto;max-width:1180px;padding:18px 22px 40px;color:var(--ink);background:#fff;
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}}
h1{{font-size:1.45em;margin:.2em 0 .3em}} h2{{font-size:1.2em;margin:1.4em 0 .5em;padding-top:.5em;
border-top:2px solid var(--line)}} h3{{font-size:1.02em;margin:1em 0 .35em}} h4{{font-size:.95em;margin:.8em 0 .3em}}
a{{color:var(--accent)}} .muted{{color:var(--muted)}} .small{{font-size:.88em}}
nav.toc{{font-size:.9em;margin:.4em 0 1em;color:var(--muted)}} nav.toc a{{margin-right:.9em}}
.scenario{{background:var(--soft);border:1px solid var(--line);border-radius:6px;padding:10px 14px;margin:.6em 0}}
.scenario p{{margin:.25em 0}} .key{{font-weight:600}}
.lab{{display:inline-block;min-width:2.6em;text-align:center;border-radius:3px;padding:0 4px;font-size:.78em;
font-weight:700;color:#fff;margin-right:4px;vertical-align:1px}}
.lab.o1{{background:var(--o1)}} .lab.o2{{background:var(--o2)}} .lab.neu{{background:var(--neu)}}
.t-o1{{color:var(--o1)}} .t-o2{{color:var(--o2)}} .t-neu{{color:var(--neu)}}
.stats{{display:flex;flex-wrap:wrap;gap:6px 22px;margin:.4em 0;padding:0;list-style:none}}
.stats li b{{font-variant-numeric:tabular-nums}}
.themes{{display:grid;grid-template-columns:repeat(auto-fill,minmax(340px,1fr));gap:10px;margin:.5em 0}}
.theme{{border:1px solid var(--line);border-left:6px solid var(--tc,#999);border-radius:5px;padding:6px 10px;
break-inside:avoid}}
.theme h3{{margin:.1em 0 .3em}} .theme ul{{margin:0;padding:0;list-style:none}}
.theme li{{margin:2px 0}} .votes{{color:var(--muted);font-size:.82em;white-space:nowrap;
font-variant-numeric:tabular-nums}}
.pruned{{color:var(--muted);font-size:.88em;margin-top:4px}} .pruned s{{text-decoration-color:#999}}
table{{border-collapse:collapse;margin:.4em 0 .8em;font-size:.92em}} caption{{text-align:left;font-weight:600;
padding:2px 0 4px}}
th,td{{border-bottom:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}}
th{{background:var(--soft);font-weight:600}} td.num,th.num{{text-align:right;font-variant-numeric:tabular-nums}}
tr.pass td{{background:#eef7f0}} tr.removed td{{background:#fbf1ee}}
figure{{margin:.6em 0 1em;break-inside:avoid}} figcaption{{color:var(--muted);font-size:.88em;margin-top:2px}}
svg{{max-width:100%;height:auto;font-family:inherit}}
.legend{{display:flex;flex-wrap:wrap;gap:4px 16px;list-style:none;padding:0;margin:.3em 0;font-size:.88em}}
.sw{{display:inline-block;width:11px;height:11px;border-radius:50%;margin-right:5px;vertical-align:-1px}}
.cond{{margin-top:1.2em}}
.verdict{{font-size:1.15em;margin:.3em 0 .6em}} .verdict .unknown{{color:#8a5a00;font-weight:700}}
.posteriors{{display:grid;grid-template-columns:repeat(3,minmax(180px,1fr));gap:10px;margin:.5em 0 1em}}
.post{{border:1px solid var(--line);border-radius:6px;padding:8px 12px;break-inside:avoid}}
.post.pooled{{border-color:var(--accent);box-shadow:inset 0 0 0 1px var(--accent)}}
.post.off{{opacity:.55}}
.post h4{{margin:0 0 .2em}} .post .p{{font-size:1.5em;font-weight:700;font-variant-numeric:tabular-nums}}
.post .w{{color:var(--muted);font-size:.88em}} .post .pl{{font-size:.6em;font-weight:400;color:var(--muted)}}
.bar{{display:flex;height:9px;border-radius:4px;overflow:hidden;background:var(--soft);margin:5px 0;
border:1px solid var(--line)}}
.bar .b1{{background:var(--o1)}} .bar .b2{{background:var(--o2)}} td .bar{{width:140px}}
.funnel-strip{{display:flex;flex-wrap:wrap;align-items:stretch;gap:0;margin:.5em 0 .8em;padding:0;list-style:none}}
.funnel-strip li{{background:var(--soft);border:1px solid var(--line);padding:4px 10px;margin-right:18px;
position:relative;border-radius:4px;font-size:.9em}}
.funnel-strip li:not(:last-child)::after{{content:"\\2192";position:absolute;right:-15px;top:4px;
color:var(--muted)}}
.funnel-strip b{{font-size:1.1em}}
ol.funnel{{padding-left:1.3em}} ol.funnel>li{{margin:.2em 0 .7em}} ol.funnel>li>h4{{margin:.1em 0 .25em}}
td.y{{color:var(--o1);font-weight:700;text-align:center}} td.n{{color:#b9bec5;text-align:center}}
.status{{font-weight:700;font-size:.82em;border-radius:3px;padding:0 5px;white-space:nowrap}}
.status.correct{{background:#e1f2e6;color:#1a6a35}} .status.wrong{{background:#f8e2de;color:#9c2a19}}
.status.unknown{{background:#f6ecd5;color:#7a5200}} .status.answered{{background:#e4ebf5;color:#27466e}}
.state{{font-size:.82em;font-weight:700;white-space:nowrap}} .state.failed{{color:#9c2a19}}
.state.abstained{{color:#7a5200}} table.runs td.err.abstained{{color:var(--muted)}}
.filters{{margin:.6em 0;padding:6px 10px;background:var(--soft);border:1px solid var(--line);border-radius:5px}}
.filters label{{margin-right:14px;white-space:nowrap}}
table.runs td.cond-text{{max-width:430px}} table.runs td.num{{white-space:nowrap}} table.runs td.err{{max-width:260px;color:#8a3b12;font-size:.88em}}
.cols{{display:grid;grid-template-columns:1fr 1fr;gap:16px}}
footer{{margin-top:2.5em;color:var(--muted);font-size:.85em;border-top:1px solid var(--line);padding-top:.5em}}
@media (max-width:800px){{.posteriors,.cols{{grid-template-columns:1fr}}}}
@media print{{
body{{max-width:none;padding:0;font-size:10.5pt}} nav.toc,.filters,.noprint{{display:none !important}}
a{{color:inherit;text-decoration:none}} h2{{break-before:auto;break-after:avoid}} h3,h4{{break-after:avoid}}
table,figure,.post,.theme,.scenario{{break-inside:avoid}} tr{{break-inside:avoid}}
.themes{{grid-template-columns:1fr 1fr}} .posteriors{{grid-template-columns:repeat(3,1fr)}}
@page{{margin:14mm}}
}}
"""


def page(title: str, body: str, *, script: str = "") -> str:
    """A complete document: the inline stylesheet, the body, and optionally one inline script."""
    js = f"<script>{script}</script>" if script else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>"
        f"<body>{body}{js}</body></html>\n"
    )
