"""Loaders for the benchmark datasets of the ANCHOR paper, with strict validation.

The data ships inside the package (``anchor/data/``, see ``data/PROVENANCE.md``) and is read through
``importlib.resources``; every loader also accepts a path to a file in the same format.

Formats, as found in the bundled files
--------------------------------------
``bird/common2sense.json`` (name ``"common2sense"``)
    A JSON array with one object per (scenario, statement pair): ``scenario``, ``statement``,
    ``opposite_statement``, ``added_information`` (conditions that support ``statement``) and
    ``oppo_added_information`` (conditions that support ``opposite_statement``). The file also has an
    ``additional_sentence_label`` map from every condition to ``"Statement 1"`` / ``"Statement 2"``;
    in the bundled file it agrees with the two lists everywhere (Statement 1 = ``added_information``).
    The lists are authoritative; when the map is present we only check that it does not contradict
    them. ``outcome1`` = ``statement``, so label 1 = a condition from ``added_information``.

``bird/plasma.json`` and ``bird/today.json`` (names ``"plasma"``, ``"today"``)
    A JSON array of objects with ``scenario``, ``statement``, ``opposite_statement``,
    ``additional_sentences`` (the conditions) and ``additional_sentence_label`` (condition ->
    ``"Statement 1"`` or ``"Statement 2"``). Today also has an ``explanation`` string, which is ignored.
    Reading of the labels: ``"Statement 1"`` means the condition supports ``statement`` and
    ``"Statement 2"`` that it supports ``opposite_statement``. This is the same encoding that
    common2sense.json uses, where it can be checked against the two explicit lists, and spot checks
    of Plasma and Today rows (and Today's explanations) read the same way. In the bundled files
    *every* Plasma and Today label is ``"Statement 1"``: the gold outcome is always ``outcome1``
    (see :func:`balance_outcome_order` for a way to remove that positional regularity). Labels are
    matched ignoring case and surrounding whitespace; any other value is an error.

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

Identifiers
-----------
Instance ids are ``"<dataset>:<entry>:<k>"`` for the JSON datasets (``entry`` = 0-based index in the
top-level array, ``k`` = 0-based index of the condition within the entry; for Common2Sense the
``added_information`` conditions come first, then ``oppo_added_information``),
``"common2sense-pairwise:<row>"`` (0-based data row, blank lines not counted) and
``"<dataset>:<record>"`` for JSON lines (0-based among non-blank lines). They depend only on the
file contents, never on run order.

Errors
------
For the JSON arrays and the CSV, a file that cannot be used raises :class:`DatasetError` (a
``ValueError``). Its message names the file and, for each problem, where it is: ``entry i (line
n)`` for JSON arrays, ``row i (line n)`` for the CSV (``i`` is the 0-based index used in the ids,
``n`` the 1-based physical line). Problems are collected over the whole file and the first ten are
reported together. A file that cannot be read (missing, not UTF-8) is reported the same way.

Fact-checking JSON lines are treated row by row: a bad row is skipped and returned as a
:class:`SkippedRow` (``line n`` and the problem) inside :class:`FactcheckData`, so a run can count
and record it; only a file that cannot be read or has no usable row raises :class:`DatasetError`.

Text clean-up
-------------
Whitespace is always normalised (runs collapsed, ends stripped), as :class:`anchor.types.Scenario`
does. With ``repair=True`` (the default) two defects found in today.json are also fixed, see
:func:`repair_text`: UTF-8 text that was decoded as GBK (``I鈥檓`` for ``I’m``, two rows) and HTML
markup left in a statement (``<b><font color="orange">``, two rows). Pass ``repair=False`` to get
the text as stored.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import warnings
from collections.abc import Callable, Iterable, Sequence
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from anchor.types import Scenario

__all__ = [
    "DATASET_NAMES",
    "FACTCHECK_FILES",
    "PAPER_FACTCHECK_SETS",
    "DatasetError",
    "DatasetWarning",
    "DecisionInstance",
    "FactcheckData",
    "PairwiseInstance",
    "SkippedRow",
    "balance_outcome_order",
    "bundled_file",
    "group_by_scenario",
    "load_dataset",
    "load_decision",
    "is_factcheck_dataset",
    "load_factcheck",
    "load_factcheck_data",
    "load_pairwise",
    "negate_claim",
    "repair_text",
    "scenario_key",
]

DecisionName = Literal["common2sense", "plasma", "today"]
#: Bundled fact-checking files by dataset name (folder ``factcheck/``); all share one format.
FACTCHECK_FILES: dict[str, str] = {
    "cnn": "aggrefact_cnn.jsonl",
    "xsum": "aggrefact_xsum.jsonl",
    "expertqa": "expertqa.jsonl",
    "covid": "covidfact_sample.jsonl",
    "factcheck": "covidfact_sample.jsonl",  # the older, generic name of the COVID-Fact sample
}
#: Fact-checking sets in the column order of the paper's Table 2.
PAPER_FACTCHECK_SETS: tuple[str, ...] = ("expertqa", "xsum", "covid", "cnn")
DATASET_NAMES: tuple[str, ...] = (
    "common2sense-pairwise", "common2sense", "plasma", "today", "factcheck", "cnn", "xsum", "expertqa", "covid",
)
MAX_REPORTED_PROBLEMS = 10

_BUNDLED: dict[str, tuple[str, str]] = {
    "common2sense-pairwise": ("bird", "common2sense_human_annotation.csv"),
    "common2sense": ("bird", "common2sense.json"),
    "plasma": ("bird", "plasma.json"),
    "today": ("bird", "today.json"),
    **{name: ("factcheck", filename) for name, filename in FACTCHECK_FILES.items()},
}


# --------------------------------------------------------------------------- errors


class DatasetError(ValueError):
    """A dataset file is unreadable or malformed.

    ``source`` names the file, ``problems`` holds up to ten located problems and ``total`` how
    many were found in all.
    """

    def __init__(self, source: str, problems: Sequence[str], total: int | None = None) -> None:
        self.source = source
        self.problems = list(problems)
        self.total = max(total or 0, len(self.problems))
        super().__init__(self._format())

    def _format(self) -> str:
        if self.total == 1 and len(self.problems) == 1:
            return f"{self.source}: {self.problems[0]}"
        head = f"{self.source}: {self.total} problems"
        if self.total > len(self.problems):
            head += f" (first {len(self.problems)} shown)"
        return "\n".join([head + ":", *(f"  {p}" for p in self.problems)])

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, (self.source, self.problems, self.total))


class _Problems:
    """Collects located problems; keeps the first few and counts all of them."""

    def __init__(self, source: str, limit: int = MAX_REPORTED_PROBLEMS) -> None:
        self.source = source
        self.limit = limit
        self.items: list[str] = []
        self.count = 0

    def add(self, where: str, what: str) -> None:
        self.count += 1
        if len(self.items) < self.limit:
            self.items.append(f"{where}: {what}")

    def raise_if_any(self) -> None:
        if self.count:
            raise DatasetError(self.source, self.items, self.count)


# --------------------------------------------------------------------------- instance types


class _Instance(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    id: str = Field(min_length=1)
    dataset: str = Field(min_length=1)
    scenario: Scenario


def _norm(text: str) -> str:
    return " ".join(text.split())


def _nonempty(text: str) -> str:
    text = _norm(text)
    if not text:
        raise ValueError("condition text is empty")
    return text


class DecisionInstance(_Instance):
    """One condition with the outcome it supports (Plasma, Today, Common2Sense, fact checking)."""

    condition: str = Field(min_length=1)
    label: Literal[1, 2] = Field(description="Outcome the condition supports: 1 = scenario.outcome1.")

    @field_validator("condition")
    @classmethod
    def _clean(cls, value: str) -> str:
        return _nonempty(value)

    @property
    def gold_outcome(self) -> str:
        return self.scenario.outcome1 if self.label == 1 else self.scenario.outcome2


class PairwiseInstance(_Instance):
    """Two conditions for the same gold outcome, with the human judgement of which supports it more."""

    gold: Literal[1, 2] = Field(description="Which outcome is the gold statement: 1 = scenario.outcome1.")
    condition1: str = Field(min_length=1)
    condition2: str = Field(min_length=1)
    human: Literal[1, 2, 3] = Field(
        description="1: condition1 supports the gold outcome more; 2: condition2 does; 3: equally."
    )

    @field_validator("condition1", "condition2")
    @classmethod
    def _clean(cls, value: str) -> str:
        return _nonempty(value)

    @property
    def gold_outcome(self) -> str:
        return self.scenario.outcome1 if self.gold == 1 else self.scenario.outcome2


Instance = TypeVar("Instance", DecisionInstance, PairwiseInstance)


# --------------------------------------------------------------------------- helpers


_HTML_TAG = re.compile(r"</?(?:b|i|u|em|strong|font|span|br|p)(?:\s[^<>]*)?/?>", re.IGNORECASE)
_CJK = re.compile(r"[\u3400-\u9fff]")


def repair_text(text: str) -> str:
    """Undo two storage defects and normalise whitespace.

    * Text containing CJK characters is re-encoded as GBK and decoded as UTF-8; this turns
      ``鈥檓`` back into ``’m``. If that round trip fails the text is genuine CJK and is kept.
    * Simple HTML formatting tags (``<b>``, ``<font ...>`` and the like) are removed.
    """
    if _CJK.search(text):
        try:
            text = text.encode("gbk").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            pass
    text = _HTML_TAG.sub(" ", text)
    return _norm(text)


def _identity(text: str) -> str:
    return _norm(text)


def negate_claim(claim: str) -> str:
    """Deterministic negation of a claim: ``"It is not true that <claim>."``.

    The first word is lower-cased when it looks like an ordinary sentence-initial word (capital
    letter followed by lower-case letters only), so ``"Saliva viral load ..."`` becomes ``"It is
    not true that saliva viral load ..."``; words like ``COVID-19`` or ``mRNA`` are left alone. A
    proper noun at the start is lower-cased too, which is cosmetic only. A trailing full stop is
    dropped before the template adds its own.
    """
    text = _norm(claim).rstrip(" .")
    if not text:
        raise ValueError("cannot negate an empty claim")
    first, sep, rest = text.partition(" ")
    if len(first) > 1 and first.isalpha() and first[0].isupper() and first[1:].islower():
        first = first.lower()
    return f"It is not true that {first}{sep}{rest}."


def scenario_key(s: Scenario) -> str:
    """Stable 16-hex-digit id of a scenario, for building one factor space per scenario.

    It hashes (text, outcome1, outcome2) after the whitespace normalisation Scenario applies, so
    it is the same across runs and processes. The order of the outcomes matters: a scenario and its
    ``swapped()`` version get different keys, because a factor space labels factors relative to
    outcome1/outcome2.
    """
    payload = json.dumps([s.text, s.outcome1, s.outcome2], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def group_by_scenario(instances: Iterable[Instance]) -> dict[str, list[Instance]]:
    """Instances grouped by :func:`scenario_key`, groups and members in first-seen order."""
    groups: dict[str, list[Instance]] = {}
    for inst in instances:
        groups.setdefault(scenario_key(inst.scenario), []).append(inst)
    return groups


def balance_outcome_order(instances: Sequence[Instance]) -> list[Instance]:
    """Swap outcome1/outcome2 for about half of the scenarios, deterministically.

    In the bundled Plasma and Today files the gold outcome is always outcome1, so a method with a
    positional bias would look perfect. This returns copies in which every scenario whose
    :func:`scenario_key` is odd has its outcomes swapped (and the label, or the pairwise ``gold``,
    flipped accordingly). All instances of a scenario are treated alike, so grouping by scenario
    still works; ids are kept, so results can be joined back to the source rows.
    """
    out: list[Instance] = []
    swapped: dict[str, Scenario] = {}
    for inst in instances:
        key = scenario_key(inst.scenario)
        if int(key, 16) % 2 == 0:
            out.append(inst)
            continue
        scen = swapped.setdefault(key, inst.scenario.swapped())
        if isinstance(inst, DecisionInstance):
            out.append(inst.model_copy(update={"scenario": scen, "label": 3 - inst.label}))
        else:
            out.append(inst.model_copy(update={"scenario": scen, "gold": 3 - inst.gold}))
    return out


def is_factcheck_dataset(name: str) -> bool:
    """True for the fact-checking datasets (``factcheck``, ``cnn``, ``xsum``, ``expertqa``, ``covid``)."""
    return name in FACTCHECK_FILES


def bundled_file(name: str) -> Traversable:
    """The packaged copy of dataset ``name`` (one of :data:`DATASET_NAMES`)."""
    if name not in _BUNDLED:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASET_NAMES)}")
    folder, filename = _BUNDLED[name]
    return resources.files("anchor").joinpath("data").joinpath(folder).joinpath(filename)


def _kind(value: Any) -> str:
    return {
        dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
        int: "a number", float: "a number",
    }.get(type(value), type(value).__name__)


def _read_text(path: str | Path | None, name: str) -> tuple[str, str]:
    """(source label for messages, decoded text) of a user file or the bundled copy."""
    if path is None:
        res = bundled_file(name)
        source = f"{res} (bundled)"
        reader = res.read_bytes
    else:
        p = Path(path)
        source = str(p)
        reader = p.read_bytes
    try:
        raw = reader()
    except OSError as exc:
        raise DatasetError(source, [f"cannot read the file ({exc.strerror or exc})"]) from exc
    try:
        return source, raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DatasetError(source, [f"line {line}: not valid UTF-8 (byte offset {exc.start})"]) from None


_WS = re.compile(r"[ \t\n\r]*")


def _entry_lines(text: str, n: int) -> list[int | None]:
    """1-based line on which each element of a (valid) top-level JSON array starts."""
    try:
        decoder = json.JSONDecoder()
        pos = _WS.match(text, 0).end() + 1  # type: ignore[union-attr]  # past "["
        line, last = 1, 0
        lines: list[int | None] = []
        for _ in range(n):
            pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
            line += text.count("\n", last, pos)
            last = pos
            lines.append(line)
            _, pos = decoder.raw_decode(text, pos)
            pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
            if pos < len(text) and text[pos] == ",":
                pos += 1
        return lines
    except (ValueError, AttributeError):  # pragma: no cover - json.loads accepted the text already
        return [None] * n


def _load_json_array(source: str, text: str) -> list[tuple[str, Any]]:
    """Parse a JSON array and return (location label, element) pairs."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise DatasetError(source, [f"{where}: not valid JSON ({exc.msg})"]) from None
    if not isinstance(data, list):
        raise DatasetError(source, [f"the top level is {_kind(data)}; expected an array of objects"])
    if not data:
        raise DatasetError(source, ["the array is empty: no entries"])
    lines = _entry_lines(text, len(data))
    return [
        (f"entry {i}" + (f" (line {ln})" if ln is not None else ""), entry)
        for i, (ln, entry) in enumerate(zip(lines, data, strict=True))
    ]


