"""Hardening, tried from outside: secrets, failures that are retried, limits checked at the boundary,
output paths checked before the work, resumes refused only for real differences, help and errors in
the user's words, progress during an outage, file permissions, and the sync API inside a loop."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import stat
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.files import write_atomic
from anchor.progress import ProgressEvent
from anchor.rundir.records import MetricsReport, Prediction
from anchor.space.io import load_space, save_space
from tests.fakeserver import FakeOpenAIServer
from tests.run_helpers import predictions_of

runner = CliRunner()
KEY = "sk-test-0123456789abcdefSECRET"
SCENARIO = ["--scenario", "Cooking noodles in hot vs warm water.", "--outcome1", "Hot water is more efficient.",
            "--outcome2", "Warm water is more efficient."]
TINY = ["--n-target", "4", "--batch-size", "2", "--max-rounds", "1", "--vote-samples", "1"]


#: The tests pass every setting as a flag: variables of the user's shell must not leak in.
pytestmark = pytest.mark.usefixtures("clean_anchor_env")


def one_line_error(result, *needles: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr, result.exception)
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0] == lines[-1], result.stderr
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def final(out: Path) -> dict[tuple[int, str], Prediction]:
    return {(p.run, p.id): p for p in predictions_of(out)}


# --------------------------------------------------------------------------- 1. the key never leaks


def test_api_key_leaves_no_trace(tmp_path):
    """The key is sent to the server, but appears in no file the run writes, in the cache, or in
    anything printed, even when the server quotes it back in an error message."""
    with FakeOpenAIServer(deterministic=True, faults=["echo_auth"] * 3) as server:
        out, cache = tmp_path / "run", tmp_path / "cache"
        result = runner.invoke(app, ["eval", "--base-url", server.base_url, "--api-key", KEY, "--cache-dir", str(cache),
                                     "--out", str(out), "--dataset", "common2sense-pairwise", "--method", "anchor",
                                     "--limit", "1", "--vote-ratio", "0.3", *TINY])
        assert result.exit_code == 0, (result.stderr, result.exception)
        assert server.served["echo_auth"] == 3
        assert server.headers and all({k.lower(): v for k, v in h.items()}.get("authorization") == f"Bearer {KEY}"
                                      for h in server.headers)
    assert KEY not in result.stdout and KEY not in result.stderr
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "config.json" for p in written) and any(p.suffix == ".sqlite" for p in written)
    for path in written:
        assert KEY.encode() not in path.read_bytes(), f"the key leaked into {path}"
    config = json.loads((out / "config.json").read_text())
    assert "--api-key '***'" in config["command"]
    calls = (out / "calls.jsonl").read_text()
    assert "bad gateway for Bearer ***" in calls  # the server's message is kept, the key is not


def test_api_key_given_as_one_argument_leaves_no_trace(tmp_path):
    """``--api-key=KEY`` (one argument) is as secret as ``--api-key KEY``: sent, never written or printed."""
    with FakeOpenAIServer(deterministic=True, faults=["echo_auth"]) as server:
        out, cache = tmp_path / "run", tmp_path / "cache"
        result = runner.invoke(app, ["eval", "--base-url", server.base_url, f"--api-key={KEY}", "--cache-dir",
                                     str(cache), "--out", str(out), "--dataset", "plasma", "--method", "vanilla",
                                     "--limit", "2"])
        assert result.exit_code == 0, (result.stderr, result.exception)
        assert server.served["echo_auth"] == 1
        assert all({k.lower(): v for k, v in h.items()}.get("authorization") == f"Bearer {KEY}"
                   for h in server.headers)
    assert KEY not in result.stdout and KEY not in result.stderr
    for path in (p for p in tmp_path.rglob("*") if p.is_file()):
        assert KEY.encode() not in path.read_bytes(), f"the key leaked into {path}"
    command = json.loads((out / "config.json").read_text())["command"]
    assert "--api-key=***" in command and "--base-url" in command


# --------------------------------------------------------------------------- 2. failures are retried


def test_failed_instances_are_retried_after_the_server_is_fixed(tmp_path):
    broken = {"on": True}

    def responder(body):
        if broken["on"]:
            return "Sorry, I cannot answer in that format."
        return json.dumps({"reasoning": "It follows.", "probability": 0.7})

    with FakeOpenAIServer(responder=responder) as server:
        out = tmp_path / "run"
        args = ["eval", "--base-url", server.base_url, "--cache-dir", str(tmp_path / "cache"), "--out", str(out),
                "--dataset", "today", "--method", "cot", "--limit", "3", "--parse-retries", "1", "--json"]
        first = runner.invoke(app, args)
        assert first.exit_code == 0, (first.stderr, first.exception)
        metrics = MetricsReport.model_validate_json(first.stdout)
        assert metrics.n_failed == 3 and metrics.n_abstained == 0
        assert all("no valid answer" in f["reason"] for f in metrics.failures)
        assert any("3 prediction(s) failed" in n and "retried" in n for n in metrics.notes)
        assert metrics.mean["coverage"] == 0.0

        # --keep-failed leaves them alone: no request is made.
        before = server.completions
        kept = runner.invoke(app, [*args, "--keep-failed"])
        assert kept.exit_code == 0 and server.completions == before
        assert MetricsReport.model_validate_json(kept.stdout).n_failed == 3

        broken["on"] = False
        second = runner.invoke(app, args)
        assert second.exit_code == 0, (second.stderr, second.exception)
        metrics = MetricsReport.model_validate_json(second.stdout)
        assert server.completions - before == 3  # exactly the three failed instances were asked again
        assert metrics.n_failed == 0 and metrics.failures == [] and metrics.mean["coverage"] == 1.0
        assert not any("failed" in n for n in metrics.notes)
    latest = final(out)
    assert len(latest) == 3 and all(p.status == "ok" and p.p_outcome1 == pytest.approx(0.7) for p in latest.values())
    # The history stays in the file: each instance has its failed and its answered record.
    assert len(predictions_of(out)) == 6


# --------------------------------------------------------------------------- 3/4. limits at the boundary


@pytest.mark.parametrize(("argv", "env", "needles"), [
    (["--limit", "-1"], {}, ["--limit", "at least 1"]),
    (["--limit", "0"], {}, ["--limit", "at least 1"]),
    (["--runs", "0"], {}, ["--runs", "at least 1"]),
    (["--concurrency", "0"], {}, ["--concurrency", "at least 1"]),
    (["--timeout", "0"], {}, ["--timeout", "greater than 0"]),
    (["--threshold", "1.5"], {}, ["--threshold", "[0, 1)"]),
    (["--w-nb", "-0.1"], {}, ["--w-nb", "at least 0"]),
    (["--w-nb", "0", "--w-cbn", "0"], {}, ["--w-nb", "--w-cbn", "both be 0"]),
    (["--no-nb", "--no-cbn"], {}, ["--no-nb", "--no-cbn"]),
    (["--k1", "0"], {}, ["--k1", "at least 1"]),
    (["--k1", "3", "--no-cbn"], {}, ["--k1", "--no-cbn", "--method vanilla does not use"]),
    (["--vote-ratio", "0"], {}, ["--vote-ratio", "(0, 1]"]),
    (["--eps", "0.5"], {}, ["--eps", "[0, 0.5)"]),
    (["--n-target", "0"], {}, ["--n-target", "at least 1"]),
    (["--abduction-window", "0"], {}, ["--abduction-window", "at least 1"]),
    (["--abduction-window", "2"], {}, ["--abduction-window", "--method vanilla does not use"]),
    (["--check-relevance"], {}, ["--check-relevance", "--method vanilla does not use"]),
    (["--dataset", "nope"], {}, ["--dataset", "common2sense-pairwise", "plasma", "today"]),
    (["--method", "magic"], {}, ["--method", "anchor", "vanilla"]),
    ([], {"ANCHOR_LLM_TIMEOUT": "abc"}, ["ANCHOR_LLM_TIMEOUT", "not a number"]),
    ([], {"ANCHOR_LLM_CONCURRENCY": "0"}, ["ANCHOR_LLM_CONCURRENCY", "at least 1"]),
    ([], {"ANCHOR_LLM_RETRIES": "-2"}, ["ANCHOR_LLM_RETRIES", "at least 0"]),
    ([], {"ANCHOR_LLM_CONCURRENCY": "many"}, ["ANCHOR_LLM_CONCURRENCY", "whole number"]),
])
def test_bad_numbers_are_refused_before_anything_runs(tmp_path, argv, env, needles):
    out = tmp_path / "run"
    base = ["eval", "--dataset", "today", "--method", "vanilla", "--out", str(out)]
    if "--dataset" in argv:
        base = ["eval", "--method", "vanilla", "--out", str(out)]
    if "--method" in argv:
        base = ["eval", "--dataset", "today", "--out", str(out)]
    result = runner.invoke(app, [*base, *argv], env=env)
    one_line_error(result, *needles)
    assert not out.exists()


@pytest.mark.parametrize(("outcome1", "outcome2", "needles"), [
    ("   ", "Warm water wins.", ["--outcome1", "empty"]),
    ("Hot water wins.", "\t ", ["--outcome2", "empty"]),
    ("Hot water wins.", "hot  WATER wins.", ["--outcome1", "must differ"]),
])
def test_blank_or_equal_outcomes_are_refused(tmp_path, outcome1, outcome2, needles):
    out = tmp_path / "space.json"
    result = runner.invoke(app, ["build", "--scenario", "S.", "--outcome1", outcome1, "--outcome2", outcome2,
                                 "--out", str(out)])
    one_line_error(result, *needles)
    assert not out.exists()


def test_python_api_refuses_blank_outcomes():
    from pydantic import ValidationError

    from anchor.types import Scenario

    with pytest.raises(ValidationError, match="empty"):
        Scenario(text="S", outcome1="   ", outcome2="x")


# --------------------------------------------------------------------------- 5. output paths first


def test_build_into_a_directory_fails_before_any_llm_call(tmp_path):
    with FakeOpenAIServer() as server:
        result = runner.invoke(app, ["build", *SCENARIO, "--out", str(tmp_path), "--base-url", server.base_url,
                                     "--cache-dir", str(tmp_path / "cache")])
        one_line_error(result, "--out", str(tmp_path), "is a directory")
        assert server.completions == 0


def test_output_under_a_file_fails_before_any_llm_call(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with FakeOpenAIServer() as server:
        result = runner.invoke(app, ["infer", *SCENARIO, "-c", "It is cold.", "--save-space",
                                     str(blocker / "space.json"), "--base-url", server.base_url,
                                     "--cache-dir", str(tmp_path / "cache")])
        one_line_error(result, "--save-space", "not a directory")
        assert server.completions == 0


def test_a_save_that_fails_after_the_work_rescues_the_space(tmp_path, make_space):
    from anchor.cli.build import save_or_rescue
    from anchor.files import DestinationError

    space = make_space([("Heat", ["water temperature", "boiling point"])])
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(DestinationError) as info:
        save_or_rescue(space, blocker / "space.json", "--out")
    message = str(info.value)
    assert "--out" in message and "saved to" in message
    rescued = Path(message.rsplit("saved to ", 1)[1].split(" instead")[0])
    assert load_space(rescued) == space


# --------------------------------------------------------------------------- 6. what defines a run


def test_resume_accepts_a_new_port_and_a_key_from_the_environment(tmp_path):
    out, cache = tmp_path / "run", tmp_path / "cache"
    common = ["eval", "--cache-dir", str(cache), "--out", str(out), "--dataset", "today", "--method", "vanilla",
              "--limit", "2", "--model", "fake-model"]
    with FakeOpenAIServer(deterministic=True) as first:
        result = runner.invoke(app, [*common, "--base-url", first.base_url, "--api-key", KEY])
        assert result.exit_code == 0, result.stderr
    with FakeOpenAIServer(deterministic=True) as second:  # another port
        result = runner.invoke(app, [*common, "--base-url", second.base_url], env={"ANCHOR_LLM_API_KEY": KEY})
        assert result.exit_code == 0, result.stderr
        assert second.completions == 0  # resumed: both instances were done
    with FakeOpenAIServer(deterministic=True, model="other-model") as third:
        changed = [c if c != "fake-model" else "other-model" for c in common]
        result = runner.invoke(app, [*changed, "--base-url", third.base_url])
        one_line_error(result, "llm.model", "'fake-model'", "'other-model'")
        result = runner.invoke(app, [*common, "--base-url", third.base_url, "--limit", "3"])
        one_line_error(result, "limit was 2, now 3")


# --------------------------------------------------------------------------- 7/8. help and errors


def _commands(group, path=()):  # noqa: ANN001, ANN202
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):
            yield from _commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


def test_every_option_has_help():
    import typer.main

    root = typer.main.get_command(app)
    seen = 0
    for path, cmd in _commands(root):
        for param in cmd.params:
            if param.param_type_name == "option" and param.name != "help":
                assert (param.help or "").strip(), f"anchor {' '.join(path)} {param.opts[0]} has no help"
                seen += 1
    assert seen > 60


def test_infer_help_names_every_environment_variable():
    result = runner.invoke(app, ["infer", "--help"], terminal_width=250)
    assert result.exit_code == 0
    text = " ".join(result.stdout.replace("│", " ").split())  # rich may wrap inside its frame
    for name in ("ANCHOR_LLM_BASE_URL", "ANCHOR_LLM_MODEL", "ANCHOR_LLM_API_KEY", "ANCHOR_LLM_TIMEOUT",
                 "ANCHOR_LLM_CONCURRENCY", "ANCHOR_LLM_RETRIES", "ANCHOR_CACHE_DIR"):
        assert f"[env: {name}]" in text, name
    assert "Cache directory ." not in text and "(default: 8)" in text


def test_ping_does_not_advertise_a_cache_it_never_uses():
    result = runner.invoke(app, ["llm", "ping", "--help"], terminal_width=250)
    assert result.exit_code == 0 and "--no-cache" not in result.stdout and "default: True" not in result.stdout


def test_readme_lists_every_environment_variable():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for name in ("ANCHOR_LLM_BASE_URL", "ANCHOR_LLM_MODEL", "ANCHOR_LLM_API_KEY", "ANCHOR_LLM_TIMEOUT",
                 "ANCHOR_LLM_CONCURRENCY", "ANCHOR_LLM_RETRIES", "ANCHOR_CACHE_DIR", "ANCHOR_DEBUG"):
        assert name in readme, name


# --------------------------------------------------------------------------- 9/10. progress during an outage


def test_progress_shows_retries_while_the_server_fails(tmp_path):
    from anchor.evaluation.driver import EvalRunner
    from anchor.evaluation.run_config import make_run_config
    from anchor.llm.settings import LLMSettings
    from anchor.runs.session import RunOptions

    events: list[ProgressEvent] = []
    with FakeOpenAIServer(deterministic=True, faults=["429"] * 4, retry_after=0.0) as server:
        settings = LLMSettings(base_url=server.base_url, cache_dir=tmp_path / "cache", max_concurrency=1)
        config = make_run_config(dataset="today", method="vanilla", data_path=None, ablations=[], limit=1, runs=1,
                                 seed=0, settings=settings, anchor_config=None)
        run = EvalRunner(config, tmp_path / "run", RunOptions(settings), report=events.append)
        metrics = asyncio.run(run.run())
    assert metrics.n_failed == 0 and metrics.cost["total"].failed_attempts == 4
    retrying = [e.info["retry"] for e in events if "retry" in e.info]
    assert retrying and "HTTP 429" in retrying[-1] and "4 failed attempt(s)" in retrying[-1]
    assert "retry" not in events[-1].info  # cleared once answers come through


def test_build_progress_shows_retries(tmp_path):
    from anchor.cli.console import llm_activity
    from anchor.llm.client import LLMClient
    from anchor.llm.ledger import CallRecord, CostLedger

    ledger = CostLedger()
    events: list[ProgressEvent] = []
    with llm_activity(ledger, events.append):
        ledger.record(CallRecord(stage="voting", outcome="transient_error", detail="HTTP 503: busy"))
        ledger.record(CallRecord(stage="voting", outcome="ok"))
    ledger.record(CallRecord(stage="voting", outcome="ok"))  # after the block: not reported
    assert [e.done for e in events] == [1, 2]
    assert "HTTP 503" in events[0].info["retry"] and "retry" not in events[1].info
    assert LLMClient  # the helper works with any client's ledger


# --------------------------------------------------------------------------- 11. permissions


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_files_follow_the_umask(tmp_path, make_space, mask, mode):
    old = os.umask(mask)
    try:
        path = save_space(make_space([("Heat", ["water temperature"])]), tmp_path / "space.json")
        other = write_atomic(tmp_path / "metrics.json", "{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert stat.S_IMODE(other.stat().st_mode) == mode


# --------------------------------------------------------------------------- 12. sync API in a loop


async def test_sync_api_inside_a_running_loop_says_what_to_use(scripted_client, embedder, make_space):
    from anchor.pipeline import Anchor
    from tests.helpers import ScriptedLLM

    engine = Anchor(client=scripted_client(ScriptedLLM()), embedder=embedder)
    space = make_space([("Heat", ["water temperature"])])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="await") as info:
            engine.infer(space, "It is cold.")
        gc.collect()
    assert "ainfer" in str(info.value)
    assert not [w for w in caught if "never awaited" in str(w.message)]


def test_check_relevance_brings_back_the_per_round_relevance_request():
    """Off by default (the extraction prompt judges relevance); the flag is how a run built before the
    default changed is resumed with its own settings."""
    from anchor.cli.options import BuildOptions

    assert BuildOptions().params().check_relevance is False
    assert BuildOptions(check_relevance=True).params().check_relevance is True
