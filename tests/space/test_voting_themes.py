"""Stage 1 voting (self-consistent labels) and theme naming with redundancy pruning."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from anchor.space.themes import MAX_THEME_WORDS, name_and_prune, tidy_theme
from anchor.space.voting import vote_labels
from anchor.types import Factor, FactorLabel, LabelVotes
from tests.helpers import ScriptedLLM, keyed, requests_of, section


def queue_labels(plan: dict[str, list[str]]):
    """A label responder that hands out each factor's planned votes one per call."""
    remaining = {text: list(votes) for text, votes in plan.items()}

    def label(text: str) -> str:
        assert remaining[text], f"{text!r} was asked about more often than planned"
        return remaining[text].pop(0)

    return label, remaining


# --------------------------------------------------------------------------- voting


@pytest.mark.parametrize(
    ("votes", "expected"),
    [
        (["outcome1", "outcome1", "outcome2"], FactorLabel.OUTCOME1),
        (["outcome2", "neutral", "outcome2"], FactorLabel.OUTCOME2),
        (["neutral", "outcome1", "neutral"], FactorLabel.NEUTRAL),
        (["outcome1", "outcome2", "neutral"], FactorLabel.NEUTRAL),  # three-way tie
        (["outcome1", "outcome2"], FactorLabel.NEUTRAL),  # two-way tie, m = 2
        (["outcome1", "outcome2", "outcome2", "outcome1"], FactorLabel.NEUTRAL),  # m = 4
        (["outcome1", "neutral", "neutral", "outcome1", "outcome1"], FactorLabel.OUTCOME1),  # m = 5
        (["outcome2"], FactorLabel.OUTCOME2),  # m = 1
    ],
)
async def test_majority_vote_over_m_samples(scripted_client, noodles, votes, expected):
    m = len(votes)
    plan = {"water temperature": votes, "gas price": ["outcome2"] * m}
    label, remaining = queue_labels(plan)
    client = scripted_client(ScriptedLLM(label=label))
    result = await vote_labels(client, noodles, list(plan), samples=m, batch_size=8)

    assert all(not left for left in remaining.values()), "every planned vote must be used"
    tally = Counter(votes)
    assert result[0] == LabelVotes(outcome1=tally["outcome1"], outcome2=tally["outcome2"], neutral=tally["neutral"])
    assert result[0].total == m
    assert result[0].majority() == expected
    assert result[1].majority() == FactorLabel.OUTCOME2


def test_no_votes_is_neutral():
    assert LabelVotes().majority() == FactorLabel.NEUTRAL


@pytest.mark.parametrize(("n", "batch", "m"), [(7, 3, 3), (8, 8, 2), (5, 1, 3), (1, 4, 1)])
async def test_batches_cover_every_factor_once_per_sample(scripted_client, noodles, n, batch, m):
    texts = [f"factor number {chr(97 + i)}" for i in range(n)]
    client = scripted_client(ScriptedLLM(label=lambda text: "outcome1"))
    result = await vote_labels(client, noodles, texts, samples=m, batch_size=batch)

    calls = requests_of(client.backend, "Votes")
    assert len(calls) == math.ceil(n / batch) * m
    seen = Counter()
    for call in calls:
        items = keyed(call.user)
        assert 1 <= len(items) <= batch
        assert [k for k, _ in items] == [f"F{i + 1}" for i in range(len(items))]
        assert call.schema_name == f"Votes{len(items)}"
        seen.update(text for _, text in items)
    assert seen == {t: m for t in texts}
    # Per sample (calls of one sample share its seed): every factor exactly once.
    by_sample: dict[int, Counter] = {}
    for call in calls:
        by_sample.setdefault(call.seed, Counter()).update(text for _, text in keyed(call.user))
    assert len(by_sample) == m
    assert all(c == {t: 1 for t in texts} for c in by_sample.values())
    assert all(v.outcome1 == m and v.total == m for v in result)


