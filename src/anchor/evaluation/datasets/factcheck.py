"""The fact-checking sets: JSON lines, one claim per line, read row by row.

``factcheck/*.jsonl`` (names ``"cnn"``, ``"xsum"``, ``"expertqa"``, ``"covid"``, ``"factcheck"``)
    JSON lines, one claim per line: ``claim``, ``label`` (``SUPPORTED``/``REFUTED``; the FEVER
    spellings ``SUPPORTS``/``REFUTES`` are accepted too, case-insensitively) and ``evidence`` (an
    array of sentences or passages; blank ones are dropped). Other keys (COVID-Fact's
    ``gold_source``, ``flair``) are ignored. Each line becomes a :class:`DecisionInstance` with an
    empty scenario text, ``outcome1`` = the claim, ``outcome2`` = its negation
    (:func:`negate_claim` unless another ``negate`` function is passed), condition = the evidence
    joined by a space, label 1 if supported and 2 if refuted. Bundled: ``cnn`` and ``xsum`` (the
    LLM-AggreFact test subsets AggreFact-CNN/-XSum), ``expertqa`` (built from ExpertQA; it
    approximates, but is not, the LLM-AggreFact ExpertQA subset) and ``covid`` (a 12-row
    COVID-Fact sample, also reachable under its older name ``factcheck``); any file of this format
    loads through a path. Blank lines are skipped. Unlike the other formats, a bad row does not
    fail the file: it is skipped and reported (see :func:`load_factcheck_data`).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from anchor.cases.model import MAX_ROW_BYTES
from anchor.evaluation.datasets.bundled import FACTCHECK_FILES, bundled_file, is_factcheck_dataset
from anchor.evaluation.datasets.instances import DecisionInstance
from anchor.evaluation.datasets.reading import MAX_REPORTED_PROBLEMS, DatasetError
from anchor.evaluation.datasets.text import negate_claim, normalise_space, repair_text
from anchor.jsonl import read_json_lines
from anchor.text import kind_of, validation_message
from anchor.types import Scenario

_FACT_LABELS: dict[str, Literal[1, 2]] = {
    "SUPPORTED": 1, "SUPPORTS": 1, "SUPPORT": 1,
    "REFUTED": 2, "REFUTES": 2, "REFUTE": 2,
}


class DatasetWarning(UserWarning):
    """Rows of a dataset file were skipped (see :class:`FactcheckData` for the details)."""


class SkippedRow(BaseModel):
    """One row of a JSON-lines file that was left out, and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    line: int = Field(ge=1, description="1-based physical line in the file.")
    record: int = Field(ge=0, description="0-based record number: the k of the id '<dataset>:<k>' it would have had.")
    problem: str


