"""``anchor reproduce`` end to end against the local test server: the paper's cells beside ours, Table 4's
mapping costs from the requests the runs made, the plan's estimate against what the runs then made, a
second run that asks nothing, a budget that stops before a run, and a kill at a random moment."""

from __future__ import annotations

import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.evaluation.cost.phases import phase_of
from anchor.evaluation.datasets import load_pairwise
from anchor.llm.ledger import CallRecord
from anchor.llm.scripted import ScriptedRequest
from anchor.rundir.records import MetricsReport, Prediction
from tests.fakeserver import FakeOpenAIServer, random_from_schema
from tests.helpers import ScriptedLLM
from tests.run_helpers import like_a_terminal

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
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

        # Moved, then copied: the same command on the new folder asks nothing and writes the same report.
        moved, copied = tmp_path / "moved", tmp_path / "copied"
        shutil.move(out, moved)
        shutil.copytree(moved, copied, symlinks=True)
        for folder in (moved, copied):
            resumed = reproduce(server, folder, "--tables", "1,4", "--figures", "cost")
            assert resumed.exit_code == 0, resumed.output
            assert server.completions == made
            assert (folder / "report.md").read_bytes() == md and (folder / "report.html").read_bytes() == html
        # The runs that reuse another's models or spaces name it from their own directory, not the old folder.
        relaxed = json.loads((copied / "runs" / f"{C2S}-bird-relaxed" / "config.json").read_text())
        assert (relaxed["spaces_from"], relaxed["spaces_from_base"]) == (f"../{C2S}-bird", "run")
    out = moved

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
        assert re.match(r"cost from \d+ request\(s\) made \(\d+ attempt\(s\)\);", cells[5])
        assert "cached" not in cells[5]
        assert float(line(text, label, "Time/B (wall time)", "## Table 4")[2]) > 0
    assert "| ANCHOR / BIRD | tokens |" in text and "![Time, tokens and requests" in text
    assert "| requests |" in text and "| attempts (retries included) |" in text
    assert "Some answers came from the response cache" not in text  # both runs made all their requests
    assert "### Headline claims" in text and "indicative, not a verdict" in text
    # --quick's two pairs are labelled 1 and 2: no pair is Same, so its F1 is undefined. No method's Same
    # cell shows a number (the note says why), and the claim about ANCHOR's Same F1 is not checked.
    for row in ("CoT", "Vanilla", "Logits", "Compare", "Factor-based", "BIRD†", "BIRD‡", "ANCHOR"):
        cells = line(text, row, "Same", "## Table 1")
        assert (cells[2], cells[4]) == ("–", "–") and cells[5].startswith("no Same pair in this run"), cells
    (claim,) = [x for x in text.splitlines() if x.startswith("| ANCHOR's F1 on the Same class")]
    assert "| no Same pair in this run (ANCHOR Same) | not checked |" in claim
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


def _start(server: FakeOpenAIServer, out: Path, args: list[str], *, wanted: int) -> subprocess.Popen:
    """``anchor reproduce`` in a process of its own, returned once the server has answered ``wanted`` of its
    requests, holds the next, and the process has recorded each answer (so it is still running, however
    fast the machine, and is stopped between requests: release the server after stopping it).

    Between requests, because a kill while an answer is being stored can change the report: the answers
    of one request for several samples are cached one by one before its ledger record, and a kill between
    two of them leaves the resumed run asking again for the rest only, with fewer tokens than in one go."""
    cmd = [sys.executable, "-c", "from anchor.cli import main; main()", "reproduce", "--base-url",
           server.base_url, "--out", str(out), *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANCHOR_")}
    server.hold(server.completions + wanted)
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=like_a_terminal)  # stopped with Ctrl-C below
    deadline = time.time() + 240  # only so that a broken run cannot hang the suite
    while time.time() < deadline and proc.poll() is None and not (
            server.held and sum(1 for r in ledgers(out) if r.outcome not in ("sent", "cache_hit")) >= wanted):
        time.sleep(0.02)
    assert proc.poll() is None and server.held, "it must still run"
    return proc


