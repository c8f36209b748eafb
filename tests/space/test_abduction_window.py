"""Pipelined abduction: several rounds in flight (``abduction_window``), merged in order.

Driven by a scripted LLM that answers by round (read from the request's seed), so answers do not
depend on the order requests arrive in, and by the real MiniLM embedder.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from dataclasses import dataclass, field

import pytest

from anchor.llm import chain
from anchor.llm.base import MultiCompletion
from anchor.llm.cache import ResponseCache
from anchor.llm.chain import Chain
from anchor.llm.client import LLMClient
from anchor.llm.ledger import CostLedger
from anchor.llm.scripted import ScriptedBackend, ScriptedRequest
from anchor.settings.space import BuildParams
from anchor.space.abduction import Abductor
from anchor.space.builder import FactorSpaceBuilder
from anchor.space.io import load_space, save_space
from anchor.space.voting import vote_labels
from anchor.types import StopReason
from tests.helpers import keyed, kind, requested_sentences, validation_items

PARAPHRASE = ("boiling water temperature", "temperature of boiling water")  # ~0.98: near duplicate
BORDERLINE = ("cooking time", "cooking duration")  # ~0.81: between 0.75 and 0.9
# Round t's extraction, for rounds 1..8: two distinct factors each (no two alike).
DISTINCT = {t + 1: pair for t, pair in enumerate([
    ["water temperature", "gas price"], ["noodle thickness", "food hygiene"], ["pot size", "altitude"],
    ["salt in the water", "stirring habits"], ["stove power", "lid on the pot"], ["starch release", "tap hardness"],
    ["kitchen ventilation", "cook's patience"], ["noodle brand", "serving size"]])}


def _first_seed(seed: int = 0) -> int:
    """The seed a client seeded ``seed`` sends for sample 0 (sample t is sent with this + t)."""
    return LLMClient(ScriptedBackend(lambda r: {}), seed=seed)._derive_seed(0, 0)


@dataclass
class ByRound:
    """Answers each request for the round it belongs to, whatever order requests arrive in.

    Generation is asked with sample index t, so its seed tells the round; the sentences name the
    round, and the extraction answers ``rounds[t]`` for them (nothing usable for a round not listed).
    """

    rounds: dict[int, list[str]]
    verdict: callable = lambda text, similar: "keep"  # type: ignore[valid-type]
    base: int = field(default_factory=_first_seed)

    def __call__(self, req: ScriptedRequest):
        k = kind(req)
        if k == "Sentences":
            t = req.seed - self.base
            return {"sentences": [f"Reason {i + 1} of round {t}." for i in range(requested_sentences(req.user))]}
        if k == "Factors":
            t = int(re.search(r"of round (\d+)\.", req.user).group(1))
            return {"factors": self.rounds.get(t, ["???"])}
        if k == "Validation":
            return {key: self.verdict(text, similar) for key, text, similar in validation_items(req.user)}
        if k == "Votes":
            return {key: "neutral" for key, _ in keyed(req.user)}
        raise AssertionError(f"unexpected request {req.schema_name}")


@dataclass
class JitteryBackend(ScriptedBackend):
    """Answers after a random pause, so concurrent rounds finish in a shuffled order; each request
    also lengthens the chain of dependent requests by one virtual second (on top of the seconds the
    transport measures: none under conftest's ``stopped_stopwatch``)."""

    rng: random.Random = field(default_factory=lambda: random.Random(7))

    async def complete(self, messages, **kwargs):  # noqa: ANN001, ANN003, ANN201
        await asyncio.sleep(self.rng.uniform(0, 0.004))
        answer = await super().complete(messages, **kwargs)
        chain.advance(1.0, requests=0)  # the request itself is counted by the transport
        return answer


def params(**kw) -> BuildParams:
    base = dict(n_target=100, batch_size=2, max_rounds=8, patience=8, abduction_window=3, check_relevance=True)
    base.update(kw)
    return BuildParams(**base)


def generate_prompts(backend) -> dict[int, str]:
    """The generation prompt of each round, by round."""
    base = _first_seed()
    return {r.seed - base: r.user for r in backend.requests if r.schema_name == "Sentences"}


def shown_in(prompt: str) -> str:
    return re.search(r"Aspects already covered \(find different ones\): (.*)", prompt).group(1)


def abduce(embedder, noodles, script, p, *, backend=None, cache=None):
    backend = backend or ScriptedBackend(script)
    client = LLMClient(backend, cache=cache, ledger=CostLedger(), parse_retries=2)

    async def go():
        chain.reset()
        outcome = await Abductor(client, embedder, p).run(noodles)
        beyond = await outcome.beyond_stop.collect()
        return outcome, beyond, chain.current()

    outcome, beyond, ended = asyncio.run(go())
    return outcome, beyond, backend, ended


# --------------------------------------------------------------------------- what each round knows


@pytest.mark.parametrize("window", [1, 3, 8])
def test_rounds_are_independent_whatever_the_window(embedder, noodles, window):
    # As in the paper's Algorithm 1: no round's prompt lists what other rounds found (a window of 1 is
    # the paper's loop exactly). Each is still validated against the factors merged when it started.
    outcome, beyond, backend, _ = abduce(embedder, noodles, ByRound(DISTINCT), params(max_rounds=5,
                                                                                      abduction_window=window))
    assert {shown_in(p) for p in generate_prompts(backend).values()} == {"none yet"}
    assert all(r.shown == [] for r in outcome.rounds)
    assert [r.known_through for r in outcome.rounds] == [max(0, t - window) for t in range(1, 6)]
    assert outcome.factors == [f for t in range(1, 6) for f in DISTINCT[t]]
    assert beyond == []


def test_steering_by_merged_factors_is_no_longer_built(embedder, noodles):
    with pytest.raises(ValueError, match="no longer built"):
        abduce(embedder, noodles, ByRound(DISTINCT), params(max_rounds=5, abduction_window=1,
                                                             abduction_steering="merged"))
    # With a window of at least max_rounds every round started before any merge and listed nothing:
    # that setting was the same build, and reads as today's.
    assert params(max_rounds=5, abduction_window=5, abduction_steering="merged").abduction_steering == "none"


# --------------------------------------------------------------------------- same space whatever the timing


@pytest.mark.parametrize("window", [2, 5])
def test_a_window_gives_the_same_space_whatever_order_answers_arrive_in(embedder, noodles, window):
    rounds = {**DISTINCT, 3: [PARAPHRASE[0], BORDERLINE[0]], 5: [PARAPHRASE[1], BORDERLINE[1], "gas price"]}
    script = ByRound(rounds, verdict=lambda text, similar: "duplicate" if similar else "keep")
    p = params(abduction_window=window)
    plain, _, _, _ = abduce(embedder, noodles, script, p)
    for seed in (1, 2):
        jittery, _, _, _ = abduce(embedder, noodles, script, p, backend=JitteryBackend(script, rng=random.Random(seed)))
        assert jittery.factors == plain.factors
        assert [r.model_dump() for r in jittery.rounds] == [r.model_dump() for r in plain.rounds]


def test_rounds_in_flight_shorten_the_chain_of_dependent_requests(embedder, noodles, stopped_stopwatch):
    script = ByRound(DISTINCT)
    ends = {}
    for w in (1, 4):
        outcome, _, backend, ends[w] = abduce(embedder, noodles, script, params(abduction_window=w),
                                              backend=JitteryBackend(script))
        assert len(backend.requests) == 24 and len(outcome.rounds) == 8
    # One at a time, the 24 requests (3 per round) follow one another; with 4 in flight, rounds 5-8
    # wait only for rounds 1-4: two rounds' worth. A virtual second each, whatever order they finished in.
    assert ends[1] == Chain(24, 24.0)
    assert ends[4] == Chain(6, 6.0)


# --------------------------------------------------------------------------- merge-time re-check


def test_candidates_are_rechecked_against_factors_merged_after_they_were_validated(embedder, noodles):
    rounds = {1: ["noodle thickness", PARAPHRASE[0], BORDERLINE[0]],
              2: ["Noodle  Thickness", PARAPHRASE[1], BORDERLINE[1], "gas price"]}
    script = ByRound(rounds, verdict=lambda text, similar: "duplicate" if similar else "keep")
    outcome, _, backend, _ = abduce(embedder, noodles, script, params(max_rounds=2, abduction_window=2))
    asked = sorted([(text, sim) for _, text, sim in validation_items(r.user)] for r in backend.requests
                   if kind(r) == "Validation")
    # Round 2 was validated beside round 1, against nothing; at its merge the exact and the near
    # duplicate of round 1's factors go without a call, and the borderline pair is asked again.
    assert asked == sorted([
        [("noodle thickness", None), (PARAPHRASE[0], None), (BORDERLINE[0], None)],
        [("Noodle Thickness", None), (PARAPHRASE[1], None), (BORDERLINE[1], None), ("gas price", None)],
        [(BORDERLINE[1], BORDERLINE[0])],
    ])
    r2 = outcome.rounds[1]
    assert r2.known_through == 0 and r2.reasked == [BORDERLINE[1]]
    assert r2.added == ["gas price"]
    assert [(r.reason, r.text, r.similar_to, r.at_merge) for r in r2.rejected] == [
        ("duplicate", "Noodle Thickness", "noodle thickness", True),
        ("near_duplicate", PARAPHRASE[1], PARAPHRASE[0], True),
        ("near_duplicate", BORDERLINE[1], BORDERLINE[0], True),
    ]
    assert outcome.factors == ["noodle thickness", PARAPHRASE[0], BORDERLINE[0], "gas price"]
    assert outcome.vectors.shape == (4, 384)


# --------------------------------------------------------------------------- the stop


def test_rounds_started_before_the_stop_run_and_are_listed_but_not_merged(embedder, noodles):
    script = ByRound(DISTINCT)
    outcome, beyond, backend, _ = abduce(embedder, noodles, script, params(n_target=4, abduction_window=3))
    assert outcome.stop_reason == StopReason.TARGET_REACHED
    assert [r.round for r in outcome.rounds] == [1, 2]
    assert outcome.factors == [*DISTINCT[1], *DISTINCT[2]]
    # Rounds 1-3 started together; round 3 had run when round 2 reached the target: listed apart,
    # not merged. Round 4 never started (after round 1, round 2 alone was expected to reach it).
    assert [(r.round, r.added, r.extracted) for r in beyond] == [(3, [], DISTINCT[3])]
    assert sorted(generate_prompts(backend)) == [1, 2, 3]
    assert len(backend.requests) == 3 * 3


def test_under_the_default_window_every_round_starts_at_once_and_is_paid_for(embedder, noodles):
    """What docs/paper-deviations.md says of the default window (20, at least every size's T_max): every
    round starts before any merge, and a build that stops at round 2 still runs all T_max rounds."""
    default = BuildParams().abduction_window
    assert default >= max(BuildParams().max_rounds, 10, 4)  # the paper's T_max and the quick sizes'
    p = dict(n_target=4, batch_size=2, max_rounds=8, patience=8)
    outcome, beyond, backend, _ = abduce(embedder, noodles, ByRound(DISTINCT), BuildParams(**p))
    assert outcome.stop_reason == StopReason.TARGET_REACHED and [r.round for r in outcome.rounds] == [1, 2]
    assert [r.known_through for r in outcome.rounds] == [0, 0]
    assert [r.round for r in beyond] == [3, 4, 5, 6, 7, 8]  # generated, extracted, validated: paid, not merged
    assert sorted(generate_prompts(backend)) == list(range(1, 9))


def test_the_window_narrows_when_the_rounds_in_flight_should_reach_the_target(embedder, noodles):
    script = ByRound(DISTINCT)
    outcome, beyond, backend, _ = abduce(embedder, noodles, script, params(n_target=10, abduction_window=3))
    # Two factors a round. After round 1: 2 merged + 2 rounds in flight x 2 = 6 < 10, so round 4
    # starts; after round 2: 4 + 2 x 2 = 8, round 5 starts; after round 3: 6 + 2 x 2 = 10, no more.
    assert [(r.round, r.known_through) for r in outcome.rounds] == [(1, 0), (2, 0), (3, 0), (4, 1), (5, 2)]
    assert outcome.stop_reason == StopReason.TARGET_REACHED and len(outcome.factors) == 10
    assert beyond == [] and sorted(generate_prompts(backend)) == [1, 2, 3, 4, 5]


def test_the_stop_tests_run_after_each_merge_in_round_order(embedder, noodles):
    # Rounds 2 and 3 add nothing: with patience 2 the build is saturated at round 3, though round 4
    # (which would add) had already run, and round 5 had started when round 1 merged. Once round 2
    # added nothing, rounds 3-5 in flight could end it: no round 6.
    rounds = {1: ["water temperature"], 2: ["water temperature"], 3: ["Water temperature"], 4: ["gas price"]}
    outcome, beyond, _, _ = abduce(embedder, noodles, ByRound(rounds), params(patience=2, abduction_window=4))
    assert outcome.stop_reason == StopReason.SATURATED
    assert [r.added for r in outcome.rounds] == [["water temperature"], [], []]
    assert [r.round for r in beyond] == [4, 5]


def test_a_build_from_its_own_cache_sends_nothing_and_gives_the_same_space(embedder, noodles, tmp_path):
    script = ByRound({**DISTINCT, 2: [PARAPHRASE[0], BORDERLINE[0]], 4: [PARAPHRASE[1], BORDERLINE[1]]})
    cache = ResponseCache(tmp_path / "responses.sqlite")
    p = params(n_target=9, abduction_window=3)
    first, beyond1, backend1, _ = abduce(embedder, noodles, script, p, cache=cache)
    again, beyond2, backend2, _ = abduce(embedder, noodles, script, p, cache=cache)
    assert backend1.requests and backend2.requests == []
    assert again.factors == first.factors and beyond1 and beyond2 == beyond1
    assert [r.model_dump() for r in again.rounds] == [r.model_dump() for r in first.rounds]


# --------------------------------------------------------------------------- voting while abduction goes on


def test_factors_are_voted_on_as_they_merge_with_the_requests_of_one_vote_over_all(embedder, noodles):
    script = ByRound(DISTINCT)
    p = params(vote_batch_size=4, vote_samples=2, cluster=False, abduction_window=2)
    backend = ScriptedBackend(script)
    space = asyncio.run(FactorSpaceBuilder(LLMClient(backend, ledger=CostLedger()), embedder, p).build(noodles))
    assert [f.text for f in space.factors] == [f for t in range(1, 9) for f in DISTINCT[t]]
    order = [kind(r) for r in backend.requests]
    # The first four factors (rounds 1 and 2) were voted on before the last rounds were asked for.
    assert "Sentences" in order[order.index("Votes"):]
    alone = ScriptedBackend(script)
    asyncio.run(vote_labels(LLMClient(alone, ledger=CostLedger()), noodles, [f.text for f in space.factors],
                            samples=2, batch_size=4))
    assert sorted((r.user, r.seed) for r in backend.requests if kind(r) == "Votes") == sorted(
        (r.user, r.seed) for r in alone.requests)
    assert all(f.votes.neutral == 2 for f in space.factors)


# --------------------------------------------------------------------------- stored spaces


def test_a_space_stored_before_the_window_existed_loads_as_built_one_round_at_a_time(tmp_path, make_space):
    space = make_space([("Heat", ["water temperature"])])
    path = save_space(space, tmp_path / "space.json")
    raw = json.loads(path.read_text())
    del raw["params"]["abduction_window"], raw["params"]["abduction_steering"], raw["rounds_beyond_stop"]
    path.write_text(json.dumps(raw))
    old = load_space(path)
    assert (old.params.abduction_window, old.params.abduction_steering) == (1, "merged")
    assert old.rounds_beyond_stop == []
    # Written again, it says so.
    assert load_space(save_space(old, tmp_path / "again.json")).params.abduction_window == 1


def test_the_space_page_lists_rounds_beyond_the_stop_and_rejections_at_merge(make_space):
    from anchor.audit.pages import space_html
    from anchor.types import AbductionRound, RejectedCandidate

    space = make_space([("Heat", ["water temperature"])])
    space.params = params(abduction_window=3)
    late = RejectedCandidate(text="Water temperature", reason="duplicate", similar_to="water temperature",
                             similarity=1.0, at_merge=True)
    space.rounds = [AbductionRound(round=1, sentences=["s"], extracted=["water temperature"],
                                   added=["water temperature"], known_through=0, shown=[]),
                    AbductionRound(round=2, sentences=["s"], extracted=["Water temperature"], added=[],
                                   rejected=[late], known_through=0, shown=[])]
    space.rounds_beyond_stop = [AbductionRound(round=3, sentences=["s"], extracted=["x"], added=[])]
    page = re.sub(r"<[^>]+>", " ", space_html(space))
    page = " ".join(page.split())
    assert "up to 3 round(s) in flight" in page
    assert "1 more round(s) had started when the stop was decided (rounds 3)" in page
    assert "2 1 1 0 1 duplicate at merge 1" in page


def test_a_run_written_before_the_window_existed_is_read_as_built_and_not_resumed():
    from anchor.config import AnchorConfig
    from anchor.evaluation.run_config import make_run_config
    from anchor.llm.settings import LLMSettings
    from anchor.runs.identity import first_difference, run_identity

    def config(**build):
        return make_run_config(dataset="today", method="anchor", data_path=None, ablations=[], limit=2, runs=1,
                               seed=0, settings=LLMSettings(), anchor_config=AnchorConfig(build=BuildParams(**build))
                               ).model_dump(mode="json")

    old = config()
    del old["anchor_config"]["build"]["abduction_window"], old["anchor_config"]["build"]["abduction_steering"]
    # Its spaces were built one round at a time, each round's prompt listing the factors found before it:
    # not with today's default window, and not as this version builds (rounds told nothing), so it is
    # not resumed, and the difference is named.
    for window in (1, 4, 20):
        assert first_difference(run_identity(old), run_identity(config(abduction_window=window))) == (
            "anchor_config.build.abduction_steering", "merged", "none")
    assert run_identity(old)["anchor_config"]["build"]["abduction_window"] == 1
    # A run of the version before this one, with the default window, steered nothing: it resumes.
    earlier = config()
    earlier["anchor_config"]["build"]["abduction_steering"] = "merged"
    assert first_difference(run_identity(earlier), run_identity(config())) is None


# --------------------------------------------------------------------------- rounds started together share a request


@dataclass
class SamplingByRound(ScriptedBackend):
    """A scripted backend that answers a request for ``n`` samples as vLLM does: choice ``j`` is the
    answer a lone request seeded ``seed + j`` gets. ``choice_requests`` keeps each such request's n."""

    honours_n: bool | None = True
    choice_requests: list[int] = field(default_factory=list)

    async def complete_choices(self, messages, *, n, json_schema, schema_name, temperature, max_tokens,  # noqa: ANN001, ANN201
                               seed):
        self.choice_requests.append(n)
        choices = [await self.complete(messages, json_schema=json_schema, schema_name=schema_name,
                                       temperature=temperature, max_tokens=max_tokens, seed=seed + j,
                                       top_logprobs=None) for j in range(n)]
        return MultiCompletion(choices=choices, prompt_tokens=choices[0].prompt_tokens,
                               completion_tokens=sum(c.completion_tokens for c in choices))


def test_rounds_started_together_ask_for_their_sentences_in_one_request(embedder, noodles):
    # The generation prompt is the same for every round (rounds are independent): the rounds a merge
    # starts are that prompt's samples, one request for all where the backend returns several answers.
    p = params(max_rounds=8, abduction_window=5, n_target=100, patience=8)
    alone, _, alone_backend, _ = abduce(embedder, noodles, ByRound(DISTINCT), p)
    together, _, backend, _ = abduce(embedder, noodles, None, p,
                                     backend=SamplingByRound(ByRound(DISTINCT)))
    assert together.factors == alone.factors == [f for t in range(1, 9) for f in DISTINCT[t]]
    assert [(r.round, r.sentences, r.extracted) for r in together.rounds] == [
        (r.round, r.sentences, r.extracted) for r in alone.rounds]
    # Rounds 1-5 start at once: one request for 5 samples; then one round starts at each merge.
    assert backend.choice_requests == [5]
    generation = [r for r in backend.requests if r.schema_name == "Sentences"]
    assert len(generation) == len(alone_backend.calls_for("Sentences")) == 8  # the same answers, seeded alike
    assert sorted(r.seed for r in generation) == sorted(r.seed for r in alone_backend.calls_for("Sentences"))
