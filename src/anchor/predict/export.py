"""The predictions of an ``anchor predict`` run as a flat table (CSV or Parquet), one row per case in
input order.

``predictions.jsonl`` (the full records) is the run directory's, written and put back in input order
when the run ends by :class:`~anchor.rundir.RunDirectory`; the table is made from it, one
record at a time.

The CSV is meant to be opened in a spreadsheet, which runs a cell that starts with ``=``, ``+``, ``-``
or ``@`` (or a tab or carriage return, or the full-width ``＝``, ``＋``, ``－``, ``＠``) as a formula: an id or a reason copied from the user's file
or the model could hold ``=HYPERLINK(...)``. Such a text cell is written with a ``'`` in front (the
OWASP rule for CSV injection); a text that is just a number (``-3``) is left as it is, and so are
the number cells. Numbers are written to 12 significant digits (``0.418``, not the
``0.41800000000000004`` that ``1 - 0.582`` gives). Parquet (typed cells) and ``predictions.jsonl``
keep every value as it is.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from anchor.cases import CasesError
from anchor.files import write_atomic_stream
from anchor.rundir import RunDirectory
from anchor.rundir.records import Prediction

TableFormat = Literal["jsonl", "csv", "parquet"]
TABLE_FORMATS: tuple[TableFormat, ...] = ("jsonl", "csv", "parquet")

#: The columns of the flat table, in order. ``p_true`` only when the cases file has that column (a synthetic
#: world's cases), ``p_outcome1_raw`` only when a calibrator was applied.
TABLE_COLUMNS = ("id", "line", "label", "p_true", "p_outcome1", "p_outcome2", "prediction", "unknown", "why_unknown",
                 "status", "p_outcome1_raw", "factors", "n_factors", "requests", "cache_hits", "prompt_tokens",
                 "completion_tokens", "seconds", "error")
#: Said when ``--format parquet`` is asked for without pyarrow.
PARQUET_WRITE_HINT = "writing Parquet needs pyarrow: pip install 'anchor-infer[parquet]'"
#: Separates the mapped factors in a CSV cell (a factor's text may hold commas).
FACTOR_SEPARATOR = " | "
#: A CSV text cell starting with one of these runs as a formula in a spreadsheet: OWASP's list, and the
#: full-width forms of its signs (U+FF1D, U+FF0B, U+FF0D, U+FF20), which Excel in a Japanese setting
#: runs too (OWASP/www-community issue 1088: "＝cmd|' /C calc'!A0" runs there).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
#: Significant digits of a number in the CSV table.
CSV_DIGITS = 12
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_PARQUET_BATCH = 2048


def why_unknown(pred: Prediction) -> str | None:
    """Why a prediction has no decision: the method's reason, a failure, or a tie at exactly 0.5."""
    if not pred.unknown:
        return None
    if pred.error:
        return pred.error
    reasons = [s.reason for s in pred.sides if s.reason]
    if reasons:
        return "; ".join(reasons)
    if pred.p_outcome1 == 0.5:
        return "a tie: P(outcome1) is exactly 0.5"
    return pred.status