def test_killed_or_interrupted_and_resumed_it_ends_with_the_uninterrupted_report_and_runs_alone(tmp_path):
    """Table 3 holds no measured time, so the reports are the same byte for byte (and name no folder)."""
    args = ["--tables", "3", *QUICK]
    with FakeOpenAIServer(deterministic=True, latency=0.02) as server:
        straight = tmp_path / "straight"
        assert runner.invoke(app, ["reproduce", "--base-url", server.base_url, "--out", str(straight),
                                   *args]).exit_code == 0
        killed = tmp_path / "killed"
        wanted = random.Random().randint(5, 45)
        proc = _start(server, killed, args, wanted=wanted)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
        server.release()
        assert not (killed / "report.md").exists(), f"the kill after {wanted} answers must land before the end"
        resumed = runner.invoke(app, ["reproduce", "--base-url", server.base_url, "--out", str(killed), *args])
        assert resumed.exit_code == 0, resumed.output

        stopped = tmp_path / "interrupted"
        proc = _start(server, stopped, args, wanted=10)
        # A second process on the same folder is refused at once, in one line, and leaves the first alone.
        second = runner.invoke(app, ["reproduce", "--base-url", server.base_url, "--out", str(stopped), *args])
        assert second.exit_code == 2
        assert second.stderr.strip() == (f"error: --out {stopped} is in use by another anchor reproduce (pid "
                                         f"{proc.pid}); wait for it to end, or use another --out")
        proc.send_signal(signal.SIGINT)  # Ctrl-C, while requests wait on the server
        _, stderr = proc.communicate(timeout=120)
        server.release()
        assert proc.returncode == 130, stderr
        command = " ".join(["anchor", "reproduce", "--base-url", server.base_url, "--out", str(stopped), *args])
        assert (f"error: interrupted: every prediction made so far is kept in {stopped}; run the same command again "
                f"to resume it: {command}") in " ".join(stderr.split())
        assert json.loads((stopped / "state.json").read_text())["interrupted"] is True
        assert not (stopped / "report.md").exists()
        resumed = runner.invoke(app, ["reproduce", "--base-url", server.base_url, "--out", str(stopped), *args])
        assert resumed.exit_code == 0, resumed.output
    for folder in (killed, stopped):
        for run in (folder / "runs").iterdir():
            keys = [(p.run, p.id) for p in (Prediction.model_validate_json(x)
                                            for x in (run / "predictions.jsonl").read_text().splitlines())]
            assert len(set(keys)) == 2, run.name  # each pair once in the end (a retried line replaces none here)
        assert (folder / "report.md").read_text() == (straight / "report.md").read_text()


