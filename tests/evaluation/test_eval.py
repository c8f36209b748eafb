"""The evaluation harness end to end against a real local OpenAI-compatible server."""

from __future__ import annotations

import gc
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.evaluation.datasets import load_pairwise
from anchor.methods import METHODS
from anchor.metrics import pairwise_metrics, pairwise_prediction
from anchor.rundir.records import MetricsReport, Prediction, RunConfig
from tests.fakeserver import FakeOpenAIServer

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


def eval_args(server: FakeOpenAIServer, tmp_path: Path, out: Path, *extra: str) -> list[str]:
    return ["eval", "--base-url", server.base_url, "--cache-dir", str(tmp_path / "cache"), "--out", str(out),
            "--json", *extra]


def run_eval(args: list[str]):
    result = runner.invoke(app, args)
    return result


def read_predictions(out: Path) -> list[Prediction]:
    return [Prediction.model_validate_json(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


PAIRS = load_pairwise()[:3]  # (human, gold): (1, 2), (2, 2), (2, 2)
#: Scripted P(O1) per condition: pair 0 favours condition 1 for the gold outcome O2, pair 1 condition
#: 2, pair 2 neither (a tie: "same").
P_O1 = {PAIRS[0].condition1: 0.3, PAIRS[0].condition2: 0.8, PAIRS[1].condition1: 0.8, PAIRS[1].condition2: 0.3,
        PAIRS[2].condition1: 0.4, PAIRS[2].condition2: 0.4}
CONDITION = re.compile(r"^Condition: (.*)$", re.MULTILINE)


def scripted_baselines(body: dict) -> str:
    """Every direct baseline's answer from P_O1 (the Logits baseline's comes from its log-probabilities)."""
    user = body["messages"][-1]["content"]
    name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
    if name.startswith("CompareChoice"):
        pair = next(p for p in PAIRS if f"Condition 1: {p.condition1}\n" in user)
        gold = [P_O1[c] if pair.gold == 1 else 1 - P_O1[c] for c in (pair.condition1, pair.condition2)]
        return json.dumps({"choice": "1" if gold[0] > gold[1] else "2" if gold[1] > gold[0] else "same"})
    if name.startswith("OracleFactors"):
        return json.dumps({"factors": ["water temperature", "time spent"]})
    p = P_O1[CONDITION.search(user).group(1)] if CONDITION.search(user) else 0.5
    choice = "1" if p > 0.5 else "2"
    return json.dumps({"VerbalProbability": {"probability": p}, "DirectChoice": {"choice": choice},
                       "ReasonedProbability": {"reasoning": "Scripted.", "probability": p},
                       "ReasonedChoice": {"reasoning": "Scripted.", "choice": choice}}.get(name.split("_")[0], "1"))


def scripted_logprobs(body: dict) -> dict[str, float]:
    p = P_O1[CONDITION.search(body["messages"][-1]["content"]).group(1)]
    return {"1": math.log(p), "2": math.log(1 - p), "x": -9.0}


DIRECT_BASELINES = [m for m in METHODS if not METHODS[m].uses_anchor_config and not m.startswith("bird")]


@pytest.mark.parametrize("method", DIRECT_BASELINES)
def test_every_baseline_runs_on_pairwise(method, tmp_path):
    with FakeOpenAIServer(responder=scripted_baselines, first_token_logprobs=scripted_logprobs) as server:
        out = tmp_path / method
        result = run_eval(eval_args(server, tmp_path, out, "--dataset", "common2sense-pairwise", "--method", method,
                                    "--limit", "3", "--runs", "2"))
        assert result.exit_code == 0, result.output
    metrics = MetricsReport.model_validate_json((out / "metrics.json").read_text())
    config = RunConfig.model_validate_json((out / "config.json").read_text())
    assert config.method == method and config.runs == 2 and config.limit == 3
    assert metrics.n_instances == 3 and metrics.n_runs == 2 and len(metrics.runs) == 2
    # Predictions 1 (pair 0), 2 (pair 1) and same (pair 2) against the human 1, 2, 2: class 1 F1 1,
    # class 2 F1 2/3 (one of two found, no false alarm), micro 2/3; both runs alike. No pair is "same":
    # its F1 is undefined (None), not 0.
    expected = {"f1_context1": 1.0, "f1_context2": 2 / 3, "f1_micro": 2 / 3, "coverage": 1.0}
    for key, value in expected.items():
        assert metrics.mean[key] == pytest.approx(value) and metrics.std[key] == pytest.approx(0.0), key
    assert metrics.mean["f1_same"] is None and metrics.std["f1_same"] is None
    assert [r["pairs_per_class"] for r in metrics.runs] == [{"context1": 1, "context2": 2, "same": 0}] * 2
    preds = read_predictions(out)
    assert sorted((p.run, p.id) for p in preds) == sorted(
        (r, f"common2sense-pairwise:{i}") for r in range(2) for i in range(3))
    assert {p.id: p.prediction for p in preds} == {f"common2sense-pairwise:{i}": c for i, c in enumerate((1, 2, 3))}
    if method != "compare":  # the others estimate P(O1) for each condition: P(gold = O2 | c) = 1 - P(O1 | c)
        direct = METHODS[method].direct
        for p in preds:
            pair = PAIRS[int(p.id.rsplit(":", 1)[1])]
            want = [1 - (float(P_O1[c] > 0.5) if direct else P_O1[c]) for c in (pair.condition1, pair.condition2)]
            assert [p.p_gold_1, p.p_gold_2] == [pytest.approx(w) for w in want], p.id
    assert metrics.cost["total"].llm_calls == server.completions
    assert metrics.oracle == (method == "factor-based")
    if method == "factor-based":
        assert any("oracle" in n for n in metrics.notes)


@pytest.mark.parametrize("method", [m for m in METHODS if m.startswith("bird") and not METHODS[m].uses_anchor_config])
def test_bird_runs_on_pairwise_over_two_runs(method, tmp_path):
    """BIRD's values are pinned in test_bird_eval.py (a scripted BIRD); here its metrics are those of its
    predictions, over two runs with random (schema-valid) answers."""
    with FakeOpenAIServer(deterministic=True) as server:
        out = tmp_path / method
        result = run_eval(eval_args(server, tmp_path, out, "--dataset", "common2sense-pairwise", "--method", method,
                                    "--limit", "3", "--runs", "2"))
        assert result.exit_code == 0, result.output
    metrics = MetricsReport.model_validate_json((out / "metrics.json").read_text())
    preds = read_predictions(out)
    assert sorted((p.run, p.id) for p in preds) == sorted(
        (r, f"common2sense-pairwise:{i}") for r in range(2) for i in range(3))
    for r, run in enumerate(metrics.runs):
        mine = sorted((p for p in preds if p.run == r), key=lambda p: p.id)
        covered = pairwise_metrics([p.human for p in mine], [p.prediction for p in mine])
        every = pairwise_metrics([p.human for p in mine],
                                 [pairwise_prediction(p.p_gold_1, p.p_gold_2, unknown_as=0.5) for p in mine])
        assert run["coverage"] == pytest.approx(covered["coverage"])
        assert run["f1_micro"] == pytest.approx(every["f1_micro"])
    assert metrics.cost["total"].llm_calls == server.completions


def test_anchor_pairwise_against_server_and_report(tmp_path):
    with FakeOpenAIServer(deterministic=True) as server:
        out = tmp_path / "anchor"
        result = run_eval(eval_args(server, tmp_path, out, "--dataset", "common2sense-pairwise", "--method", "anchor",
                                    "--limit", "2", "--runs", "2", "--n-target", "6", "--batch-size", "3",
                                    "--max-rounds", "2"))
        assert result.exit_code == 0, result.output
    metrics = MetricsReport.model_validate_json((out / "metrics.json").read_text())
    assert metrics.method == "anchor" and not metrics.small_model
    stages = set(metrics.cost)
    assert {"abduction.generate", "voting", "mapping.select"} <= stages
    spaces = list((out / "spaces").glob("*.json"))
    assert spaces, "factor spaces are stored with the run"
    report = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    md = (tmp_path / "report" / "report.md").read_text()
    assert "ANCHOR" in md and "Context1" in md


def test_resume_after_sigkill_matches_uninterrupted_run(tmp_path):
    """Kill a run half-way, start it again: no instance is repeated and the metrics equal those of
    an uninterrupted run (both read the same LLM answers: a deterministic server + shared cache)."""
    with FakeOpenAIServer(deterministic=True) as server:
        cache = tmp_path / "cache"
        killed = tmp_path / "killed"
        cmd = [sys.executable, "-c", "from anchor.cli import main; main()", "eval", "--base-url", server.base_url,
               "--cache-dir", str(cache), "--dataset", "common2sense-pairwise", "--method", "cot", "--limit", "8",
               "--runs", "2", "--out", str(killed)]
        env = dict(os.environ, ANCHOR_LLM_CONCURRENCY="1")
        # Half-way: the server answers 12 requests (6 predictions, one request per condition) and holds
        # the rest, so the run is still going when it is killed, however fast or slow the machine.
        server.hold(12)
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        preds = killed / "predictions.jsonl"
        deadline = time.time() + 240  # only so that a broken run cannot hang the suite
        while time.time() < deadline and proc.poll() is None:
            if preds.exists() and len(preds.read_text().splitlines()) >= 5 and server.held:
                break
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        server.release()
        done_before = len(preds.read_text().splitlines())
        assert 5 <= done_before <= 6, "the kill must land half-way"
        assert not (killed / "metrics.json").exists()
        calls_before = server.completions

        resumed = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr
        new_calls = server.completions - calls_before
        # Only the unfinished instances reached the server again (2 calls each: one per condition).
        assert new_calls <= 2 * (16 - done_before) + 2

        straight = tmp_path / "straight"
        cmd2 = [*cmd[:-1], str(straight)]
        subprocess.run(cmd2, cwd=REPO, env=env, check=True, capture_output=True, timeout=300)

    ids = [(p.run, p.id) for p in read_predictions(killed)]
    assert len(ids) == len(set(ids)) == 16
    a = json.loads((killed / "metrics.json").read_text())
    b = json.loads((straight / "metrics.json").read_text())
    assert a["runs"] == b["runs"] and a["mean"] == b["mean"] and a["std"] == b["std"]


def test_torn_last_line_is_dropped_on_resume(tmp_path):
    with FakeOpenAIServer(deterministic=True) as server:
        out = tmp_path / "run"
        args = eval_args(server, tmp_path, out, "--dataset", "today", "--method", "vanilla", "--limit", "4")
        assert run_eval(args).exit_code == 0
        lines = (out / "predictions.jsonl").read_text().splitlines()
        # Simulate a process killed while writing the last record.
        (out / "predictions.jsonl").write_text("\n".join(lines[:2]) + "\n" + lines[2][:25])
        (out / "metrics.json").unlink()
        result = run_eval(args)
        assert result.exit_code == 0, result.output
    preds = read_predictions(out)
    assert len(preds) == 4 and len({p.id for p in preds}) == 4


def test_unseen_factcheck_file_with_data(tmp_path):
    claims = [
        {"claim": "Drinking water reduces the risk of kidney stones.", "label": "SUPPORTED",
         "evidence": ["A cohort study found fewer stones among people drinking more water."]},
        {"claim": "Vitamin C cures the common cold.", "label": "REFUTED",
         "evidence": ["Trials found no effect of vitamin C on cold incidence.", "Duration shortened slightly."]},
        {"claim": "Regular exercise improves sleep quality.", "label": "SUPPORTED",
         "evidence": ["Participants who exercised reported better sleep."]},
    ]
    data = tmp_path / "my_claims.jsonl"
    data.write_text("\n".join(json.dumps(c) for c in claims) + "\n")
    with FakeOpenAIServer(deterministic=True) as server:
        out = tmp_path / "fc"
        result = run_eval(eval_args(server, tmp_path, out, "--data", str(data), "--method", "vanilla"))
        assert result.exit_code == 0, result.output
    metrics = MetricsReport.model_validate_json((out / "metrics.json").read_text())
    assert metrics.kind == "factcheck" and metrics.n_instances == 3
    assert "balanced_accuracy" in metrics.mean
    assert {p.label for p in read_predictions(out)} == {1, 2}


@pytest.mark.filterwarnings("error::anchor.evaluation.datasets.DatasetWarning")  # counted, not warned about
def test_broken_data_rows_are_skipped_and_an_unusable_file_is_a_clear_error(tmp_path):
    data = tmp_path / "broken.jsonl"
    data.write_text('{"claim": "x", "label": "SUPPORTED", "evidence": ["e"]}\n{"claim": "y", "lab')
    with FakeOpenAIServer(deterministic=True) as server:
        result = run_eval(eval_args(server, tmp_path, tmp_path / "o", "--data", str(data), "--method", "vanilla"))
    assert result.exit_code == 0, result.output
    m = MetricsReport.model_validate_json((tmp_path / "o" / "metrics.json").read_text())
    assert m.n_instances == 1 and m.data is not None and (m.data["rows"], m.data["skipped"]) == (2, 1)
    assert m.data["skipped_rows"][0]["line"] == 2
    data.write_text('{"claim": "", "label": "SUPPORTED", "evidence": ["e"]}\n{"claim": "y", "lab')
    result = run_eval(["eval", "--data", str(data), "--method", "vanilla", "--out", str(tmp_path / "o2")])
    assert result.exit_code == 2
    assert "no usable row" in result.output and "line 2" in result.output and "Traceback" not in result.output


def test_compare_is_pairwise_only(tmp_path):
    result = run_eval(["eval", "--dataset", "today", "--method", "compare", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "pairwise" in result.output


def test_other_settings_in_the_same_dir_are_refused(tmp_path):
    with FakeOpenAIServer(deterministic=True) as server:
        out = tmp_path / "run"
        assert run_eval(eval_args(server, tmp_path, out, "--dataset", "today", "--method", "vanilla",
                                  "--limit", "2")).exit_code == 0
        result = run_eval(eval_args(server, tmp_path, out, "--dataset", "today", "--method", "vanilla",
                                    "--limit", "3"))
    assert result.exit_code == 2 and "limit" in result.output


def test_logits_without_logprobs_is_a_clear_error(tmp_path):
    with FakeOpenAIServer(logprobs=False) as server:
        result = run_eval(eval_args(server, tmp_path, tmp_path / "o", "--dataset", "today", "--method", "logits",
                                    "--limit", "2"))
    assert result.exit_code == 2
    assert "log-probabilities" in result.output and "Traceback" not in result.output


def test_factcheck_llm_written_negation(tmp_path):
    negations = {}

    def responder(body):
        user = body["messages"][-1]["content"]
        if user.startswith("Claim:"):
            claim = user.split("\n")[0][len("Claim: "):]
            negations[claim] = f"NOT: {claim}"
            return json.dumps({"negation": negations[claim]})
        return json.dumps({"probability": 0.95})

    with FakeOpenAIServer(responder=responder) as server:
        out = tmp_path / "neg"
        result = run_eval(eval_args(server, tmp_path, out, "--dataset", "factcheck", "--method", "vanilla",
                                    "--limit", "3", "--negation", "llm"))
        assert result.exit_code == 0, result.output
        vanilla_prompts = [b for b in server.requests if "What is the probability" in b["messages"][-1]["content"]]
    assert len(negations) == 3
    # The LLM-written negation is what the method was asked about as outcome 2.
    assert all(any(f"Outcome 2: {neg}" in b["messages"][-1]["content"] for b in vanilla_prompts)
               for neg in negations.values())
    metrics = MetricsReport.model_validate_json((out / "metrics.json").read_text())
    # P(claim) = 0.95 > 0.9 everywhere: every claim is called supported.
    assert metrics.runs[0]["coverage"] == 1.0


def test_a_refused_resume_leaves_no_connection_open(tmp_path):
    # The run asks the server for its model before it reads the run directory; refused there, it
    # must still close what it opened (unclosed transports surfaced later, in unrelated tests).
    out = tmp_path / "run"
    with FakeOpenAIServer(deterministic=True) as server:
        assert run_eval(eval_args(server, tmp_path, out, "--dataset", "today", "--method", "vanilla",
                                  "--limit", "1")).exit_code == 0
        gc.collect()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            refused = run_eval(eval_args(server, tmp_path, out, "--dataset", "today", "--method", "vanilla",
                                         "--limit", "2"))
            gc.collect()
    assert refused.exit_code == 2 and "limit" in refused.output
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
