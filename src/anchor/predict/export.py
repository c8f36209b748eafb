"""The outputs of an ``anchor predict`` run in input order: ``predictions.jsonl`` (the full records) put
back in the order of the cases file, and the same predictions as a flat table (CSV or Parquet).

While a run goes on, ``predictions.jsonl`` grows in the order rows finish (a resumed run appends, and a
row answered again appends a newer line). :func:`order_predictions` rewrites it once the run ends: one
line a row, the newest, in input order. Only an index of (row, offset) is held, never the records.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from anchor.cases import PARQUET_EXTRA_HINT, CasesError
from anchor.evaluation.results import Prediction
from anchor.files import write_atomic_stream

TableFormat = Literal["jsonl", "csv", "parquet"]
TABLE_FORMATS: tuple[TableFormat, ...] = ("jsonl", "csv", "parquet")

#: The columns of the flat table, in order. ``p_outcome1_raw`` only when a calibrator was applied.
TABLE_COLUMNS = ("id", "line", "label", "p_outcome1", "p_outcome2", "prediction", "unknown", "why_unknown",
                 "status", "p_outcome1_raw", "factors", "n_factors", "requests", "cache_hits", "prompt_tokens",
                 "completion_tokens", "seconds", "error")
#: Separates the mapped factors in a CSV cell (a factor's text may hold commas).
FACTOR_SEPARATOR = " | "
_PARQUET_BATCH = 2048


def order_predictions(path: Path) -> int:
    """Rewrite ``path`` (a predict run's ``predictions.jsonl``) in input order, keeping the last line of
    each id; returns the number of rows. Lines that are not JSON objects with an ``id`` (a torn last
    line) are dropped."""
    index: dict[str, tuple[int, int, int]] = {}  # id -> (line in the cases file, offset, length)
    offset = 0
    with open(path, "rb") as fh:
        for raw in fh:
            try:
                record = json.loads(raw) if raw.strip() else None
            except (json.JSONDecodeError, UnicodeDecodeError):
                record = None
            if isinstance(record, dict) and isinstance(record.get("id"), str):
                index[record["id"]] = (int(record.get("line") or 0), offset, len(raw))
            offset += len(raw)
    order = sorted(index.values())

    def lines() -> Iterator[bytes]:
        with open(path, "rb") as src:
            for _, start, length in order:
                src.seek(start)
                line = src.read(length)
                yield line if line.endswith(b"\n") else line + b"\n"

    write_atomic_stream(path, lines())
    return len(order)


def read_ordered(path: Path, *, without_cost: bool = False) -> Iterator[Prediction]:
    """The predictions of an ordered ``predictions.jsonl``, one at a time (``without_cost``: their
    per-stage ``cost`` left empty)."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            if without_cost:
                record = json.loads(line)
                record["cost"] = []
                yield Prediction.model_validate(record)
            else:
                yield Prediction.model_validate_json(line)


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


def table_row(pred: Prediction, calibrated: bool) -> dict[str, Any]:
    """One prediction as a flat row of :data:`TABLE_COLUMNS` (factors as a list)."""
    side = pred.sides[0] if pred.sides else None
    totals = {"llm_calls": 0, "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0}
    for stage in pred.cost:
        for key in totals:
            totals[key] += int(stage.get(key) or 0)
    p1 = pred.p_outcome1
    row: dict[str, Any] = {
        "id": pred.id, "line": pred.line, "label": pred.label, "p_outcome1": p1,
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
    return {k: row[k] for k in TABLE_COLUMNS if k in row}


def table_columns(calibrated: bool) -> list[str]:
    return [c for c in TABLE_COLUMNS if calibrated or c != "p_outcome1_raw"]


def check_table_format(fmt: TableFormat) -> None:
    """Refuse a format that cannot be written here before any work (Parquet needs pyarrow)."""
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401 - an optional extra, needed only for this format
        except ImportError:
            raise CasesError(f"--format parquet: {PARQUET_EXTRA_HINT}") from None


def write_table(source: Path, target: Path, fmt: TableFormat, *, calibrated: bool) -> Path | None:
    """Write the ordered predictions of ``source`` as ``target`` (CSV or Parquet, atomically); jsonl
    needs no table (``source`` is the JSON-lines output). Returns what was written."""
    if fmt == "jsonl":
        return None
    columns = table_columns(calibrated)
    rows = (table_row(p, calibrated) for p in read_ordered(source))
    if fmt == "csv":
        write_atomic_stream(target, _csv_lines(rows, columns))
    else:
        _write_parquet(rows, columns, target)
    return target


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
        writer.writerow({k: "" if v is None else v for k, v in cells.items()})
        yield buffer.text.encode("utf-8")


def _write_parquet(rows: Iterator[dict[str, Any]], columns: list[str], target: Path) -> None:
    import pyarrow as pa  # the parquet extra, checked by check_table_format
    import pyarrow.parquet as pq

    types = {"id": pa.string(), "line": pa.int64(), "label": pa.int64(), "p_outcome1": pa.float64(),
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
