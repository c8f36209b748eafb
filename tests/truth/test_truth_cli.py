"""``anchor truth make`` and ``anchor truth score`` from the command line, and a world's cases answered by
``anchor predict`` against a real local server, then scored against the truth by ``truth score`` and
``anchor report``."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.truth.world import load_worlds
from tests.fakeserver import FakeOpenAIServer
from tests.helpers import refused_in_one_line

pytestmark = pytest.mark.usefixtures("clean_anchor_env")
runner = CliRunner()
CONDITION = re.compile(r"^Condition: (.*)$", re.MULTILINE)
MAKE = ["truth", "make", "--structure", "all", "--worlds", "1", "--conditions", "8", "--seed", "5"]


def make(tmp_path: Path, *extra: str):
    return runner.invoke(app, [*MAKE, "--out", str(tmp_path / "w.json"), "--cases", str(tmp_path / "w.csv"), *extra])


def test_make_writes_the_same_files_for_the_same_seed(tmp_path):
    result = make(tmp_path)
    assert result.exit_code == 0, result.output
    first = ((tmp_path / "w.json").read_bytes(), (tmp_path / "w.csv").read_bytes())
    file = load_worlds(tmp_path / "w.json")
    assert [w.id for w in file.worlds] == ["naive-bayes-1", "latent-1", "interaction-1"]
    assert file.generator["seed"] == 5 and file.generator["n_conditions"] == 8
    assert "wrote" in result.stderr and "24 conditions" in result.stderr
    assert make(tmp_path).exit_code == 0
    assert ((tmp_path / "w.json").read_bytes(), (tmp_path / "w.csv").read_bytes()) == first
    with (tmp_path / "w.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 24 and list(rows[0]) == ["id", "scenario", "outcome1", "outcome2", "condition", "label",
                                                 "p_true"]


@pytest.mark.parametrize("args, message", [
    (["--worlds", "0"], "Invalid value for '--worlds': must be in [1, 80] (got 0)"),
    (["--conditions", "2"], "Invalid value for '--conditions': must be in [4, 300] (got 2)"),
    (["--seed", "-3"], "Invalid value for '--seed': must be at least 0 (got -3)"),
    (["--structure", "tree"], "Invalid value for '--structure': 'tree' is not one of: naive-bayes, latent, "
                              "interaction, all"),
    (["--out", "w.txt"], "--out w.txt: give a .json file name"),
    (["--cases", "w.tsv"], "--cases w.tsv: give a .csv or .jsonl file name"),
])
def test_bad_values_are_one_line_errors_naming_the_flag(tmp_path, args, message, monkeypatch):
    monkeypatch.chdir(tmp_path)
    refused_in_one_line(runner.invoke(app, ["truth", "make", *args]), message, tmp_path)


def test_help_says_what_the_commands_do():
    result = runner.invoke(app, ["truth", "--help"])
    assert result.exit_code == 0 and "make" in result.output and "score" in result.output
    text = " ".join(runner.invoke(app, ["truth", "make", "--help"]).output.split())
    for words in ("--structure", "naive-bayes", "--worlds", "--conditions", "--seed", "--cases", "p_true"):
        assert words in text


def scripted(estimates: dict[str, float]):
    """Vanilla's answer for each condition: the estimate the test chose for it."""
    def answer(body: dict) -> str:
        match = CONDITION.search(body["messages"][-1]["content"])
        return json.dumps({"probability": estimates[match.group(1)]})
    return answer


