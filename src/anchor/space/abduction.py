"""Iterative bottom-up abduction: grow a factor set round by round.

Each round asks for ``b`` sentences arguing for either outcome, extracts the factors that bear on the
scenario from them, and validates the candidates before merging them (``anchor.space.validation``).
It stops at ``n_target`` factors, after ``max_rounds`` rounds, or when ``patience`` rounds in a row
add nothing; the tests run after each merge, which is where the paper's Algorithm 1 tests before the
next round.

Up to ``abduction_window`` (w) rounds are in flight at once: a round does its generation,
extraction and validation (against the factors merged when it started) while the rounds before it
finish, and rounds merge one at a time and in order, each re-checked against the factors merged
after it started. New rounds are started only at merges, from what has merged: the next ones the
window allows, except those the stop tests would most likely make useless (the rounds in flight
are expected to reach the target, or the latest rounds added nothing and those in flight complete
the ``patience`` rounds). So the factors depend on the window and the answers, never on timing: a
window gives the same space every time from the same cache, and a window of 1 is the plain
one-round-at-a-time loop. Rounds are independent of one another, as in the paper's Algorithm 1: a
round's generation prompt lists nothing as already covered. (Earlier versions listed the factors
merged when a round started; under any window of at least ``max_rounds`` rounds, the default, that
was nothing anyway, since every round starts before the first merge. Spaces built so stay readable,
with ``abduction_steering="merged"``; this version does not build them.)

Rounds already started when the stop is decided run to their end, so that their answers are cached
and a rebuild from the cache sends nothing; they are paid for, listed apart and never merged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from anchor import prompts
from anchor.embedding.embed import Embedder
from anchor.llm import chain
from anchor.llm.client import LLMClient
from anchor.progress import ProgressEvent, Reporter, silent
from anchor.settings.space import BuildParams
from anchor.space.validation import CandidateValidator, Merged, Validated, text_key
from anchor.types import AbductionRound, RejectedCandidate, Scenario, StopReason

#: What the generation prompt's "already covered" line says: the line stays, so that the prompt, and with
#: it every cached answer to it, is the one rounds were always sent under the default window.
_NOTHING_COVERED = "none yet"


@dataclass
class RoundWork:
    """What a round did before its turn to merge."""

    t: int
    known_through: int
    merged_at_start: Merged
    shown: list[str]
    sentences: list[str]
    extracted: list[str]
    validated: Validated

    def record(self, added: list[str], rejected: list[RejectedCandidate], reasked: list[str]) -> AbductionRound:
        return AbductionRound(round=self.t, sentences=self.sentences, extracted=self.extracted, added=added,
                              rejected=rejected, known_through=self.known_through, shown=self.shown,
                              reasked=reasked)


class BeyondStop:
    """Rounds that had started when the stop was decided, still running.

    ``collect`` waits for them once the build has done the rest of its work (they hold nothing it
    needs); ``cancel`` stops them, and the generation requests they wait on, when the build fails instead.
    """

    def __init__(self, tasks: Iterable[asyncio.Task[tuple[RoundWork, chain.Chain]]] = (),
                 helpers: Iterable[asyncio.Task] = ()) -> None:  # type: ignore[type-arg]
        self._tasks = list(tasks)
        self._helpers = list(helpers)

    async def collect(self) -> list[AbductionRound]:
        rounds = []
        for task in self._tasks:
            work, ended = await task
            chain.merge(ended)
            rounds.append(work.record([], [], []))
        return rounds

    async def cancel(self) -> None:
        await _cancel([*self._tasks, *self._helpers])


async def _cancel(tasks: Iterable[asyncio.Task]) -> None:  # type: ignore[type-arg]
    pending = [task for task in tasks if not task.done()]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


def _retrieved(task: asyncio.Task) -> None:  # type: ignore[type-arg]
    """Mark a shared generation request's failure as seen: the rounds waiting on it re-raise it, and
    rounds cancelled before it ended no longer wait for it."""
    if not task.cancelled():
        task.exception()


def _distinct(sentences: list[str], b: int) -> list[str]:
    """The first ``b`` different sentences of an answer, spaces tidied."""
    seen: set[str] = set()
    out: list[str] = []
    for s in sentences:
        s = " ".join(s.split())
        if s and text_key(s) not in seen:
            seen.add(text_key(s))
            out.append(s)
    return out[:b]


@dataclass
class AbductionOutcome:
    factors: list[str]
    found_in_round: list[int]
    rounds: list[AbductionRound]
    stop_reason: StopReason
    vectors: np.ndarray
    beyond_stop: BeyondStop


class Abductor:
    """Runs the abduction rounds for one scenario."""

    def __init__(self, client: LLMClient, embedder: Embedder, params: BuildParams) -> None:
        self.client = client
        self.embedder = embedder
        self.params = params

    async def run(self, scenario: Scenario, report: Reporter = silent,
                  on_merge: Callable[[list[str]], None] | None = None) -> AbductionOutcome:
        """Abduce factors for ``scenario``; ``on_merge`` is told all factors merged so far after
        each merge (to start work on them early)."""
        p = self.params
        if p.abduction_steering != "none":
            raise ValueError("abduction_steering='merged' is no longer built: abduction rounds are independent, as "
                             "in the paper's Algorithm 1 (spaces built with it stay readable)")
        validator = CandidateValidator(self.client, self.embedder, p, scenario)
        merged = Merged()
        found_in: list[int] = []
        rounds: list[AbductionRound] = []
        running: dict[int, asyncio.Task[tuple[RoundWork, chain.Chain]]] = {}
        started = idle = 0

        batches: list[asyncio.Task[tuple[list[list[str]], chain.Chain]]] = []

        def start_rounds() -> None:
            """Start the next rounds the window allows, but none that the stop tests would most
            likely make useless (see ``_enough_in_flight``). Their generation prompts are one prompt
            sampled once a round, so the rounds started together share one request for their sentences
            (several samples in one request where the server honours ``n``; ``_generate``)."""
            nonlocal started
            done = len(rounds)
            first = started + 1
            while started < p.max_rounds and started - done < p.abduction_window:
                if started > done and self._enough_in_flight(started - done, len(merged), done, idle):
                    break
                started += 1
            if started < first:
                return
            loop = asyncio.get_running_loop()
            batch = loop.create_task(chain.traced(self._generate(scenario, first, started - first + 1)))
            batch.add_done_callback(_retrieved)
            batches.append(batch)
            for t in range(first, started + 1):
                work = self._work(validator, scenario, t, done, merged, batch, t - first)
                running[t] = loop.create_task(chain.traced(work))

        report(ProgressEvent("abduction", 0, p.max_rounds, "starting", {"factors": 0}))
        start_rounds()
        stop = StopReason.MAX_ROUNDS
        try:
            for t in range(1, p.max_rounds + 1):
                work, ended = await running.pop(t)
                chain.merge(ended)
                checked = await validator.recheck(work.validated, merged.since(work.merged_at_start), t)
                added = [c.text for c in checked.added]
                if added:
                    merged = merged.plus(added, np.stack([c.vector for c in checked.added]))
                found_in.extend([t] * len(added))
                if added and on_merge is not None:
                    on_merge(list(merged.texts))
                rounds.append(work.record(added, [*work.validated.rejected, *checked.rejected], checked.reasked))
                idle = 0 if added else idle + 1
                report(ProgressEvent("abduction", t, p.max_rounds, f"round {t}: +{len(added)}",
                                     {"factors": len(merged)}))
                if len(merged) >= p.n_target:
                    stop = StopReason.TARGET_REACHED
                    break
                if idle >= p.patience:
                    stop = StopReason.SATURATED
                    break
                start_rounds()
        except BaseException:
            await _cancel([*running.values(), *batches])
            raise
        return AbductionOutcome(list(merged.texts), found_in, rounds, stop, merged.vectors,
                                BeyondStop((running[t] for t in sorted(running)), batches))

    def _enough_in_flight(self, in_flight: int, merged: int, done: int, idle: int) -> bool:
        """Whether the rounds in flight are likely to end the abduction, so that one more would run
        beyond the stop: they are expected to reach the target (each adding what the merged rounds
        added on average), or the latest rounds added nothing and those in flight complete the
        ``patience`` rounds that would stop it. Before the first merge there is nothing to go on,
        and the window alone decides. Only merged rounds count, so the choice, like the space, does
        not depend on timing."""
        p = self.params
        if not done:
            return False
        return merged + in_flight * merged / done >= p.n_target or (idle > 0 and idle + in_flight >= p.patience)

    async def _work(self, validator: CandidateValidator, scenario: Scenario, t: int, known_through: int,
                    known: Merged, batch: asyncio.Task[tuple[list[list[str]], chain.Chain]], j: int) -> RoundWork:
        """Round ``t`` up to its merge: its sentences (answer ``j`` of ``batch``, the generation of the
        rounds started with it, each told nothing of the others), extract, validate against ``known``
        (the factors merged when it started)."""
        answers, ended = await asyncio.shield(batch)
        chain.merge(ended)
        sentences = answers[j]
        extracted = await self._extract(scenario, sentences, t)
        validated = await validator.validate(extracted, known, t)
        return RoundWork(t, known_through, known, [], sentences, extracted, validated)

    # ------------------------------------------------------------------ the two LLM steps before validation

    async def _generate(self, scenario: Scenario, first: int, rounds: int) -> list[list[str]]:
        """The sentences of rounds ``first`` to ``first + rounds - 1``: the generation prompt's samples
        with those indices (cached and seeded per round, so the answers are those of one request per
        round, however many requests they took)."""
        b = self.params.batch_size
        answers = await self.client.ask_samples(
            prompts.GENERATE_SENTENCES,
            schema=prompts.text_list_schema("Sentences", "sentences", b, 240),
            samples=rounds, first_sample=first,
            temperature=self.params.abduction_temperature,
            scenario=scenario.text or "(none)", outcome1=scenario.outcome1, outcome2=scenario.outcome2,
            known=_NOTHING_COVERED, n=b,
        )
        return [_distinct(answer.sentences, b) for answer in answers]  # type: ignore[attr-defined]

    async def _extract(self, scenario: Scenario, sentences: list[str], t: int) -> list[str]:
        """The factors of round ``t``'s sentences that bear on the scenario: the extraction prompt sees
        the scenario and its outcomes and may answer none, so that relevance needs no request of its
        own (``BuildParams.check_relevance`` asks for one anyway)."""
        if not sentences:
            return []
        limit = min(30, 3 * len(sentences))
        answer = await self.client.ask(
            prompts.EXTRACT_FACTORS,
            schema=prompts.text_list_schema("Factors", "factors", limit, 80, min_items=0),
            sample_index=t,
            scenario=scenario.text or "(none)", outcome1=scenario.outcome1, outcome2=scenario.outcome2,
            sentences=prompts.numbered(sentences),
        )
        return [f for f in answer.factors[:limit]]  # type: ignore[attr-defined]
