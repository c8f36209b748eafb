"""Self-consistent factor-outcome voting.

Each factor is labelled outcome1 / outcome2 / neutral by ``m`` independent samples and the
majority wins (ties go to neutral). Several factors share one prompt (``batch_size``) to save
prompt tokens; ``batch_size=1`` asks about one factor at a time. The ``m`` samples of a batch
are one request on servers that honour ``n`` (see ``LLMClient.ask_samples``).
"""

from __future__ import annotations

from anchor import prompts
from anchor.llm import chain
from anchor.llm.client import LLMClient
from anchor.progress import ProgressEvent, Reporter, silent
from anchor.types import LabelVotes, Scenario


async def vote_labels(
    client: LLMClient,
    scenario: Scenario,
    factors: list[str],
    *,
    samples: int = 3,
    batch_size: int = 8,
    temperature: float | None = None,
    report: Reporter = silent,
) -> list[LabelVotes]:
    """Vote counts per factor, in input order; ``temperature`` None keeps the prompt's."""
    if samples < 1 or batch_size < 1:
        raise ValueError("samples and batch_size must be >= 1")
    batches = [list(range(i, min(i + batch_size, len(factors)))) for i in range(0, len(factors), batch_size)]
    tallies = [{"outcome1": 0, "outcome2": 0, "neutral": 0} for _ in factors]
    total = len(batches) * samples
    done = 0

    async def one(batch: list[int]) -> None:
        nonlocal done
        schema = prompts.keyed_schema("Votes", len(batch), "label")
        answers = await client.ask_samples(
            prompts.VOTE_LABELS, schema=schema, samples=samples, temperature=temperature,
            scenario=scenario.text or "(none)", outcome1=scenario.outcome1, outcome2=scenario.outcome2,
            factors=prompts.numbered([factors[i] for i in batch], keys=True),
        )
        for answer in answers:
            data = answer.model_dump()
            for key, i in zip(prompts.item_keys(len(batch)), batch, strict=True):
                tallies[i][data[key]] += 1
        done += samples
        report(ProgressEvent("voting", done, total))

    await chain.gather(*(one(batch) for batch in batches))
    return [LabelVotes(**t) for t in tallies]