class FactcheckData(BaseModel):
    """A fact-checking file as loaded: the usable instances and the rows that were skipped.

    ``rows`` counts every non-blank line (usable or not); ids keep their record numbers, so
    skipping a row never renumbers the others.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: str
    source: str = Field(description="The file the rows came from, as named in messages.")
    instances: list[DecisionInstance]
    skipped: list[SkippedRow] = Field(default_factory=list)

    @property
    def rows(self) -> int:
        return len(self.instances) + len(self.skipped)

    def skipped_messages(self, limit: int | None = None) -> list[str]:
        """``"<file>: line <n>: <problem>"`` per skipped row (the first ``limit`` when given)."""
        rows = self.skipped if limit is None else self.skipped[:limit]
        return [f"{self.source}: line {s.line}: {s.problem}" for s in rows]

    def summary(self) -> str | None:
        """One line saying how many rows were skipped and the first reason; None when none were."""
        if not self.skipped:
            return None
        first = self.skipped[0]
        return (f"{self.source}: {len(self.skipped)} of {self.rows} rows skipped "
                f"(first: line {first.line}: {first.problem})")


def _factcheck_bytes(path: str | Path | None, name: str) -> tuple[str, bytes]:
    if path is None:
        res = bundled_file(name)
        source, reader = f"{res} (bundled)", res.read_bytes
    else:
        source, reader = str(Path(path)), Path(path).read_bytes
    try:
        return source, reader()
    except OSError as exc:
        raise DatasetError(source, [f"cannot read the file ({exc.strerror or exc})"]) from exc


def _evidence(obj: dict[str, Any]) -> tuple[list[str] | None, str | None]:
    """(evidence sentences, None) or (None, the problem). Blank sentences are dropped."""
    if "evidence" not in obj:
        return None, "missing key 'evidence'"
    value = obj["evidence"]
    if not isinstance(value, list):
        return None, f"'evidence' must be an array of strings, got {kind_of(value)}"
    if not value:
        return None, "'evidence' is an empty array"
    for j, item in enumerate(value):
        if not isinstance(item, str):
            return None, f"evidence[{j}] must be a string, got {kind_of(item)}"
    kept = [item for item in value if item.strip()]
    if not kept:
        return None, "'evidence' holds only empty strings"
    return kept, None


def _claim_and_label(obj: dict[str, Any]) -> tuple[str | None, Literal[1, 2] | None, str | None]:
    claim = obj.get("claim")
    if "claim" not in obj:
        return None, None, "missing key 'claim'"
    if not isinstance(claim, str):
        return None, None, f"'claim' must be a string, got {kind_of(claim)}"
    if not claim.strip():
        return None, None, "'claim' is empty"
    if "label" not in obj:
        return None, None, "missing key 'label'"
    raw = obj["label"]
    if not isinstance(raw, str) or raw.strip().upper() not in _FACT_LABELS:
        return None, None, f"label {raw!r} is not recognised (expected SUPPORTED or REFUTED)"
    return claim, _FACT_LABELS[raw.strip().upper()], None


def load_factcheck_data(
    path: str | Path | None = None,
    *,
    dataset: str | None = None,
    negate: Callable[[str], str] = negate_claim,
    repair: bool = True,
) -> FactcheckData:
    """Load a fact-checking JSON-lines file, skipping (and reporting) the rows that cannot be used.

    ``dataset`` names the instances (ids ``"<dataset>:<record>"``) and, when ``path`` is None,
    picks the bundled file: ``cnn``, ``xsum``, ``expertqa``, ``covid`` or ``factcheck`` (the
    COVID-Fact sample under its old name). Without ``dataset`` the name is ``"factcheck"`` for the
    bundled sample and the file's stem for a path. ``negate`` writes outcome2 from the claim.

    The file is read by anchor's one lenient JSON-lines reader (:mod:`anchor.jsonl`), as a cases file
    is: a UTF-8 byte-order mark at its start is skipped, a UTF-16 or UTF-32 file is refused. A row is
    skipped, with its line and the reason, when it is not valid UTF-8 or JSON, starts with a byte-order
    mark (past the first line), gives a key twice, is not an object, has a missing or empty claim, an
    unknown label, or evidence that is not a non-empty array of strings. A file with no usable row
    raises :class:`DatasetError` (one line); so does a file that cannot be read.
    """
    if dataset is None:
        dataset = "factcheck" if path is None else Path(path).stem
    if path is None and dataset not in FACTCHECK_FILES:
        raise ValueError(f"no bundled fact-checking file named {dataset!r}; "
                         f"known: {', '.join(FACTCHECK_FILES)} (or pass a path)")
    source, raw = _factcheck_bytes(path, dataset if path is None else "factcheck")
    fix = repair_text if repair else normalise_space
    out: list[DecisionInstance] = []
    skipped: list[SkippedRow] = []
    record = -1
    for read in read_json_lines(io.BytesIO(raw), source,
                                lambda message: DatasetError(source, [message.removeprefix(f"{source}: ")]),
                                max_line_bytes=MAX_ROW_BYTES):
        record += 1
        line_no = read.line

        def skip(problem: str, line_no: int = line_no, record: int = record) -> None:
            skipped.append(SkippedRow(line=line_no, record=record, problem=problem))

        if read.problem is not None:
            skip(read.problem)
            continue
        obj = read.value
        if not isinstance(obj, dict):
            skip(f"expected an object, got {kind_of(obj)}")
            continue
        claim, label, problem = _claim_and_label(obj)
        evidence, ev_problem = _evidence(obj) if problem is None else (None, None)
        if problem or ev_problem or claim is None or label is None or evidence is None:
            skip(problem or ev_problem or "unusable row")
            continue
        claim_text = fix(claim)
        try:
            scenario = Scenario(text="", outcome1=claim_text, outcome2=negate(claim_text))
            out.append(DecisionInstance(
                id=f"{dataset}:{record}", dataset=dataset, scenario=scenario,
                condition=" ".join(fix(e) for e in evidence), label=label,
            ))
        except ValidationError as exc:
            skip(f"unusable row ({validation_message(exc)})")
        except ValueError as exc:  # the negation function refused the claim
            skip(f"invalid claim ({exc})")
    if record < 0:
        raise DatasetError(source, ["no records (the file is empty or has only blank lines)"])
    if not out:
        first = "; ".join(f"line {s.line}: {s.problem}" for s in skipped[:3])
        more = "" if len(skipped) <= 3 else "; ..."
        raise DatasetError(source, [f"no usable row: all {len(skipped)} rows were skipped ({first}{more})"])
    return FactcheckData(dataset=dataset, source=source, instances=out, skipped=skipped)


def factcheck_ids_name(name: str) -> str | None:
    """The ``dataset`` argument under which fact-checking set ``name`` is loaded.

    The generic ``factcheck`` leaves it to :func:`load_factcheck_data` (``"factcheck"`` for the
    bundled sample, the file's stem for a path); the named sets keep their name, with or without a
    path, so ``cnn`` always has ids ``cnn:<k>``.
    """
    return None if name == "factcheck" else name


def load_factcheck_set(name: str, path: str | Path | None = None) -> FactcheckData:
    """Fact-checking set ``name`` (bundled, or the file at ``path``) with its skipped rows, named
    as :func:`load_dataset` names it."""
    if not is_factcheck_dataset(name):
        raise ValueError(f"{name!r} is not a fact-checking dataset; known: {', '.join(FACTCHECK_FILES)}")
    return load_factcheck_data(path, dataset=factcheck_ids_name(name))


def load_factcheck(
    path: str | Path | None = None,
    *,
    dataset: str | None = None,
    negate: Callable[[str], str] = negate_claim,
    repair: bool = True,
) -> list[DecisionInstance]:
    """The usable instances of :func:`load_factcheck_data`, as a list.

    Skipped rows are announced with a :class:`DatasetWarning`; callers that need to count or
    record them use :func:`load_factcheck_data`.
    """
    data = load_factcheck_data(path, dataset=dataset, negate=negate, repair=repair)
    if data.skipped:
        shown = "; ".join(f"line {s.line}: {s.problem}" for s in data.skipped[:MAX_REPORTED_PROBLEMS])
        warnings.warn(DatasetWarning(f"{data.summary()}; skipped: {shown}"), stacklevel=2)
    return data.instances
