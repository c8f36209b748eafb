"""What the commands print on an 80-column terminal, their --help, and usage errors found before the
first request: the progress line keeps its bar, count and time; the results title and `anchor
report`'s Markdown are not hard-wrapped; flags show no value type; `--out` naming a file fails at
once, naming --out."""

from __future__ import annotations

import io
import re
import socket

import pytest
from rich.console import Console
from typer.testing import CliRunner

from anchor.cli import app
from anchor.cli import console as cli_console
from anchor.cli import evaluate as cli_evaluate
from anchor.cli.console import RichReporter
from anchor.cli.render import cost_table
from anchor.progress import ProgressEvent
from anchor.types import StageCost
from tests.fakeserver import FakeOpenAIServer
from tests.run_helpers import eval_args

runner = CliRunner()
BAR = "━"


def narrow(buffer: io.StringIO) -> Console:
    """A console 80 columns wide that is not a terminal (what a pipe or a log file gets)."""
    return Console(file=buffer, width=80, force_terminal=False, color_system=None)


def test_the_progress_line_keeps_bar_count_and_time_at_80_columns(monkeypatch):
    buffer = io.StringIO()
    monkeypatch.setattr(cli_console, "err", narrow(buffer))
    info = {"unknown": 12, "failed": 3, "calls": 123456, "cached": 7890, "tokens": 98765432}
    with RichReporter() as report:
        report(ProgressEvent("instances", 37, 400, "", info))
        report(ProgressEvent("instances", 38, 400, "", {**info, "retry": "retrying: 4 failed attempt(s), last: "
                                                                          "HTTP 503 from the server, twice in a row"}))
    lines = buffer.getvalue().splitlines()
    assert lines and all(len(line) <= 80 for line in lines), lines
    last = lines[-1]
    assert last.startswith("instances") and BAR in last and "38/400" in last
    assert re.search(r"\d:\d\d:\d\d", last), last  # the elapsed time
    # The note takes what is left; during an outage the retry comes first, so it is what shows.
    assert "retrying: 4 failed attempt(s)" in last and last.rstrip().endswith("…")


