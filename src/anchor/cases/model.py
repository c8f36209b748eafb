"""What a cases file becomes: a :class:`CaseRow` per good row, a :class:`RejectedRow` per bad one, the
limits a row must keep, and the errors that stop a file."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from anchor.errors import AnchorError
from anchor.types import InferenceResult, Scenario

CaseFormat = Literal["csv", "tsv", "jsonl", "json", "parquet"]
CASE_FORMATS: tuple[CaseFormat, ...] = ("csv", "tsv", "jsonl", "json", "parquet")

#: The canonical columns, in the order a table shows them.
CASE_COLUMNS: tuple[str, ...] = ("id", "scenario", "outcome1", "outcome2", "condition", "label", "p_true")
#: The columns every row needs; ``scenario``, ``id``, ``label`` and ``p_true`` may be left out.
REQUIRED_COLUMNS: tuple[str, ...] = ("outcome1", "outcome2", "condition")
OPTIONAL_COLUMNS: tuple[str, ...] = ("id", "scenario", "label", "p_true")
TEXT_COLUMNS: tuple[str, ...] = ("scenario", "outcome1", "outcome2", "condition")

#: The flags the command line gives these settings, named in messages.
COLUMN_FLAG = "--column"
FORMAT_FLAG = "--input-format"

#: Longest condition accepted, in characters after whitespace normalisation. The longest bundled
#: document (AggreFact-CNN) has 10,569; 16,000 characters (about 5,300 tokens at the project's
#: estimate of 3 characters a token) still fit whole, with a prompt's own text and its answer, into
#: the default 8,192-token server window, so a condition under the limit is sent in full there.
#: Longer text is more likely a broken row (a quote that swallowed the lines after it) than a
#: condition; a user with long documents raises the limit and the prompts cut them to fit (see
#: docs/long-conditions.md).
MAX_CONDITION_CHARS = 16_000
#: Longest scenario or outcome accepted. They go into every prompt of their group and, unlike the
#: condition, are never cut to fit the context; the longest bundled one has 691 characters.
MAX_SCENARIO_CHARS = 4_000
#: Longest id accepted (ids name rows in outputs and file names).
MAX_ID_CHARS = 200
#: Largest row accepted, in bytes of the file (a CSV row's lines, a JSON line or array element, line
#: ends included). The default text limits make a row at most 28,200 characters: 113 KB in UTF-8 at
#: worst, 340 KB as JSON \u escapes; 1 MiB leaves room for the columns anchor does not read, and for a
#: condition limit raised to about 250,000 characters (a million of plain ASCII). A longer row is a bad
#: row, read past in chunks and never held whole: memory holds at most one row of this size, whatever
#: the file (an upload to the service may be 256 MiB, and one row of it used to be read whole).
MAX_ROW_BYTES = 1 << 20


class CaseLimits(BaseModel):
    """How long a row and its texts may be; a row over a limit is rejected, never cut."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_condition_chars: int = Field(default=MAX_CONDITION_CHARS, ge=1)
    max_scenario_chars: int = Field(default=MAX_SCENARIO_CHARS, ge=1)
    max_id_chars: int = Field(default=MAX_ID_CHARS, ge=1)
    max_row_bytes: int = Field(default=MAX_ROW_BYTES, ge=1)

    @classmethod
    def for_condition_chars(cls, chars: int) -> CaseLimits:
        """The default limits but for conditions of up to ``chars`` characters, with a row limit that
        holds such a condition: 4 bytes (UTF-8's longest character) more a character over the default."""
        return cls(max_condition_chars=chars, max_row_bytes=MAX_ROW_BYTES + 4 * max(0, chars - MAX_CONDITION_CHARS))


