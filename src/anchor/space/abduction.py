"""Iterative bottom-up abduction: grow a factor set round by round.

Each round asks for ``b`` sentences arguing for either outcome (told which aspects are already
covered), extracts factors from them, and validates the candidates before merging: exact and
near duplicates (by embedding similarity) are dropped outright, borderline pairs and relevance
are judged by the LLM in one call. It stops at ``n_target`` factors, after ``max_rounds`` rounds,
or when ``patience`` rounds in a row add nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from anchor import offload, prompts
from anchor.embed import Embedder
from anchor.llm.client import LLMClient
from anchor.progress import ProgressEvent, Reporter, silent
from anchor.types import AbductionRound, BuildParams, RejectedCandidate, Scenario, StopReason

MAX_FACTOR_CHARS = 120
_KNOWN_IN_PROMPT = 25  # factors listed as "already covered": enough to steer, short enough to stay cheap
_LEADING_MARK = re.compile(r"^\s*(?:[-*\u2022]+|\(?\d+[.)]|F\d+:)\s*")


def normalize_factor(text: str) -> str | None:
    """Tidy one extracted factor; None when nothing usable remains."""
    text = _LEADING_MARK.sub("", text)
    text = " ".join(text.split()).strip(" \"'`.,;:!?-")
    if not text or len(text) > MAX_FACTOR_CHARS or not any(ch.isalpha() for ch in text):
        return None
    return text


def _key(text: str) -> str:
    return " ".join(text.casefold().split())


@dataclass
class AbductionOutcome:
    factors: list[str]
    found_in_round: list[int]
    rounds: list[AbductionRound]
    stop_reason: StopReason
    vectors: np.ndarray


class Abductor:
    """Runs the abduction loop for one scenario."""

    def __init__(self, client: LLMClient, embedder: Embedder, params: BuildParams) -> None:
        self.client = client
        self.embedder = embedder
        self.params = params

    async def run(self, scenario: Scenario, report: Reporter = silent) -> AbductionOutcome:
        p = self.params
        factors: list[str] = []
        found_in: list[int] = []
        vectors = np.zeros((0, 0), dtype=np.float32)
        rounds: list[AbductionRound] = []
        idle = 0
        stop = StopReason.MAX_ROUNDS
        report(ProgressEvent("abduction", 0, p.max_rounds, "starting", {"factors": 0}))
        for t in range(1, p.max_rounds + 1):
            if len(factors) >= p.n_target:
                stop = StopReason.TARGET_REACHED
                break
            sentences = await self._generate(scenario, factors, t)
            extracted = await self._extract(sentences, t)
            added, rejected, new_vecs = await self._validate(scenario, extracted, factors, vectors, t)
            factors.extend(added)
            found_in.extend([t] * len(added))
            if added:
                vectors = new_vecs if vectors.size == 0 else np.vstack([vectors, new_vecs])
            rounds.append(AbductionRound(round=t, sentences=sentences, extracted=extracted, added=added,
                                         rejected=rejected))
            idle = 0 if added else idle + 1
            report(ProgressEvent("abduction", t, p.max_rounds, f"round {t}: +{len(added)}",
                                 {"factors": len(factors)}))
            if idle >= p.patience:
                stop = StopReason.SATURATED
                break
        else:
            if len(factors) >= p.n_target:
                stop = StopReason.TARGET_REACHED
        return AbductionOutcome(factors, found_in, rounds, stop, vectors)

    # ------------------------------------------------------------------ the three steps

    async def _generate(self, scenario: Scenario, known: list[str], t: int) -> list[str]:
        b = self.params.batch_size
        shown = known[-_KNOWN_IN_PROMPT:]
        answer = await self.client.ask(
            prompts.GENERATE_SENTENCES,
            schema=prompts.text_list_schema("Sentences", "sentences", b, 240),
            sample_index=t,
            temperature=self.params.abduction_temperature,
            scenario=scenario.text or "(none)", outcome1=scenario.outcome1, outcome2=scenario.outcome2,
            known="; ".join(shown) if shown else "none yet", n=b,
        )
        seen: set[str] = set()
        out: list[str] = []
        for s in answer.sentences:  # type: ignore[attr-defined]
            s = " ".join(s.split())
            if s and _key(s) not in seen:
                seen.add(_key(s))
                out.append(s)
        return out[:b]

    async def _extract(self, sentences: list[str], t: int) -> list[str]:
        if not sentences:
            return []
        limit = min(30, 3 * len(sentences))
        answer = await self.client.ask(
            prompts.EXTRACT_FACTORS,
            schema=prompts.text_list_schema("Factors", "factors", limit, 80),
            sample_index=t,
            sentences=prompts.numbered(sentences),
        )
        return [f for f in answer.factors[:limit]]  # type: ignore[attr-defined]

    async def _validate(
        self, scenario: Scenario, extracted: list[str], factors: list[str], vectors: np.ndarray, t: int
    ) -> tuple[list[str], list[RejectedCandidate], np.ndarray]:
        p = self.params
        rejected: list[RejectedCandidate] = []
        existing = {_key(f): f for f in factors}
        echoes = prompts.example_strings(prompts.EXTRACT_FACTORS)
        candidates: list[str] = []
        first_seen: dict[str, str] = {}
        for raw in extracted:
            text = normalize_factor(raw)
            if text is None:
                rejected.append(RejectedCandidate(text=raw[:200], reason="invalid"))
            elif _key(text) in echoes:
                rejected.append(RejectedCandidate(text=text, reason="example_echo"))
            elif _key(text) in existing:
                rejected.append(RejectedCandidate(text=text, reason="duplicate", similar_to=existing[_key(text)],
                                                  similarity=1.0))
            elif _key(text) in first_seen:
                # Repeats an earlier candidate of this round: name that one, not the repeat itself.
                rejected.append(RejectedCandidate(text=text, reason="duplicate", similar_to=first_seen[_key(text)],
                                                  similarity=1.0))
            else:
                first_seen[_key(text)] = text
                candidates.append(text)
        if not candidates:
            return [], rejected, np.zeros((0, 0), dtype=np.float32)

        cand_vecs = await offload.encode(self.embedder, candidates)
        # Compare each candidate with the accepted set, growing it as candidates pass, so two
        # paraphrases within one round do not both get in.
        pool_texts = list(factors)
        pool = vectors if vectors.size else np.zeros((0, cand_vecs.shape[1]), dtype=np.float32)
        pending: list[tuple[str, np.ndarray, str | None, float | None]] = []
        for text, vec in zip(candidates, cand_vecs, strict=True):
            nearest, sim = None, None
            if len(pool_texts):
                sims = pool @ vec
                j = int(np.argmax(sims))
                nearest, sim = pool_texts[j], float(sims[j])
            if sim is not None and sim >= p.dedup_threshold:
                rejected.append(RejectedCandidate(text=text, reason="near_duplicate", similar_to=nearest,
                                                  similarity=round(sim, 4)))
                continue
            borderline = nearest if sim is not None and sim >= p.borderline_threshold else None
            pending.append((text, vec, borderline, round(sim, 4) if borderline else None))
            pool_texts.append(text)
            pool = np.vstack([pool, vec[None, :]])

        needs_llm = [i for i, (_, _, near, _) in enumerate(pending) if near is not None or p.check_relevance]
        verdicts: dict[int, str] = {}
        if needs_llm:
            lines = []
            for i in needs_llm:
                text, _, near, _ = pending[i]
                lines.append(text + (f"  (similar existing factor: {near})" if near else ""))
            schema = prompts.keyed_schema("Validation", len(lines), "verdict")
            answer = await self.client.ask(
                prompts.VALIDATE_FACTORS, schema=schema, sample_index=t,
                scenario=scenario.text or "(none)", outcome1=scenario.outcome1, outcome2=scenario.outcome2,
                candidates=prompts.numbered(lines, keys=True),
            )
            data = answer.model_dump()
            for key, i in zip(prompts.item_keys(len(lines)), needs_llm, strict=True):
                verdict = data[key]
                # The LLM may only call a pair a duplicate when there was a similar factor to compare.
                if verdict == "duplicate" and pending[i][2] is None:
                    verdict = "keep"
                if verdict == "irrelevant" and not p.check_relevance:
                    verdict = "keep"
                verdicts[i] = verdict
        added: list[str] = []
        kept_vecs: list[np.ndarray] = []
        for i, (text, vec, near, sim) in enumerate(pending):
            verdict = verdicts.get(i, "keep")
            if verdict == "keep":
                added.append(text)
                kept_vecs.append(vec)
            elif verdict == "duplicate":
                rejected.append(RejectedCandidate(text=text, reason="near_duplicate", similar_to=near, similarity=sim))
            else:
                rejected.append(RejectedCandidate(text=text, reason="irrelevant"))
        new_vecs = np.stack(kept_vecs).astype(np.float32) if kept_vecs else np.zeros((0, 0), dtype=np.float32)
        return added, rejected, new_vecs
