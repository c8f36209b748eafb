"""Evaluation correctness against a real local OpenAI-compatible server that counts what it served:
costs equal to the server's counts, one failed side of a pair, the paper's knobs, spaces per run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.rundir.records import MetricsReport, RunConfig, TraceRecord
from anchor.space.io import load_space
from tests.fakeserver import FakeOpenAIServer
from tests.run_helpers import eval_args, metrics_of, predictions_of

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
TINY = ["--n-target", "5", "--batch-size", "3", "--max-rounds", "2", "--vote-samples", "1"]


#: The tests pass every setting as a flag: variables of the user's shell must not leak in.
pytestmark = pytest.mark.usefixtures("clean_anchor_env")


def assert_cost_matches_server(metrics: MetricsReport, server: FakeOpenAIServer, *, before: tuple[int, int, int]):
    calls, prompt, completion = before
    total = metrics.cost["total"]
    assert total.llm_calls == server.completions - calls
    assert total.prompt_tokens == server.prompt_tokens_served - prompt
    assert total.completion_tokens == server.completion_tokens_served - completion


def counts(server: FakeOpenAIServer) -> tuple[int, int, int]:
    return server.completions, server.prompt_tokens_served, server.completion_tokens_served


# --------------------------------------------------------------------------- cost = what the server counted


@pytest.mark.parametrize("runs", [1, 2])
def test_cost_totals_equal_the_servers_counts(tmp_path, runs):
    """Every request counted once: space builds are no longer added on top of the predictions that
    triggered them (a 5-pair run used to report 610 calls for 334 requests)."""
    with FakeOpenAIServer(deterministic=True, fault_rates={"500": 0.05, "violation": 0.05}) as server:
        out = tmp_path / "run"
        result = runner.invoke(app, eval_args(server, tmp_path / "cache", out, "--dataset", "common2sense-pairwise",
                                              "--method", "anchor", "--limit", "3", "--runs", str(runs),
                                              "--vote-ratio", "0.3", *TINY))
        assert result.exit_code == 0, (result.stderr, result.exception)
        metrics = metrics_of(out)
        assert_cost_matches_server(metrics, server, before=(0, 0, 0))
        assert server.served["500"] > 0  # failed attempts happened and are counted too
        assert metrics.cost["total"].failed_attempts >= server.served["500"]
        # Per-run spaces: one build per scenario and run, each stored.
        scenarios = {p.id for p in predictions_of(out)}
        assert len(list((out / "spaces").glob("*.json"))) >= runs * 1 and scenarios
        build_calls = sum(c.llm_calls for path in (out / "spaces").glob("*.json") for c in load_space(path).cost)
        prediction_calls = sum(c["llm_calls"] for p in predictions_of(out) for c in p.cost)
        assert build_calls + prediction_calls == metrics.cost["total"].llm_calls
        assert "calls.jsonl" in metrics.cost_scope
        report = runner.invoke(app, ["report", str(out)])
        assert report.exit_code == 0, report.output
        md = (out / "report.md").read_text()
        total = metrics.cost["total"]
        # A request retried after a 500 is one request; a re-ask after a schema violation is a request too.
        assert total.logical_requests == server.completions - server.served["500"]
        assert f"**{total.logical_requests}** | {total.llm_calls} |" in md.replace(",", "")


def test_reused_spaces_are_reported_apart(tmp_path):
    with FakeOpenAIServer(deterministic=True) as server:
        first = tmp_path / "first"
        args = ["--dataset", "common2sense-pairwise", "--method", "anchor", "--limit", "2", "--vote-ratio", "0.3", *TINY]
        assert runner.invoke(app, eval_args(server, tmp_path / "cache", first, *args)).exit_code == 0
        build_cost = sum(c.llm_calls for path in (first / "spaces").glob("*.json") for c in load_space(path).cost)
        assert build_cost > 0
        before = counts(server)
        second = tmp_path / "second"
        result = runner.invoke(app, eval_args(server, tmp_path / "cache2", second, *args, "--no-hierarchy",
                                              "--spaces-from", str(first)))
        assert result.exit_code == 0, (result.stderr, result.exception)
        metrics = metrics_of(second)
        assert_cost_matches_server(metrics, server, before=before)
        assert not (second / "spaces").exists(), "reused spaces are read where they are, not rebuilt"
        assert metrics.cost_reused["total"].llm_calls == build_cost
        assert "reused" in metrics.cost_scope
        assert {"abduction.generate"} <= set(metrics.cost_reused) and "abduction.generate" not in metrics.cost


def test_reuse_of_spaces_built_otherwise_is_refused(tmp_path):
    with FakeOpenAIServer(deterministic=True) as server:
        first = tmp_path / "first"
        args = ["--dataset", "common2sense-pairwise", "--method", "anchor", "--limit", "1", "--vote-ratio", "0.3"]
        assert runner.invoke(app, eval_args(server, tmp_path / "cache", first, *args, *TINY)).exit_code == 0
        result = runner.invoke(app, eval_args(server, tmp_path / "cache", tmp_path / "second", *args, *TINY,
                                              "--no-cluster", "--spaces-from", str(first)))
    assert result.exit_code == 2
    assert "cannot reuse" in result.stderr and "cluster" in result.stderr


def test_cost_is_exact_after_a_kill_and_resume(tmp_path):
    """Killed while a request is being answered, then resumed: every request is counted once, and the
    one cut off by the kill is counted apart as interrupted (not as a failed attempt): the server did
    receive it, but the run cannot know its answer or tokens, only its prompt's estimated size."""
    with FakeOpenAIServer(deterministic=True) as server:
        out = tmp_path / "run"
        cmd = [sys.executable, "-c", "from anchor.cli import main; main()", *eval_args(
            server, tmp_path / "cache", out, "--dataset", "common2sense-pairwise", "--method", "anchor", "--limit", "3",
            "--vote-ratio", "0.3", *TINY)]
        env = dict(os.environ, ANCHOR_LLM_CONCURRENCY="1")
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        preds = out / "predictions.jsonl"
        deadline = time.time() + 240  # only so that a broken run cannot hang the suite
        while time.time() < deadline and proc.poll() is None:
            if preds.exists() and preds.read_text().count("\n") >= 1:
                break
            time.sleep(0.02)
        # From here the server answers nothing: the next request is the one the kill cuts off.
        server.hold(server.completions)
        server.wait_until(lambda: server.held >= 1)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        server.release()
        server.wait_until(lambda: server.in_flight == 0)  # the killed request answered (to no one) and counted
        assert not (out / "metrics.json").exists()
        resumed = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        metrics = metrics_of(out)
        total = metrics.cost["total"]
        assert (total.interrupted, total.failed_attempts) == (1, 0)
        assert total.llm_calls + total.interrupted == server.completions
        # The server counted the interrupted request's tokens; the client knows only its prompt's estimate
        # (an upper one), and that of the answer nothing.
        extra = server.prompt_tokens_served - total.prompt_tokens
        assert 0 < extra <= total.interrupted_prompt_tokens
        assert total.completion_tokens < server.completion_tokens_served
        assert "1 interrupted by a kill" in metrics.cost_scope
        assert len({(p.run, p.id) for p in predictions_of(out)}) == 3
    doc = json.loads(runner.invoke(app, ["cost", str(out), str(out), "--json"]).stdout)
    assert (doc["a"]["attempts"], doc["a"]["interrupted"], doc["a"]["failed_attempts"]) == (total.llm_calls, 1, 0)
    assert doc["a"]["requests"] == total.logical_requests == total.llm_calls
    assert "and 1 request(s) interrupted by a kill" in runner.invoke(app, ["cost", str(out), str(out)]).stdout
    assert runner.invoke(app, ["report", str(out), "--no-html"]).exit_code == 0
    table = (out / "report.md").read_text()
    assert "| Requests | Attempts | Failed | Interrupted |" in table
    assert f"| **{total.logical_requests}** | {total.llm_calls} | 0 | 1 |" in table


