"""A world file as a cases file for ``anchor predict``: one row per condition, with its true probability.

Columns, in order: ``id`` (the condition's id), ``scenario``, ``outcome1``, ``outcome2``,
``condition`` (its text), ``label`` (1 or 2, drawn from the truth) and ``p_true`` (the exact
P(outcome1 | condition), written with every digit a float needs to be read back the same). The
cases reader takes ``p_true`` as an optional column and ``anchor predict`` keeps it with each row's
prediction, so a finished run can be scored against the truth without this file
(:mod:`anchor.truth.scores`).

CSV (``.csv``) or JSON lines (``.jsonl``), chosen by the file's suffix.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from anchor.files import write_atomic
from anchor.truth.world import WorldFile

CASES_COLUMNS: tuple[str, ...] = ("id", "scenario", "outcome1", "outcome2", "condition", "label", "p_true")
CASES_FORMATS: tuple[str, ...] = (".csv", ".jsonl")


def cases_rows(worlds: WorldFile) -> Iterator[dict[str, Any]]:
    """Every condition of every world as a row of :data:`CASES_COLUMNS`, world after world."""
    for world in worlds.worlds:
        for cond in world.conditions:
            yield {"id": cond.id, "scenario": world.scenario, "outcome1": world.outcome1,
                   "outcome2": world.outcome2, "condition": cond.text, "label": cond.label, "p_true": cond.p_true}


def cases_text(worlds: WorldFile, suffix: str = ".csv") -> str:
    """The cases file's text in the format of ``suffix`` (``.csv`` or ``.jsonl``)."""
    if suffix == ".jsonl":
        return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in cases_rows(worlds))
    if suffix != ".csv":
        raise ValueError(f"a cases file is {' or '.join(CASES_FORMATS)}, not {suffix or 'a file without suffix'}")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(CASES_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in cases_rows(worlds):
        writer.writerow({**row, "p_true": repr(row["p_true"])})  # repr: the shortest text read back exactly
    return buffer.getvalue()


def write_cases(worlds: WorldFile, path: str | Path) -> Path:
    """Write the cases file (atomically), its format from the suffix; returns the path."""
    target = Path(path)
    write_atomic(target, cases_text(worlds, target.suffix.lower()))
    return target