def test_a_worlds_cases_answered_by_predict_are_scored_against_the_truth(tmp_path):
    assert make(tmp_path).exit_code == 0
    file = load_worlds(tmp_path / "w.json")
    conds = [c for w in file.worlds for c in w.conditions]
    # Estimates the test knows: the truth rounded to one decimal, and exactly 0.5 where nothing is stated.
    estimates = {c.text: 0.5 if c.kind == "nothing" else round(c.p_true, 1) for c in conds}
    run = tmp_path / "run"
    with FakeOpenAIServer(responder=scripted(estimates)) as server:
        result = runner.invoke(app, ["predict", str(tmp_path / "w.csv"), "--method", "vanilla", "--base-url",
                                     server.base_url, "--cache-dir", str(tmp_path / "cache"), "--out", str(run)])
        assert result.exit_code == 0, result.output
    scored = runner.invoke(app, ["truth", "score", str(run), "--json"])
    assert scored.exit_code == 0, scored.output
    doc = json.loads(scored.stdout)
    assert doc["schema_version"] == 1 and doc["n"] == doc["answered"] == 24 and doc["failed"] == 0
    t = np.array([c.p_true for c in conds])
    p = np.array([estimates[c.text] for c in conds])
    assert doc["mae"] == {"value": pytest.approx(float(np.mean(np.abs(p - t)))), "n": 24, "reason": None}
    assert doc["rmse"]["value"] == pytest.approx(math.sqrt(float(np.mean((p - t) ** 2))))
    labels = np.array([c.label for c in conds])
    assert doc["brier_labels"]["value"] == pytest.approx(float(np.mean((p - (labels == 1)) ** 2)))
    ties = [c for c in conds if estimates[c.text] == 0.5 or abs(c.p_true - 0.5) <= 1e-12]
    decided = [c for c in conds if c not in ties]
    assert doc["decision_ties"] == len(ties) >= 3  # the "nothing" conditions at least
    right = sum((estimates[c.text] > 0.5) == (c.p_true > 0.5) for c in decided)
    assert doc["decision_accuracy"] == {"value": pytest.approx(right / len(decided)), "n": len(decided),
                                        "reason": None}
    assert doc["requests"] == 24 and doc["tokens"] > 0
    readable = runner.invoke(app, ["truth", "score", str(run)])
    assert readable.exit_code == 0 and "24 rows with a true probability" in readable.stdout
    assert re.search(rf"mae\s+{doc['mae']['value']:.4f}\s+over 24 rows", readable.stdout), readable.stdout
    report = runner.invoke(app, ["report", str(run), "--no-html"])
    assert report.exit_code == 0, report.output
    section = report.stdout.split("## Against the truth", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith("| Vanilla"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:6] == ["24", "24", "0", "0"] and cells[6] == f"{doc['mae']['value']:.3f}"
    assert cells[-3:] == [str(len(ties)), "24", f"{doc['tokens']:,}"]
    # An unfinished run (no metrics.json yet) is scored on what it wrote; its cost says why it is missing.
    (run / "metrics.json").unlink()
    partial = json.loads(runner.invoke(app, ["truth", "score", str(run), "--json"]).stdout)
    assert partial["mae"] == doc["mae"] and partial["requests"] is None
    assert partial["cost_note"] == "the run has not finished (no metrics.json yet)"


def test_a_run_without_a_true_probability_is_refused_by_score_and_left_out_of_the_report(tmp_path):
    assert make(tmp_path).exit_code == 0
    with (tmp_path / "w.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    plain = tmp_path / "plain.csv"
    with plain.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=[k for k in rows[0] if k != "p_true"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows[:4])
    run = tmp_path / "run"
    with FakeOpenAIServer(responder=lambda body: json.dumps({"probability": 0.3})) as server:
        result = runner.invoke(app, ["predict", str(plain), "--method", "vanilla", "--base-url", server.base_url,
                                     "--cache-dir", str(tmp_path / "cache"), "--out", str(run)])
        assert result.exit_code == 0, result.output
    scored = runner.invoke(app, ["truth", "score", str(run)])
    assert scored.exit_code == 2 and "no prediction carries a true probability (p_true)" in scored.stderr
    assert len(scored.stderr.strip().splitlines()) == 1
    report = runner.invoke(app, ["report", str(run), "--no-html"])
    assert report.exit_code == 0 and "Against the truth" not in report.stdout
    missing = runner.invoke(app, ["truth", "score", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "no such run directory" in missing.stderr


def test_make_takes_a_prior_and_refuses_one_out_of_range_naming_the_flag(tmp_path):
    result = make(tmp_path, "--prior", "0.2")
    assert result.exit_code == 0, result.output
    file = load_worlds(tmp_path / "w.json")
    assert file.generator["prior"] == 0.2
    rows = list(csv.DictReader((tmp_path / "w.csv").open(encoding="utf-8")))
    nothing = [float(r["p_true"]) for r in rows for w in file.worlds for c in w.conditions
               if c.id == r["id"] and c.kind == "nothing"]
    assert nothing and all(abs(p - 0.2) < 1e-12 for p in nothing)
    refused = make(tmp_path / "x", "--prior", "0.99")
    assert refused.exit_code == 2 and "--prior" in refused.output and "0.99" in refused.output
