"""BIRD's forward abduction: sentences, a factor structure with values, value labels, pruning.

1. For each outcome, ``sentence_calls_per_side`` calls write sentences that make it more likely.
2. One call turns them into factors with mutually exclusive values; three follow-up turns (when
   ``extend_factors``) add missing factors, rerank and keep at most ``max_factors``, and complete
   the values. A turn whose answer is unusable keeps the previous structure (and says so).
3. ``label_rounds`` calls per factor label each value statement 1 / statement 2 / both / neither;
   a value keeps a label that has at least ``label_accept_ratio`` of the votes it received
   ('both' counts as neutral, a 'neither' majority is not a label); unlabelled values go.
4. A factor whose remaining values all share one label (or that has one value left) is pruned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from anchor import prompts
from anchor.bird.types import (
    AbductionRecord,
    BirdConfig,
    BirdFactor,
    BirdValue,
    FactorDraft,
    PruneRecord,
    ValueVotes,
)
from anchor.errors import LLMOutputError
from anchor.llm import chain
from anchor.llm.client import LLMClient
from anchor.progress import ProgressEvent, Reporter, silent
from anchor.types import FactorLabel, Scenario

MAX_NAME_CHARS = 80
MAX_SENTENCE_CHARS = 300


def tidy(text: str, limit: int = MAX_NAME_CHARS) -> str | None:
    """One factor name or value, trimmed; None when nothing usable remains."""
    text = " ".join(str(text).split()).strip(" \"'`.,;:!?-*")
    if not text or len(text) > limit or not any(ch.isalpha() for ch in text):
        return None
    return text


def key(text: str) -> str:
    """Comparison key: case, spacing and surrounding punctuation do not matter."""
    return " ".join(text.casefold().split()).strip(" \"'`.,;:!?")


def tidy_structure(items: list[prompts.BirdFactorItem]) -> list[FactorDraft]:
    """Drop empty or repeated factors and values (case-insensitively), keeping the first spelling."""
    seen: set[str] = set()
    out: list[FactorDraft] = []
    for item in items:
        name = tidy(item.factor)
        if name is None or key(name) in seen:
            continue
        values: list[str] = []
        value_keys: set[str] = set()
        for raw in item.values:
            value = tidy(raw)
            if value is not None and key(value) not in value_keys:
                value_keys.add(key(value))
                values.append(value)
        if values:
            seen.add(key(name))
            out.append(FactorDraft(name=name, values=values))
    return out


_LABEL_WORDS = {
    "statement 1": "outcome1", "statement1": "outcome1", "1": "outcome1", "outcome 1": "outcome1",
    "statement 2": "outcome2", "statement2": "outcome2", "2": "outcome2", "outcome 2": "outcome2",
    "both": "both", "neutral": "both", "neither": "neither", "none": "neither",
}


def read_vote(answer: str) -> str | None:
    """'outcome1' / 'outcome2' / 'both' / 'neither' for a label answer, or None if it names no option."""
    return _LABEL_WORDS.get(" ".join(re.sub(r"[^a-z0-9]+", " ", answer.casefold()).split()))


def accepted_label(votes: ValueVotes, ratio: float) -> FactorLabel | None:
    """The label holding at least ``ratio`` of the recorded votes; 'neither' is never a label."""
    recorded = votes.recorded
    if recorded == 0:
        return None
    for label, count in ((FactorLabel.OUTCOME1, votes.outcome1), (FactorLabel.OUTCOME2, votes.outcome2),
                         (FactorLabel.NEUTRAL, votes.both)):
        if count >= ratio * recorded - 1e-9:
            return label
    return None


@dataclass
class AbductionResult:
    factors: list[BirdFactor]
    pruned: list[PruneRecord]
    record: AbductionRecord
    notes: list[str] = field(default_factory=list)


class BirdAbductor:
    """Runs BIRD's abduction for one scenario."""

    def __init__(self, client: LLMClient, config: BirdConfig, report: Reporter = silent) -> None:
        self.client = client
        self.config = config
        self.report = report

    async def run(self, scenario: Scenario) -> AbductionResult:
        record = AbductionRecord()
        notes: list[str] = []
        pruned: list[PruneRecord] = []
        record.sentences_outcome1, record.sentences_outcome2 = await chain.gather(
            self._sentences(scenario, scenario.outcome1, record), self._sentences(scenario, scenario.outcome2, record))
        drafts = await self._structure(scenario, record)
        if not drafts:
            notes.append("no usable factor: the factor-structure call gave no factor with values")
            return AbductionResult([], pruned, record, notes)
        drafts = self._limit(drafts, pruned)
        factors = await self._label(scenario, drafts, pruned)
        if not factors:
            notes.append("no usable factor: every factor was pruned (its labelled values all support the same "
                         "side, or none of its values got an accepted label)")
        return AbductionResult(factors, pruned, record, notes)

    # ------------------------------------------------------------------ sentences

    async def _sentences(self, scenario: Scenario, statement: str, record: AbductionRecord) -> list[str]:
        c = self.config
        schema = prompts.text_list_schema("BirdSentences", "sentences", c.sentences_per_call, MAX_SENTENCE_CHARS)

        async def one(call: int) -> list[str]:
            try:
                answer = await self.client.ask(
                    prompts.BIRD_SENTENCES, schema=schema, sample_index=call, temperature=c.temperatures.sentences,
                    scenario=scenario.text or "(none)", statement=statement, n=c.sentences_per_call)
            except LLMOutputError as exc:
                record.failures.append(f"sentences for {statement!r}, call {call + 1}: {exc.reason}")
                return []
            return list(answer.sentences)[: c.sentences_per_call]  # type: ignore[attr-defined]

        batches = await chain.gather(*(one(k) for k in range(c.sentence_calls_per_side)))
        out: list[str] = []
        seen: set[str] = set()
        for batch in batches:
            for raw in batch:
                text = " ".join(str(raw).split())
                if text and len(text) <= MAX_SENTENCE_CHARS and key(text) not in seen:
                    seen.add(key(text))
                    out.append(text)
        return out

    # ------------------------------------------------------------------ factor structure

    async def _structure(self, scenario: Scenario, record: AbductionRecord) -> list[FactorDraft]:
        c = self.config
        base = {
            "scenario": scenario.text or "(none)", "outcome1": scenario.outcome1, "outcome2": scenario.outcome2,
            "sentences1": "\n".join(f"- {s}" for s in record.sentences_outcome1) or "- (none)",
            "sentences2": "\n".join(f"- {s}" for s in record.sentences_outcome2) or "- (none)",
        }
        current = await self._turn("initial", prompts.BIRD_FACTORS, base, [], record, c.temperatures.factors)
        if not current or not c.extend_factors:
            return current
        values_prompt = prompts.BIRD_VALUES_OPPOSITES if c.value_completion == "opposites" else \
            prompts.BIRD_VALUES_AS_NEEDED
        turns = (
            ("extended", prompts.BIRD_FACTORS_EXTEND, {}, c.temperatures.factors),
            ("reranked", prompts.BIRD_FACTORS_RERANK, {"max_factors": c.max_factors}, c.temperatures.factors),
            ("completed", values_prompt, {}, c.temperatures.values),
        )
        for name, prompt, extra, temperature in turns:
            structure = prompts.bird_structure_text([(d.name, d.values) for d in current])
            current = await self._turn(name, prompt, {**base, **extra, "structure": structure}, current, record,
                                       temperature)
        return current

    async def _turn(self, name: str, prompt: prompts.PromptSpec, values: dict[str, object],
                    previous: list[FactorDraft], record: AbductionRecord, temperature: float) -> list[FactorDraft]:
        try:
            answer = await self.client.ask(prompt, temperature=temperature, **values)
        except LLMOutputError as exc:
            record.failures.append(f"factor turn '{name}': no valid answer ({exc.reason}); kept the previous structure")
            record.drafts[name] = list(previous)
            return previous
        drafts = tidy_structure(answer.factors)  # type: ignore[attr-defined]
        if not drafts:
            record.failures.append(f"factor turn '{name}': no usable factor in the answer; kept the previous structure")
            drafts = previous
        record.drafts[name] = list(drafts)
        return drafts

    def _limit(self, drafts: list[FactorDraft], pruned: list[PruneRecord]) -> list[FactorDraft]:
        """At most ``max_factors`` factors and ``max_values_per_factor`` values each (the product of
        value counts is what the CPT has to cover)."""
        c = self.config
        for d in drafts[c.max_factors:]:
            pruned.append(PruneRecord(factor=d.name, reason="over_limit",
                                      detail=f"beyond the first {c.max_factors} factors"))
        out = []
        for d in drafts[: c.max_factors]:
            for v in d.values[c.max_values_per_factor:]:
                pruned.append(PruneRecord(factor=d.name, value=v, reason="over_limit",
                                          detail=f"beyond the first {c.max_values_per_factor} values"))
            out.append(FactorDraft(name=d.name, values=d.values[: c.max_values_per_factor]))
        return out

    # ------------------------------------------------------------------ labels and pruning

    async def _label(self, scenario: Scenario, drafts: list[FactorDraft], pruned: list[PruneRecord]
                     ) -> list[BirdFactor]:
        c = self.config
        total = len(drafts) * c.label_rounds
        done = 0

        async def one(draft: FactorDraft, r: int) -> list[str | None] | None:
            nonlocal done
            keys = prompts.bird_value_keys(len(draft.values))
            try:
                answer = await self.client.ask(
                    prompts.BIRD_LABELS, schema=prompts.bird_label_schema(len(draft.values)), sample_index=r,
                    temperature=c.temperatures.labels, scenario=scenario.text or "(none)",
                    outcome1=scenario.outcome1, outcome2=scenario.outcome2, factor=draft.name,
                    values="\n".join(f"{k}: {v}" for k, v in zip(keys, draft.values, strict=True)))
            except LLMOutputError:
                return None
            finally:
                done += 1
                self.report(ProgressEvent("bird.labels", done, total))
            labels = answer.labels.model_dump()  # type: ignore[attr-defined]
            return [read_vote(str(labels[k])) for k in keys]

        rounds = await chain.gather(*(one(d, r) for d in drafts for r in range(c.label_rounds)))
        factors: list[BirdFactor] = []
        for i, draft in enumerate(drafts):
            answers = rounds[i * c.label_rounds:(i + 1) * c.label_rounds]
            if all(a is None for a in answers):
                pruned.append(PruneRecord(factor=draft.name, reason="labelling_failed",
                                          detail=f"none of the {c.label_rounds} labelling calls gave a valid answer"))
                continue
            values: list[BirdValue] = []
            for j, text in enumerate(draft.values):
                votes = ValueVotes()
                for a in answers:
                    if a is None:
                        continue
                    vote = a[j]
                    if vote is None:
                        votes.unreadable += 1
                    else:
                        setattr(votes, vote, getattr(votes, vote) + 1)
                label = accepted_label(votes, c.label_accept_ratio)
                if label is None:
                    pruned.append(PruneRecord(factor=draft.name, value=text, reason="no_accepted_label",
                                              detail=_votes_text(votes)))
                else:
                    values.append(BirdValue(text=text, label=label, votes=votes))
            if not values:
                pruned.append(PruneRecord(factor=draft.name, reason="no_values", detail="no value kept a label"))
            elif len({v.label for v in values}) == 1:
                pruned.append(PruneRecord(
                    factor=draft.name, reason="single_label",
                    detail=f"every labelled value ({len(values)}) is {values[0].label.value}"))
            else:
                factors.append(BirdFactor(name=draft.name, values=values))
        return factors


def _votes_text(v: ValueVotes) -> str:
    parts = [f"{name}={getattr(v, name)}" for name in ("outcome1", "outcome2", "both", "neither", "unreadable")
             if getattr(v, name)]
    return "votes: " + (", ".join(parts) or "none")
