"""The package's example cases files and the JSON Schema of one case row (``anchor/data/``).

:func:`case_row_schema` builds the schema from the reader's own names and limits; the shipped file
``data/cases.schema.json`` is that schema written out (a test keeps the two equal).
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from anchor.cases.model import (
    MAX_CONDITION_CHARS,
    MAX_ID_CHARS,
    MAX_SCENARIO_CHARS,
    REQUIRED_COLUMNS,
    CasesError,
)

#: Example files by name (folder ``data/examples/``).
CASE_EXAMPLES: dict[str, str] = {
    "decisions": "decisions.csv",
    "factcheck": "factcheck.csv",
}
SCHEMA_FILE = "cases.schema.json"


def example_file(name: str) -> Traversable:
    """The packaged example cases file ``name`` (one of :data:`CASE_EXAMPLES`)."""
    if name not in CASE_EXAMPLES:
        raise CasesError(f"unknown example {name!r}; the examples are {', '.join(CASE_EXAMPLES)}")
    return resources.files("anchor").joinpath("data").joinpath("examples").joinpath(CASE_EXAMPLES[name])


def schema_file() -> Traversable:
    return resources.files("anchor").joinpath("data").joinpath(SCHEMA_FILE)


def _text(description: str, max_chars: int, *, required: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"description": description, "maxLength": max_chars}
    if required:
        spec |= {"type": "string", "minLength": 1, "pattern": r"\S"}
    else:
        spec["type"] = ["string", "null"]
    return spec


def case_row_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one case row, as the reader accepts it.

    What it cannot say: a label given as text must equal one outcome's text; a p_true given as text
    must read as a number in [0, 1]; ids are unique; the outcomes differ; lengths are counted after
    whitespace normalisation.
    """
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "One case for anchor predict",
        "description": (
            "A scenario, two competing outcomes and one condition, with an optional id, label and true "
            "probability. Column "
            "names other than these are ignored. Texts are compared and measured after whitespace "
            "normalisation (runs collapsed, ends stripped). Beyond this schema the reader also rejects a "
            "row whose outcomes are the same text (ignoring case, Unicode compatibility forms (NFKC) and "
            "invisible characters such as zero-width spaces), a repeated id, an id holding a control "
            "character (a NUL, a tab, a line break), a label given as "
            "text that is not one outcome's text, and a p_true given as text that is not a number in [0, 1]."
        ),
        "type": "object",
        "required": list(REQUIRED_COLUMNS),
        "properties": {
            "id": {
                "description": "The row's id, unique in the file; a whole number is read as text. Without "
                               "one a row is named row-<n> (its 1-based data row).",
                "type": ["string", "integer", "null"],
                "maxLength": MAX_ID_CHARS,
            },
            "scenario": _text("The situation; may be empty (fact checking).", MAX_SCENARIO_CHARS, required=False),
            "outcome1": _text("The first outcome (O1).", MAX_SCENARIO_CHARS, required=True),
            "outcome2": _text("The competing outcome (O2).", MAX_SCENARIO_CHARS, required=True),
            "condition": _text("The condition of this case (for fact checking: the evidence).",
                               MAX_CONDITION_CHARS, required=True),
            "label": {
                "description": "The outcome that holds, when known: 1 or 2 (number or text; '1.0' and "
                               "'2.0' too), or the exact text of outcome1 or outcome2. Empty or null means "
                               "unlabelled.",
                "anyOf": [{"enum": [1, 2, None]}, {"type": "string"}],
            },
            "p_true": {
                "description": "The true probability of outcome1 given the condition, when it is known (the "
                               "cases of a synthetic world, `anchor truth make`): a number in [0, 1], or text "
                               "that reads as one. Empty or null means unknown.",
                "anyOf": [{"type": "number", "minimum": 0, "maximum": 1}, {"type": "null"}, {"type": "string"}],
            },
        },
        "additionalProperties": True,
    }
