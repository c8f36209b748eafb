"""``--negation llm``: the second outcome of each fact-checking claim written by the LLM.

By default a claim's negation is a template (:func:`~anchor.evaluation.datasets.text.negate_claim`),
written when the data is read. Asking the model instead needs the run's client, so the runner calls
:func:`negate_with_llm` once a run has one, before any instance is answered. A module of its own:
reading the datasets never imports the LLM client.
"""

from __future__ import annotations

from collections.abc import Sequence

from anchor import prompts
from anchor.evaluation.datasets.instances import DecisionInstance
from anchor.llm import chain
from anchor.llm.client import LLMClient
from anchor.types import Scenario


async def negate_with_llm(client: LLMClient, instances: Sequence[DecisionInstance]) -> list[DecisionInstance]:
    """``instances`` with each claim's negation (``outcome2``) asked of ``client``, in their order. Each
    request is charged to its claim's scenario (ledger scope ``negation:<id>``)."""

    async def negate(inst: DecisionInstance) -> DecisionInstance:
        with client.ledger.scope(f"negation:{inst.id}"):
            answer = await client.ask(prompts.NEGATE_CLAIM, claim=inst.scenario.outcome1)
        scen = Scenario(text=inst.scenario.text, outcome1=inst.scenario.outcome1, outcome2=answer.negation)
        return inst.model_copy(update={"scenario": scen})

    return list(await chain.gather(*(negate(i) for i in instances)))
