"""Helpers for tests that drive the stages with the scripted backend.

The stages put their items into the prompt text in a few fixed shapes (``F1: text`` keys,
``- text`` bullets, ``1. text`` numbers); the functions here read those shapes back, so a test's
responder can answer about the items it was actually shown. ``ScriptedLLM`` is a configurable
responder for every schema the pipeline uses; tests replace the parts they care about.

Only for unit tests: nothing here produces results.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from anchor.llm.scripted import ScriptedRequest

_KEYED = re.compile(r"^(F\d+): (.*)$", re.M)
_SIMILAR = re.compile(r"^(.*?)  \(similar existing factor: (.*)\)$")
_ROUGH = re.compile(r"^(.*) \(rough: ([0-9.]+)\)$")
_LATENT_LINE = re.compile(r"^(L\d+): (.*)$", re.M)
_ITEM = re.compile(r"^(?:- |\d+\. )(.*)$")


def kind(request: ScriptedRequest) -> str:
    """The schema family of a request: 'Votes3' -> 'Votes', 'LatentParams2' -> 'LatentParams'."""
    return re.sub(r"\d+$", "", request.schema_name)


def keyed(user: str) -> list[tuple[str, str]]:
    """``[(key, text)]`` for the ``F1: text`` lines of a prompt, in order."""
    return _KEYED.findall(user)


def validation_items(user: str) -> list[tuple[str, str, str | None]]:
    """``[(key, candidate, similar existing factor or None)]`` of a validation prompt."""
    out = []
    for key, line in keyed(user):
        m = _SIMILAR.match(line)
        out.append((key, m.group(1), m.group(2)) if m else (key, line, None))
    return out


def phi_items(user: str) -> list[tuple[str, str, float | None]]:
    """``[(key, factor text, rough prior)]`` of a phi-elicitation prompt (the rough prior None where the prompt
    gives none: the consistent rule's, which states the base rate instead)."""
    out: list[tuple[str, str, float | None]] = []
    for key, line in keyed(user):
        m = _ROUGH.match(line)
        if m is None:
            assert "Base rate of outcome 1: " in user, f"unexpected phi line {line!r}"
            out.append((key, line, None))
        else:
            out.append((key, m.group(1), float(m.group(2))))
    return out


def section(user: str, header: str) -> list[str]:
    """Items (``- x`` or ``1. x`` lines) right after the line ``header``."""
    lines = user.splitlines()
    start = lines.index(header) + 1
    items = []
    for line in lines[start:]:
        m = _ITEM.match(line)
        if not m:
            break
        items.append(m.group(1))
    return items


def field_line(user: str, name: str) -> str:
    """The value of a ``Name: value`` line (e.g. the condition)."""
    for line in user.splitlines():
        if line.startswith(f"{name}: "):
            return line[len(name) + 2:]
    raise AssertionError(f"no {name!r} line in prompt:\n{user}")


def latent_lines(user: str) -> list[tuple[str, str]]:
    return _LATENT_LINE.findall(user)


def requested_sentences(user: str) -> int:
    m = re.search(r"Write (\d+) new sentences", user)
    assert m, user
    return int(m.group(1))


def _first_words(texts: list[str]) -> dict[str, Any]:
    return {"theme": f"Theme of {texts[0]}", "redundant": []}


@dataclass
class ScriptedLLM:
    """A responder for ``ScriptedBackend`` covering every schema the pipeline asks for.

    * ``rounds``: the factors the extraction call returns, one list per abduction round; after
      the last one it returns an unusable item (a round that adds nothing). An extraction is answered
      for the generation whose sentences it is given ("... of call K": the K-th list), not by the order
      the extractions arrive in: rounds that get their sentences together (one request with ``n``) send
      their extractions at once, and over HTTP those may reach the server in either order.
    * ``verdict(candidate, similar)``, ``label(factor)``, ``theme(members)``,
      ``select(condition, candidates)``, ``reflect(condition, selected)``, ``phi(factor)``,
      ``partition(texts)``, ``latent_params(line)``, ``base_rate()``: the answers for the other calls.
    """

    rounds: list[list[str]] = field(default_factory=list)
    verdict: Callable[[str, str | None], str] = lambda text, similar: "keep"
    label: Callable[[str], str] = lambda text: "neutral"
    theme: Callable[[list[str]], dict[str, Any]] = _first_words
    select: Callable[[str, list[str]], list[str]] = lambda condition, candidates: list(candidates)
    reflect: Callable[[str, list[str]], list[str]] = lambda condition, selected: list(selected)
    phi: Callable[[str], float] = lambda text: 0.7
    partition: Callable[[list[str]], list[dict[str, Any]]] = lambda texts: [{"name": "All", "factors": list(texts)}]
    latent_params: Callable[[str], tuple[float, float]] = lambda line: (0.8, 0.3)
    base_rate: Callable[[], float] = lambda: 0.5
    calls: Counter = field(default_factory=Counter)

    def __call__(self, req: ScriptedRequest) -> Any:
        k = kind(req)
        self.calls[k] += 1
        user = req.user
        if k == "Sentences":
            n = requested_sentences(user)
            return {"sentences": [f"Reason {i + 1} of call {self.calls[k]}." for i in range(n)]}
        if k == "Factors":
            of_call = re.search(r"of call (\d+)\.", user)
            t = int(of_call.group(1)) if of_call else self.calls[k]
            return {"factors": list(self.rounds[t - 1]) if t <= len(self.rounds) else ["???"]}
        if k == "Validation":
            return {key: self.verdict(text, similar) for key, text, similar in validation_items(user)}
        if k == "Votes":
            return {key: self.label(text) for key, text in keyed(user)}
        if k == "ThemeAndPruning":
            return self.theme(section(user, "Factors in the group:"))
        if k == "Selection":
            return {"selected": self.select(field_line(user, "Condition"), section(user, "Candidate factors:"))}
        if k == "Reflection":
            return {"keep": self.reflect(field_line(user, "Condition"), section(user, "Selected factors:"))}
        if k == "FactorProbabilities":
            return {key: self.phi(text) for key, text, _ in phi_items(user)}
        if k == "LatentPartition":
            return {"latents": self.partition(section(user, "Factors:"))}
        if k == "LatentParams":
            out = {}
            for key, line in latent_lines(user):
                p1, p2 = self.latent_params(line)
                out[key] = {"p_outcome1": p1, "p_outcome2": p2}
            return out
        if k == "BaseRateAnswer":
            return {"p_outcome1": self.base_rate()}
        raise AssertionError(f"unexpected request schema {req.schema_name!r}")


def requests_of(backend: Any, family: str) -> list[ScriptedRequest]:
    """The requests a ScriptedBackend received for one schema family (see ``kind``), in order."""
    return [r for r in backend.requests if kind(r) == family]


def refused_in_one_line(result: Any, message: str, folder: Any) -> None:
    """Exit code 2, stderr one ``error:`` line holding ``message``, and nothing written into ``folder``."""
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    assert list(folder.iterdir()) == []
