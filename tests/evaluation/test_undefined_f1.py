"""An F1 of a class that has no pair in the run is undefined, not 0: metrics.json records None (and how
many pairs of each class the run had), and `anchor report` shows a dash and says why.

The bundled Common2Sense file's first two pairs have the human labels 1 and 2: `--limit 2` is a run
without a Same pair, as `anchor reproduce --quick` makes on a server.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from tests.fakeserver import FakeOpenAIServer

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("clean_anchor_env")


def test_a_run_without_a_same_pair_has_no_same_f1_and_the_report_says_why(tmp_path):
    out = tmp_path / "vanilla"
    with FakeOpenAIServer(deterministic=True, fault_rates={"500": 0.2}, seed=3) as server:
        result = runner.invoke(app, ["eval", "--dataset", "common2sense-pairwise", "--method", "vanilla", "--limit", "2",
                                     "--base-url", server.base_url, "--cache-dir", str(tmp_path / "cache"),
                                     "--retries", "8", "--out", str(out)])
        assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    (run,) = metrics["runs"]
    assert run["pairs_per_class"] == {"context1": 1, "context2": 1, "same": 0}
    assert run["f1_same"] is None and run["covered"]["f1_same"] is None
    assert metrics["mean"]["f1_same"] is None and metrics["mean"]["covered_f1_same"] is None
    assert run["f1_context1"] is not None and run["f1_context2"] is not None  # those classes have a pair

    report = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    md = (tmp_path / "report" / "report.md").read_text()
    (row,) = [x for x in md.splitlines() if x.startswith("| Vanilla |") and x.endswith("| 1 |")]
    assert row.split(" | ")[4] == "–"  # Context1, Context2, Same: the Same cell
    assert "- Same: no Same pair in this run (Vanilla): its F1 is undefined, not 0, and shows –." in md