def _text_field(entry: dict[str, Any], key: str, where: str, problems: _Problems) -> str | None:
    if key not in entry:
        problems.add(where, f"missing key {key!r}")
        return None
    value = entry[key]
    if not isinstance(value, str):
        problems.add(where, f"{key!r} must be a string, got {_kind(value)}")
        return None
    if not value.strip():
        problems.add(where, f"{key!r} is empty")
        return None
    return value


def _text_list(
    entry: dict[str, Any], key: str, where: str, problems: _Problems, *, allow_empty: bool
) -> list[str] | None:
    if key not in entry:
        problems.add(where, f"missing key {key!r}")
        return None
    value = entry[key]
    if not isinstance(value, list):
        problems.add(where, f"{key!r} must be an array of strings, got {_kind(value)}")
        return None
    if not value and not allow_empty:
        problems.add(where, f"{key!r} is an empty array")
        return None
    ok = True
    for j, item in enumerate(value):
        if not isinstance(item, str):
            problems.add(where, f"{key}[{j}] must be a string, got {_kind(item)}")
            ok = False
        elif not item.strip():
            problems.add(where, f"{key}[{j}] is empty")
            ok = False
    return value if ok else None


_EXPECTED_LABELS = "(expected 'Statement 1' or 'Statement 2')"