def test_an_estimator_slice_without_a_phi_ends_with_nothing_to_compare_and_its_claims_unchecked(tmp_path):
    """Every build gets four made-up factors and the mapping selects none of them: each condition is unknown,
    none fails, so no phi exists to compare. That is the slice's result (asking again changes nothing), not an
    error: the reproduction finishes, says why in the report, and does not ask again."""
    script = ScriptedLLM(rounds=[["zorblax quimble", "frindle wabbet", "snorkum plibber", "vorpal gunkle"]] * 200,
                         select=lambda condition, candidates: [])
    lock = threading.Lock()

    def answer(body: dict) -> str:
        name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
        with lock:
            return json.dumps(script(ScriptedRequest(
                messages=body["messages"], schema_name=name, json_schema=None, temperature=0.0, max_tokens=0,
                seed=body.get("seed"), top_logprobs=None)))

    out = tmp_path / "repro"
    with FakeOpenAIServer(responder=answer) as server:
        done = reproduce(server, out, "--appendix", "estimator")
        assert done.exit_code == 0, done.output
        made = server.completions
        assert reproduce(server, out, "--appendix", "estimator").exit_code == 0
        assert server.completions == made  # finished: not asked again
    # Said before anything ran: the estimator is the main model itself.
    assert ("note: the estimator analysis compares fake-model with itself (seed 0 against 1): Tables 8 and 9 show "
            "the analysis working, and their claims will be 'not checked'") in " ".join(done.stderr.split())
    assert "4 with nothing to compare (estimator-cnn, estimator-expertqa, estimator-plasma, estimator-today)" in \
        " ".join(done.stdout.split())
    assert set(json.loads((out / "state.json").read_text())["states"].values()) == {"empty"}
    nothing = json.loads((out / "analyses" / "estimator-cnn" / "no-result.json").read_text())
    assert nothing["schema_version"] == 1 and nothing["reason"]  # docs/schemas.md
    md = (out / "report.md").read_text()
    cells = line(md, "CNN", "Δ (mini − 72B)", "## Table 8")
    assert cells[2] == "–" and cells[5].startswith(
        "estimator-cnn: nothing to compare: the main model gave no factor a phi on this slice: every condition of "
        "its 1 instance(s) was unknown and none failed (see runs/main/metrics.json in the analysis's folder)")
    (claim,) = [x.split(" | ") for x in md.splitlines() if x.startswith("| Swapping the probability estimator")]
    assert claim[3] == "not checked" and claim[2].startswith(
        "needs a second estimator: this one is the main model itself (fake-model, another seed); give "
        "--estimator-base-url; missing: CNN Δ (mini − 72B)")


def test_a_claim_across_two_models_reads_a_reproduction_of_the_other_model(tmp_path):
    """Two reproductions of Table 1, served as a 72B and a 32B model (their names point to the paper's), with
    the same scripted answers: ANCHOR with 32B against the 72B baselines is not checked on one model's runs,
    and is compared once the 32B reproduction is given; a reproduction of another slice is refused for it."""
    big, small = tmp_path / "r72", tmp_path / "r32"
    for folder, model in ((small, "qwen2.5-32b-instruct"), (big, "qwen2.5-72b-instruct")):
        with FakeOpenAIServer(model=model, responder=respond, first_token_logprobs=logprobs) as server:
            assert reproduce(server, folder, "--tables", "1").exit_code == 0
    claim = "| ANCHOR with the smaller Qwen2.5-32B is above every baseline run with Qwen2.5-72B. |"

    def row(folder: Path) -> list[str]:
        (found,) = [x.split(" | ") for x in (folder / "report.md").read_text().splitlines() if x.startswith(claim)]
        return found

    alone = row(big)
    assert alone[3] == "not checked" and alone[2].startswith("needs runs of Qwen2.5-32B")
    unlike = tmp_path / "r32-other-slice"
    shutil.copytree(small, unlike)
    config = unlike / "runs" / f"{C2S}-anchor" / "config.json"
    config.write_text(config.read_text().replace('"limit": 2', '"limit": 1'))
    anchor32 = metrics(small, f"{C2S}-anchor").mean["f1_micro"]
    with FakeOpenAIServer(model="qwen2.5-72b-instruct", responder=respond) as server:
        assert reproduce(server, big, "--tables", "1", "--model-runs", f"Qwen2.5-32B={small}").exit_code == 0
        both = row(big)
        assert reproduce(server, big, "--tables", "1", "--model-runs", f"Qwen2.5-32B={unlike}").exit_code == 0
        mixed = row(big)
        itself = reproduce(server, big, "--tables", "1", "--model-runs", f"Qwen2.5-72B={small}")
        assert server.completions == 0  # every run finished: only the reports are written again
    assert both[3] in ("held", "did not hold")
    assert both[2].startswith(f"ANCHOR Average {anchor32:.3f} (Qwen2.5-32B's runs) against ")
    assert f"Qwen2.5-32B's {small}/runs/{C2S}-anchor" in both[4]
    assert mixed[3] == "not checked" and mixed[2] == (
        f"Qwen2.5-32B's runs of {C2S} in {unlike} are not like ours (limit 1 there, 2 here)")
    assert itself.exit_code == 2 and "this reproduction's own model stands for Qwen2.5-72B" in itself.stderr