def test_eval_prints_its_title_on_one_line_and_report_prints_the_markdown_unwrapped(monkeypatch, tmp_path):
    err, out = io.StringIO(), io.StringIO()
    monkeypatch.setattr(cli_console, "err", narrow(err))
    monkeypatch.setattr(cli_evaluate, "out", narrow(out))
    run = tmp_path / "run"
    with FakeOpenAIServer(deterministic=True) as server:
        args = [a for a in eval_args(server, tmp_path / "cache", run, "--dataset", "common2sense-pairwise",
                                     "--method", "vanilla-direct", "--limit", "2") if a != "--json"]
        result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    printed = out.getvalue().splitlines()
    assert printed[0] == "vanilla-direct on common2sense-pairwise (2 instances x 1 run(s))"
    progress = [line for line in err.getvalue().splitlines() if line.startswith("instances")]
    assert progress and BAR in progress[-1] and "2/2" in progress[-1], err.getvalue()

    # `anchor report` with stdout not a terminal (80 columns): the Markdown as in report.md.
    monkeypatch.setattr(cli_evaluate, "out", Console(width=80, color_system=None))
    report = runner.invoke(app, ["report", str(run), "--out", str(tmp_path / "rep"), "--no-html"])
    assert report.exit_code == 0, report.output
    written = (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    assert max(len(line) for line in written.splitlines()) > 80  # long table rows, which must stay whole
    assert report.stdout == written


def commands(group=None, prefix=()):  # noqa: ANN001, ANN201
    """Every command path of the app (``("eval",)``, ``("llm", "ping")``, ...)."""
    import typer.main

    group = group or typer.main.get_command(app)
    for name, command in getattr(group, "commands", {}).items():
        yield (*prefix, name)
        yield from commands(command, (*prefix, name))


def help_text(monkeypatch, argv: list[str], columns: int) -> str:  # noqa: ANN001
    """``argv --help`` as printed on a terminal ``columns`` wide (typer's help console reads COLUMNS)."""
    monkeypatch.setenv("COLUMNS", str(columns))
    result = runner.invoke(app, [*argv, "--help"])
    assert result.exit_code == 0, (argv, result.output)
    return result.stdout


def test_no_flag_shows_a_value_type_in_any_help(monkeypatch):
    paths = list(commands())
    assert ("eval",) in paths and ("analyze", "factors") in paths and ("cache", "clear") in paths
    for path in [(), *paths]:
        assert "<bool>" not in help_text(monkeypatch, list(path), 80), path
    # A flag takes no value: the help no longer suggests one, and giving one is still refused.
    refused = runner.invoke(app, ["eval", "--dataset", "plasma", "--no-cache", "true"])
    assert refused.exit_code == 2 and "true" in refused.output


def test_eval_help_reads_right_at_80_and_200_columns(monkeypatch):
    wide = help_text(monkeypatch, ["eval"], 200)
    # The docstring's second paragraph is one paragraph, not broken where the source line ended.
    assert ("Killed half-way? Run the same command again: finished instances are skipped and failed ones "
            "retried.") in [line.strip() for line in wide.splitlines()]
    narrow_help = help_text(monkeypatch, ["eval"], 80)
    assert max(len(line) for line in narrow_help.splitlines()) <= 80
    assert "…" not in narrow_help  # no help text cut short (the --out default was)
    assert "runs/plasma-anchor-s0" in narrow_help and "--keep-failed" in narrow_help


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize("where", ["file", "under-a-file"])
def test_eval_out_that_cannot_be_a_directory_fails_before_any_request(tmp_path, where):
    existing = tmp_path / "results.txt"
    existing.write_text("keep me", encoding="utf-8")
    out = existing if where == "file" else existing / "run"
    # Nothing listens at the server's address: had the command contacted it first, the error would say so.
    result = runner.invoke(app, ["eval", "--base-url", closed_port_url(), "--retries", "0", "--dataset", "plasma",
                                 "--method", "vanilla", "--limit", "1", "--out", str(out),
                                 "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --out {out}:"), result.output
    assert "not a directory" in lines[0] and "reach" not in lines[0]
    assert existing.read_text(encoding="utf-8") == "keep me"


def test_eval_out_existing_file_leaves_the_server_untouched(tmp_path):
    existing = tmp_path / "results.txt"
    existing.write_text("keep me", encoding="utf-8")
    with FakeOpenAIServer(deterministic=True) as server:
        result = runner.invoke(app, [*eval_args(server, tmp_path / "cache", existing, "--dataset", "plasma",
                                                "--method", "vanilla", "--limit", "1")])
        assert result.exit_code == 2 and server.completions == 0
    assert result.output.strip() == f"error: --out {existing}: exists and is not a directory"


def test_the_cost_table_keeps_stage_names_whole_at_80_columns():
    stages = ["abduction.generate", "abduction.extract", "abduction.validate", "mapping.select",
              "inference.latent_params", "voting"]
    costs = [StageCost(stage=s, llm_calls=1234, logical_requests=1200, prompt_tokens=1_234_567, completion_tokens=123_456,
                       cache_hits=12, wall_seconds=1234.5, llm_seconds=12345.6) for s in stages]
    buffer = io.StringIO()
    narrow(buffer).print(cost_table(costs))
    lines = buffer.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    body = [line.split("│")[0].strip() for line in lines if "│" in line]
    assert body == [*stages, "total"]  # every name whole, so no two rows read the same
    assert "…" not in buffer.getvalue()
    total = next(line for line in lines if line.startswith("total"))
    assert total.split("│")[1:3] == ["7200 ", " 7404 "]  # requests, then the attempts they took


@pytest.mark.parametrize("command", [["build"], ["infer"], ["explain"], ["eval"], ["cost"], ["analyze", "factors"]])
def test_help_examples_wrap_between_arguments_at_80_columns(command):
    result = runner.invoke(app, [*command, "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    lines = [line.strip() for line in result.output.splitlines()]
    start = lines.index("Example:") + 1
    example = lines[start:lines.index("", start)]
    assert example[0].startswith("anchor " + " ".join(command))
    for line in example[:-1]:
        assert line.endswith(" \\"), example  # a shell continuation, so the lines paste as one command
    for line in example:
        assert line.count('"') % 2 == 0, example  # no quoted value is cut in two
        words = line.removesuffix(" \\").split()
        assert not words[-1].startswith("-") or words[-1] in ("--json",), example  # no flag apart from its value
