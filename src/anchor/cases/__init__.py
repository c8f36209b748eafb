"""A user's own table of cases: the input of ``anchor predict``, read as a stream and checked row by row.

A cases file holds one case a row: ``scenario`` (may be empty, as in fact checking), ``outcome1``,
``outcome2``, ``condition``, and optionally ``id``, ``label`` (1, 2 or the text of the outcome that
holds) and ``p_true`` (the true P(outcome1), known for synthetic worlds: ``anchor truth make``). Other names map to these with ``columns={"condition": "Evidence"}`` (the CLI's repeatable
``--column condition=Evidence``); other columns are ignored and listed. docs/your-data.md is the
user's guide.

* :mod:`.model`: :class:`CaseRow`, :class:`RejectedRow`, the limits and the errors;
* :mod:`.formats`: CSV, TSV, JSON lines, JSON array and Parquet, each read as a stream of records;
* :mod:`.csvlines`: the lines of a CSV or TSV file, bounded by the row limit;
* :mod:`.columns`: the column mapping and the header check;
* :mod:`.validate`: a record becomes a :class:`CaseRow` or a :class:`RejectedRow`;
* :mod:`.stream`: :func:`read_cases`, one pass over a file in input order;
* :mod:`.check`: :func:`check_cases`, the summary of one pass without answering anything;
* :mod:`.bundled`: the example files and the JSON Schema of a row shipped in ``anchor/data/``.

Bad rows are never dropped: each comes out as a :class:`RejectedRow` (line, reason, field), or with
``strict=True`` the first raises :class:`BadCaseRow`. Rows are grouped by ``CaseRow.group``, the
:func:`~anchor.types.scenario_key` of (scenario, outcome1, outcome2), so a
group's key is the key of the factor space built for its scenario.
"""

from anchor.cases.bundled import (
    CASE_EXAMPLES,
    case_row_schema,
    example_file,
    schema_file,
)
from anchor.cases.check import MAX_LISTED_REJECTS, CaseCheck, check_cases
from anchor.cases.columns import check_column_mapping, parse_column_options
from anchor.cases.formats import PARQUET_EXTRA_HINT, detect_format
from anchor.cases.model import (
    CASE_COLUMNS,
    CASE_FORMATS,
    MAX_CONDITION_CHARS,
    MAX_ID_CHARS,
    MAX_ROW_BYTES,
    MAX_SCENARIO_CHARS,
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
    BadCaseRow,
    CaseFormat,
    CaseLimits,
    CasePrediction,
    CaseRow,
    CasesError,
    RejectedRow,
)
from anchor.cases.stream import CaseSource, CaseStream, read_cases

__all__ = [
    "CASE_COLUMNS",
    "CASE_EXAMPLES",
    "CASE_FORMATS",
    "MAX_CONDITION_CHARS",
    "MAX_ID_CHARS",
    "MAX_LISTED_REJECTS",
    "MAX_ROW_BYTES",
    "MAX_SCENARIO_CHARS",
    "OPTIONAL_COLUMNS",
    "PARQUET_EXTRA_HINT",
    "REQUIRED_COLUMNS",
    "BadCaseRow",
    "CaseCheck",
    "CaseFormat",
    "CaseLimits",
    "CasePrediction",
    "CaseRow",
    "CaseSource",
    "CaseStream",
    "CasesError",
    "RejectedRow",
    "case_row_schema",
    "check_cases",
    "check_column_mapping",
    "detect_format",
    "example_file",
    "parse_column_options",
    "read_cases",
    "schema_file",
]
