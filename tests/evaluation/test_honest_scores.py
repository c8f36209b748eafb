"""Every score honest, tried from outside against tests/fakeserver.py: unknown counts that agree
between the terminal and metrics.json, notes that are true of the file read, and runs scored side by
side only on the instances they share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.evaluation.datasets import load_dataset
from tests.fakeserver import FakeOpenAIServer
from tests.run_helpers import eval_args, metrics_of, predictions_of

runner = CliRunner()

#: The tests pass every setting as a flag: variables of the user's shell must not leak in.
pytestmark = pytest.mark.usefixtures("clean_anchor_env")


def _today_conditions(n: int) -> list[str]:
    return [inst.condition for inst in load_dataset("today")[:n]]


# --------------------------------------------------------------------------- unknown counts


def test_unknown_counts_agree_between_the_terminal_and_metrics_json(tmp_path):
    """Four Today instances, one request each, one at a time: the first request gets HTTP 500 with no
    retry (failed), the second neither '1' nor '2' among its first tokens (abstained), the third
    '1' and '2' equally likely (P = 0.5, a tie: no decision), the fourth a clear '1'. metrics.json's
    runs[].unknown counts all three without a decision; the terminal says the same, and which of
    them failed."""
    first, second, third, _ = _today_conditions(4)

    def logprobs(body: dict) -> dict[str, float]:
        text = body["messages"][-1]["content"]
        if first[:40] in text:
            raise AssertionError("the first request is answered with HTTP 500 before its tokens are drawn")
        if second[:40] in text:
            return {"x": -0.1, "y": -2.0}
        if third[:40] in text:
            return {"1": -0.7, "2": -0.7}
        return {"1": -0.1, "2": -3.0}

    with FakeOpenAIServer(faults=["500"], first_token_logprobs=logprobs) as server:
        out = tmp_path / "run"
        args = eval_args(server, tmp_path / "cache", out, "--dataset", "today", "--method", "logits", "--limit", "4",
                         "--retries", "0", "--concurrency", "1")
        args.remove("--json")
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    metrics = metrics_of(out)
    run = metrics.runs[0]
    assert (run["unknown"], run["abstained"], run["failed"]) == (3, 1, 1)
    assert (metrics.n_unknown, metrics.n_abstained, metrics.n_failed) == (3, 1, 1)
    assert {p.status for p in predictions_of(out)} == {"failed", "abstained", "ok"}
    terminal = " ".join(result.stdout.split())
    assert ("unknown: 3 of 4 prediction(s) without a decision, as metrics.json's runs[].unknown counts them: "
            "1 abstained, 1 failed, 1 a tie at exactly 0.5") in terminal


# --------------------------------------------------------------------------- notes true of the file read


def _today_file(path: Path, labels: list[str]) -> Path:
    """A Today-format file whose i-th scenario's one condition carries ``labels[i]``."""
    entries = []
    for i, label in enumerate(labels):
        condition = f"Condition number {i} happened first."
        entries.append({"scenario": f"Story {i}: a person did two things.", "statement": f"Thing A came first ({i}).",
                        "opposite_statement": f"Thing B came first ({i}).", "additional_sentences": [condition],
                        "additional_sentence_label": {condition: label}})
    path.write_text(json.dumps(entries), encoding="utf-8")
    return path


@pytest.mark.parametrize(("labels", "noted"), [(["Statement 1", "Statement 2", "Statement 1"], False),
                                                (["Statement 1", "Statement 1"], True)])
def test_the_one_gold_outcome_note_is_given_only_when_true_of_the_file(tmp_path, labels, noted):
    """A custom Today-format file gets the bundled file's "every condition supports outcome 1" note only
    when every one of its conditions does."""
    data = _today_file(tmp_path / "mine.json", labels)
    with FakeOpenAIServer(deterministic=True) as server:
        out = tmp_path / "run"
        result = runner.invoke(app, eval_args(server, tmp_path / "cache", out, "--dataset", "today", "--data",
                                              str(data), "--method", "vanilla"))
        assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    notes = [n for n in metrics_of(out).notes if "100%" in n]
    expected = [f"Every one of the {len(labels)} instance(s) scored has outcome 1 as its gold outcome, so always "
                "answering outcome 1 scores 100%; consider --balance-outcomes."]
    assert notes == (expected if noted else [])


# --------------------------------------------------------------------------- anchor report: like with like


