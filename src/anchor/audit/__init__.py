"""Self-contained HTML audit views: a factor space, the explanation of conditions, and the index
of an evaluation run.

    from anchor.audit import space_html, space_page, explain_html, write_run_index
    html = explain_html(space, results)          # one file: no CDN, no fonts, nothing fetched
    space_page(space, "space.html")              # the factor space alone, written to a file
    write_run_index("runs/c2s-anchor")           # index.html + one page per instance

Only the run index carries a (small, inline) script, for filtering its rows; every page reads
fully with JavaScript disabled.
"""

from __future__ import annotations

from anchor.audit.pages import explain_html, space_html, space_page
from anchor.audit.runs import (
    IndexRow,
    RunIndexError,
    RunIndexResult,
    index_rows,
    read_traces,
    run_index_html,
    write_run_index,
)
from anchor.evaluation.results import TraceRecord
from anchor.files import PageWriteError

__all__ = [
    "IndexRow", "PageWriteError", "RunIndexError", "RunIndexResult", "TraceRecord", "explain_html", "index_rows", "read_traces",
    "run_index_html", "space_html", "space_page", "write_run_index",
]
