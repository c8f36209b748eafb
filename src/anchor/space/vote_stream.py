"""Voting on factors while abduction is still finding more.

``vote_labels`` labels factors in batches of consecutive factors, and a batch's votes depend only on
its own factors. So a batch can be sent as soon as abduction has merged all of its factors: the
votes then overlap the later abduction rounds instead of waiting for the last one, and the
requests are exactly those one ``vote_labels`` call over all the factors would send (same batches,
same prompts, same sample indices), so the answers, and the cache, are shared with it.
"""

from __future__ import annotations

import asyncio

from anchor.llm import chain
from anchor.llm.client import LLMClient
from anchor.progress import ProgressEvent, Reporter, silent
from anchor.settings.space import BuildParams
from anchor.space.voting import vote_labels
from anchor.types import LabelVotes, Scenario


class VoteStream:
    """Votes on each full batch of factors as it merges (``add``), on the rest at the end (``finish``)."""

    def __init__(self, client: LLMClient, scenario: Scenario, params: BuildParams, report: Reporter = silent) -> None:
        self.client = client
        self.scenario = scenario
        self.samples = params.vote_samples
        self.batch_size = params.vote_batch_size
        self.temperature = params.vote_temperature
        self.report = report
        self._sent = 0
        self._done = 0
        self._tasks: list[asyncio.Task[tuple[list[LabelVotes], chain.Chain]]] = []

    def add(self, factors: list[str]) -> None:
        """``factors``: every factor merged so far, in merge order."""
        while len(factors) - self._sent >= self.batch_size:
            self._start(factors[self._sent:self._sent + self.batch_size])

    async def finish(self, factors: list[str]) -> list[LabelVotes]:
        """The votes on every factor of ``factors`` (all merged factors), in order."""
        if len(factors) > self._sent:
            self._start(factors[self._sent:])
        votes: list[LabelVotes] = []
        for task in self._tasks:
            batch, ended = await task
            chain.merge(ended)
            votes.extend(batch)
        return votes

    async def cancel(self) -> None:
        pending = [task for task in self._tasks if not task.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def _start(self, batch: list[str]) -> None:
        self._sent += len(batch)
        work = chain.traced(self._vote(batch))
        self._tasks.append(asyncio.get_running_loop().create_task(work))

    async def _vote(self, batch: list[str]) -> list[LabelVotes]:
        votes = await vote_labels(self.client, self.scenario, batch, samples=self.samples,
                                  batch_size=self.batch_size, temperature=self.temperature)
        self._done += len(batch)
        self.report(ProgressEvent("voting", self._done, None, f"{self._done} factors labelled"))
        return votes