def _statement_label(value: Any) -> Literal[1, 2] | None:
    if not isinstance(value, str):
        return None
    key = " ".join(value.lower().split())
    return 1 if key == "statement 1" else 2 if key == "statement 2" else None


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(x) for x in err.get("loc", ()))
        msg = str(err.get("msg", "invalid"))
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


# --------------------------------------------------------------------------- decision datasets


def _c2s_conditions(
    entry: dict[str, Any], where: str, problems: _Problems
) -> list[tuple[str, Literal[1, 2]]]:
    before = problems.count
    pro = _text_list(entry, "added_information", where, problems, allow_empty=True)
    con = _text_list(entry, "oppo_added_information", where, problems, allow_empty=True)
    if pro is None or con is None:
        return []
    if not pro and not con:
        problems.add(where, "no conditions: 'added_information' and 'oppo_added_information' are both empty")
    both = sorted(set(pro) & set(con))
    if both:
        problems.add(where, f"{len(both)} sentence(s) listed as supporting both statements, e.g. {both[0]!r}")
    labels = entry.get("additional_sentence_label")
    if labels is not None:
        if not isinstance(labels, dict):
            problems.add(where, f"'additional_sentence_label' must be an object, got {_kind(labels)}")
        else:
            for key, expected in (("added_information", 1), ("oppo_added_information", 2)):
                for j, sentence in enumerate(pro if expected == 1 else con):
                    if sentence not in labels:
                        continue
                    got = _statement_label(labels[sentence])
                    if got is None:
                        problems.add(where, f"additional_sentence_label value {labels[sentence]!r} for "
                                            f"{key}[{j}] is not recognised {_EXPECTED_LABELS}")
                    elif got != expected:
                        problems.add(where, f"{key}[{j}] is labelled {labels[sentence]!r} in "
                                            f"'additional_sentence_label', contradicting its list")
    if problems.count > before:
        return []
    return [(s, 1) for s in pro] + [(s, 2) for s in con]


