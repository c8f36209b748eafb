"""The row check: a record's values become a :class:`CaseRow`, or a :class:`RejectedRow` with the
first problem found (one line) and the field at fault.

Values may come as text (CSV, TSV), JSON values or Parquet values. Text fields take text only
(bytes are decoded as UTF-8); an id may also be a whole number, and holds no control character; a
label is 1 or 2 (number or text) or the exact text of one outcome; ``p_true`` is a probability in
[0, 1] (number or text). A missing optional value (absent, null, NaN, empty text) means "none": no
scenario text, a generated id ``row-<n>``, no label, no true probability.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import ValidationError

from anchor.cases.columns import ResolvedColumns
from anchor.cases.formats import RawRecord
from anchor.cases.model import (
    REQUIRED_COLUMNS,
    TEXT_COLUMNS,
    CaseLimits,
    CaseRow,
    RejectedRow,
)
from anchor.text import kind_of, normalise_space, same_text, validation_message
from anchor.types import Scenario, scenario_key

#: What an id may not hold: control characters (C0, DEL, C1: a NUL, a tab, a line break), which a table,
#: a terminal or a URL shows as nothing or breaks on. The one rule for ids of a cases file, an upload to
#: the service and an online case alike (the service's own ids are narrower still).
ID_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
# "1.0" is how pandas writes a label column that has gaps (a float column).
_LABEL_NUMBERS: dict[str, Literal[1, 2]] = {"1": 1, "2": 2, "1.0": 1, "2.0": 2}
_ABSENT = object()


class _Bad(Exception):
    """A row's problem, raised inside the check and turned into a RejectedRow."""

    def __init__(self, field: str | None, reason: str) -> None:
        self.field = field
        self.reason = reason


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or (
        isinstance(value, str) and not value.strip())


def _text(field: str, value: Any) -> str:
    """A text value, decoded and checked for bytes that are not UTF-8, whitespace not yet normalised."""
    if type(value) is not str:
        if not isinstance(value, str | bytes | bytearray):
            raise _Bad(field, f"{field} must be text, got {kind_of(value)}")
        if not isinstance(value, str):
            try:
                return bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                raise _Bad(field, f"{field} is not valid UTF-8 text") from None
    if not value.isascii():
        try:
            # Bytes that were not UTF-8 are surrogate escapes here (CSV), and a JSON "\ud800" is a lone
            # surrogate: neither can be written back as UTF-8.
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _Bad(field, f"{field} is not valid UTF-8 text (bytes that are not characters)") from None
    return value


#: Scenarios whose cleaned texts and key a checker keeps (then it starts again): memory that does not
#: grow with the file, and every group of most files.
SCENARIOS_REMEMBERED = 4096


