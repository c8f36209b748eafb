"""Theme naming and redundancy pruning, one LLM call per cluster.

The namer returns a short theme (trimmed to three words if longer) and the members that repeat
another member. A removal is accepted only when both names are members of the cluster, differ,
and the kept member is not itself removed; every cluster keeps at least one member. What was
removed and why goes into the cluster's ``pruned`` list.
"""

from __future__ import annotations

from anchor import prompts
from anchor.llm import chain
from anchor.llm.client import LLMClient
from anchor.progress import ProgressEvent, Reporter, silent
from anchor.types import Cluster, Factor, PrunedFactor, Scenario

MAX_THEME_WORDS = 3


def tidy_theme(theme: str, fallback: str) -> str:
    words = " ".join(theme.split()).strip(" \"'.:;,").split()
    return " ".join(words[:MAX_THEME_WORDS]) if words else fallback


async def name_and_prune(
    client: LLMClient,
    scenario: Scenario,
    groups: dict[int, list[Factor]],
    *,
    prune: bool = True,
    report: Reporter = silent,
) -> list[Cluster]:
    done = 0

    async def one(cluster_id: int, members: list[Factor]) -> Cluster:
        nonlocal done
        texts = tuple(f.text for f in members)
        answer = await client.ask(
            prompts.NAME_THEME, schema=prompts.theme_schema(texts), sample_index=cluster_id,
            scenario=scenario.text or "(none)", factors=prompts.numbered(list(texts)),
        )
        theme = tidy_theme(answer.theme, fallback=members[0].text)  # type: ignore[attr-defined]
        by_text = {f.text: f for f in members}
        removed: dict[str, PrunedFactor] = {}
        keepers: set[str] = set()
        if prune:
            for item in answer.redundant:  # type: ignore[attr-defined]
                victim, keeper = by_text.get(item.factor), by_text.get(item.same_as)
                if victim is None or keeper is None or victim.id == keeper.id:
                    continue
                # A removed factor cannot keep another, and a factor already kept as the original
                # of a removed one must stay (else duplicate_of would point at a removed factor).
                if victim.id in removed or keeper.id in removed or victim.id in keepers:
                    continue
                if len(removed) + 1 >= len(members):
                    break
                removed[victim.id] = PrunedFactor(factor_id=victim.id, text=victim.text,
                                                  reason="redundant within its cluster", duplicate_of=keeper.id)
                keepers.add(keeper.id)
        done += 1
        report(ProgressEvent("themes", done, len(groups), theme))
        return Cluster(id=cluster_id, theme=theme,
                       factor_ids=[f.id for f in members if f.id not in removed],
                       pruned=list(removed.values()))

    clusters = list(await chain.gather(*(one(cid, members) for cid, members in sorted(groups.items()))))
    # Two clusters with one name would be indistinguishable to a reader and share a theme vector.
    seen: dict[str, int] = {}
    for cluster in clusters:
        n = seen.get(cluster.theme.casefold(), 0)
        seen[cluster.theme.casefold()] = n + 1
        if n:
            cluster.theme = f"{cluster.theme} ({n + 1})"
    return clusters
