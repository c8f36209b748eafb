"""The Common2Sense human pairwise annotation (CSV) as :class:`PairwiseInstance` rows.

``bird/common2sense_human_annotation.csv`` (name ``"common2sense-pairwise"``)
    The preference-based pairwise set: columns ``scenario, statement_1, statement_2,
    gold_statement, sentence_1, sentence_2, human_prediction`` (extra columns are ignored).
    ``human_prediction`` is 1 when sentence_1 supports the gold statement more, 2 when sentence_2
    does, 3 when they support it equally. The scenario is ``(scenario, statement_1, statement_2)``;
    ``gold`` says which of the two is ``gold_statement`` (matched after whitespace normalisation).
    The companion ``common2sense_human_annotation.json`` holds, for each of the 175 distinct
    (scenario, statement_1, statement_2) triples of the CSV, the pool of sentences the pairs were
    drawn from (599 sentences, exactly the distinct sentences of the CSV) and nothing else: no
    pairing, no gold statement, no human judgement. It adds nothing the evaluation needs, so it is
    bundled for provenance but not read.

A file that cannot be used raises :class:`DatasetError` listing where each problem is (``row i
(line n)``, ``i`` being the 0-based data row used in the ids).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from anchor.evaluation.datasets.instances import PairwiseInstance
from anchor.evaluation.datasets.reading import DatasetError, Problems, read_text
from anchor.evaluation.datasets.text import normalise_space, repair_text
from anchor.text import validation_message
from anchor.types import Scenario

PAIRWISE_COLUMNS: tuple[str, ...] = (
    "scenario", "statement_1", "statement_2", "gold_statement",
    "sentence_1", "sentence_2", "human_prediction",
)


def load_pairwise(path: str | Path | None = None, *, repair: bool = True) -> list[PairwiseInstance]:
    """Load the Common2Sense human pairwise annotation (CSV) as :class:`PairwiseInstance` rows."""
    dataset = "common2sense-pairwise"
    source, text = read_text(path, dataset)
    fix = repair_text if repair else normalise_space
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        raise DatasetError(source, ["the file is empty"]) from None
    except csv.Error as exc:
        raise DatasetError(source, [f"line 1: malformed CSV header ({exc})"]) from None
    header = [h.strip() for h in header]
    missing = [c for c in PAIRWISE_COLUMNS if c not in header]
    if missing:
        raise DatasetError(source, [f"line 1 (header): missing column(s) {', '.join(missing)}"])
    col = {c: header.index(c) for c in PAIRWISE_COLUMNS}

    problems = Problems(source)
    out: list[PairwiseInstance] = []
    row = -1
    prev_line = reader.line_num
    while True:
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            problems.add(f"line {reader.line_num}", f"malformed CSV ({exc})")
            break
        start, prev_line = prev_line + 1, reader.line_num
        if not any(field.strip() for field in record):
            continue  # blank line
        row += 1
        where = f"row {row} (line {start})"
        if len(record) != len(header):
            problems.add(where, f"has {len(record)} fields, expected {len(header)}")
            continue
        values = {c: record[col[c]] for c in PAIRWISE_COLUMNS}
        empty = [c for c in PAIRWISE_COLUMNS if not values[c].strip()]
        if empty:
            problems.add(where, f"empty value in column(s) {', '.join(empty)}")
            continue
        human_raw = values["human_prediction"].strip()
        if human_raw not in ("1", "2", "3"):
            problems.add(where, f"human_prediction {values['human_prediction']!r} is not 1, 2 or 3")
            continue
        gold_text = normalise_space(values["gold_statement"])
        if gold_text == normalise_space(values["statement_1"]):
            gold: Literal[1, 2] = 1
        elif gold_text == normalise_space(values["statement_2"]):
            gold = 2
        else:
            problems.add(where, "gold_statement matches neither statement_1 nor statement_2")
            continue
        try:
            scenario = Scenario(
                text=fix(values["scenario"]),
                outcome1=fix(values["statement_1"]),
                outcome2=fix(values["statement_2"]),
            )
        except ValidationError as exc:
            problems.add(where, f"invalid scenario ({validation_message(exc)})")
            continue
        try:
            out.append(PairwiseInstance(
                id=f"{dataset}:{row}", dataset=dataset, scenario=scenario, gold=gold,
                condition1=fix(values["sentence_1"]), condition2=fix(values["sentence_2"]),
                human=int(human_raw),  # type: ignore[arg-type]
            ))
        except ValidationError as exc:
            problems.add(where, f"unusable row ({validation_message(exc)})")
    problems.raise_if_any()
    if not out:
        raise DatasetError(source, ["no data rows after the header"])
    return out