class RowChecker:
    """Checks rows in input order; remembers each id's first line to reject duplicates, unless told which
    rows are duplicates (``duplicates``: row -> the line of its id's first row, as a whole pass over the
    same file found them), which spares a second pass the memory of every id."""

    def __init__(self, columns: ResolvedColumns, limits: CaseLimits, duplicates: Mapping[int, int] | None = None
                 ) -> None:
        self.columns = columns.used
        self.limits = limits
        self._first_line: dict[str, int] = {}
        self._known_duplicates = duplicates
        self.duplicates: dict[int, int] = {}
        """The rows rejected for an id seen before, and the line of its first row (as ``duplicates``)."""
        # The scenario texts of the groups seen lately, cleaned, and their keys: a group's rows repeat them,
        # and cleaning and hashing them again for every row was most of the cost of reading a large file.
        self._clean: dict[tuple[str, str], str] = {}
        self._keys: dict[tuple[str, str, str], str] = {}

    def check(self, record: RawRecord, row: int) -> CaseRow | RejectedRow:
        if record.values is None:
            return RejectedRow(line=record.line, row=row, reason=record.problem or "cannot be read")
        row_id: str | None = None
        try:
            row_id = self._id(record.values, row)
            self._register(row_id, record.line, row)
            texts = {name: self._text_field(record.values, name) for name in TEXT_COLUMNS}
            if same_text(texts["outcome1"], texts["outcome2"]):
                raise _Bad("outcome2", "outcome1 and outcome2 are the same text")
            label = self._label(record.values, texts["outcome1"], texts["outcome2"])
            p_true = self._p_true(record.values)
            return CaseRow(line=record.line, row=row, id=row_id, label=label, p_true=p_true,
                           group=self._group(texts["scenario"], texts["outcome1"], texts["outcome2"]), **texts)
        except _Bad as bad:
            return RejectedRow(line=record.line, row=row, id=row_id, field=bad.field, reason=bad.reason)
        except ValidationError as exc:  # a case the checks above missed: still one line, never a crash
            return RejectedRow(line=record.line, row=row, id=row_id, reason=validation_message(exc))

    def _value(self, values: dict[str, Any], name: str) -> Any:
        column = self.columns.get(name)
        return None if column is None else values.get(column)

    def _id(self, values: dict[str, Any], row: int) -> str:
        value = self._value(values, "id")
        if _missing(value):
            row_id = f"row-{row}"
        elif isinstance(value, int) and not isinstance(value, bool):
            row_id = str(value)
        elif isinstance(value, float) and value.is_integer():
            row_id = str(int(value))  # a whole number stored as a float (a Parquet column with gaps)
        elif isinstance(value, str | bytes | bytearray):
            row_id = _text("id", value).strip()
        else:
            raise _Bad("id", f"id must be text or a whole number, got {kind_of(value)}")
        control = ID_CONTROL.search(row_id)
        if control is not None:
            raise _Bad("id", f"id holds a control character (U+{ord(control.group()):04X})")
        if len(row_id) > self.limits.max_id_chars:
            raise _Bad("id", f"id has {len(row_id):,} characters, over the limit of {self.limits.max_id_chars:,}")
        return row_id

    def _register(self, row_id: str, line: int, row: int) -> None:
        # Every row's id counts, a bad row's too: an id names one row of the input, answered or not.
        if self._known_duplicates is not None:
            first = self._known_duplicates.get(row)
        else:
            first = self._first_line.get(row_id)
            if first is None:
                self._first_line[row_id] = line
        if first is not None:
            self.duplicates[row] = first
            raise _Bad("id", f"duplicate id {row_id!r} (first on line {first})")

    def _text_field(self, values: dict[str, Any], name: str) -> str:
        column = self.columns.get(name)
        if column is None:  # no scenario column
            return ""
        value = values.get(column, _ABSENT)
        if value is _ABSENT and name in REQUIRED_COLUMNS:
            raise _Bad(name, f"missing {name} (no {column!r} in this row)")
        if value is _ABSENT or value is None or (type(value) is float and math.isnan(value)):
            if name in REQUIRED_COLUMNS:
                raise _Bad(name, f"{name} is empty (null)")
            return ""
        remembered = name != "condition" and type(value) is str
        text = self._clean.get((name, value)) if remembered else None
        if text is None:
            text = normalise_space(_text(name, value))
            if remembered and text:
                if len(self._clean) >= SCENARIOS_REMEMBERED:
                    self._clean.clear()
                self._clean[(name, value)] = text
        if not text and name in REQUIRED_COLUMNS:
            raise _Bad(name, f"{name} is empty")
        limit = self.limits.max_condition_chars if name == "condition" else self.limits.max_scenario_chars
        if len(text) > limit:
            raise _Bad(name, f"{name} has {len(text):,} characters, over the limit of {limit:,}")
        return text

    def _label(self, values: dict[str, Any], outcome1: str, outcome2: str) -> Literal[1, 2] | None:
        value = self._value(values, "label")
        if _missing(value):
            return None
        if isinstance(value, bool):
            raise _Bad("label", "label must be 1, 2 or the text of one outcome, got a boolean")
        if isinstance(value, int | float):
            if value in (1, 2):
                return 1 if value == 1 else 2
            raise _Bad("label", f"label must be 1, 2 or the text of one outcome, got {value!r}")
        text = normalise_space(_text("label", value))
        by_text = 1 if text == outcome1 else 2 if text == outcome2 else None
        by_number = _LABEL_NUMBERS.get(text)
        if by_number is not None and by_text is not None and by_number != by_text:
            raise _Bad("label", f"label {text!r} is ambiguous: it is outcome {by_text}'s text and the number "
                                f"of outcome {by_number}")
        label = by_number or by_text
        if label is None:
            shown = text if len(text) <= 60 else text[:57] + "..."
            raise _Bad("label", f"label {shown!r} is neither 1, 2 nor the text of outcome1 or outcome2")
        return label

    def _p_true(self, values: dict[str, Any]) -> float | None:
        value = self._value(values, "p_true")
        if _missing(value):
            return None
        if isinstance(value, bool):
            raise _Bad("p_true", "p_true must be a probability in [0, 1], got a boolean")
        if isinstance(value, int | float):
            number = float(value)
        elif not isinstance(value, str | bytes | bytearray):
            raise _Bad("p_true", f"p_true must be a probability in [0, 1], got {kind_of(value)}")
        else:
            text = _text("p_true", value).strip()
            try:
                number = float(text)
            except ValueError:
                shown = text if len(text) <= 30 else text[:27] + "..."
                raise _Bad("p_true", f"p_true must be a probability in [0, 1], got {shown!r}") from None
        if not 0.0 <= number <= 1.0:  # NaN fails this too
            raise _Bad("p_true", f"p_true must be a probability in [0, 1], got {value!r}")
        return number

    def _group(self, text: str, outcome1: str, outcome2: str) -> str:
        triple = (text, outcome1, outcome2)
        key = self._keys.get(triple)
        if key is None:
            key = scenario_key(Scenario(text=text, outcome1=outcome1, outcome2=outcome2))
            if len(self._keys) >= SCENARIOS_REMEMBERED:
                self._keys.clear()
            self._keys[triple] = key
        return key
