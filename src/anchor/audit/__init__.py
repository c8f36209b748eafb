"""Self-contained HTML views of domain objects: a factor space, and the explanation of conditions
answered on it.

    from anchor.audit import space_html, space_page, explain_html
    html = explain_html(space, results)          # one file: no CDN, no fonts, nothing fetched
    space_page(space, "space.html")              # the factor space alone, written to a file

* :mod:`.pages`: the pages; :mod:`.figures`: their SVG figures (the embedding map, the latent
  network); :mod:`.markup`: escaping, tables, the page shell, shared by every page anchor writes.

The index of an evaluation run, which reads a run directory, is the evaluation report's:
:mod:`anchor.evaluation.report.run_index` (``write_run_index``). Every page reads fully with
JavaScript disabled.
"""

from __future__ import annotations

from anchor.audit.pages import explain_html, space_html, space_page
from anchor.files import PageWriteError

__all__ = ["PageWriteError", "explain_html", "space_html", "space_page"]
