"""Common2Sense, Plasma and Today: JSON arrays with one :class:`DecisionInstance` per condition.

Formats, as found in the bundled files:

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

A file that cannot be used raises :class:`DatasetError` listing where each problem is (``entry i
(line n)``, ``i`` being the 0-based index used in the ids).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from anchor.evaluation.datasets.instances import DecisionInstance
from anchor.evaluation.datasets.reading import DatasetError, Problems, read_text
from anchor.evaluation.datasets.text import normalise_space, repair_text
from anchor.text import kind_of, validation_message
from anchor.types import Scenario

DecisionName = Literal["common2sense", "plasma", "today"]

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
        raise DatasetError(source, [f"the top level is {kind_of(data)}; expected an array of objects"])
    if not data:
        raise DatasetError(source, ["the array is empty: no entries"])
    lines = _entry_lines(text, len(data))
    return [
        (f"entry {i}" + (f" (line {ln})" if ln is not None else ""), entry)
        for i, (ln, entry) in enumerate(zip(lines, data, strict=True))
    ]


def _text_field(entry: dict[str, Any], key: str, where: str, problems: Problems) -> str | None:
    if key not in entry:
        problems.add(where, f"missing key {key!r}")
        return None
    value = entry[key]
    if not isinstance(value, str):
        problems.add(where, f"{key!r} must be a string, got {kind_of(value)}")
        return None
    if not value.strip():
        problems.add(where, f"{key!r} is empty")
        return None
    return value


def _text_list(
    entry: dict[str, Any], key: str, where: str, problems: Problems, *, allow_empty: bool
) -> list[str] | None:
    if key not in entry:
        problems.add(where, f"missing key {key!r}")
        return None
    value = entry[key]
    if not isinstance(value, list):
        problems.add(where, f"{key!r} must be an array of strings, got {kind_of(value)}")
        return None
    if not value and not allow_empty:
        problems.add(where, f"{key!r} is an empty array")
        return None
    ok = True
    for j, item in enumerate(value):
        if not isinstance(item, str):
            problems.add(where, f"{key}[{j}] must be a string, got {kind_of(item)}")
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


def _c2s_conditions(
    entry: dict[str, Any], where: str, problems: Problems
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
            problems.add(where, f"'additional_sentence_label' must be an object, got {kind_of(labels)}")
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
    entry: dict[str, Any], where: str, problems: Problems
) -> list[tuple[str, Literal[1, 2]]]:
    before = problems.count
    sentences = _text_list(entry, "additional_sentences", where, problems, allow_empty=False)
    labels = entry.get("additional_sentence_label")
    if "additional_sentence_label" not in entry:
        problems.add(where, "missing key 'additional_sentence_label'")
        return []
    if not isinstance(labels, dict):
        problems.add(where, f"'additional_sentence_label' must be an object, got {kind_of(labels)}")
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
    source, text = read_text(path, name)
    entries = _load_json_array(source, text)
    fix = repair_text if repair else normalise_space
    problems = Problems(source)
    out: list[DecisionInstance] = []
    for i, (where, entry) in enumerate(entries):
        if not isinstance(entry, dict):
            problems.add(where, f"expected an object, got {kind_of(entry)}")
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
            problems.add(where, f"invalid scenario ({validation_message(exc)})")
            continue
        for k, (sentence, label) in enumerate(conditions):
            try:
                out.append(DecisionInstance(
                    id=f"{name}:{i}:{k}", dataset=name, scenario=scenario, condition=fix(sentence), label=label,
                ))
            except ValidationError as exc:
                problems.add(where, f"condition {k} is unusable ({validation_message(exc)})")
    problems.raise_if_any()
    if not out:  # pragma: no cover - every valid entry yields at least one condition
        raise DatasetError(source, ["no instances"])
    return out