async def test_one_at_a_time_gives_the_same_labels_as_batched(scripted_client, noodles):
    texts = ["water temperature", "gas price", "noodle thickness", "food hygiene", "cooking duration",
             "household budget", "starch gelatinization"]
    rule = {0: "outcome1", 1: "outcome2", 2: "neutral"}

    def label(text: str) -> str:  # deterministic per factor
        return rule[sum(map(ord, text)) % 3]

    batched = await vote_labels(scripted_client(ScriptedLLM(label=label)), noodles, texts, samples=3, batch_size=4)
    single_client = scripted_client(ScriptedLLM(label=label))
    single = await vote_labels(single_client, noodles, texts, samples=3, batch_size=1)
    assert single == batched
    assert [v.majority().value for v in single] == [label(t) for t in texts]
    assert all(r.schema_name == "Votes1" for r in single_client.backend.requests)


async def test_voting_nothing_makes_no_call(scripted_client, noodles):
    client = scripted_client(ScriptedLLM())
    assert await vote_labels(client, noodles, [], samples=3) == []
    assert client.backend.requests == []


async def test_voting_rejects_bad_arguments(scripted_client, noodles):
    with pytest.raises(ValueError):
        await vote_labels(scripted_client(ScriptedLLM()), noodles, ["x"], samples=0)
    with pytest.raises(ValueError):
        await vote_labels(scripted_client(ScriptedLLM()), noodles, ["x"], batch_size=0)


# --------------------------------------------------------------------------- themes


def factors(*texts: str, start: int = 1) -> list[Factor]:
    return [Factor(id=f"f{start + i:03d}", text=t) for i, t in enumerate(texts)]


def theme_script(answers: dict[str, dict]):
    """Answer each cluster (identified by its first member) with a planned theme/redundancy."""

    def theme(members: list[str]) -> dict:
        return answers[members[0]]

    return theme


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Water Temperature", "Water Temperature"),
        ("Very Long Theme Name Here", "Very Long Theme"),
        ('  "Energy   Costs".  ', "Energy Costs"),
        ("...", "fallback text"),
    ],
)
def test_tidy_theme(raw, expected):
    assert tidy_theme(raw, fallback="fallback text") == expected


async def test_theme_is_trimmed_to_three_words_and_members_are_shown(scripted_client, noodles):
    members = factors("water temperature", "boiling point", "heat transfer rate")
    script = ScriptedLLM(theme=theme_script({"water temperature": {
        "theme": "Heat And Temperature Of The Water", "redundant": []}}))
    client = scripted_client(script)
    (cluster,) = await name_and_prune(client, noodles, {0: members})
    assert cluster.theme == "Heat And Temperature"
    assert len(cluster.theme.split()) == MAX_THEME_WORDS
    assert cluster.factor_ids == ["f001", "f002", "f003"] and cluster.pruned == []
    (req,) = requests_of(client.backend, "ThemeAndPruning")
    assert section(req.user, "Factors in the group:") == [f.text for f in members]


async def test_pruning_records_removals_with_their_keeper(scripted_client, noodles):
    members = factors("rush-hour traffic", "traffic congestion", "parking search time", "road works")
    script = ScriptedLLM(theme=theme_script({"rush-hour traffic": {"theme": "Traffic", "redundant": [
        {"factor": "traffic congestion", "same_as": "rush-hour traffic"},
    ]}}))
    (cluster,) = await name_and_prune(scripted_client(script), noodles, {3: members})
    assert cluster.id == 3
    assert cluster.factor_ids == ["f001", "f003", "f004"]
    (gone,) = cluster.pruned
    assert (gone.factor_id, gone.text, gone.duplicate_of) == ("f002", "traffic congestion", "f001")
    assert gone.reason


async def test_pruning_ignores_non_members_and_self_references(scripted_client, noodles):
    members = factors("water temperature", "boiling point", "heat transfer rate", "stove power", "flame size")
    script = ScriptedLLM(theme=theme_script({"water temperature": {"theme": "Heat", "redundant": [
        {"factor": "gas price", "same_as": "water temperature"},      # victim not a member
        {"factor": "boiling point", "same_as": "oven power"},         # keeper not a member
        {"factor": "heat transfer rate", "same_as": "heat transfer rate"},  # itself
        {"factor": "Boiling Point", "same_as": "water temperature"},  # not an exact member name
    ]}}))
    (cluster,) = await name_and_prune(scripted_client(script), noodles, {0: members})
    assert cluster.factor_ids == [f.id for f in members]
    assert cluster.pruned == []


