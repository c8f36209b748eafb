"""``anchor reproduce`` end to end against the local test server: the paper's cells beside ours, Table 4's
mapping costs from the requests the runs made, the plan's estimate against what the runs then made, a
second run that asks nothing, a budget that stops before a run, and a kill at a random moment."""

from __future__ import annotations

import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.evaluation.cost.phases import phase_of
from anchor.evaluation.datasets import load_pairwise
from anchor.evaluation.results import MetricsReport, Prediction
from anchor.llm.ledger import CallRecord
from tests.fakeserver import FakeOpenAIServer, random_from_schema

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]
C2S = "common2sense-pairwise"
QUICK = ["--runs", "1", "--quick"]
PAIRS = load_pairwise()[:2]  # --quick's two pairs; human 1 and 2, gold O2 for both
#: Scripted P(O1) per condition: the direct baselines get both pairs right (Vanilla: F1 1.0 on each context).
P_O1 = {PAIRS[0].condition1: 0.3, PAIRS[0].condition2: 0.8, PAIRS[1].condition1: 0.8, PAIRS[1].condition2: 0.3}
CONDITION = re.compile(r"^Condition: (.*)$", re.MULTILINE)


#: The tests pass every setting as a flag: variables of the user's shell must not leak in.
pytestmark = pytest.mark.usefixtures("clean_anchor_env")


def respond(body: dict) -> str:
    """The direct baselines answer from P_O1; everything else gets a schema-valid answer that depends
    only on the request (as a seeded model's would)."""
    fmt = (body.get("response_format") or {}).get("json_schema") or {}
    name = fmt.get("name", "")
    user = body["messages"][-1]["content"]
    found = CONDITION.search(user)
    if name.startswith(("VerbalProbability", "ReasonedProbability")) and found and found.group(1) in P_O1:
        p = P_O1[found.group(1)]
        return json.dumps({"probability": p, **({"reasoning": "Scripted."} if name.startswith("Reasoned") else {})})
    rng = random.Random(json.dumps(body, sort_keys=True))
    return json.dumps(random_from_schema(fmt["schema"], rng)) if fmt.get("schema") else "A plain answer."


def logprobs(body: dict) -> dict[str, float]:
    found = CONDITION.search(body["messages"][-1]["content"])
    p = P_O1.get(found.group(1), 0.5) if found else 0.5
    return {"1": math.log(p), "2": math.log(1 - p), "x": -9.0}


def reproduce(server: FakeOpenAIServer, out: Path, *args: str):
    return runner.invoke(app, ["reproduce", "--base-url", server.base_url, "--out", str(out), *QUICK, *args])


def ledgers(out: Path) -> list[CallRecord]:
    return [CallRecord.model_validate_json(line) for path in sorted(out.rglob("calls.jsonl"))
            for line in path.read_text().splitlines()]


def mapping_tokens(run: Path) -> int:
    return sum(r.prompt_tokens + r.completion_tokens for r in ledgers(run)
               if r.outcome not in ("cache_hit", "sent") and phase_of(r.stage) == "mapping")


def metrics(out: Path, name: str) -> MetricsReport:
    return MetricsReport.model_validate_json((out / "runs" / name / "metrics.json").read_text())


def line(md: str, row: str, column: str, section: str) -> list[str]:
    part = md[md.index(section):]
    part = part[:part.index("\n## ")]
    (found,) = [x for x in part.splitlines() if x.startswith(f"| {row} | {column} |")]
    return found.split(" | ")


def test_tables_1_and_4_beside_the_paper_planned_run_and_run_again(tmp_path):
    out = tmp_path / "repro"
    with FakeOpenAIServer(responder=respond, first_token_logprobs=logprobs) as server:
        planned = reproduce(server, out, "--tables", "1,4", "--figures", "cost", "--plan", "--json")
        assert planned.exit_code == 0, planned.output
        plan = json.loads(planned.stdout)
        assert plan["spent"]["requests"] == server.completions > 0  # the pilot, counted as the server saw it
        assert plan["total"]["unknown"] == 0 and not (out / "report.md").exists()

        done = reproduce(server, out, "--tables", "1,4", "--figures", "cost")
        assert done.exit_code == 0, done.output
        made = server.completions
        stats = server.stats()
        # The estimate is within a factor 2 of what the runs made (pilot included).
        assert made / 2 <= plan["total"]["requests"] <= made * 2
        records = [r for r in ledgers(out / "runs") if r.outcome not in ("cache_hit", "sent")]
        assert len(records) == made
        assert sum(r.prompt_tokens + r.completion_tokens for r in records) == (
            stats["prompt_tokens"] + stats["completion_tokens"])
        md, html = (out / "report.md").read_bytes(), (out / "report.html").read_bytes()

        again = reproduce(server, out, "--tables", "1,4", "--figures", "cost")
        assert again.exit_code == 0, again.output
        assert server.completions == made  # every run finished: nothing is asked again
    assert (out / "report.md").read_bytes() == md and (out / "report.html").read_bytes() == html

    text = md.decode()
    # Vanilla got both pairs right: F1 1.000 on each context, 1.000 on average, beside the paper's 0.470.
    assert line(text, "Vanilla", "Average", "## Table 1")[2:5] == ["1.000", "0.470", "+0.530"]
    assert line(text, "Vanilla", "Context1", "## Table 1")[2:5] == ["1.000", "0.526", "+0.474"]
    anchor = metrics(out, f"{C2S}-anchor").mean["f1_micro"]
    delta = round(anchor - 0.606, 3)
    assert line(text, "ANCHOR", "Average", "## Table 1")[2:5] == [
        f"{anchor:.3f}", "0.606 ± 0.030", f"{'−' if delta < 0 else '+'}{abs(delta):.3f}"]
    # Table 4: mapping tokens per prediction over BIRD‡'s, each from requests its run made (own caches).
    base = mapping_tokens(out / "runs" / f"{C2S}-bird-relaxed")
    for stage, label in (("factors", "+ ANCHOR-generated factors"), ("mapping", "+ ANCHOR mapping"),
                         ("pool", "+ LOP (Naive Bayes + CBN)")):
        tokens = mapping_tokens(out / "runs" / f"{C2S}-bird-on-anchor-{stage}")
        cells = line(text, label, "Tok./B", "## Table 4")
        assert tokens > 0 and cells[2] == f"{tokens / base:.2f}" and float(cells[2]) > 0
        assert re.match(r"cost from \d+ request\(s\) made;", cells[5]) and "cached" not in cells[5]
        assert float(line(text, label, "Time/B (wall time)", "## Table 4")[2]) > 0
    assert "| ANCHOR / BIRD | tokens |" in text and "![Time, tokens and calls" in text
    assert "Some answers came from the response cache" not in text  # both runs made all their requests
    assert "### Headline claims" in text and "indicative, not a verdict" in text
    assert not re.search(rb"https?://", html) and b"data:image/png;base64," in html


