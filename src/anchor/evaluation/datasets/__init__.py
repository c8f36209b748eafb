"""The benchmark datasets of the ANCHOR paper, loaded with strict validation: one module per family.

The data ships inside the package (``anchor/data/``, see ``data/PROVENANCE.md``) and is read through
``importlib.resources``; every loader also accepts a path to a file in the same format.

* :mod:`.decision`: Common2Sense, Plasma and Today (JSON arrays), one instance per condition;
* :mod:`.pairwise`: the Common2Sense human pairwise annotation (CSV);
* :mod:`.factcheck`: the fact-checking sets (JSON lines), read row by row;
* :mod:`.loading`: any of them by name; :mod:`.bundled`: the names and the packaged files;
* :mod:`.instances`: the instance types, scenario keys, grouping and outcome-order balancing;
* :mod:`.text`: whitespace, the repair of stored text and the template negation of a claim;
* :mod:`.negation`: a claim's negation asked of the LLM (``--negation llm``; imported by the runner only);
* :mod:`.reading`: reading a file and collecting its problems (:class:`DatasetError`);
* :mod:`.sampling` and :mod:`.selection`: the paper's seeded sample, and which instances a run scores.

Identifiers
-----------
Instance ids are ``"<dataset>:<entry>:<k>"`` for the JSON datasets (``entry`` = 0-based index in the
top-level array, ``k`` = 0-based index of the condition within the entry; for Common2Sense the
``added_information`` conditions come first, then ``oppo_added_information``),
``"common2sense-pairwise:<row>"`` (0-based data row, blank lines not counted) and
``"<dataset>:<record>"`` for JSON lines (0-based among non-blank lines). They depend only on the
file contents, never on run order.

Errors
------
For the JSON arrays and the CSV, a file that cannot be used raises :class:`DatasetError` (a
``ValueError``). Its message names the file and, for each problem, where it is: ``entry i (line
n)`` for JSON arrays, ``row i (line n)`` for the CSV (``i`` is the 0-based index used in the ids,
``n`` the 1-based physical line). Problems are collected over the whole file and the first ten are
reported together. A file that cannot be read (missing, not UTF-8) is reported the same way.

Fact-checking JSON lines are treated row by row: a bad row is skipped and returned as a
:class:`SkippedRow` (``line n`` and the problem) inside :class:`FactcheckData`, so a run can count
and record it; only a file that cannot be read or has no usable row raises :class:`DatasetError`.

Text clean-up
-------------
Whitespace is always normalised (runs collapsed, ends stripped), as :class:`anchor.types.Scenario`
does. With ``repair=True`` (the default) two defects found in today.json are also fixed, see
:func:`repair_text`: UTF-8 text that was decoded as GBK (``I鈥檓`` for ``I’m``, two rows) and HTML
markup left in a statement (``<b><font color="orange">``, two rows). Pass ``repair=False`` to get
the text as stored.
"""

from anchor.evaluation.datasets.bundled import (
    DATASET_NAMES,
    FACTCHECK_FILES,
    PAPER_FACTCHECK_SETS,
    bundled_file,
    is_factcheck_dataset,
)
from anchor.evaluation.datasets.decision import DecisionName, load_decision
from anchor.evaluation.datasets.factcheck import (
    DatasetWarning,
    FactcheckData,
    SkippedRow,
    factcheck_ids_name,
    load_factcheck,
    load_factcheck_data,
    load_factcheck_set,
)
from anchor.evaluation.datasets.instances import (
    DecisionInstance,
    PairwiseInstance,
    balance_outcome_order,
    group_by_scenario,
    scenario_key,
)
from anchor.evaluation.datasets.loading import load_dataset
from anchor.evaluation.datasets.pairwise import PAIRWISE_COLUMNS, load_pairwise
from anchor.evaluation.datasets.reading import MAX_REPORTED_PROBLEMS, DatasetError
from anchor.evaluation.datasets.text import negate_claim, repair_text

__all__ = [
    "DATASET_NAMES",
    "FACTCHECK_FILES",
    "MAX_REPORTED_PROBLEMS",
    "PAIRWISE_COLUMNS",
    "PAPER_FACTCHECK_SETS",
    "DatasetError",
    "DatasetWarning",
    "DecisionInstance",
    "DecisionName",
    "FactcheckData",
    "PairwiseInstance",
    "SkippedRow",
    "balance_outcome_order",
    "bundled_file",
    "factcheck_ids_name",
    "group_by_scenario",
    "is_factcheck_dataset",
    "load_dataset",
    "load_decision",
    "load_factcheck",
    "load_factcheck_data",
    "load_factcheck_set",
    "load_pairwise",
    "negate_claim",
    "repair_text",
    "scenario_key",
]
