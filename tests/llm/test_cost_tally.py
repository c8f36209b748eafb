"""Costs added up one record at a time (``CostTally``), as a run's metrics read a call log of any length:
the same figures as the whole log collapsed in memory, worked out here by hand."""

from __future__ import annotations

import pytest

from anchor.llm.ledger import CallRecord, CostLedger, CostTally, collapse_sent, summarize, total


def rec(stage: str, outcome: str, rid: str = "", started: float = 0.0, seconds: float = 0.0, **kw) -> CallRecord:
    return CallRecord(stage=stage, outcome=outcome, request_id=rid, started=started, seconds=seconds, **kw)


#: A log as written: each request's "sent" record, then its outcome; one request ("c") never answered.
LOG = [
    rec("abduce", "sent", "a", estimated_prompt_tokens=10),
    rec("vote", "sent", "b", estimated_prompt_tokens=5),
    rec("abduce", "ok", "a", started=100.0, seconds=2.0, prompt_tokens=7, completion_tokens=3),
    rec("map", "sent", "c", estimated_prompt_tokens=40),
    rec("vote", "transient_error", "b", started=101.0, seconds=2.0),
    rec("vote", "sent", "d", estimated_prompt_tokens=5),
    rec("vote", "ok", "d", started=105.0, seconds=1.0, prompt_tokens=4, completion_tokens=1),
    rec("abduce", "cache_hit"),
]


def test_the_tally_of_a_log_read_as_written_is_the_cost_worked_out_by_hand():
    tally = CostTally.of(LOG)
    stages = {s.stage: s for s in tally.stages()}
    # First-seen order among what counts: abduce (line 3), vote (line 5), map (its unanswered "sent", line 4).
    assert [s.stage for s in tally.stages()] == ["abduce", "map", "vote"]
    assert (stages["abduce"].llm_calls, stages["abduce"].cache_hits, stages["abduce"].wall_seconds) == (1, 1, 2.0)
    assert (stages["map"].llm_calls, stages["map"].interrupted, stages["map"].interrupted_prompt_tokens) == (0, 1, 40)
    # [101, 103] and [105, 106]: 3 s busy; one failed attempt, one logical request (the retried one ended "ok").
    vote = stages["vote"]
    assert (vote.llm_calls, vote.failed_attempts, vote.wall_seconds, vote.prompt_tokens) == (2, 1, 3.0, 4)
    everything = tally.total()
    # [100, 102] and [101, 103] overlap: 3 s, then [105, 106]: 4 s in all.
    assert (everything.llm_calls, everything.interrupted, everything.cache_hits, everything.wall_seconds) == (3, 1, 1, 4.0)
    assert (everything.prompt_tokens, everything.completion_tokens, everything.llm_seconds) == (11, 4, 5.0)


def test_summarize_and_total_of_a_log_in_memory_agree_with_the_tally_read_as_written():
    assert summarize(LOG) == CostTally.of(LOG).stages()
    assert total(LOG) == CostTally.of(LOG).total()
    assert total(collapse_sent(LOG)) == CostTally.of(LOG).total()


def test_a_ledger_that_does_not_keep_its_records_still_tells_its_subscribers_and_its_tally():
    ledger = CostLedger(keep=False)
    seen: list[CallRecord] = []
    ledger.subscribe(seen.append)
    with ledger.scope("instance:0:x") as mine:
        for r in LOG:
            ledger.record(r.model_copy())
    assert len(seen) == len(mine) == len(LOG)
    assert ledger.tally().llm_calls == 3
    assert ledger._records == []  # nothing held: a run's ledger of a million requests would not fit
    with pytest.raises(RuntimeError, match="does not keep its records"):
        ledger.records  # noqa: B018 - asking is the error