def _labelled_conditions(
    entry: dict[str, Any], where: str, problems: _Problems
) -> list[tuple[str, Literal[1, 2]]]:
    before = problems.count
    sentences = _text_list(entry, "additional_sentences", where, problems, allow_empty=False)
    labels = entry.get("additional_sentence_label")
    if "additional_sentence_label" not in entry:
        problems.add(where, "missing key 'additional_sentence_label'")
        return []
    if not isinstance(labels, dict):
        problems.add(where, f"'additional_sentence_label' must be an object, got {_kind(labels)}")
        return []
    if sentences is None:
        return []
    out: list[tuple[str, Literal[1, 2]]] = []
    for j, sentence in enumerate(sentences):
        if sentence not in labels:
            problems.add(where, f"additional_sentences[{j}] has no entry in 'additional_sentence_label'")
            continue
        label = _statement_label(labels[sentence])
        if label is None:
            problems.add(where, f"additional_sentence_label value {labels[sentence]!r} for "
                                f"additional_sentences[{j}] is not recognised {_EXPECTED_LABELS}")
            continue
        out.append((sentence, label))
    known = set(sentences)
    extra = [k for k in labels if k not in known]
    if extra:
        problems.add(where, f"'additional_sentence_label' has {len(extra)} key(s) that are not in "
                            f"'additional_sentences', e.g. {extra[0]!r}")
    return out if problems.count == before else []