# --------------------------------------------------------------------------- one failed side


def test_one_failed_side_keeps_the_other_estimate(tmp_path):
    """The model answers the CoT prompt for condition 1 but never in schema for condition 2: side 2
    is failed (and says why), side 1 keeps its estimate, and the pair is not scored as 'Same'."""
    from anchor.evaluation.datasets import load_pairwise

    pair = load_pairwise()[0]

    def responder(body):
        user = body["messages"][-1]["content"]
        if pair.condition2 in user:
            return "I would rather not say."
        return json.dumps({"reasoning": "Because.", "probability": 0.8})

    with FakeOpenAIServer(responder=responder) as server:
        out = tmp_path / "run"
        result = runner.invoke(app, eval_args(server, tmp_path / "cache", out, "--dataset", "common2sense-pairwise",
                                              "--method", "cot", "--limit", "1", "--parse-retries", "1"))
        assert result.exit_code == 0, (result.stderr, result.exception)
    (pred,) = predictions_of(out)
    p1 = 0.8 if pair.gold == 1 else 0.2
    assert pred.p_gold_1 == pytest.approx(p1) and pred.p_gold_2 is None
    assert [s.status for s in pred.sides] == ["ok", "failed"]
    assert "no valid answer" in pred.sides[1].reason and pred.sides[0].reason is None
    assert pred.status == "failed" and pred.error.startswith("condition 2 failed:")
    metrics = metrics_of(out)
    assert metrics.n_failed == 1 and metrics.failures[0]["id"] == pred.id
    # Headline scoring: the failed side stands in as 0.5, so the known side decides; never "Same".
    expected = 1 if p1 > 0.5 else 2
    assert metrics.runs[0]["f1_micro"] == (1.0 if expected == pair.human else 0.0)


