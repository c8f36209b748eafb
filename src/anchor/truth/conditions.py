"""A world's conditions: which factors each makes present, its text, its exact truth and its label.

Four kinds (``WorldCondition.kind``), in the shares of :class:`ConditionSettings` (at least one of each):

* ``factors``: one to three factors, each stated by its plain mention (built around the factor's text);
* ``paraphrase``: the same, each stated by one of its other mentions (other words, so retrieval and
  mapping must work by meaning);
* ``distractor``: plain mentions plus one sentence from the bank that matches no factor;
* ``nothing``: one or two such sentences only. No factor is present, so the truth is the prior, and a
  method should answer "unknown".

Each clause becomes a sentence through one of the bank's frames, in a random order. The truth is
:func:`anchor.truth.exact.p_outcome1` of the present factors (every other factor unobserved); the
label is drawn from it with a generator seeded by the world's seed, condition after condition.
"""

from __future__ import annotations

import hashlib
import random
from typing import get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from anchor.truth import exact
from anchor.truth.vocabulary import DISTRACTORS, SENTENCE_FRAMES
from anchor.truth.world import ConditionKind, World, WorldCondition

CONDITION_KINDS: tuple[ConditionKind, ...] = get_args(ConditionKind)
_MAX_TRIES = 100


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any parts, the same in every Python version and process."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


class ConditionSettings(BaseModel):
    """How many conditions a world gets, in which shares of the kinds, with how many factors each."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n_conditions: int = Field(default=24, ge=len(CONDITION_KINDS), le=300)
    shares: dict[ConditionKind, float] = Field(default_factory=lambda: {
        "factors": 0.4, "paraphrase": 0.25, "distractor": 0.2, "nothing": 0.15})
    max_present: int = Field(default=3, ge=1, le=3, description="Most factors one condition makes present.")

    @model_validator(mode="after")
    def _shares(self) -> ConditionSettings:
        if set(self.shares) != set(CONDITION_KINDS) or any(v <= 0 for v in self.shares.values()):
            raise ValueError(f"shares: a positive share for each of {', '.join(CONDITION_KINDS)}")
        return self

    def counts(self) -> dict[ConditionKind, int]:
        """Conditions of each kind: one each, the rest in proportion to the shares (largest remainders)."""
        total = sum(self.shares.values())
        spare = self.n_conditions - len(CONDITION_KINDS)
        exact_counts = {k: spare * self.shares[k] / total for k in CONDITION_KINDS}
        counts = {k: 1 + int(v) for k, v in exact_counts.items()}
        by_remainder = sorted(CONDITION_KINDS, key=lambda k: (-(exact_counts[k] % 1), CONDITION_KINDS.index(k)))
        for k in by_remainder[: self.n_conditions - sum(counts.values())]:
            counts[k] += 1
        return counts


def make_conditions(world: World, rng: random.Random, settings: ConditionSettings,
                    taken: set[str] | None = None) -> list[WorldCondition]:
    """The world's conditions (any it already has are ignored), drawn from ``rng``; labels from the world's seed.
    ``taken``: texts other worlds of the file already use (added to as this world takes more), so that a
    condition names its world even in a prompt that carries no scenario (the simulated LLM relies on it)."""
    kinds = [k for k, n in settings.counts().items() for _ in range(n)]
    rng.shuffle(kinds)
    labels = random.Random(derive_seed(world.seed, "labels"))
    seen: set[str] = taken if taken is not None else set()
    out: list[WorldCondition] = []
    for j, kind in enumerate(kinds, start=1):
        for _ in range(_MAX_TRIES):
            present = _present(world, kind, rng, settings.max_present)
            text = render(world, kind, present, rng)
            if text not in seen:
                break
        else:
            raise ValueError(f"world {world.id}: could not draw {settings.n_conditions} distinct conditions; "
                             "ask for fewer")
        seen.add(text)
        p_true = exact.p_outcome1(world, present)
        label = 1 if labels.random() < p_true else 2
        out.append(WorldCondition(id=f"{world.id}-{j:03d}", text=text, present=present, kind=kind, p_true=p_true,
                                  label=label))
    return out


def _present(world: World, kind: ConditionKind, rng: random.Random, max_present: int) -> list[str]:
    if kind == "nothing":
        return []
    if world.network is not None:
        return _network_present(world, rng, max_present)
    k = rng.randint(1, min(max_present, len(world.factors)))
    chosen = rng.sample([f.id for f in world.factors], k)
    return sorted(chosen, key=lambda fid: int(fid[1:]))


def _network_present(world: World, rng: random.Random, max_present: int) -> list[str]:
    """Factors of a network world: at most one state of a node (a node is in one state), drawn again until
    they can be present together (some combinations of states have probability zero)."""
    nodes = {f.node for f in world.factors}
    for _ in range(_MAX_TRIES):
        k = rng.randint(1, min(max_present, len(nodes)))
        chosen: list[str] = []
        used: set[str | None] = set()
        for _ in range(k):
            f = rng.choice([f for f in world.factors if f.node not in used])
            chosen.append(f.id)
            used.add(f.node)
        if exact.joint(world).probability({fid: 1 for fid in chosen}) > 0.0:
            return sorted(chosen, key=lambda fid: int(fid[1:]))
    raise ValueError(f"world {world.id}: no combination of factors with positive probability found")


def render(world: World, kind: ConditionKind, present: list[str], rng: random.Random) -> str:
    """The text of a condition of ``kind`` stating the ``present`` factors."""
    if kind == "nothing":
        return " ".join(rng.sample(DISTRACTORS, rng.randint(1, 2)))
    clauses = []
    for fid in present:
        mentions = world.factor(fid).mentions
        clauses.append(rng.choice(mentions[1:]) if kind == "paraphrase" and len(mentions) > 1 else mentions[0])
    rng.shuffle(clauses)
    frames = rng.sample(SENTENCE_FRAMES, len(clauses))
    sentences = [_sentence(frame.format(clause=c)) for frame, c in zip(frames, clauses, strict=True)]
    if kind == "distractor":
        sentences.insert(rng.randint(0, len(sentences)), rng.choice(DISTRACTORS))
    return " ".join(sentences)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]
