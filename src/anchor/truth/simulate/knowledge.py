"""What the simulated LLM knows about one world, and the true numbers it answers from.

* The factors it can name: a fixed subset of the world's factors (``factor_recall``) plus invented
  ones (``hallucination_rate``), drawn once per world from the simulator's seed. Inventions are
  plausible but absent: factors of the world's own domain in the bank (``anchor.truth.vocabulary``)
  that the world does not use, from its other themes and from the themes it uses; a world not drawn
  from the bank (a hand-made one) gets them from a small bank of unrelated phrases
  (:mod:`.invented`);
* the factors it recognises when shown one: every factor of the world (a real factor is relevant even
  if the LLM would never have thought of it) and its own inventions;
* what a condition makes present: the world's condition with that exact text, else every factor
  whose text or one of whose mentions appears in the text (so a condition written by a user works too);
* the truth: P(O1 | present factors) by exact enumeration, and each factor's phi (by ``phi_reading``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

from anchor.truth import exact
from anchor.truth.simulate.errors import SimErrors, world_rng
from anchor.truth.simulate.invented import INVENTED
from anchor.truth.vocabulary import DOMAINS
from anchor.truth.world import OUTCOME, World

#: What ``anchor.llm.context`` puts where it cut a long field (taken off before a condition is read).
T = TypeVar("T")
_OMISSION = re.compile(r"\s*\[\.\.\. [\d,]+ characters omitted \.\.\.\]\s*$")


def key(text: str) -> str:
    """What two spellings of one factor share (case and spacing aside)."""
    return " ".join(text.casefold().split())


def find_phrases(text: str, phrases: Iterable[tuple[str, T]]) -> list[tuple[int, T]]:
    """(position, item) for each phrase found in ``text`` (case aside), longest phrases first: a phrase
    inside a longer one's match is not found again there. In order of position."""
    folded = text.casefold()
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, T]] = []
    for phrase, item in sorted(phrases, key=lambda p: -len(p[0])):
        needle = " ".join(phrase.casefold().split())
        at = folded.find(needle) if needle else -1
        while at >= 0:
            span = (at, at + len(needle))
            if not any(a < span[1] and span[0] < b for a, b in taken):
                taken.append(span)
                found.append((at, item))
                break
            at = folded.find(needle, at + 1)
    return sorted(found, key=lambda f: f[0])


@dataclass(frozen=True)
class Entry:
    """A factor the simulated LLM can talk about: a world factor, or one it invented (no id)."""

    text: str
    theme: str
    factor_id: str | None = None
    latent: str | None = None

    @property
    def invented(self) -> bool:
        return self.factor_id is None


def invention_pool(world: World) -> list[Entry]:
    """What the LLM may invent for ``world``, in a fixed order: the factors of its domain in the bank
    (found by its outcomes and its factors' texts) that it does not use; for a world not drawn from the
    bank, the unrelated phrases of :data:`~anchor.truth.simulate.invented.INVENTED`. Never one of the
    world's own factors."""
    taken = {key(f.text) for f in world.factors}
    outcomes = (key(world.outcome1), key(world.outcome2))
    for d in DOMAINS:
        bank = [(th.name, words.text) for th in d.themes for words in th.factors]
        if (key(d.outcome1), key(d.outcome2)) == outcomes and taken <= {key(text) for _, text in bank}:
            return [Entry(text, theme) for theme, text in bank if key(text) not in taken]
    return [Entry(text, theme) for theme, text in INVENTED if key(text) not in taken]