def table_row(pred: Prediction, calibrated: bool, truth: bool = False) -> dict[str, Any]:
    """One prediction as a flat row of :data:`TABLE_COLUMNS` (factors as a list)."""
    side = pred.sides[0] if pred.sides else None
    totals = {"llm_calls": 0, "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0}
    for stage in pred.cost:
        for key in totals:
            totals[key] += int(stage.get(key) or 0)
    p1 = pred.p_outcome1
    row: dict[str, Any] = {
        "id": pred.id, "line": pred.line, "label": pred.label, "p_true": pred.p_true, "p_outcome1": p1,
        "p_outcome2": None if p1 is None else 1.0 - p1, "prediction": pred.prediction, "unknown": pred.unknown,
        "why_unknown": why_unknown(pred), "status": pred.status,
        "factors": list(side.factors) if side is not None and side.factors is not None else None,
        "n_factors": side.n_factors if side is not None else None,
        "requests": totals["llm_calls"], "cache_hits": totals["cache_hits"],
        "prompt_tokens": totals["prompt_tokens"], "completion_tokens": totals["completion_tokens"],
        "seconds": pred.seconds, "error": pred.error,
    }
    if calibrated:
        row["p_outcome1_raw"] = pred.p_outcome1_raw
    return {k: row[k] for k in table_columns(calibrated, truth)}


def table_columns(calibrated: bool, truth: bool = False) -> list[str]:
    """The table's columns: ``p_outcome1_raw`` with a calibrator, ``p_true`` when the cases carry it."""
    return [c for c in TABLE_COLUMNS if (calibrated or c != "p_outcome1_raw") and (truth or c != "p_true")]


def carries_truth(columns_used: Mapping[str, str]) -> bool:
    """Whether a cases file's table has the ``p_true`` column (``columns_used``: its check's)."""
    return "p_true" in columns_used


def check_table_format(fmt: TableFormat) -> None:
    """Refuse a format that cannot be written here before any work (Parquet needs pyarrow)."""
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401 - an optional extra, needed only for this format
        except ImportError:
            raise CasesError(f"--format parquet: {PARQUET_WRITE_HINT}") from None


def write_table(run: RunDirectory, fmt: TableFormat, *, calibrated: bool, truth: bool = False) -> Path | None:
    """Write the ordered predictions of ``run`` as its table (CSV or Parquet, atomically); jsonl needs
    no table (``predictions.jsonl`` is the JSON-lines output). ``truth``: the cases file has a
    ``p_true`` column, which the table then carries. Returns what was written."""
    if fmt == "jsonl":
        return None
    target = run.table_path(fmt)
    if fmt == "csv":
        write_atomic_stream(target, csv_table(run.iter_predictions(), calibrated=calibrated, truth=truth))
    else:
        columns = table_columns(calibrated, truth)
        _write_parquet((table_row(p, calibrated, truth) for p in run.iter_predictions()), columns, target)
    return target


def csv_table(predictions: Iterable[Prediction], *, calibrated: bool, truth: bool) -> Iterator[bytes]:
    """The CSV table of ``predictions``, its header first, a line at a time: what ``predictions.csv`` holds,
    and what ``anchor serve`` streams as a job's CSV results (one writer, so the two cannot differ)."""
    columns = table_columns(calibrated, truth)
    return _csv_lines((table_row(p, calibrated, truth) for p in predictions), columns)


def csv_cell(value: Any) -> Any:
    """A value as its CSV cell: none as empty, a float to :data:`CSV_DIGITS` significant digits, a text
    that a spreadsheet would run as a formula behind a ``'``; other values as they are."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(float(f"{value:.{CSV_DIGITS}g}")) if math.isfinite(value) else repr(value)
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def _csv_lines(rows: Iterator[dict[str, Any]], columns: list[str]) -> Iterator[bytes]:
    class _Line:
        text = ""

        def write(self, s: str) -> None:
            self.text += s

    buffer = _Line()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    yield buffer.text.encode("utf-8")
    for row in rows:
        buffer.text = ""
        cells = dict(row)
        if cells.get("factors") is not None:
            cells["factors"] = FACTOR_SEPARATOR.join(cells["factors"])
        writer.writerow({k: csv_cell(v) for k, v in cells.items()})
        yield buffer.text.encode("utf-8")


def _write_parquet(rows: Iterator[dict[str, Any]], columns: list[str], target: Path) -> None:
    import pyarrow as pa  # the parquet extra, checked by check_table_format
    import pyarrow.parquet as pq

    types = {"id": pa.string(), "line": pa.int64(), "label": pa.int64(), "p_true": pa.float64(),
             "p_outcome1": pa.float64(),
             "p_outcome2": pa.float64(), "prediction": pa.int64(), "unknown": pa.bool_(),
             "why_unknown": pa.string(), "status": pa.string(), "p_outcome1_raw": pa.float64(),
             "factors": pa.list_(pa.string()), "n_factors": pa.int64(), "requests": pa.int64(),
             "cache_hits": pa.int64(), "prompt_tokens": pa.int64(), "completion_tokens": pa.int64(),
             "seconds": pa.float64(), "error": pa.string()}
    schema = pa.schema([(c, types[c]) for c in columns])
    part = target.with_name(target.name + ".part")
    with pq.ParquetWriter(part, schema) as writer:
        batch: list[dict[str, Any]] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= _PARQUET_BATCH:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                batch = []
        if batch:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
    part.replace(target)
