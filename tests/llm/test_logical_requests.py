"""Logical requests against attempts: a server's transient faults (HTTP 500, 429) add attempts, never
requests, so every cost figure that compares runs (metrics.json, ``anchor cost``, Table 4's mapping
cost) is the same against a faulty server as against a clean one; a re-ask after an unusable answer
is a request, and old call logs (before ``gave_up`` was recorded) are still summed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.evaluation.report.transplant import mapping_cost
from anchor.llm.ledger import CallRecord, merge_costs, summarize, total
from anchor.reproduce.estimate import Spent, spent_in
from anchor.rundir.records import RunConfig
from anchor.types import StageCost
from tests.fakeserver import FakeOpenAIServer
from tests.run_helpers import eval_args, metrics_of, predictions_of

runner = CliRunner()
TINY = ["--n-target", "5", "--batch-size", "3", "--max-rounds", "2", "--vote-samples", "1", "--vote-ratio", "0.3"]
#: The faults of the issue's measurement; answers depend on the request only (``deterministic``).
FAULTS = {"500": 0.2, "429": 0.1}

pytestmark = pytest.mark.usefixtures("clean_anchor_env")


def invoke(args: list[str]):
    result = runner.invoke(app, args)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def test_a_record_ends_a_request_unless_the_transport_retried_it():
    def rec(outcome: str, **kw) -> CallRecord:
        return CallRecord(stage="s", outcome=outcome, **kw)  # type: ignore[arg-type]

    records = [rec("transient_error"), rec("format_rejected"), rec("ok"),  # one request in three attempts
               rec("invalid_output"), rec("truncated"), rec("ok"),  # re-asks: three requests
               rec("transient_error", gave_up=True),  # a request the transport gave up on
               rec("fatal_error"), rec("cache_hit"), rec("sent", request_id="x")]
    cost = total(records)
    assert (cost.logical_requests, cost.llm_calls, cost.failed_attempts) == (6, 8, 6)
    assert (cost.cache_hits, cost.interrupted) == (1, 1)
    assert summarize([rec("transient_error")])[0].logical_requests == 0  # counted, and none: not unknown


def test_old_call_logs_are_summed_and_old_stored_costs_stay_unknown():
    # A line written before gave_up existed reads as a retried attempt (the usual case).
    old = CallRecord.model_validate_json('{"stage": "s", "outcome": "transient_error", "detail": "HTTP 500"}')
    assert not old.gave_up and not old.ends_request
    assert total([old, CallRecord(stage="s", outcome="ok")]).logical_requests == 1
    # A stored cost written before logical requests were counted: unknown, and so is any sum with it.
    stored = StageCost.model_validate({"stage": "s", "llm_calls": 4})
    assert stored.logical_requests is None
    assert merge_costs([stored, StageCost(stage="s", llm_calls=2, logical_requests=2)])[0].logical_requests is None
    assert merge_costs([StageCost(stage="s", logical_requests=2), StageCost(stage="t", logical_requests=3)],
                       label="total")[0].logical_requests == 5


def test_the_reproductions_spending_is_requests_with_their_attempts(tmp_path):
    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    records = [CallRecord(stage="s", outcome="transient_error"), CallRecord(stage="s", outcome="ok", prompt_tokens=5),
               CallRecord(stage="s", outcome="invalid_output", completion_tokens=2), CallRecord(stage="s", outcome="ok"),
               CallRecord(stage="s", outcome="cache_hit")]
    (run / "calls.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
    assert spent_in(tmp_path) == Spent(requests=3, attempts=4, tokens=7)


def _evaluate(tmp_path: Path, name: str, faults: dict[str, float], method: str) -> tuple[Path, dict]:
    """``anchor eval`` of 2 Common2Sense pairs on a server of its own (and a cache of its own, so that
    no request is hidden); returns the run directory and what the server served."""
    with FakeOpenAIServer(deterministic=True, fault_rates=faults, seed=3) as server:
        out = tmp_path / name
        # Retries enough that no request runs out of them (30 % of attempts fail here).
        invoke(eval_args(server, tmp_path / f"cache-{name}", out, "--dataset", "common2sense-pairwise",
                         "--limit", "2", "--method", method, "--retries", "30", *(TINY if method == "anchor" else [])))
        return out, {"requests": server.completions, "served": dict(server.served)}


def test_a_servers_faults_change_attempts_not_requests_nor_ratios(tmp_path):
    runs = {(method, kind): _evaluate(tmp_path, f"{method}-{kind}", faults, method)
            for method in ("bird", "anchor") for kind, faults in (("clean", {}), ("faulty", FAULTS))}
    faulted = sum(runs[(m, "faulty")][1]["served"].get(f, 0) for m in ("bird", "anchor") for f in FAULTS)
    assert faulted > 10  # the faulty runs did meet faults
    for method in ("bird", "anchor"):
        (clean, s_clean), (faulty, s_faulty) = runs[(method, "clean")], runs[(method, "faulty")]
        mc, mf = metrics_of(clean), metrics_of(faulty)
        assert mc.mean == mf.mean and mc.n_failed == mf.n_failed == 0  # the same answers, the same scores
        # metrics.json: per stage, the same requests and tokens; the attempts are what each server received.
        assert set(mc.cost) == set(mf.cost)
        for stage in mc.cost:
            c, f = mc.cost[stage], mf.cost[stage]
            assert (c.logical_requests, c.prompt_tokens, c.completion_tokens) == (
                f.logical_requests, f.prompt_tokens, f.completion_tokens), stage
        assert mc.cost["total"].llm_calls == mc.cost["total"].logical_requests == s_clean["requests"]
        assert mf.cost["total"].llm_calls == s_faulty["requests"] > mf.cost["total"].logical_requests
        assert mf.cost["total"].logical_requests == s_faulty["requests"] - sum(s_faulty["served"].get(f, 0)
                                                                                for f in FAULTS)
        # Table 4's "cost from N request(s)": the same N, the attempts apart.
        config = RunConfig.model_validate_json((clean / "config.json").read_text())
        a, b = mapping_cost(config, mc, clean), mapping_cost(config, mf, faulty)
        assert (a.made, a.tokens) == (b.made, b.tokens) and a.made == a.attempts
        # What anchor reproduce counts against --budget-requests: requests; the attempts beside them.
        assert spent_in(clean).requests == spent_in(faulty).requests == spent_in(clean).attempts
        assert spent_in(faulty).attempts == s_faulty["requests"]
        keep = {"id", "p_gold_1", "p_gold_2", "prediction", "unknown"}
        assert sorted(p.model_dump_json(include=keep) for p in predictions_of(clean)) == sorted(
            p.model_dump_json(include=keep) for p in predictions_of(faulty))

    def cost(kind: str) -> dict:
        return json.loads(invoke(["cost", str(runs[("bird", kind)][0]), str(runs[("anchor", kind)][0]),
                                  "--json"]).stdout)

    clean, faulty = cost("clean"), cost("faulty")
    for side in ("a", "b"):
        assert clean[side]["requests"] == faulty[side]["requests"] == clean[side]["attempts"]
    assert faulty["a"]["attempts"] + faulty["b"]["attempts"] > clean["a"]["attempts"] + clean["b"]["attempts"]
    total_c, total_f = clean["per_scenario"]["total"], faulty["per_scenario"]["total"]
    for key in ("requests", "tokens"):
        assert total_c["ratio"][key] == total_f["ratio"][key] is not None
    for phase, row in clean["per_scenario"]["phases"].items():
        assert row["ratio"]["requests"] == faulty["per_scenario"]["phases"][phase]["ratio"]["requests"]
    text = invoke(["cost", str(runs[("bird", "faulty")][0]), str(runs[("anchor", "faulty")][0])]).stdout
    assert f"{faulty['b']['requests']:,} requests in {faulty['b']['attempts']:,} attempts" in text
    assert "| Requests A (attempts) | Requests B (attempts) | B/A |" in text