def load_decision(
    name: DecisionName, path: str | Path | None = None, *, repair: bool = True
) -> list[DecisionInstance]:
    """Load Common2Sense, Plasma or Today as one :class:`DecisionInstance` per condition.

    ``path`` None reads the bundled copy; otherwise the file must have the format of ``name``.
    """
    if name not in ("common2sense", "plasma", "today"):
        raise ValueError(f"unknown decision dataset {name!r}; expected 'common2sense', 'plasma' or 'today'")
    source, text = _read_text(path, name)
    entries = _load_json_array(source, text)
    fix = repair_text if repair else _identity
    problems = _Problems(source)
    out: list[DecisionInstance] = []
    for i, (where, entry) in enumerate(entries):
        if not isinstance(entry, dict):
            problems.add(where, f"expected an object, got {_kind(entry)}")
            continue
        before = problems.count
        scen_text = _text_field(entry, "scenario", where, problems)
        statement = _text_field(entry, "statement", where, problems)
        opposite = _text_field(entry, "opposite_statement", where, problems)
        if name == "common2sense":
            conditions = _c2s_conditions(entry, where, problems)
        else:
            conditions = _labelled_conditions(entry, where, problems)
        if problems.count > before or scen_text is None or statement is None or opposite is None:
            continue
        try:
            scenario = Scenario(text=fix(scen_text), outcome1=fix(statement), outcome2=fix(opposite))
        except ValidationError as exc:
            problems.add(where, f"invalid scenario ({_validation_message(exc)})")
            continue
        for k, (sentence, label) in enumerate(conditions):
            try:
                out.append(DecisionInstance(
                    id=f"{name}:{i}:{k}", dataset=name, scenario=scenario, condition=fix(sentence), label=label,
                ))
            except ValidationError as exc:
                problems.add(where, f"condition {k} is unusable ({_validation_message(exc)})")
    problems.raise_if_any()
    if not out:  # pragma: no cover - every valid entry yields at least one condition
        raise DatasetError(source, ["no instances"])
    return out


