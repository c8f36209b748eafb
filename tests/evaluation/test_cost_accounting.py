"""``anchor cost`` and metrics.json against a local server that counts what it served: sampled
slices, every request charged to its scenario, and the critical path per scenario."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.evaluation.datasets import load_factcheck_set, scenario_key
from anchor.rundir import RunDirectory
from anchor.rundir.records import TraceRecord
from anchor.space.io import load_space
from anchor.types import CriticalPath
from tests.fakeserver import FakeOpenAIServer
from tests.run_helpers import eval_args, metrics_of

runner = CliRunner()
TINY = ["--n-target", "5", "--batch-size", "3", "--max-rounds", "2", "--vote-samples", "1", "--vote-ratio", "0.3"]


#: The tests pass every setting as a flag: variables of the user's shell must not leak in.
pytestmark = pytest.mark.usefixtures("clean_anchor_env")


def invoke(args: list[str]):
    result = runner.invoke(app, args)
    assert result.exit_code == 0, (result.stderr, result.exception)
    return result


def served(server: FakeOpenAIServer) -> tuple[int, int]:
    return server.completions, server.prompt_tokens_served + server.completion_tokens_served


def evaluate(server: FakeOpenAIServer, tmp_path: Path, name: str, *args: str) -> tuple[Path, int, int]:
    """Run ``anchor eval`` into ``tmp_path/name`` with a cache of its own; returns the directory and the
    requests and tokens the server served for it."""
    calls, tokens = served(server)
    out = tmp_path / name
    invoke(eval_args(server, tmp_path / f"cache-{name}", out, *args))
    after = served(server)
    return out, after[0] - calls, after[1] - tokens


def cost(a: Path, b: Path) -> dict:
    return json.loads(invoke(["cost", str(a), str(b), "--json"]).stdout)


def test_sampled_factcheck_runs_are_compared_over_their_sampled_scenarios(tmp_path):
    """A seeded sample of 4 CNN claims: 4 scenarios (not the 558 of the whole file), and calls per
    scenario x 4 are the requests the server received."""
    with FakeOpenAIServer(deterministic=True) as server:
        vanilla, v_calls, v_tokens = evaluate(server, tmp_path, "v4", "--dataset", "cnn", "--sample", "4", "-m",
                                              "vanilla")
        cot, c_calls, c_tokens = evaluate(server, tmp_path, "c4", "--dataset", "cnn", "--sample", "4", "-m", "cot")
    doc = cost(vanilla, cot)
    assert (v_calls, c_calls) == (4, 4)
    assert doc["slice"] | {"scenarios": doc["slice"]["scenarios"]} == {
        "dataset": "cnn", "kind": "factcheck", "sample": 4, "sample_seed": 42, "limit": None, "runs": 1, "scenarios": 4}
    total = doc["per_scenario"]["total"]
    assert total["a"]["attempts"] * 4 == v_calls and total["b"]["attempts"] * 4 == c_calls
    assert total["a"]["requests"] * 4 == v_calls and total["b"]["requests"] * 4 == c_calls  # a server without faults
    assert total["a"]["tokens"] * 4 == pytest.approx(v_tokens) and total["b"]["tokens"] * 4 == pytest.approx(c_tokens)
    # One row per sampled claim, each with its one request; nothing left over in a run-level row.
    sample = RunDirectory(vanilla).read_sample()
    assert sample is not None
    ids = sample.ids
    claims = {inst.id: scenario_key(inst.scenario) for inst in load_factcheck_set("cnn").instances}
    assert set(doc["scenarios"]) == {claims[i] for i in ids}
    assert all(row["a"]["requests"] == row["b"]["requests"] == 1 for row in doc["scenarios"].values())
    text = invoke(["cost", str(vanilla), str(cot)]).stdout
    assert "Slice: cnn (factcheck), 4 scenario(s), a sample of 4 (seed 42), 1 run(s)." in text


def test_llm_negations_are_charged_to_their_claims(tmp_path):
    with FakeOpenAIServer(deterministic=True) as server:
        run, calls, _ = evaluate(server, tmp_path, "neg", "--dataset", "cnn", "--sample", "3", "--negation", "llm",
                                 "-m", "vanilla")
    doc = cost(run, run)
    assert calls == 6 and doc["slice"]["scenarios"] == 3
    assert "(run)" not in doc["scenarios"]
    assert [row["a"]["requests"] for row in doc["scenarios"].values()] == [2, 2, 2]  # the negation and the estimate


def test_runs_on_other_samples_are_refused_naming_both_values(tmp_path):
    with FakeOpenAIServer(deterministic=True) as server:
        first, *_ = evaluate(server, tmp_path, "s42", "--dataset", "cnn", "--sample", "2", "-m", "vanilla")
        seed7, *_ = evaluate(server, tmp_path, "s7", "--dataset", "cnn", "--sample", "2", "--sample-seed", "7",
                             "-m", "vanilla")
        three, *_ = evaluate(server, tmp_path, "n3", "--dataset", "cnn", "--sample", "3", "-m", "vanilla")
    result = runner.invoke(app, ["cost", str(first), str(seed7)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "not runs of the same dataset slice: sample_seed is 42 in the first and 7 in the second" in result.stderr
    result = runner.invoke(app, ["cost", str(first), str(three)])
    assert result.exit_code == 2 and "sample is 2 in the first and 3 in the second" in result.stderr


def test_critical_path_per_scenario_is_its_build_then_its_longest_condition(tmp_path, stopped_stopwatch):
    # With the stopwatch stopped every chain lasts 0 s and the longest is the one with most requests:
    # by wall-clock seconds, a round of 3 requests left slow by a loaded machine could outlast the
    # build's longer chains, and the build's critical path would be those 3.
    args = ["--dataset", "common2sense-pairwise", "--limit", "2"]
    with FakeOpenAIServer(deterministic=True) as server:
        anchor, *_ = evaluate(server, tmp_path, "anchor", *args, "-m", "anchor", "--no-cluster", *TINY)
        vanilla, *_ = evaluate(server, tmp_path, "vanilla", *args, "-m", "vanilla")
    paths = metrics_of(anchor).critical_path
    spaces = {path.stem[:16]: load_space(path).critical_path for path in (anchor / "spaces").glob("*.json")}
    traces = [TraceRecord.model_validate_json(line) for line in (anchor / "traces.jsonl").read_text().splitlines()]
    assert set(paths.per_scenario) == set(spaces) and paths.scenarios == len(spaces)
    for key, path in paths.per_scenario.items():
        # Every condition waited for the scenario's factor space, then mapped and inferred on its own.
        longest = max((CriticalPath.model_validate(t.result["critical_path"]) for t in traces if t.space[:16] == key),
                      key=lambda p: (p.seconds, p.requests))
        assert path.requests == spaces[key].requests + longest.requests
        assert path.seconds == pytest.approx(spaces[key].seconds + longest.seconds, abs=1e-5)
        # at least a round's generation and extraction, then a vote on what it merged
        assert spaces[key].requests >= 3
    # A direct baseline asks about the two conditions side by side: one request deep.
    assert {p.requests for p in metrics_of(vanilla).critical_path.per_scenario.values()} == {1}
    doc = cost(vanilla, anchor)
    mean = doc["per_scenario"]["critical_path"]
    assert mean["a"]["requests"] == 1 and mean["b"]["requests"] == pytest.approx(paths.mean_requests)
    assert mean["ratio"]["requests"] == round(paths.mean_requests, 4)
    for key, path in paths.per_scenario.items():
        assert doc["scenarios"][key]["critical_path"]["b"] == {"requests": path.requests,
                                                                "seconds": round(path.seconds, 4)}
    assert "Critical path per scenario (mean): A 1.0 req." in invoke(["cost", str(vanilla), str(anchor)]).stdout
