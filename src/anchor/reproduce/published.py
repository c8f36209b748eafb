"""The paper's published numbers, read from the package (``anchor/data/paper/``).

``published.csv`` holds one row per numeric cell of the paper's result tables (and the few figure
numbers the text states); ``published.json`` holds the tables and figures they come from, the
paper's settings (data sizes, sample, runs, hyperparameters) and its claims as checkable
comparisons between cells. ``PROVENANCE.md`` beside them says how they were extracted.

Names follow the harness: ``method`` is an ``anchor eval --method`` name (``random`` is the paper's
chance row, which has none), ``variant`` an ablation name (``anchor eval --ablation``) or a
``--stage``, ``dataset`` a ``--dataset`` name and ``metric`` the key of ``metrics.json`` or of the
analysis result that reproduces the cell (:data:`DERIVED_METRICS` lists the ratios and differences
that no single run reports). The paper's own row and column labels are kept beside them.

Values are stored as printed, in the unit the paper prints (:data:`UNITS`);
:meth:`PublishedCell.in_metric_scale` converts percentages to the 0-1 scale of ``metrics.json``.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Unit = Literal["fraction", "percent", "points", "ratio", "statistic", "p-value"]
#: What each unit means; ``percent`` and ``points`` are divided by 100 for the ``metrics.json`` scale.
UNITS: dict[str, str] = {
    "fraction": "a score or F1 on 0-1, as metrics.json stores it",
    "percent": "a share or score in %",
    "points": "a difference of two percentages, in percentage points",
    "ratio": "one cost over another (x times)",
    "statistic": "a distance or divergence, as the analysis reports it",
    "p-value": "a test's p-value",
}
#: Metrics no single run reports: how each is derived from runs.
DERIVED_METRICS: dict[str, str] = {
    "f1_micro_delta": "the variant's f1_micro minus the full model's (Table 3's subscripts)",
    "mapping_tokens_ratio": "mapping-stage tokens per prediction over the BIRD-relaxed baseline's (Table 4)",
    "mapping_seconds_ratio": "mapping-stage wall time per prediction over the BIRD-relaxed baseline's (Table 4)",
    "seconds_ratio": "ANCHOR's wall time per scenario over BIRD's (anchor cost)",
    "tokens_ratio": "ANCHOR's tokens per scenario over BIRD's (anchor cost)",
    "calls_ratio": "ANCHOR's logical requests per scenario over BIRD's (anchor cost; retries not counted)",
    "difference": "the estimator model's headline score minus the main model's (anchor analyze estimator)",
}
Comparison = Literal["greater", "less", "above", "below", "within", "about", "qualitative"]
MatchField = Literal["dataset", "model", "metric"]

DATA_PACKAGE = "anchor"
DATA_FOLDER = ("data", "paper")
CELLS_FILE = "published.csv"
META_FILE = "published.json"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _decimals(text: str) -> int:
    return len(text.partition(".")[2])


class PublishedCell(_Frozen):
    """One number of the paper: where it is (table, row, column, model) and what it is."""

    table: str = Field(description="The LaTeX label of the table or figure, e.g. tab:main-results.")
    method: str
    variant: str = Field(default="", description="Ablation (--ablation) or --stage name; empty for the method itself.")
    dataset: str
    metric: str
    model: str = Field(default="", description="The paper's model name; empty for the chance row.")
    value: float
    std: float | None = None
    decimals: int = Field(ge=0, description="Digits after the decimal point, as printed.")
    unit: Unit
    runs: int | None = Field(default=None, ge=1, description="Runs behind the value, where the paper says.")
    row_label: str
    column_label: str
    source_line: int = Field(ge=1, description="1-based line of the value in the paper's .tex file.")
    std_line: int | None = Field(default=None, ge=1)
    note: str = ""

    @model_validator(mode="after")
    def _std_has_a_line(self) -> PublishedCell:
        if (self.std is None) != (self.std_line is None):
            raise ValueError(f"{self.key}: std and std_line go together")
        return self

    @property
    def row(self) -> str:
        """``method`` or ``method:variant``."""
        return f"{self.method}:{self.variant}" if self.variant else self.method

    @property
    def key(self) -> str:
        """Unique name of the cell, used by the claims: ``table|row|dataset|metric|model``."""
        return "|".join((self.table, self.row, self.dataset, self.metric, self.model))

    def in_metric_scale(self) -> float:
        """The value on the scale a run reports (percentages and points divided by 100)."""
        return self.value / 100 if self.unit in ("percent", "points") else self.value

    def std_in_metric_scale(self) -> float | None:
        if self.std is None:
            return None
        return self.std / 100 if self.unit in ("percent", "points") else self.std

    def text(self) -> str:
        """The cell as the paper prints it (without its marks), e.g. ``0.606 ± 0.030`` or ``87.77%``."""
        out = f"{self.value:.{self.decimals}f}"
        if self.std is not None:
            out += f" ± {self.std:.{self.decimals}f}"
        return out + ("%" if self.unit == "percent" else "")


class PublishedSetting(_Frozen):
    """A setting the paper states (a data size, the sample, a hyperparameter)."""

    name: str
    value: float
    text: str = Field(description="As printed.")
    unit: str
    option: str = Field(default="", description="The CLI option that sets it, if any.")
    datasets: tuple[str, ...] = Field(default=(), description="Where it applies; empty for every dataset.")
    model: str = Field(default="", description="The model it applies to; empty for every model.")
    source_line: int = Field(ge=1)
    note: str = ""

    @property
    def key(self) -> str:
        return "|".join((self.name, ",".join(self.datasets), self.model))


class PublishedSource(_Frozen):
    """A table or figure of the paper, and what of it is (and is not) in the data."""

    id: str = Field(description="Its LaTeX label.")
    kind: Literal["table", "figure"]
    number: str = Field(description="Its number in the compiled paper, by caption order (3a = a sub-figure).")
    lines: tuple[int, int] = Field(description="First and last line of it in the .tex file.")
    datasets: tuple[str, ...] = ()
    title: str
    reproduced_by: str = Field(default="", description="The command that produces its counterpart.")
    settings: tuple[str, ...] = Field(default=(), description="Names of the settings behind it.")
    note: str = ""
    missing: tuple[str, ...] = Field(default=(), description="What it shows that is not in the data (image only).")

    @property
    def label(self) -> str:
        return f"{self.kind.capitalize()} {self.number}"


class Claim(_Frozen):
    """A claim of the paper as a comparison between cells (or with a threshold, in the cells' unit).

    * ``greater`` / ``less``: every subject cell is above / below every reference cell that agrees
      with it on the ``match`` fields;
    * ``above`` / ``below``: every subject cell is above / below ``threshold``;
    * ``within``: every subject cell is within ``tolerance`` of ``threshold``;
    * ``about``: a size, not only a direction: every subject cell is within ``tolerance`` (a fraction:
      0.25 is 25 %) of the paper's own value of that cell, as "about 0.74x the time" states it;
    * ``qualitative``: a statement about a figure whose values are not published; nothing to compare.
    """

    id: str
    source: str
    headline: bool = Field(default=False, description="One of the paper's headline results.")
    statement: str
    comparison: Comparison
    subject: tuple[str, ...] = ()
    reference: tuple[str, ...] = ()
    match: tuple[MatchField, ...] = ()
    threshold: float | None = None
    tolerance: float | None = Field(default=None, ge=0, description=(
        "within: in the cells' unit; about: a fraction of each cell's published value."))
    runs: int | None = Field(default=None, ge=1)
    stated: str = Field(default="", description="The number as the text states it, where it does.")
    source_lines: tuple[int, ...] = ()
    note: str = ""

    @model_validator(mode="after")
    def _complete(self) -> Claim:
        c = self.comparison
        if c == "qualitative":
            if self.subject or self.reference:
                raise ValueError(f"claim {self.id}: a qualitative claim compares no cells")
            return self
        if not self.subject:
            raise ValueError(f"claim {self.id}: no subject cells")
        if c in ("greater", "less") and not self.reference:
            raise ValueError(f"claim {self.id}: '{c}' needs reference cells")
        if c in ("above", "below", "within") and self.threshold is None:
            raise ValueError(f"claim {self.id}: '{c}' needs a threshold")
        if c in ("within", "about") and self.tolerance is None:
            raise ValueError(f"claim {self.id}: '{c}' needs a tolerance")
        if c == "about" and self.threshold is not None:
            raise ValueError(f"claim {self.id}: 'about' compares each cell with its published value, not a threshold")
        return self


class PublishedNumbers(_Frozen):
    """Everything in ``anchor/data/paper``, checked for consistency when built."""

    paper_sha256: str
    cells: tuple[PublishedCell, ...]
    sources: tuple[PublishedSource, ...]
    settings: tuple[PublishedSetting, ...]
    claims: tuple[Claim, ...]

    @model_validator(mode="after")
    def _consistent(self) -> PublishedNumbers:
        _unique((c.key for c in self.cells), "cell")
        _unique((s.id for s in self.sources), "source")
        _unique((s.key for s in self.settings), "setting")
        _unique((c.id for c in self.claims), "claim")
        sources = {s.id for s in self.sources}
        for cell in self.cells:
            if cell.table not in sources:
                raise ValueError(f"cell {cell.key}: no source {cell.table!r}")
        names = {s.name for s in self.settings}
        for source in self.sources:
            for name in source.settings:
                if name not in names:
                    raise ValueError(f"source {source.id}: no setting {name!r}")
        keys = self.by_key
        for claim in self.claims:
            if claim.source not in sources:
                raise ValueError(f"claim {claim.id}: no source {claim.source!r}")
            for key in (*claim.subject, *claim.reference):
                if key not in keys:
                    raise ValueError(f"claim {claim.id}: no cell {key!r}")
            if claim.threshold is not None and len({keys[k].unit for k in claim.subject}) > 1:
                raise ValueError(f"claim {claim.id}: a threshold needs subject cells of one unit")
            if claim.comparison in ("greater", "less"):
                paired = self.pairs(claim)
                unpaired = ({*claim.subject} - {a for a, _ in paired}) | ({*claim.reference} - {b for _, b in paired})
                if unpaired:
                    raise ValueError(f"claim {claim.id}: cells with nothing to compare to: {sorted(unpaired)}")
        return self

    # ------------------------------------------------------------------ lookup

    @property
    def by_key(self) -> dict[str, PublishedCell]:
        return {c.key: c for c in self.cells}

    def find(self, **fields: str) -> list[PublishedCell]:
        """Cells whose fields (table, method, variant, dataset, metric, model, unit, row) equal the given values."""
        allowed = {"table", "method", "variant", "dataset", "metric", "model", "unit", "row"}
        unknown = set(fields) - allowed
        if unknown:
            raise TypeError(f"find() got unknown field(s) {sorted(unknown)}; known: {sorted(allowed)}")
        return [c for c in self.cells if all(getattr(c, f) == v for f, v in fields.items())]

    def cell(self, table: str, row: str, column: str, model: str = "", *, dataset: str | None = None) -> PublishedCell:
        """The one cell at ``row`` (``method`` or ``method:variant``) and ``column`` (a metric, or a dataset
        where the table's columns are datasets) for ``model``, of ``dataset`` when given; KeyError when
        there is not exactly one."""
        found = [c for c in self.cells if c.table == table and c.row == row and c.model == model
                 and column in (c.metric, c.dataset) and dataset in (None, c.dataset)]
        if len(found) != 1:
            what = f"{table} / {row} / {column} / {model or '(no model)'}" + (f" / {dataset}" if dataset else "")
            if not found:
                raise KeyError(f"no published cell {what}")
            raise KeyError(f"{len(found)} published cells at {what}: {', '.join(c.key for c in found)}")
        return found[0]

    def table(self, table: str) -> list[PublishedCell]:
        """The cells of one table or figure, in the paper's order."""
        return [c for c in self.cells if c.table == table]

    def source(self, source_id: str) -> PublishedSource:
        for s in self.sources:
            if s.id == source_id:
                return s
        raise KeyError(f"no published table or figure {source_id!r}")

    def setting(self, name: str, *, dataset: str | None = None, model: str | None = None) -> PublishedSetting:
        """The setting ``name`` that applies to ``dataset`` and ``model`` (KeyError unless exactly one)."""
        found = [s for s in self.settings if s.name == name
                 and (dataset is None or not s.datasets or dataset in s.datasets)
                 and (model is None or not s.model or s.model == model)]
        if len(found) != 1:
            raise KeyError(f"{len(found)} published settings {name!r} for dataset {dataset!r}, model {model!r}")
        return found[0]

    def claim(self, claim_id: str) -> Claim:
        for c in self.claims:
            if c.id == claim_id:
                return c
        raise KeyError(f"no published claim {claim_id!r}")

    # ------------------------------------------------------------------ claims

    def pairs(self, claim: Claim) -> list[tuple[str, str]]:
        """(subject, reference) keys compared by a greater/less claim: those agreeing on ``claim.match``."""
        cells = self.by_key
        return [(a, b) for a in claim.subject for b in claim.reference
                if all(getattr(cells[a], f) == getattr(cells[b], f) for f in claim.match)]

    def paper_values(self) -> dict[str, float]:
        """Every cell's published value by key, in the cells' own units."""
        return {c.key: c.value for c in self.cells}

    def holds(self, claim: Claim, values: Mapping[str, float] | None = None) -> bool | None:
        """Whether ``claim`` holds for ``values`` (cell key -> value in the cell's unit; default the paper's).

        None for a qualitative claim or when a value it needs is missing.
        """
        values = self.paper_values() if values is None else values
        needed = (*claim.subject, *claim.reference)
        if claim.comparison == "qualitative" or any(k not in values for k in needed):
            return None
        subject = [values[k] for k in claim.subject]
        if claim.comparison == "about":
            assert claim.tolerance is not None  # checked when the claim was built
            cells = self.by_key
            return all(near(values[k], cells[k].value, claim.tolerance) for k in claim.subject)
        if claim.comparison in ("greater", "less"):
            sign = 1 if claim.comparison == "greater" else -1
            return all(sign * (values[a] - values[b]) > 0 for a, b in self.pairs(claim))
        assert claim.threshold is not None  # checked when the claim was built
        if claim.comparison == "above":
            return all(v > claim.threshold for v in subject)
        if claim.comparison == "below":
            return all(v < claim.threshold for v in subject)
        assert claim.tolerance is not None
        return all(abs(v - claim.threshold) <= claim.tolerance for v in subject)


def near(value: float, published: float, tolerance: float) -> bool:
    """``value`` is within ``tolerance`` (a fraction) of ``published``: an "about" claim's test."""
    return abs(value - published) <= tolerance * abs(published)


def _unique(items: Iterable[str], what: str) -> None:
    seen: set[str] = set()
    for item in items:
        if item in seen:
            raise ValueError(f"duplicate {what} {item!r}")
        seen.add(item)


def _cell_row(row: dict[str, str]) -> dict[str, Any]:
    """A CSV row as PublishedCell fields: empty strings are absent values; decimals come from the text."""
    out: dict[str, Any] = {k: v for k, v in row.items() if v != "" or k in ("variant", "model", "note")}
    out["decimals"] = _decimals(row["value"])
    return out


def parse_published(cells_csv: str, meta_json: str) -> PublishedNumbers:
    """Build the published numbers from the two files' text (ValueError when they are inconsistent)."""
    meta = json.loads(meta_json)
    cells = [PublishedCell.model_validate(_cell_row(r)) for r in csv.DictReader(io.StringIO(cells_csv))]
    return PublishedNumbers.model_validate({**meta, "cells": cells})


@lru_cache(maxsize=1)
def load_published() -> PublishedNumbers:
    """The paper's published numbers bundled with the package (read once, immutable)."""
    folder = resources.files(DATA_PACKAGE).joinpath(DATA_FOLDER[0]).joinpath(DATA_FOLDER[1])
    return parse_published(folder.joinpath(CELLS_FILE).read_text(encoding="utf-8"),
                           folder.joinpath(META_FILE).read_text(encoding="utf-8"))