# --------------------------------------------------------------------------- pairwise


PAIRWISE_COLUMNS: tuple[str, ...] = (
    "scenario", "statement_1", "statement_2", "gold_statement",
    "sentence_1", "sentence_2", "human_prediction",
)


def load_pairwise(path: str | Path | None = None, *, repair: bool = True) -> list[PairwiseInstance]:
    """Load the Common2Sense human pairwise annotation (CSV) as :class:`PairwiseInstance` rows."""
    dataset = "common2sense-pairwise"
    source, text = _read_text(path, dataset)
    fix = repair_text if repair else _identity
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

    problems = _Problems(source)
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
        gold_text = _norm(values["gold_statement"])
        if gold_text == _norm(values["statement_1"]):
            gold: Literal[1, 2] = 1
        elif gold_text == _norm(values["statement_2"]):
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
            problems.add(where, f"invalid scenario ({_validation_message(exc)})")
            continue
        try:
            out.append(PairwiseInstance(
                id=f"{dataset}:{row}", dataset=dataset, scenario=scenario, gold=gold,
                condition1=fix(values["sentence_1"]), condition2=fix(values["sentence_2"]),
                human=int(human_raw),  # type: ignore[arg-type]
            ))
        except ValidationError as exc:
            problems.add(where, f"unusable row ({_validation_message(exc)})")
    problems.raise_if_any()
    if not out:
        raise DatasetError(source, ["no data rows after the header"])
    return out


# --------------------------------------------------------------------------- fact checking