def _run(server: FakeOpenAIServer, tmp_path: Path, name: str, *extra: str) -> Path:
    out = tmp_path / name
    result = runner.invoke(app, eval_args(server, tmp_path / "cache", out, *extra))
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return out


def _balanced_accuracy(preds: list, threshold: float = 0.9) -> float:
    """Mean recall of 'supported' and 'refuted', support iff P(claim) > threshold, written out."""
    recalls = []
    for label in (1, 2):
        mine = [p for p in preds if p.label == label]
        if mine:
            recalls.append(sum((p.p_outcome1 is not None and p.p_outcome1 > threshold) == (label == 1)
                               for p in mine) / len(mine))
    return sum(recalls) / len(recalls)


def test_report_scores_runs_of_different_limits_on_the_instances_they_share(tmp_path):
    """A --limit 8 vanilla run beside a --limit 3 cot run of the same fact-check sample: both are scored on
    the 3 claims they share, and the table says so; metrics.json is left as the runs wrote it."""
    with FakeOpenAIServer(seed=5) as server:  # random answers: P(claim) uniform on [0, 1]
        wide = _run(server, tmp_path, "wide", "--dataset", "covid", "--method", "vanilla", "--limit", "8")
        narrow = _run(server, tmp_path, "narrow", "--dataset", "covid", "--method", "cot", "--limit", "3",
                      "--threshold", "0.5")
    before = (wide / "metrics.json").read_bytes()
    result = runner.invoke(app, ["report", str(wide), str(narrow), "--out", str(tmp_path / "rep"), "--no-html"])
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert (wide / "metrics.json").read_bytes() == before
    shared = {p.id for p in predictions_of(narrow)}
    assert len(shared) == 3 and shared < {p.id for p in predictions_of(wide)}
    on_shared = _balanced_accuracy([p for p in predictions_of(wide) if p.id in shared])
    own = metrics_of(narrow).mean["balanced_accuracy"]
    assert own == _balanced_accuracy(predictions_of(narrow), 0.5)
    table = result.stdout.split("## Decisions and fact checking")[1].split("\n## ")[0]
    assert "| Method | Model | covid (bal. acc., 3 shared instances) |" in table
    assert f"| Vanilla | fake-model | {on_shared:.3f} (cov. 100.0%) |" in table
    assert f"| CoT | fake-model | {own:.3f} (cov. 100.0%) |" in table
    assert "Scored on the 3 instance(s) of covid that every run of it in this report scored, not on each run's own " \
           "(`wide` 8, `narrow` 3)" in table


def test_report_refuses_runs_that_cannot_stand_side_by_side(tmp_path):
    other = tmp_path / "other.jsonl"
    other.write_text("".join(line + "\n" for line in (
        json.dumps({"claim": f"Claim {i} holds.", "label": "SUPPORTED" if i % 2 else "REFUTED",
                    "evidence": [f"Evidence {i}."]}) for i in range(4))), encoding="utf-8")
    with FakeOpenAIServer(seed=5) as server:
        first = _run(server, tmp_path, "first", "--data", str(other), "--method", "vanilla", "--limit", "2")
        second = _run(server, tmp_path, "second", "--data", str(other), "--method", "vanilla", "--limit", "2",
                      "--sample", "2", "--sample-seed", "9")
        covid = _run(server, tmp_path, "covid", "--dataset", "factcheck", "--data",
                     str(Path(__file__).parents[2] / "src/anchor/data/factcheck/covidfact_sample.jsonl"),
                     "--method", "vanilla", "--limit", "2")
        today = _run(server, tmp_path, "today", "--dataset", "today", "--method", "vanilla", "--limit", "2")
        balanced = _run(server, tmp_path, "balanced", "--dataset", "today", "--method", "vanilla", "--limit", "2",
                        "--balance-outcomes")
    assert not {p.id for p in predictions_of(first)} & {p.id for p in predictions_of(second)}, \
        "the two samples were meant to share no claim"
    cases = [((first, second), "share no instance"), ((first, covid), "different data files"),
             ((today, balanced), "--balance-outcomes")]
    for dirs, needle in cases:
        result = runner.invoke(app, ["report", *map(str, dirs), "--out", str(tmp_path / "rep"), "--no-html"])
        assert result.exit_code == 2, (dirs, result.stdout, result.stderr)
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and needle in errors[0] and "report them separately" in errors[0], result.stderr
