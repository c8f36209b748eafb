"""BIRD's mapping of a condition onto factor values.

Strict (BIRD-dagger): ``mapping_rounds`` rounds, each with one call per factor (its values in a
shuffled order) asking for the one value the condition directly implies, or 'none'. A value
chosen in at least ``mapping_votes`` rounds is kept; a lenient reflection call then removes
values the condition does not imply. Answers naming no listed value are discarded and counted.

Relaxed (BIRD-double-dagger): when the strict pass maps nothing, one more call must name the
single closest factor value; an answer that is not a listed value is asked again, so only a
model that never gives a listed value leaves the condition unmapped.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass

from anchor import prompts
from anchor.bird.abduction import key
from anchor.bird.types import BirdConfig, BirdMappingTrace, MappedValue, MappingRound
from anchor.errors import LLMOutputError
from anchor.llm import chain
from anchor.llm.client import LLMClient
from anchor.types import Scenario


@dataclass(frozen=True)
class MappingSlot:
    """One factor as the mapping sees it: ``key`` identifies it in the trace, ``name`` is shown."""

    key: str
    name: str
    values: tuple[str, ...]


def _shuffle_rng(config: BirdConfig, condition: str, slot: MappingSlot, round_index: int) -> random.Random:
    if not config.seeded_sampling:
        return random.Random(random.SystemRandom().randrange(2**63))
    digest = hashlib.sha256(f"{config.seed}\x1f{condition}\x1f{slot.key}\x1f{round_index}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def match_value(answer: str, values: Sequence[str]) -> str | None:
    """The listed value an answer names (case and spacing ignored), or None."""
    k = key(answer)
    for v in values:
        if key(v) == k:
            return v
    return None


def is_none(answer: str) -> bool:
    return key(answer) in {"none", "no value", "null", "n/a", ""}


class RelaxedMappingFailed(Exception):
    """The relaxed fallback got no listed value (after the client's re-asks)."""


async def map_condition(
    client: LLMClient,
    scenario: Scenario,
    slots: Sequence[MappingSlot],
    condition: str,
    config: BirdConfig,
    *,
    relaxed: bool = False,
) -> BirdMappingTrace:
    """Map ``condition`` onto the slots' values; see the module docstring.

    Raises ``RelaxedMappingFailed`` (with the trace attached as ``.trace``) only in relaxed mode when
    the fallback call never produced a listed value. Mapping calls that fail (no valid JSON after
    the client's retries) count as no vote and are counted in ``failed_calls``.
    """
    c = config
    trace = BirdMappingTrace(condition=condition, mode="relaxed" if relaxed else "strict",
                             vote_threshold=c.mapping_votes)
    text = scenario.text or "(none)"

    async def ask(slot: MappingSlot, r: int) -> tuple[str | None, str | None, bool]:
        order = list(slot.values)
        _shuffle_rng(c, condition, slot, r).shuffle(order)
        try:
            answer = await client.ask(
                prompts.BIRD_MAPPING, schema=prompts.bird_value_choice_schema(tuple(order)), sample_index=r,
                temperature=c.temperatures.mapping, scenario=text, condition=condition, factor=slot.name,
                values="\n".join(f"- {v}" for v in order))
        except LLMOutputError:
            return None, None, False
        raw = str(answer.value)  # type: ignore[attr-defined]
        if is_none(raw):
            return raw, None, True
        return raw, match_value(raw, slot.values), True

    jobs = [(r, slot) for r in range(c.mapping_rounds) for slot in slots]
    answers = await chain.gather(*(ask(slot, r) for r, slot in jobs))
    trace.votes = {slot.key: {v: 0 for v in slot.values} for slot in slots}
    rounds = {r: MappingRound(round=r) for r in range(c.mapping_rounds)}
    for (r, slot), (raw, value, ok) in zip(jobs, answers, strict=True):
        rnd = rounds[r]
        rnd.answers[slot.key] = raw
        rnd.chosen[slot.key] = value
        if not ok:
            trace.failed_calls += 1
        elif value is None and raw is not None and not is_none(raw):
            rnd.invalid.append(slot.key)
            trace.invalid_answers += 1
        elif value is not None:
            trace.votes[slot.key][value] += 1
    trace.rounds = [rounds[r] for r in range(c.mapping_rounds)]

    for slot in slots:
        kept = [v for v in slot.values if trace.votes[slot.key][v] >= c.mapping_votes]
        if len(kept) > 1:
            # Possible only with a vote threshold of half the rounds or less: one value per factor.
            top = max(trace.votes[slot.key][v] for v in kept)
            best = [v for v in kept if trace.votes[slot.key][v] == top]
            trace.conflicts.append(slot.key)
            kept = best if len(best) == 1 else []
        trace.voted.extend(MappedValue(factor=slot.key, value=v) for v in kept)

    mapped = list(trace.voted)
    if mapped and c.reflection:
        mapped = await _reflect(client, condition, mapped, c, trace)
    trace.mapped = mapped
    if not mapped and relaxed:
        await _relaxed(client, text, slots, condition, c, trace)
    return trace


async def _reflect(client: LLMClient, condition: str, voted: list[MappedValue], config: BirdConfig,
                   trace: BirdMappingTrace) -> list[MappedValue]:
    texts = tuple(dict.fromkeys(m.value for m in voted))
    trace.reflection_ran = True
    try:
        answer = await client.ask(
            prompts.BIRD_REFLECT, schema=prompts.choice_list_schema("BirdReflection", "keep", texts),
            temperature=config.temperatures.reflect, condition=condition,
            values="\n".join(f"- {t}" for t in texts))
    except LLMOutputError:
        # The reference code reads an unparseable reflection as an empty list: nothing is mapped.
        trace.reflection_failed = True
        trace.reflection_removed = list(voted)
        return []
    trace.reflection_answer = [str(a) for a in answer.keep]  # type: ignore[attr-defined]
    keep: set[str] = set()
    for item in trace.reflection_answer:
        value = match_value(item, texts)
        if value is None:
            trace.reflection_invalid += 1
        else:
            keep.add(value)
    trace.reflection_removed = [m for m in voted if m.value not in keep]
    return [m for m in voted if m.value in keep]


async def _relaxed(client: LLMClient, scenario_text: str, slots: Sequence[MappingSlot], condition: str,
                   config: BirdConfig, trace: BirdMappingTrace) -> None:
    trace.relaxed_used = True
    names = tuple(dict.fromkeys(s.name for s in slots))
    values = tuple(dict.fromkeys(v for s in slots for v in s.values))
    resolved: list[MappedValue] = []

    def check(answer: object) -> None:
        found = resolve_closest(slots, str(answer.factor), str(answer.value))  # type: ignore[attr-defined]
        if found is None:
            raise ValueError("the answer must copy one listed factor and one of its values")
        resolved[:] = [found]

    options = "\n".join(f"- {s.name}:\n" + "\n".join(f"  - {v}" for v in s.values) for s in slots)
    try:
        answer = await client.ask(
            prompts.BIRD_MAPPING_RELAXED, schema=prompts.bird_closest_schema(names, values), check=check,
            temperature=config.temperatures.mapping, scenario=scenario_text, condition=condition, options=options)
    except LLMOutputError as exc:
        trace.relaxed_answer = exc.last_answer[:300]
        error = RelaxedMappingFailed(f"the relaxed fallback gave no listed value: {exc.reason}")
        error.trace = trace  # type: ignore[attr-defined]
        raise error from exc
    trace.relaxed_answer = f"{answer.factor}: {answer.value}"  # type: ignore[attr-defined]
    if not resolved:  # a cached answer is validated by the same check, so this only guards the invariant
        resolved = [m for m in [resolve_closest(slots, answer.factor, answer.value)] if m]  # type: ignore[attr-defined]
    trace.mapped = resolved


def resolve_closest(slots: Sequence[MappingSlot], factor: str, value: str) -> MappedValue | None:
    """The slot value an answer names: by the value when it is unique, else also by the factor name."""
    holders = [s for s in slots if match_value(value, s.values) is not None]
    if len(holders) > 1:
        holders = [s for s in holders if key(s.name) == key(factor)]
    if len(holders) != 1:
        return None
    slot = holders[0]
    matched = match_value(value, slot.values)
    assert matched is not None
    return MappedValue(factor=slot.key, value=matched)