_FACT_LABELS: dict[str, Literal[1, 2]] = {
    "SUPPORTED": 1, "SUPPORTS": 1, "SUPPORT": 1,
    "REFUTED": 2, "REFUTES": 2, "REFUTE": 2,
}
_BOM = "\ufeff"


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


def _json_problem(line: str, exc: json.JSONDecodeError) -> str:
    # Only a line that opens an object or array and stops before closing it looks cut off; any other
    # bad line (a word, a bare value) is just not JSON.
    if line.startswith(("{", "[")) and (exc.pos >= len(line) or not line.endswith(("}", "]"))):
        return f"not valid JSON: the line ends too early (truncated?) ({exc.msg})"
    return f"not valid JSON ({exc.msg}, column {exc.colno})"


def _evidence(obj: dict[str, Any]) -> tuple[list[str] | None, str | None]:
    """(evidence sentences, None) or (None, the problem). Blank sentences are dropped."""
    if "evidence" not in obj:
        return None, "missing key 'evidence'"
    value = obj["evidence"]
    if not isinstance(value, list):
        return None, f"'evidence' must be an array of strings, got {_kind(value)}"
    if not value:
        return None, "'evidence' is an empty array"
    for j, item in enumerate(value):
        if not isinstance(item, str):
            return None, f"evidence[{j}] must be a string, got {_kind(item)}"
    kept = [item for item in value if item.strip()]
    if not kept:
        return None, "'evidence' holds only empty strings"
    return kept, None


def _claim_and_label(obj: dict[str, Any]) -> tuple[str | None, Literal[1, 2] | None, str | None]:
    claim = obj.get("claim")
    if "claim" not in obj:
        return None, None, "missing key 'claim'"
    if not isinstance(claim, str):
        return None, None, f"'claim' must be a string, got {_kind(claim)}"
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

    A row is skipped, with its line and the reason, when it is not valid UTF-8 or JSON, starts
    with a byte-order mark, is not an object, has a missing or empty claim, an unknown label, or
    evidence that is not a non-empty array of strings. A file with no usable row raises
    :class:`DatasetError` (one line); so does a file that cannot be read.
    """
    if dataset is None:
        dataset = "factcheck" if path is None else Path(path).stem
    if path is None and dataset not in FACTCHECK_FILES:
        raise ValueError(f"no bundled fact-checking file named {dataset!r}; "
                         f"known: {', '.join(FACTCHECK_FILES)} (or pass a path)")
    source, raw = _factcheck_bytes(path, dataset if path is None else "factcheck")
    fix = repair_text if repair else _identity
    out: list[DecisionInstance] = []
    skipped: list[SkippedRow] = []
    record = -1
    for line_no, raw_line in enumerate(raw.split(b"\n"), start=1):
        if not raw_line.strip():
            continue
        record += 1

        def skip(problem: str, line_no: int = line_no, record: int = record) -> None:
            skipped.append(SkippedRow(line=line_no, record=record, problem=problem))

        try:
            line = raw_line.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            skip(f"not valid UTF-8 (byte {exc.start + 1} of the line)")
            continue
        if line.startswith(_BOM):
            skip("starts with a byte-order mark (U+FEFF); save the file as UTF-8 without BOM")
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            skip(_json_problem(line, exc))
            continue
        if not isinstance(obj, dict):
            skip(f"expected an object, got {_kind(obj)}")
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
            skip(f"unusable row ({_validation_message(exc)})")
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


# --------------------------------------------------------------------------- dispatch


def load_dataset(
    name: str, path: str | Path | None = None
) -> list[DecisionInstance] | list[PairwiseInstance]:
    """Load a dataset by name (one of :data:`DATASET_NAMES`); ``path`` None reads the bundled copy."""
    if name == "common2sense-pairwise":
        return load_pairwise(path)
    if name in ("common2sense", "plasma", "today"):
        return load_decision(name, path)  # type: ignore[arg-type]
    if is_factcheck_dataset(name):
        return load_factcheck(path, dataset=factcheck_ids_name(name))
    raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASET_NAMES)}")