def test_a_budget_stops_before_the_run_that_would_cross_it(tmp_path):
    """(With an API key, which no file of the reproduction may hold.)"""
    out = tmp_path / "repro"
    secret = "sk-reproduce-9f3e1d"
    with FakeOpenAIServer(deterministic=True) as server:
        plan = json.loads(reproduce(server, out, "--tables", "3", "--plan", "--json", "--api-key", secret).stdout)
        estimate = {e["name"]: e for e in plan["runs"]}[f"{C2S}-anchor"]
        left = estimate["requests"] - estimate["spent"]["requests"]
        assert left > 0
        cap = server.completions + left - 1
        stopped = reproduce(server, out, "--tables", "3", "--budget-requests", str(cap))
        assert stopped.exit_code == 3, stopped.output
        spent = server.completions
        assert spent == plan["spent"]["requests"]  # it stopped before the first run that would cross the cap
        assert (f"stopped before {C2S}-anchor: it is expected to need about {left} requests, and {spent} of the "
                f"{cap} allowed by --budget-requests are spent ({cap - spent} left)") in " ".join(stopped.stderr.split())
        md = (out / "report.md").read_text()
        # Every run's pilot ran (--plan): none is "not run", each says it started and what stopped it.
        assert "not run" not in md
        (row,) = [x.split(" | ") for x in md.splitlines() if x.startswith(f"| runs/{C2S}-anchor | anchor |")]
        assert row[5] == ("started (its pilot ran), then the budget stopped the reproduction; run again with a "
                          "larger budget to finish it") and int(row[6]) > 0  # its pilot's requests
        assert json.loads((out / "state.json").read_text())["states"][f"{C2S}-anchor"] == "paused"
        assert reproduce(server, out, "--tables", "3", "--api-key", secret).exit_code == 0
    assert "| ANCHOR (full) | Avg. |" in (out / "report.md").read_text()
    assert all(secret.encode() not in path.read_bytes() for path in out.rglob("*") if path.is_file())


def test_killed_at_a_random_moment_and_resumed_it_ends_with_the_uninterrupted_report(tmp_path):
    """Tables 1 and 3 hold no measured time, so the two reports are the same byte for byte."""
    args = ["--tables", "3", *QUICK]
    with FakeOpenAIServer(deterministic=True, latency=0.02) as server:
        straight = tmp_path / "straight"
        assert runner.invoke(app, ["reproduce", "--base-url", server.base_url, "--out", str(straight),
                                   *args]).exit_code == 0
        killed = tmp_path / "killed"
        cmd = [sys.executable, "-c", "from anchor.cli import main; main()", "reproduce", "--base-url",
               server.base_url, "--out", str(killed), *args]
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANCHOR_")}
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wanted = random.Random().randint(5, 45)  # requests answered before the kill
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if sum(1 for r in ledgers(killed) if r.outcome == "ok") >= wanted:
                break
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert not (killed / "report.md").exists(), "the kill must land before the end"
        resumed = runner.invoke(app, ["reproduce", "--base-url", server.base_url, "--out", str(killed), *args])
        assert resumed.exit_code == 0, resumed.output
    for run in (killed / "runs").iterdir():
        keys = [(p.run, p.id) for p in (Prediction.model_validate_json(x)
                                        for x in (run / "predictions.jsonl").read_text().splitlines())]
        assert len(set(keys)) == 2, run.name  # each pair once in the end (a retried line replaces none here)
    assert (killed / "report.md").read_text() == (straight / "report.md").read_text().replace(
        str(straight), str(killed))