async def test_a_keeper_is_never_removed(scripted_client, noodles):
    # B is named as the keeper of A and then as a repeat of C: removing B as well would leave A
    # recorded as a duplicate of a factor that is gone.
    members = factors("A factor", "B factor", "C factor", "D factor")
    script = ScriptedLLM(theme=theme_script({"A factor": {"theme": "Letters", "redundant": [
        {"factor": "A factor", "same_as": "B factor"},
        {"factor": "B factor", "same_as": "C factor"},
    ]}}))
    (cluster,) = await name_and_prune(scripted_client(script), noodles, {0: members})
    kept = set(cluster.factor_ids)
    for gone in cluster.pruned:
        assert gone.factor_id not in kept
        assert gone.duplicate_of in kept, f"{gone.factor_id} points at removed keeper {gone.duplicate_of}"
    assert cluster.factor_ids == ["f002", "f003", "f004"]
    assert [(p.factor_id, p.duplicate_of) for p in cluster.pruned] == [("f001", "f002")]


async def test_removed_factor_cannot_be_a_keeper(scripted_client, noodles):
    members = factors("A factor", "B factor", "C factor", "D factor")
    script = ScriptedLLM(theme=theme_script({"A factor": {"theme": "Letters", "redundant": [
        {"factor": "A factor", "same_as": "B factor"},
        {"factor": "C factor", "same_as": "A factor"},   # A is already gone
        {"factor": "D factor", "same_as": "C factor"},   # fine: C stays
    ]}}))
    (cluster,) = await name_and_prune(scripted_client(script), noodles, {0: members})
    assert cluster.factor_ids == ["f002", "f003"]
    assert [(p.factor_id, p.duplicate_of) for p in cluster.pruned] == [("f001", "f002"), ("f004", "f003")]


async def test_at_least_one_member_is_kept(scripted_client, noodles):
    pair = factors("cooking time", "cooking duration")
    trio = factors("gas price", "fuel price", "energy price", start=3)
    script = ScriptedLLM(theme=theme_script({
        "cooking time": {"theme": "Time", "redundant": [
            {"factor": "cooking time", "same_as": "cooking duration"},
        ]},
        "gas price": {"theme": "Prices", "redundant": [
            {"factor": "gas price", "same_as": "fuel price"},
            {"factor": "fuel price", "same_as": "gas price"},   # a cycle: only the first removal stands
        ]},
    }))
    clusters = await name_and_prune(scripted_client(script), noodles, {0: pair, 1: trio})
    for cluster, members in zip(clusters, [pair, trio], strict=True):
        assert len(cluster.factor_ids) >= 1
        ids = cluster.factor_ids + [p.factor_id for p in cluster.pruned]
        assert sorted(ids) == sorted(f.id for f in members)  # a partition of the members
        assert all(p.duplicate_of in cluster.factor_ids for p in cluster.pruned)
    assert clusters[0].factor_ids == ["f002"]
    assert clusters[1].factor_ids == ["f004", "f005"]


async def test_no_prune_keeps_every_member(scripted_client, noodles):
    members = factors("rush-hour traffic", "traffic congestion")
    script = ScriptedLLM(theme=theme_script({"rush-hour traffic": {"theme": "Traffic", "redundant": [
        {"factor": "traffic congestion", "same_as": "rush-hour traffic"}]}}))
    (cluster,) = await name_and_prune(scripted_client(script), noodles, {0: members}, prune=False)
    assert cluster.factor_ids == ["f001", "f002"] and cluster.pruned == []
    assert cluster.theme == "Traffic"


async def test_duplicate_theme_names_are_disambiguated(scripted_client, noodles):
    groups = {0: factors("gas price", start=1), 1: factors("electricity bill", start=2),
              2: factors("water temperature", start=3), 3: factors("utility costs", start=4)}
    script = ScriptedLLM(theme=theme_script({
        "gas price": {"theme": "Energy Cost", "redundant": []},
        "electricity bill": {"theme": "energy cost", "redundant": []},
        "water temperature": {"theme": "Heat", "redundant": []},
        "utility costs": {"theme": "Energy Cost", "redundant": []},
    }))
    clusters = await name_and_prune(scripted_client(script), noodles, groups)
    assert [c.id for c in clusters] == [0, 1, 2, 3]
    themes = [c.theme for c in clusters]
    assert len({t.casefold() for t in themes}) == len(themes)
    assert themes[0] == "Energy Cost" and themes[2] == "Heat"
    assert themes[1].casefold().startswith("energy cost") and themes[3].startswith("Energy Cost")
