"""Validating one abduction round's candidate factors before they join the factor set.

Unusable items, few-shot echoes and exact duplicates are dropped by their text; near duplicates by
embedding similarity (to the factors merged so far and to earlier candidates of the same round);
borderline pairs are judged by the LLM in one call (``validate``), which also judges every candidate's
relevance when ``BuildParams.check_relevance`` asks for it (by default extraction has left out what has
no bearing on the scenario, and a round without a borderline pair sends no request).

With several rounds in flight, a round is validated against the factors that were merged when it
started, and checked again when its turn to merge comes against those merged since (``recheck``):
by embedding, which may reject a candidate outright, and by the LLM again only for a candidate that
meanwhile got a new borderline neighbour. A round validated against everything merged before it
(one round at a time) has nothing to re-check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from anchor import prompts
from anchor.compute import offload
from anchor.embedding.embed import Embedder
from anchor.llm.client import LLMClient
from anchor.settings.space import BuildParams
from anchor.types import RejectedCandidate, Scenario

MAX_FACTOR_CHARS = 120
_LEADING_MARK = re.compile(r"^\s*(?:[-*\u2022]+|\(?\d+[.)]|F\d+:)\s*")


def normalize_factor(text: str) -> str | None:
    """Tidy one extracted factor; None when nothing usable remains."""
    text = _LEADING_MARK.sub("", text)
    text = " ".join(text.split()).strip(" \"'`.,;:!?-")
    if not text or len(text) > MAX_FACTOR_CHARS or not any(ch.isalpha() for ch in text):
        return None
    return text


def text_key(text: str) -> str:
    """What two texts share when they are the same factor written differently (case, spacing)."""
    return " ".join(text.casefold().split())


def _no_vectors() -> np.ndarray:
    return np.zeros((0, 0), dtype=np.float32)


@dataclass(frozen=True)
class Merged:
    """Factors merged into the set, in merge order, with their unit-length embedding rows."""

    texts: tuple[str, ...] = ()
    vectors: np.ndarray = field(default_factory=_no_vectors)

    def __len__(self) -> int:
        return len(self.texts)

    def plus(self, texts: list[str], vectors: np.ndarray) -> Merged:
        if not texts:
            return self
        stacked = vectors if self.vectors.size == 0 else np.vstack([self.vectors, vectors])
        return Merged((*self.texts, *texts), stacked.astype(np.float32))

    def since(self, earlier: Merged) -> Merged:
        """The factors merged after ``earlier`` (a prefix of this set)."""
        n = len(earlier)
        return Merged(self.texts[n:], self.vectors[n:] if n < len(self.texts) else _no_vectors())


@dataclass
class Candidate:
    """A candidate that passed its checks so far, with the similar factor the LLM was shown."""

    text: str
    vector: np.ndarray
    similar_to: str | None = None
    similarity: float | None = None


@dataclass
class Validated:
    """A round's candidates after validation: those kept (in order) and those rejected."""

    kept: list[Candidate]
    rejected: list[RejectedCandidate]


@dataclass
class Rechecked:
    added: list[Candidate]
    rejected: list[RejectedCandidate]
    reasked: list[str]


