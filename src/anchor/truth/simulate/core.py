"""What every answer of the simulated LLM is built with: the worlds and what the LLM knows of each,
finding the world a request is about, and the request's random sources.

A request is placed in a world by what it says: its scenario text (and outcomes, where the prompt
has them), else the factor texts and the condition it carries. A request that fits no world, or
more than one, is refused (:class:`~anchor.truth.simulate.recognise.Unrecognised`): the simulator
never answers at random.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from anchor.llm.base import TokenLogprob
from anchor.truth.simulate.errors import SimErrors, request_rng
from anchor.truth.simulate.knowledge import WorldKnowledge, key
from anchor.truth.simulate.recognise import Request, Unrecognised
from anchor.truth.world import World, WorldFile


@dataclass(frozen=True)
class Reply:
    """An answer: JSON data (structured prompts) or free text, with token log-probabilities if any."""

    data: Any = None
    text: str | None = None
    logprobs: list[TokenLogprob] | None = None


def _short(text: str, limit: int = 80) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[:limit] + "..."


class Simulator:
    """The worlds under one set of errors and one seed; answers are built by the handlers."""

    def __init__(self, worlds: WorldFile, errors: SimErrors, seed: int) -> None:
        self.worlds = worlds
        self.errors = errors
        self.seed = seed
        self._knowledge: dict[str, WorldKnowledge] = {}

    def knowledge(self, world: World) -> WorldKnowledge:
        found = self._knowledge.get(world.id)
        if found is None:
            found = self._knowledge[world.id] = WorldKnowledge(world, self.errors, self.seed)
        return found

    def rng(self, req: Request, world: WorldKnowledge | None, purpose: str) -> random.Random:
        """The random source of one kind of draw in this request."""
        return request_rng(self.seed, world.world.id if world is not None else "", req.name, req.messages,
                           req.schema, req.seed, purpose)

    # ------------------------------------------------------------------ finding the world

    def world(self, req: Request, *, scenario: str | None = None, outcomes: tuple[str, ...] = (),
              ordered: bool = False, texts: Iterable[str] = (), condition: str | None = None) -> WorldKnowledge:
        """The one world the request is about.

        ``scenario`` must be a world's scenario; ``outcomes`` its two outcomes in order when
        ``ordered``, else each one of its outcomes; ``texts`` (factor texts shown) and ``condition``
        tell worlds apart that the rest leaves open.
        """
        candidates = list(self.worlds.worlds)
        if scenario is not None:
            candidates = [w for w in candidates if key(w.scenario) == key(scenario)]
            if not candidates:
                raise Unrecognised(f"{req.name}: unknown scenario {_short(scenario)!r} (no world in the simulator's "
                                   "world file has it)")
        if outcomes:
            if ordered:
                wanted = tuple(key(o) for o in outcomes)
                kept = [w for w in candidates if (key(w.outcome1), key(w.outcome2)) == wanted]
            else:
                kept = [w for w in candidates if all(key(o) in (key(w.outcome1), key(w.outcome2)) for o in outcomes)]
            if not kept:
                raise Unrecognised(f"{req.name}: the outcomes {' / '.join(_short(o, 50) for o in outcomes)!r} are not "
                                   f"those of the world{'s' if len(candidates) > 1 else ''} of this scenario")
            candidates = kept
        shown = [t for t in texts if t.strip()]
        if len(candidates) > 1 and shown:
            counts = {w.id: sum(self.knowledge(w).lookup(t) is not None for t in shown) for w in candidates}
            best = max(counts.values())
            if best > 0:
                candidates = [w for w in candidates if counts[w.id] == best]
        if len(candidates) > 1 and condition is not None:
            with_it = [w for w in candidates if any(key(c.text) == key(condition) for c in w.conditions)]
            candidates = with_it or candidates
        if scenario is None and shown and not any(self.knowledge(w).lookup(t) for w in candidates for t in shown):
            raise Unrecognised(f"{req.name}: none of the factors shown ({_short('; '.join(shown))!r}) belongs to a "
                               "world of the simulator's world file")
        if len(candidates) != 1:
            raise Unrecognised(f"{req.name}: the request fits {len(candidates)} worlds "
                               f"({', '.join(w.id for w in candidates[:5])}); cannot tell which it is about")
        return self.knowledge(candidates[0])


Handler = Callable[[Simulator, Request], Reply]


def number(req: Request, field: str) -> int:
    """A whole-number field of the request (how many items to write)."""
    try:
        return int(req.fields[field].strip())
    except ValueError:
        raise Unrecognised(f"{req.name}: field {field!r} is not a whole number "
                           f"({_short(req.fields[field])!r})") from None