class CaseRow(BaseModel):
    """One good row of a cases file: a scenario, its two outcomes, one condition, maybe a label.

    Texts are whitespace-normalised (runs collapsed, ends stripped), as :class:`Scenario` does.
    ``group`` is the :func:`~anchor.types.scenario_key` of the row's
    scenario: rows with the same (scenario, outcome1, outcome2) share it, and so share one factor
    space.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    line: int = Field(ge=1, description="1-based physical line where the row starts (Parquet: the row number).")
    row: int = Field(ge=1, description="1-based data row, counting bad rows too: the input order.")
    id: str = Field(min_length=1, description="The input's id, or 'row-<row>' when the row has none.")
    scenario: str = Field(default="", description="May be empty, as in fact checking.")
    outcome1: str = Field(min_length=1)
    outcome2: str = Field(min_length=1)
    condition: str = Field(min_length=1)
    label: Literal[1, 2] | None = Field(default=None, description="The outcome that holds, when known.")
    p_true: float | None = Field(default=None, ge=0.0, le=1.0, description=(
        "The true P(outcome1 | condition), when known (a synthetic world's cases: anchor truth make)."))
    group: str = Field(pattern=r"^[0-9a-f]{16}$", description="scenario_key of (scenario, outcome1, outcome2).")

    def to_scenario(self) -> Scenario:
        return Scenario(text=self.scenario, outcome1=self.outcome1, outcome2=self.outcome2)

    @property
    def gold_outcome(self) -> str | None:
        if self.label is None:
            return None
        return self.outcome1 if self.label == 1 else self.outcome2


class RejectedRow(BaseModel):
    """One bad row: where it is, what is wrong, and which field (a canonical column name) when one is."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    line: int = Field(ge=1, description="1-based physical line where the row starts (Parquet: the row number).")
    row: int = Field(ge=1, description="1-based data row, counting bad rows too.")
    id: str | None = Field(default=None, description="The row's id when it could be read.")
    field: str | None = Field(default=None, description="The canonical column at fault, if one is.")
    reason: str = Field(min_length=1, description="One line.")

    def message(self) -> str:
        return f"line {self.line}: {self.reason}"


class CasePrediction(BaseModel):
    """What ``Anchor.predict`` gives for one row of a cases file: the answer, or why there is none.

    ``status``: ``ok`` (a probability), ``unknown`` (the method abstained: nothing mapped, or below
    ``tau``), ``failed`` (no usable answer from the LLM, or the scenario's space could not be built)
    or ``rejected`` (a bad row, never asked: ``reason`` says what is wrong with it).
    """

    model_config = ConfigDict(extra="forbid")

    line: int = Field(ge=1, description="Line of the file where the row starts (Parquet: its row number).")
    row: int = Field(ge=1, description="1-based data row, counting bad rows too: the input order.")
    id: str | None = Field(default=None, description="The row's id (None for a bad row without a readable one).")
    label: Literal[1, 2] | None = None
    group: str | None = Field(default=None, description="The key of the row's scenario (and factor space).")
    status: Literal["ok", "unknown", "failed", "rejected"]
    reason: str | None = Field(default=None, description="Why there is no probability.")
    result: InferenceResult | None = Field(default=None, description="The full answer with its audit trail.")

    @property
    def p_outcome1(self) -> float | None:
        return None if self.result is None else self.result.p_outcome1

    @property
    def p_outcome2(self) -> float | None:
        return None if self.result is None else self.result.p_outcome2

    @property
    def factors(self) -> list[str]:
        """The texts of the factors the condition was mapped to."""
        return [] if self.result is None else [f.text for f in self.result.factors]


class CasesError(AnchorError, ValueError):
    """A cases file cannot be read at all (or a column mapping is wrong): one line, naming the file."""


class BadCaseRow(CasesError):
    """Raised in strict mode at the first bad row; ``rejected`` holds its line and reason."""

    def __init__(self, source: str, rejected: RejectedRow) -> None:
        self.source = source
        self.rejected = rejected
        super().__init__(f"{source}: {rejected.message()}")

    @property
    def line(self) -> int:
        return self.rejected.line

    @property
    def reason(self) -> str:
        return self.rejected.reason

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, (self.source, self.rejected))