class WorldKnowledge:
    """The simulated LLM's view of one world under given errors and seed."""

    def __init__(self, world: World, errors: SimErrors, seed: int) -> None:
        self.world = world
        self.errors = errors
        self.seed = seed
        self.real = [Entry(f.text, f.theme, f.id, world.latent_of(f.id)) for f in world.factors]
        n = len(self.real)
        keep = round(errors.factor_recall * n)
        known = sorted(world_rng(seed, world.id, "recall").sample(range(n), keep))
        pool = invention_pool(world)
        invented = world_rng(seed, world.id, "hallucination").sample(pool, min(len(pool),
                                                                                round(errors.hallucination_rate * n)))
        #: What the LLM can name (in abduction), real factors first.
        self.known: list[Entry] = [self.real[i] for i in known] + invented
        self._by_key: dict[str, Entry] = {key(e.text): e for e in [*self.real, *invented]}

    @cached_property
    def theme_latent(self) -> dict[str, str]:
        """The latent of each theme of a latent world (its factors' latent), where it has one."""
        return {e.theme: e.latent for e in self.real if e.latent is not None}

    @property
    def entries(self) -> list[Entry]:
        """Every factor it recognises: the world's, then its inventions."""
        return list(self._by_key.values())

    def lookup(self, text: str) -> Entry | None:
        """The factor with this text (any world factor, or one of the LLM's inventions)."""
        return self._by_key.get(key(text))

    # ------------------------------------------------------------------ conditions

    @cached_property
    def _conditions(self) -> dict[str, list[str]]:
        return {key(c.text): list(c.present) for c in self.world.conditions}

    def present(self, condition: str) -> list[str]:
        """Ids of the factors ``condition`` makes present."""
        text = _OMISSION.sub("", condition)
        found = self._conditions.get(key(text))
        if found is not None:
            return found
        folded = key(text)
        out = []
        for f in self.world.factors:
            if any(key(m) in folded for m in (f.text, *f.mentions)):
                out.append(f.id)
        return out

    def p_outcome1(self, present: list[str]) -> float:
        """The true P(O1 | these factors present)."""
        return exact.p_outcome1(self.world, sorted(set(present)))

    def base_rate(self) -> float:
        """The true P(O1) with nothing observed."""
        return exact.prior_outcome1(self.world)

    def p_given(self, evidence: dict[str, int]) -> float:
        """The true P(O1 | factors set present (1) or absent (0))."""
        return exact.joint(self.world).conditional({OUTCOME: 1}, evidence)

    # ------------------------------------------------------------------ factors

    @cached_property
    def _posterior(self) -> dict[str, float]:
        return {f.id: exact.factor_phi(self.world, f.id) for f in self.world.factors}

    def posterior(self, entry: Entry | None) -> float:
        """P(O1 | the factor is present); 0.5 for an invented or unknown one."""
        if entry is None or entry.factor_id is None:
            return 0.5
        return self._posterior[entry.factor_id]

    def given_base_rate(self, entry: Entry | None, base_rate: float) -> float:
        """P(O1 | the factor present) had the outcome's prior been ``base_rate``: the factor's own likelihood
        ratio on that prior (an invented or unknown factor says nothing: the base rate itself)."""
        if entry is None or entry.factor_id is None:
            return base_rate
        on1, on2 = exact.likelihoods(self.world, {entry.factor_id: 1})
        return base_rate * on1 / (base_rate * on1 + (1.0 - base_rate) * on2)

    def phi(self, entry: Entry | None) -> float:
        """The exact answer to "phi of this factor" under ``phi_reading``."""
        if entry is None or entry.factor_id is None:
            return 0.5
        if self.errors.phi_reading == "latent-link" and entry.latent is not None:
            table = exact.joint(self.world)
            state = self.o1_state(entry.latent)
            return table.conditional({entry.factor_id: 1}, {entry.latent: state})
        return self._posterior[entry.factor_id]

    def o1_state(self, latent: str) -> int:
        """The latent's O1-leaning state: the one more likely under O1 than under O2."""
        p1, p2 = self._latent_given_outcome(latent)
        return 1 if p1 >= p2 else 0

    def _latent_given_outcome(self, latent: str) -> tuple[float, float]:
        table = exact.joint(self.world)
        return table.conditional({latent: 1}, {OUTCOME: 1}), table.conditional({latent: 1}, {OUTCOME: 0})

    def latent_params(self, latent: str) -> tuple[float, float]:
        """(P(L = s | O1), P(L = s | O2)) for the latent's O1-leaning state s."""
        p1, p2 = self._latent_given_outcome(latent)
        return (p1, p2) if p1 >= p2 else (1.0 - p1, 1.0 - p2)

    def latent_name(self, latent: str) -> str:
        return next(lat.name for lat in self.world.latents if lat.id == latent)