class CandidateValidator:
    """Validates candidates for one scenario (configured like the ``Abductor`` that uses it)."""

    def __init__(self, client: LLMClient, embedder: Embedder, params: BuildParams, scenario: Scenario) -> None:
        self.client = client
        self.embedder = embedder
        self.params = params
        self.scenario = scenario
        self._echoes = prompts.example_strings(prompts.EXTRACT_FACTORS)

    async def validate(self, extracted: list[str], merged: Merged, t: int) -> Validated:
        """Check round ``t``'s extracted items against ``merged`` and against each other."""
        p = self.params
        rejected: list[RejectedCandidate] = []
        existing = {text_key(f): f for f in merged.texts}
        texts: list[str] = []
        first_seen: dict[str, str] = {}
        for raw in extracted:
            text = normalize_factor(raw)
            if text is None:
                rejected.append(RejectedCandidate(text=raw[:200], reason="invalid"))
            elif text_key(text) in self._echoes:
                rejected.append(RejectedCandidate(text=text, reason="example_echo"))
            elif text_key(text) in existing:
                rejected.append(RejectedCandidate(text=text, reason="duplicate", similar_to=existing[text_key(text)],
                                                  similarity=1.0))
            elif text_key(text) in first_seen:
                # Repeats an earlier candidate of this round: name that one, not the repeat itself.
                rejected.append(RejectedCandidate(text=text, reason="duplicate",
                                                  similar_to=first_seen[text_key(text)], similarity=1.0))
            else:
                first_seen[text_key(text)] = text
                texts.append(text)
        if not texts:
            return Validated([], rejected)

        vectors = await offload.encode(self.embedder, texts)
        # Compare each candidate with the merged set, growing it as candidates pass, so two
        # paraphrases within one round do not both get in.
        pool_texts = list(merged.texts)
        pool = merged.vectors if merged.vectors.size else np.zeros((0, vectors.shape[1]), dtype=np.float32)
        pending: list[Candidate] = []
        for text, vec in zip(texts, vectors, strict=True):
            nearest, sim = None, None
            if pool_texts:
                sims = pool @ vec
                j = int(np.argmax(sims))
                nearest, sim = pool_texts[j], float(sims[j])
            if sim is not None and sim >= p.dedup_threshold:
                rejected.append(RejectedCandidate(text=text, reason="near_duplicate", similar_to=nearest,
                                                  similarity=round(sim, 4)))
                continue
            borderline = sim is not None and sim >= p.borderline_threshold
            pending.append(Candidate(text, vec, nearest if borderline else None,
                                     round(sim, 4) if borderline and sim is not None else None))
            pool_texts.append(text)
            pool = np.vstack([pool, vec[None, :]])

        asked = [i for i, c in enumerate(pending) if c.similar_to is not None or p.check_relevance]
        verdicts = dict(zip(asked, await self._verdicts([pending[i] for i in asked], t), strict=True))
        kept: list[Candidate] = []
        for i, c in enumerate(pending):
            verdict = verdicts.get(i, "keep")
            if verdict == "keep":
                kept.append(c)
            else:
                rejected.append(self._rejection(c, verdict))
        return Validated(kept, rejected)

    async def recheck(self, validated: Validated, newer: Merged, t: int) -> Rechecked:
        """Check candidates kept by ``validate`` against ``newer`` factors (merged after it ran).

        An exact or near duplicate of a newer factor is rejected here; a candidate whose nearest
        factor is now a newer, borderline one is put to the LLM again, next to that factor.
        """
        p = self.params
        if not newer or not validated.kept:
            return Rechecked(list(validated.kept), [], [])
        keys = {text_key(f): f for f in newer.texts}
        verdict_of: dict[int, str] = {}  # candidate index -> "keep" or why it goes
        rejected_at: dict[int, RejectedCandidate] = {}
        again: list[tuple[int, Candidate]] = []
        for i, c in enumerate(validated.kept):
            if text_key(c.text) in keys:
                rejected_at[i] = RejectedCandidate(text=c.text, reason="duplicate", similar_to=keys[text_key(c.text)],
                                                   similarity=1.0, at_merge=True)
                continue
            sims = newer.vectors @ c.vector
            j = int(np.argmax(sims))
            sim = float(sims[j])
            if sim >= p.dedup_threshold:
                rejected_at[i] = RejectedCandidate(text=c.text, reason="near_duplicate", similar_to=newer.texts[j],
                                                   similarity=round(sim, 4), at_merge=True)
            elif sim >= p.borderline_threshold and (c.similarity is None or sim > c.similarity):
                again.append((i, Candidate(c.text, c.vector, newer.texts[j], round(sim, 4))))
            else:
                verdict_of[i] = "keep"
        for (i, c), verdict in zip(again, await self._verdicts([c for _, c in again], t), strict=True):
            if verdict == "keep":
                verdict_of[i] = "keep"
            else:
                rejected_at[i] = self._rejection(c, verdict).model_copy(update={"at_merge": True})
        added = [c for i, c in enumerate(validated.kept) if verdict_of.get(i) == "keep"]
        return Rechecked(added, [rejected_at[i] for i in sorted(rejected_at)], [c.text for _, c in again])

    async def _verdicts(self, asked: list[Candidate], t: int) -> list[str]:
        """The LLM's verdict on each candidate (one call for all of them; none when empty)."""
        if not asked:
            return []
        p = self.params
        lines = [c.text + (f"  (similar existing factor: {c.similar_to})" if c.similar_to else "") for c in asked]
        schema = prompts.keyed_schema("Validation", len(lines), "verdict")
        answer = await self.client.ask(
            prompts.VALIDATE_FACTORS, schema=schema, sample_index=t,
            scenario=self.scenario.text or "(none)", outcome1=self.scenario.outcome1,
            outcome2=self.scenario.outcome2, candidates=prompts.numbered(lines, keys=True),
        )
        data = answer.model_dump()
        out = []
        for key, c in zip(prompts.item_keys(len(lines)), asked, strict=True):
            verdict = data[key]
            # The LLM may only call a pair a duplicate when there was a similar factor to compare.
            if verdict == "duplicate" and c.similar_to is None:
                verdict = "keep"
            if verdict == "irrelevant" and not p.check_relevance:
                verdict = "keep"
            out.append(verdict)
        return out

    @staticmethod
    def _rejection(c: Candidate, verdict: str) -> RejectedCandidate:
        if verdict == "duplicate":
            return RejectedCandidate(text=c.text, reason="near_duplicate", similar_to=c.similar_to,
                                     similarity=c.similarity)
        return RejectedCandidate(text=c.text, reason="irrelevant")
