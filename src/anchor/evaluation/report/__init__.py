"""Turn finished evaluation run directories into a Markdown report with PNG plots.

Each run directory holds ``config.json`` (:class:`RunConfig`) and ``metrics.json`` (:class:`MetricsReport`),
as written by ``anchor eval``. :func:`build_report` reads any number of them, of any kind, and writes
``report.md`` with tables laid out like the paper's:

* pairwise F1 per dataset (the paper's Table 1), plus the same scores on covered pairs only;
* decision accuracy / fact-check balanced accuracy with coverage, one column per dataset, the four
  fact-checking sets first in the paper's order (ExpertQA, XSum, COVID, CNN) (Table 2);
* ablation variants against the full ANCHOR run on the same dataset and model (Table 3);
* LLM cost per stage and per instance (the cost-analysis figure), and calibration numbers;
* for runs whose rows carry a true probability (the cases of ``anchor truth make``), the scores against
  the truth beside the label-based ones (:mod:`.truth_table`).

Two plots go next to it: ``cost_per_stage.png`` and ``reliability.png``. A plot with no data behind it is
not drawn; the Markdown says so (and a stale file of that name from an earlier report is removed).

Honesty markers that every table carries: runs on the embedded 135M model are tagged (§) and announced in
bold at the top, because their numbers only show that the pipeline runs; the Factor-based baseline is an
oracle (†) and is flagged as an unfair comparison; direct-decision baselines carry ⋆ as in the paper; the
bundled ExpertQA set, an approximation of the paper's, carries ‡ and its caveat wherever its numbers appear.

One module per part: :mod:`.loading` reads a run directory; :mod:`.shared` scores the runs of one dataset on the
instances they all scored, when they scored different ones; :mod:`.runs` names the runs;
:mod:`.names` and :mod:`.markdown` hold the paper's names, the marks and the cell formats;
:mod:`.tables` the header, runs, Tables 1-3 and calibration; :mod:`.transplant` Table 4;
:mod:`.cost_table` the cost section; :mod:`.truth_table` the scores against the truth; :mod:`.cost_plot` and :mod:`.reliability_plot` one figure each;
:mod:`.build` puts them together (:func:`build_report`).

Beside the Markdown report, the HTML one of a single run: :mod:`.run_index` reads a run directory
into ``index.html`` and one explanation page per instance (:func:`write_run_index`), and
:mod:`.index_page` draws the index.

Plots are drawn on :class:`matplotlib.figure.Figure` objects rendered by the Agg canvas directly, without
``pyplot``: nothing is registered in pyplot's global figure list (so nothing can leak or pop up), the
process-wide backend is left untouched, and no display is ever needed.
"""

from anchor.evaluation.report.build import (
    COST_PLOT,
    RELIABILITY_PLOT,
    REPORT_FILE,
    ReportResult,
    build_report,
)
from anchor.evaluation.report.loading import LoadedRun, ReportError, load_run
from anchor.evaluation.report.markdown import format_delta, format_mean_std
from anchor.evaluation.report.names import display_name
from anchor.evaluation.report.run_index import (
    IndexRow,
    RunIndexError,
    RunIndexResult,
    index_rows,
    read_traces,
    run_index_html,
    write_run_index,
)

__all__ = [
    "COST_PLOT",
    "RELIABILITY_PLOT",
    "REPORT_FILE",
    "IndexRow",
    "LoadedRun",
    "ReportError",
    "ReportResult",
    "RunIndexError",
    "RunIndexResult",
    "build_report",
    "display_name",
    "format_delta",
    "format_mean_std",
    "index_rows",
    "load_run",
    "read_traces",
    "run_index_html",
    "write_run_index",
]
