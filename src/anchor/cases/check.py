"""Checking a cases file without answering it: one pass, a typed summary.

Memory holds one row at a time, plus a counter per group and the set of ids seen (for the duplicate
check): both grow with the file (about 100 bytes an id), nothing else does.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from anchor.cases.model import (
    COLUMN_FLAG,
    OPTIONAL_COLUMNS,
    CaseFormat,
    CaseLimits,
    CaseRow,
    RejectedRow,
)
from anchor.cases.stream import CaseSource, read_cases

#: Bad rows listed in a summary (all are counted).
MAX_LISTED_REJECTS = 10


class CaseCheck(BaseModel):
    """What one pass over a cases file found."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    format: CaseFormat
    rows: int = Field(ge=0, description="Data rows read, good and bad.")
    good: int = Field(ge=0)
    bad: int = Field(ge=0)
    labelled: int = Field(ge=0, description="Good rows with a label.")
    groups: int = Field(ge=0, description="Distinct (scenario, outcome1, outcome2) among good rows.")
    largest_group: int = Field(ge=0, description="Good rows in the largest group.")
    condition_chars: int = Field(ge=0, description="Characters of all good rows' conditions.")
    scenario_chars: int = Field(ge=0, description="Characters of each group's scenario and outcomes, once a group.")
    columns_found: list[str] = Field(description="The header (JSON: the first object's keys).")
    columns_used: dict[str, str] = Field(description="Canonical name -> the file's column read for it.")
    columns_ignored: list[str] = Field(description="Columns (JSON: keys in any row) that are not read.")
    ignored_not_named: int = Field(default=0, ge=0, description="Further ignored keys, counted only.")
    rejected: list[RejectedRow] = Field(description="The first bad rows, in file order.")
    notes: list[str] = Field(default_factory=list)
    duplicate_rows: dict[int, int] = Field(default_factory=dict, exclude=True, description=(
        "Every row rejected for an id an earlier row has (row -> that row's line): what a later pass over "
        "the same file needs instead of remembering every id. Not written out."))

    def lines(self) -> list[str]:
        """The summary for a terminal, one fact a line."""
        out = [
            f"{self.source} ({self.format}): {self.rows:,} rows, {self.good:,} good, {self.bad:,} bad; "
            f"{self.groups:,} groups (largest {self.largest_group:,} rows); {self.labelled:,} labelled",
            "columns: " + ", ".join(f"{name}={column}" if name != column else name
                                    for name, column in self.columns_used.items()),
        ]
        if self.columns_ignored:
            more = f" and {self.ignored_not_named} more" if self.ignored_not_named else ""
            out.append("ignored columns: " + ", ".join(self.columns_ignored) + more)
        out += [f"line {r.line}: {r.reason}" for r in self.rejected]
        if self.bad > len(self.rejected):
            out.append(f"... and {self.bad - len(self.rejected):,} more bad rows")
        return out + self.notes


def check_cases(
    source: CaseSource,
    *,
    format: str | None = None,
    columns: Mapping[str, str] | None = None,
    limits: CaseLimits | None = None,
    name: str | None = None,
    max_listed: int = MAX_LISTED_REJECTS,
) -> CaseCheck:
    """Read a cases file once and summarise it (rows, groups, labels, columns, the first bad rows).

    Raises :class:`~anchor.cases.model.CasesError` only for a file that cannot
    be read at all or a column mapping that does not fit it; bad rows are counted and listed.
    """
    stream = read_cases(source, format=format, columns=columns, limits=limits, name=name)
    group_rows: dict[str, int] = {}
    rejected: list[RejectedRow] = []
    labelled = condition_chars = scenario_chars = 0
    given: set[str] = set()  # optional fields some good row has a value for
    for item in stream:
        if isinstance(item, RejectedRow):
            if len(rejected) < max_listed:
                rejected.append(item)
            continue
        _count(item, group_rows)
        if group_rows[item.group] == 1:
            scenario_chars += len(item.scenario) + len(item.outcome1) + len(item.outcome2)
        labelled += item.label is not None
        condition_chars += len(item.condition)
        if len(given) < len(OPTIONAL_COLUMNS):
            given |= _given(item)
    notes = [f"{COLUMN_FLAG} {field}={column}: no good row has a value in {column!r}"
             for field, column in stream.mapped_columns.items()
             if field in stream.mapping and field in OPTIONAL_COLUMNS and field not in given and stream.good]
    if stream.rows and not stream.good:
        notes.append("no row is usable")
    return CaseCheck(
        source=stream.name, format=stream.format, rows=stream.rows, good=stream.good, bad=stream.bad,
        labelled=labelled, groups=len(group_rows), largest_group=max(group_rows.values(), default=0),
        condition_chars=condition_chars, scenario_chars=scenario_chars,
        columns_found=list(stream.header or []), columns_used=dict(stream.used_columns),
        columns_ignored=stream.ignored_columns, ignored_not_named=stream.ignored_overflow,
        rejected=rejected, notes=notes, duplicate_rows=stream.duplicates,
    )


def _count(row: CaseRow, group_rows: dict[str, int]) -> None:
    group_rows[row.group] = group_rows.get(row.group, 0) + 1


def _given(row: CaseRow) -> set[str]:
    """The optional fields this row has a value for."""
    given = set()
    if row.label is not None:
        given.add("label")
    if row.scenario:
        given.add("scenario")
    if row.id != f"row-{row.row}":
        given.add("id")
    if row.p_true is not None:
        given.add("p_true")
    return given