# --------------------------------------------------------------------------- the paper's knobs


def test_eval_help_lists_the_papers_knobs():
    result = runner.invoke(app, ["eval", "--help"], terminal_width=250)
    assert result.exit_code == 0
    for flag in ("--w-nb", "--w-cbn", "--k1", "--k2", "--alpha", "--rounds", "--vote-ratio", "--tau", "--eps",
                 "--n-target", "--batch-size", "--max-rounds", "--no-cbn", "--no-nb", "--no-pe-llm", "--bma",
                 "--no-hierarchy", "--no-cluster", "--spaces"):
        assert flag in result.stdout, flag


def test_lop_weights_are_recorded_and_used(tmp_path):
    with FakeOpenAIServer(deterministic=True) as server:
        out = tmp_path / "run"
        result = runner.invoke(app, eval_args(server, tmp_path / "cache", out, "--dataset", "today", "--method",
                                              "anchor", "--limit", "3", "--vote-ratio", "0.3", "--w-nb", "0.8",
                                              "--w-cbn", "0.2", "--k1", "2", "--eps", "0.05", *TINY))
        assert result.exit_code == 0, (result.stderr, result.exception)
    config = RunConfig.model_validate_json((out / "config.json").read_text())
    inference = config.anchor_config["inference"]
    assert (inference["w_nb"], inference["w_cbn"], inference["eps"]) == (0.8, 0.2, 0.05)
    assert config.anchor_config["mapping"]["k1"] == 2
    traces = [TraceRecord.model_validate_json(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    known = [t.result for t in traces if not t.result["unknown"]]
    assert known, "with a vote ratio of 0.3 some condition maps a factor"
    for res in known:
        assert res["weights"] == {"nb": pytest.approx(0.8), "cbn": pytest.approx(0.2)}
        assert res["p_outcome1"] == pytest.approx(0.8 * res["nb"] + 0.2 * res["cbn"])
        assert all(0.05 <= f["phi"] <= 0.95 for f in res["factors"])
        assert len(res["mapping"]["clusters"]) <= 2


# --------------------------------------------------------------------------- spaces per run or shared


@pytest.mark.parametrize(("mode", "expected_spaces"), [("per-run", 2), ("shared", 1)])
def test_spaces_per_run_or_shared(tmp_path, mode, expected_spaces):
    with FakeOpenAIServer(deterministic=True) as server:
        out = tmp_path / mode
        result = runner.invoke(app, eval_args(server, tmp_path / "cache", out, "--dataset", "today", "--method",
                                              "anchor", "--limit", "1", "--runs", "2", "--spaces", mode,
                                              "--vote-ratio", "0.3", *TINY))
        assert result.exit_code == 0, (result.stderr, result.exception)
    spaces = sorted((out / "spaces").glob("*.json"))
    assert len(spaces) == expected_spaces
    seeds = sorted(load_space(p).params.seed for p in spaces)
    assert seeds == ([0, 1] if mode == "per-run" else [0])
    config = RunConfig.model_validate_json((out / "config.json").read_text())
    assert config.spaces == mode
    metrics = metrics_of(out)
    assert any(("every run" if mode == "per-run" else "shared by all runs") in n for n in metrics.notes)
    used = {(p.run, p.sides[0].artefact) for p in predictions_of(out)}
    assert len({a for _, a in used}) == expected_spaces
