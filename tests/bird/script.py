"""A scripted responder for the BIRD prompts (unit tests only).

It reads back what each prompt shows (the factor, its values, the condition) and answers through
functions a test supplies, so the expected numbers of a test are known in advance.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from anchor.llm.scripted import ScriptedRequest
from tests.helpers import field_line, kind, section

Structure = list[tuple[str, list[str]]]


def structure_json(structure: Structure) -> dict[str, Any]:
    return {"factors": [{"factor": name, "values": list(values)} for name, values in structure]}


def value_lines(user: str) -> list[tuple[str, str]]:
    """``[(key, value)]`` of a labelling prompt's ``V1: value`` lines."""
    return re.findall(r"^(V\d+): (.*)$", user, re.M)


def condition_sentences(condition: str) -> list[str]:
    """The values of a CPT-data condition (each was written as a sentence ending with '.')."""
    return [s.strip() for s in re.findall(r"[^.]+\.", condition)]


@dataclass
class BirdScript:
    """Responder for ``ScriptedBackend``; every answer comes from the functions below.

    * ``structure``: the initial factor structure; ``extend``/``rerank``/``complete`` the answers to
      the follow-up turns (default: repeat the structure shown).
    * ``label(factor, value, round)``: 'statement 1' / 'statement 2' / 'both' / 'neither' / anything.
    * ``judge(values)``: (outcome-1 level, outcome-2 level) for the values of one assignment.
    * ``choose(condition, factor, values, round)``: the mapping answer (a value or 'none').
    * ``reflect(condition, values)``: the values to keep.
    * ``closest(condition, options)``: ``(factor, value)`` for the relaxed fallback.
    """

    structure: Structure = field(default_factory=list)
    extend: Structure | None = None
    rerank: Structure | None = None
    complete: Structure | None = None
    label: Callable[[str, str, int], str] = lambda factor, value, r: "both"
    judge: Callable[[list[str]], tuple[str, str]] = lambda values: ("neutral", "neutral")
    choose: Callable[[str, str, list[str], int], str] = lambda condition, factor, values, r: "none"
    reflect: Callable[[str, list[str]], list[str]] = lambda condition, values: list(values)
    closest: Callable[[str, dict[str, list[str]]], tuple[str, str]] | None = None
    calls: Counter = field(default_factory=Counter)
    label_rounds: Counter = field(default_factory=Counter)
    mapping_rounds: Counter = field(default_factory=Counter)

    def __call__(self, req: ScriptedRequest) -> Any:
        k = kind(req)
        self.calls[k] += 1
        user = req.user
        if k == "BirdSentences":
            n = int(re.search(r"Write (\d+) sentences", user).group(1))  # type: ignore[union-attr]
            return {"sentences": [f"Reason {i + 1} from call {self.calls[k]}." for i in range(n)]}
        if k == "BirdFactorStructure":
            if "Are these all the factors?" in user:
                return structure_json(self.extend if self.extend is not None else self._shown(user))
            if "keep at most" in user:
                return structure_json(self.rerank if self.rerank is not None else self._shown(user))
            if "Current factors:" in user:
                return structure_json(self.complete if self.complete is not None else self._shown(user))
            return structure_json(self.structure)
        if k == "BirdLabels":
            factor = field_line(user, "Factor")
            r = self.label_rounds[factor]
            self.label_rounds[factor] += 1
            return {"explanation": "scripted", "labels": {key: self.label(factor, v, r) for key, v in value_lines(user)}}
        if k == "BirdJudgement":
            o1, o2 = self.judge(condition_sentences(field_line(user, "Condition")))
            return {"reasoning": "scripted", "outcome1": o1, "outcome2": o2}
        if k == "BirdValueChoice":
            condition, factor = field_line(user, "Condition"), field_line(user, "Factor")
            r = self.mapping_rounds[(condition, factor)]
            self.mapping_rounds[(condition, factor)] += 1
            return {"value": self.choose(condition, factor, section(user, "Values:"), r)}
        if k == "BirdReflection":
            return {"keep": self.reflect(field_line(user, "Condition"), section(user, "Matched values:"))}
        if k == "BirdClosestValue":
            assert self.closest is not None, "relaxed fallback not scripted"
            factor, value = self.closest(field_line(user, "Condition"), relaxed_options(user))
            return {"factor": factor, "value": value}
        raise AssertionError(f"unexpected request schema {req.schema_name!r}")

    @staticmethod
    def _shown(user: str) -> Structure:
        import json

        shown = json.loads(field_line(user, "Current factors"))
        return [(f["factor"], f["values"]) for f in shown["factors"]]


def relaxed_options(user: str) -> dict[str, list[str]]:
    """``{factor: [values]}`` of the relaxed-fallback prompt."""
    lines = user.splitlines()
    start = lines.index("Factors and their values:") + 1
    out: dict[str, list[str]] = {}
    current = None
    for line in lines[start:]:
        if line.startswith("  - ") and current is not None:
            out[current].append(line[4:])
        elif line.startswith("- ") and line.endswith(":"):
            current = line[2:-1]
            out[current] = []
        else:
            break
    return out
