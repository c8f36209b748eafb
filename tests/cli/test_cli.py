"""The command line, in-process with typer's CliRunner against tests/fakeserver.py (a real local
OpenAI-compatible HTTP server answering random schema-valid JSON), plus a subprocess check that
`anchor infer --space` never imports umap."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.inference.bayes import cbn_posterior, naive_bayes_posterior
from anchor.space.io import load_space, save_space
from anchor.types import StopReason
from tests.fakeserver import FakeOpenAIServer
from tests.helpers import ScriptedLLM
from tests.run_helpers import server_responder

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ["--scenario", "Cooking noodles in hot vs warm water.", "--outcome1", "Hot water is more efficient.",
            "--outcome2", "Warm water is more efficient."]
CONDITIONS = ["You are at a high altitude where water boils at a lower temperature.",
              "The pot is made of thin aluminium.",
              "Gas is expensive this winter."]
KNOWN_STAGES = {"mapping.select", "mapping.reflect", "inference.phi", "inference.latents", "inference.latent_params"}


#: The tests pass every setting as a flag: variables of the user's shell must not leak in.
pytestmark = pytest.mark.usefixtures("clean_anchor_env")


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def server():
    with FakeOpenAIServer(seed=1) as srv:
        yield srv


@pytest.fixture
def space_file(make_space, tmp_path) -> Path:
    space = make_space(
        [("Water Temperature", ["water temperature", "boiling point", "heat transfer rate"]),
         ("Energy Cost", ["electricity bill", "gas price"])],
        ["noodle texture"],
        labels={"water temperature": "outcome1", "boiling point": "outcome1", "gas price": "outcome2"},
    )
    return save_space(space, tmp_path / "space.json")


def llm_args(server: FakeOpenAIServer, tmp_path: Path) -> list[str]:
    return ["--base-url", server.base_url, "--cache-dir", str(tmp_path / "cache"), "--parse-retries", "3"]


def assert_clean_error(result, *needles: str) -> str:
    """Exit code 2, one 'error:' line at the end of stderr naming every needle (progress bars may
    come before it), nothing on stdout, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr, result.exception)
    assert isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if "error:" in line]
    assert len(errors) == 1, f"expected one error line: {result.stderr!r}"
    message = errors[0]
    assert message.startswith("error: ") and message == lines[-1], f"error spans several lines: {result.stderr!r}"
    assert "Traceback" not in result.output
    assert result.stdout == ""
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    return message


# --------------------------------------------------------------------------- help


def test_top_level_help_lists_the_commands(runner):
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in ("build", "infer", "demo", "llm", "cache"):
        assert f" {name} " in result.stdout, name


@pytest.mark.parametrize(("argv", "mentions"), [
    (["build", "--help"], ["--out", "--n-target", "--batch-size", "--max-rounds", "--no-cluster", "--base-url"]),
    (["infer", "--help"], ["--space", "--condition", "--conditions-file", "--no-cbn", "--no-nb", "--bma", "--tau",
                           "--json"]),
    (["demo", "--help"], ["--full", "--json"]),
    (["llm", "--help"], ["ping"]),
    (["llm", "ping", "--help"], ["--base-url", "--timeout"]),
    (["cache", "--help"], ["info", "clear"]),
    (["cache", "info", "--help"], ["--cache-dir"]),
    (["cache", "clear", "--help"], ["--yes"]),
])
def test_each_command_has_help(runner, argv, mentions):
    result = runner.invoke(app, argv, terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.stdout
    for flag in mentions:
        assert flag in result.stdout, flag


# --------------------------------------------------------------------------- infer


def run_infer(runner, server, tmp_path, space_file, *extra: str):
    argv = ["infer", "--space", str(space_file), *[a for c in CONDITIONS for a in ("-c", c)], "--json",
            "--concurrency", "1", *llm_args(server, tmp_path), *extra]
    return runner.invoke(app, argv)


# Scripted answers for the three conditions: the factors each selects (all three rounds alike,
# reflection keeps them), their phi, and one latent concept over them.
MAPPED = {CONDITIONS[0]: ["boiling point", "water temperature"], CONDITIONS[1]: ["heat transfer rate"],
          CONDITIONS[2]: ["gas price"]}
PHI = {"boiling point": 0.3, "water temperature": 0.4, "heat transfer rate": 0.8, "gas price": 0.25}
LATENT_PARAMS = (0.7, 0.4)


def test_infer_json_against_a_server(runner, tmp_path, space_file):
    script = ScriptedLLM(select=lambda condition, candidates: MAPPED[condition], phi=PHI.__getitem__,
                         partition=lambda texts: [{"name": "Heat and cost", "factors": list(texts)}],
                         latent_params=lambda line: LATENT_PARAMS)
    with FakeOpenAIServer(responder=server_responder(script)) as server:
        result = run_infer(runner, server, tmp_path, space_file, "--inference", "paper")
        completions = server.completions
    assert result.exit_code == 0, (result.stderr, result.exception)
    objs = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert [o["condition"] for o in objs] == CONDITIONS

    space = load_space(space_file)
    theme = {f.text: space.theme_of(f.id) for f in space.factors}
    for obj in objs:
        texts = MAPPED[obj["condition"]]
        phis = [PHI[t] for t in texts]
        nb = naive_bayes_posterior(phis)
        cbn = cbn_posterior(phis, [0] * len(phis), [LATENT_PARAMS])
        assert not obj["unknown"] and obj["unknown_reason"] is None
        assert (obj["nb"], obj["cbn"]) == (pytest.approx(nb), pytest.approx(cbn))
        assert obj["p_outcome1"] == pytest.approx(0.5 * nb + 0.5 * cbn)  # the default weights 0.5 / 0.5
        assert obj["p_outcome1"] + obj["p_outcome2"] == pytest.approx(1.0, abs=1e-9)
        assert {f["text"]: (f["phi"], f["theme"]) for f in obj["factors"]} == {
            t: (pytest.approx(PHI[t]), theme[t]) for t in texts}
        # A lone factor forms its latent without asking the LLM for a partition (it is named "Single").
        name = "Heat and cost" if len(texts) > 1 else "Single"
        assert [(lat["name"], lat["p_given_o1"], lat["p_given_o2"]) for lat in obj["latents"]] == [
            (name, *map(pytest.approx, LATENT_PARAMS))]
        stages = {c["stage"]: c for c in obj["cost"]}
        # R = 3 selections: three samples, in one request (the test server honours n).
        assert (stages["mapping.select"]["llm_calls"], stages["mapping.select"]["samples"]) == (1, 3)
        assert set(stages) <= KNOWN_STAGES
    # Every request the server saw is accounted for in some condition's cost.
    assert sum(c["llm_calls"] for o in objs for c in o["cost"]) == completions


def test_infer_readable_output(runner, server, tmp_path, space_file):
    result = runner.invoke(app, ["infer", "--space", str(space_file), "-c", CONDITIONS[0],
                                 *llm_args(server, tmp_path)], terminal_width=200)
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert CONDITIONS[0][:40] in result.stdout
    assert "P(O1) = " in result.stdout or "UNKNOWN" in result.stdout
    assert "mapping: " in result.stdout and "cost: " in result.stdout
    assert not result.stdout.lstrip().startswith("{")


def test_infer_says_which_rule_read_the_numbers_and_the_base_rate_it_counted(runner, tmp_path, space_file):
    script = ScriptedLLM(select=lambda condition, candidates: MAPPED[condition], phi=PHI.__getitem__,
                         latent_params=lambda line: LATENT_PARAMS, base_rate=lambda: 0.3)
    with FakeOpenAIServer(model="model-b", responder=server_responder(script)) as server:
        result = runner.invoke(app, ["infer", "--space", str(space_file), "-c", CONDITIONS[1],
                                     *llm_args(server, tmp_path)], terminal_width=200)
    assert result.exit_code == 0, (result.stderr, result.exception)
    flat = " ".join(result.stdout.replace("│", " ").split())  # the panel wraps its lines
    assert "consistent rule: base rate P(O1 | scenario) = 0.300 (stated by model-b), counted once" in flat


def test_build_against_a_server_writes_a_loadable_space(runner, server, tmp_path):
    out = tmp_path / "built" / "space.json"
    argv = ["build", *SCENARIO, "--out", str(out), "--n-target", "12", "--batch-size", "4", "--max-rounds", "3",
            "--json", *llm_args(server, tmp_path)]
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, (result.stderr, result.exception)
    summary = json.loads(result.stdout)
    assert summary["path"] == str(out)
    assert "embeddings" not in summary

    space = load_space(out)
    assert space.scenario.outcome2 == "Warm water is more efficient."
    assert space.params.n_target == 12 and space.params.batch_size == 4 and space.params.max_rounds == 3
    assert space.stop_reason in set(StopReason)
    assert 1 <= len(space.rounds) <= 3
    assert space.llm.model == "fake-model" and space.llm.backend.startswith("openai-compatible")
    assert len(summary["factors"]) == len(space.factors)
    assert all(f.votes.total == 3 for f in space.factors)
    assert sum(c.llm_calls for c in space.cost) == server.completions
    # Built for the rule infer answers with by default: the scenario's base rate is asked once and kept.
    assert space.base_rate is not None and space.base_rate.source == "elicited" and space.base_rate.model == "fake-model"
    assert "inference.base_rate" in {c.stage for c in space.cost}

    # The space it wrote serves `anchor infer`.
    inferred = runner.invoke(app, ["infer", "--space", str(out), "-c", CONDITIONS[0], "--json",
                                   *llm_args(server, tmp_path)])
    assert inferred.exit_code == 0, (inferred.stderr, inferred.exception)
    assert json.loads(inferred.stdout)["condition"] == CONDITIONS[0]


def test_infer_builds_first_and_saves_the_space(runner, server, tmp_path):
    saved = tmp_path / "fresh.json"
    argv = ["infer", *SCENARIO, "-c", CONDITIONS[0], "-c", CONDITIONS[2], "--save-space", str(saved), "--json",
            "--n-target", "8", "--batch-size", "3", "--max-rounds", "2", "--no-cbn", "--bma",
            *llm_args(server, tmp_path)]
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, (result.stderr, result.exception)
    objs = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert [o["condition"] for o in objs] == [CONDITIONS[0], CONDITIONS[2]]
    space = load_space(saved)
    assert space.params.n_target == 8
    for obj in objs:
        assert obj["variant"] == ["no-cbn", "bma"]
        assert obj["cbn"] is None and obj["latents"] == []
        assert "inference.latents" not in {c["stage"] for c in obj["cost"]}
        assert all(f["text"] in {x.text for x in space.factors} for f in obj["factors"])


def test_demo_json_against_a_server(runner, server, tmp_path):
    out = tmp_path / "demo.json"
    result = runner.invoke(app, ["demo", "--json", "--out", str(out), *llm_args(server, tmp_path)])
    assert result.exit_code == 0, (result.stderr, result.exception)
    data = json.loads(result.stdout)
    assert set(data) == {"schema_version", "space", "results", "timing"}
    assert len(data["results"]) == 5
    assert data["space"]["params"]["n_target"] == 24
    assert load_space(out).scenario.outcome1.startswith("Noodles cook much more efficiently in hot water")
    for obj in data["results"]:
        assert obj["unknown"] or obj["p_outcome1"] + obj["p_outcome2"] == pytest.approx(1.0)


def test_llm_ping_and_cache_commands(runner, server, tmp_path):
    cache = str(tmp_path / "cache")
    ping = runner.invoke(app, ["llm", "ping", "--json", "--base-url", server.base_url], env={"ANCHOR_CACHE_DIR": cache})
    assert ping.exit_code == 0, (ping.stderr, ping.exception)
    info = json.loads(ping.stdout)
    assert info["model"] == "fake-model" and info["attempts"] >= 1 and 0.0 <= info["answer"]["probability"] <= 1.0
    assert server.completions == info["attempts"]

    # Ping never uses the cache (a cached answer would say nothing about the server); a real command fills it.
    # Read with its white space folded: the console may break the line at any space, and inside the
    # cache's path (as long as the temporary folder's name).
    def info() -> tuple[int, str]:
        listed = runner.invoke(app, ["cache", "info", "--cache-dir", cache], terminal_width=200)
        assert listed.exit_code == 0, listed.output
        text = " ".join(listed.stdout.split())
        return int(re.search(r": (\d+) cached answers", text).group(1)), text

    assert info()[0] == 0
    built = runner.invoke(app, ["build", *SCENARIO, "--out", str(tmp_path / "s.json"), "--n-target", "3",
                                "--batch-size", "2", "--max-rounds", "1", *llm_args(server, tmp_path)])
    assert built.exit_code == 0, (built.stderr, built.exception)
    n, listed = info()
    assert n >= 2 and "abduction.generate" in listed
    cleared = runner.invoke(app, ["cache", "clear", "--yes", "--cache-dir", cache])
    assert cleared.exit_code == 0 and f"removed {n} cached answers" in " ".join(cleared.stdout.split())
    assert info()[0] == 0


# --------------------------------------------------------------------------- clean errors


def test_error_space_missing(runner, tmp_path):
    missing = tmp_path / "no" / "such" / "space-with-a-rather-long-name-so-the-line-would-wrap.json"
    result = runner.invoke(app, ["infer", "--space", str(missing), "-c", "x"])
    assert_clean_error(result, str(missing), "no such file")


def test_error_space_broken_json(runner, tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"schema_version": 1,\n "factors": [}')
    result = runner.invoke(app, ["infer", "--space", str(path), "-c", "x"])
    assert_clean_error(result, str(path), "not valid JSON", "line 2")


def test_error_space_with_brackets_in_its_name(runner, tmp_path):
    # Square brackets are not console markup: the path is printed as is (and nothing crashes).
    path = tmp_path / "a[/b]" / "x[bold]y.json"
    result = runner.invoke(app, ["infer", "--space", str(path), "-c", "x"])
    assert_clean_error(result, str(path))


def test_error_space_invalid_content(runner, tmp_path, space_file):
    data = json.loads(space_file.read_text())
    data["unclustered"].append("f999")
    bad = tmp_path / "dangling.json"
    bad.write_text(json.dumps(data))
    result = runner.invoke(app, ["infer", "--space", str(bad), "-c", "x"])
    assert_clean_error(result, "f999")


def test_error_empty_conditions_file(runner, tmp_path, space_file):
    path = tmp_path / "conds.txt"
    path.write_text("\n# only a comment\n   \n")
    result = runner.invoke(app, ["infer", "--space", str(space_file), "--conditions-file", str(path)])
    assert_clean_error(result, "no condition given")


def test_error_missing_conditions_file(runner, tmp_path, space_file):
    path = tmp_path / "absent.txt"
    result = runner.invoke(app, ["infer", "--space", str(space_file), "--conditions-file", str(path)])
    assert_clean_error(result, str(path), "cannot read")


@pytest.mark.parametrize(("lines", "line_no", "what"), [
    (['{"condition": "fine"}', "# comment", '{"condition": "broken"'], 3, "not valid JSON"),
    (['{"condition": "fine"}', '{"text": ""}'], 2, "non-empty 'condition'"),
    (["plain condition", '{"other": 1}'], 2, "non-empty 'condition'"),
])
def test_error_bad_jsonl_line_names_the_line(runner, tmp_path, space_file, lines, line_no, what):
    path = tmp_path / "conds.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = runner.invoke(app, ["infer", "--space", str(space_file), "--conditions-file", str(path)])
    assert_clean_error(result, f"line {line_no}", what, str(path))


def test_conditions_file_lines_and_jsonl_are_read(tmp_path):
    from anchor.cli.build import read_conditions

    path = tmp_path / "mixed.txt"
    path.write_text('# header\nfirst  condition\n\n{"condition": "second"}\n{"text": "third"}\n')
    assert read_conditions(["zeroth"], path) == ["zeroth", "first condition", "second", "third"]


def test_conditions_file_bom_is_not_part_of_the_first_condition(tmp_path):
    """A spreadsheet saves UTF-8 with a byte-order mark: it is not part of the first condition."""
    from anchor.cli.build import read_conditions

    path = tmp_path / "bom.txt"
    path.write_bytes("\ufefffirst\nsecond\n".encode())
    assert read_conditions([], path) == ["first", "second"]
    path.write_bytes("\ufeff{\"condition\": \"first\"}\n".encode())
    assert read_conditions([], path) == ["first"]


@pytest.mark.parametrize(("data", "needles"), [
    ("first\n".encode("utf-16"), ("UTF-16", "iconv")),
    (b'{"condition": "a", "condition": "b"}\n', ("line 1", "appears twice")),
    (b"ok\n" + b'{"condition": "a", "x": ' + b"[" * 40 + b"]" * 40 + b"}\n", ("line 2", "nested deeper")),
])
def test_error_conditions_file_by_the_row_rules(runner, tmp_path, space_file, data, needles):
    """The conditions file is read by the rules every cases file is (anchor.jsonl): another encoding, a key
    given twice and a line nested past the row limit are each one error line naming the file and line."""
    path = tmp_path / "conds.jsonl"
    path.write_bytes(data)
    result = runner.invoke(app, ["infer", "--space", str(space_file), "--conditions-file", str(path)])
    assert_clean_error(result, str(path), *needles)


@pytest.mark.parametrize("command", ["build", "infer"])
def test_error_missing_outcome2(runner, tmp_path, command):
    argv = [command, "--scenario", "S.", "--outcome1", "Hot water is better."]
    if command == "infer":
        argv += ["-c", "x"]
    else:
        argv += ["--out", str(tmp_path / "s.json")]
    result = runner.invoke(app, argv)
    assert_clean_error(result, "--outcome2")
    assert not (tmp_path / "s.json").exists()


def test_error_equal_outcomes(runner, tmp_path):
    result = runner.invoke(app, ["build", "--scenario", "S.", "--outcome1", "Hot water wins.",
                                 "--outcome2", "hot water  WINS.", "--out", str(tmp_path / "s.json")])
    assert_clean_error(result, "must differ")


def test_error_space_and_scenario_together(runner, space_file):
    result = runner.invoke(app, ["infer", "--space", str(space_file), "-c", "x", *SCENARIO])
    assert_clean_error(result, "either --space or --scenario")


def test_error_unreachable_server(runner, tmp_path, space_file):
    result = runner.invoke(app, ["infer", "--space", str(space_file), "-c", CONDITIONS[0],
                                 "--base-url", "http://127.0.0.1:9/v1", "--timeout", "1",
                                 "--cache-dir", str(tmp_path / "cache")])
    assert_clean_error(result, "cannot reach", "127.0.0.1:9")


def test_error_bad_option_value(runner, space_file):
    result = runner.invoke(app, ["infer", "--space", str(space_file), "-c", "x", "--tau", "2"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "tau" in result.stderr


# --------------------------------------------------------------------------- no umap on the infer path


def test_infer_with_a_stored_space_never_imports_umap(tmp_path, space_file):
    snippet = textwrap.dedent(f"""
        import json, sys
        sys.argv = ["anchor", "infer", "--space", {str(space_file)!r}, "-c", {CONDITIONS[0]!r}, "--json",
                    "--vote-ratio", "0.3", "--cache-dir", {str(tmp_path / "cache")!r}]
        from tests.fakeserver import FakeOpenAIServer
        from anchor.cli import main
        with FakeOpenAIServer(seed=2) as server:
            sys.argv += ["--base-url", server.base_url]
            try:
                main()
            except SystemExit as exc:
                code = exc.code
            else:
                code = 0
        print(json.dumps({{"marker": "done", "code": code, "requests": server.completions,
                           "umap": sorted(m for m in sys.modules if m == "umap" or m.startswith("umap.")),
                           "minilm_loaded": bool(sys.modules["anchor.embedding.minilm"]._LOADED),
                           "heavy": sorted(m for m in ("torch", "sentence_transformers", "sklearn") if m in sys.modules),
                           "unused": sorted(m for m in {UNUSED_BY_INFER!r} if m in sys.modules)}}))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANCHOR_")}
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["ANCHOR_COMPUTE"] = "threads"  # MiniLM in this process, where sys.modules shows it
    proc = subprocess.run([sys.executable, "-c", snippet], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    report = lines[-1]
    assert report["marker"] == "done" and report["code"] in (0, None), proc.stderr[-3000:]
    # It really ran the infer path: the condition was embedded, mapped and answered.
    (result,) = lines[:-1]
    assert result["condition"] == CONDITIONS[0]
    assert report["requests"] >= 1 and report["minilm_loaded"]
    assert report["umap"] == [], f"anchor infer imported {report['umap']}"
    # Nor the other slow imports: torch and sentence-transformers (MiniLM runs in numpy), scikit-learn
    # (exact nearest neighbours in numpy).
    assert report["heavy"] == [], f"anchor infer imported {report['heavy']}"
    # Nor another command's machinery, nor the openai SDK's types for APIs other than chat completions.
    assert report["unused"] == [], f"anchor infer imported {report['unused']}"


#: Modules ``anchor infer`` on a stored space has no use for: other commands and their machinery, and
#: the SDK's type packages of the APIs anchor does not call (``anchor.llm.sdk``).
UNUSED_BY_INFER = ("anchor.cli.analyze", "anchor.cli.evaluate", "anchor.cli.reproduce", "anchor.cli.serve",
                   "anchor.cli.truth", "anchor.cli.calibrate", "anchor.cli.predict", "anchor.analysis",
                   "anchor.reproduce", "anchor.serve.server", "matplotlib", "openai.types.responses.response",
                   "openai.types.eval_create_params", "openai.types.graders", "openai.types.realtime",
                   "openai.types.beta")


def test_a_command_imports_only_its_own_module():
    """``anchor infer --help`` loads the infer command's module, not every command's (nor the SDK)."""
    snippet = textwrap.dedent("""
        import json, sys
        sys.argv = ["anchor", "infer", "--help"]
        from anchor.cli import main
        try:
            main()
        except SystemExit:
            pass
        print(json.dumps(sorted(m for m in sys.modules if m.startswith(("anchor.cli.", "openai", "matplotlib")))))
    """)
    proc = subprocess.run([sys.executable, "-c", snippet], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = set(json.loads(proc.stdout.splitlines()[-1]))
    assert "--conditions-file" in proc.stdout and "anchor.cli.build" in loaded
    others = {f"anchor.cli.{name}" for name in ("analyze", "evaluate", "predict", "reproduce", "serve", "truth",
                                                "calibrate", "audit", "cost", "backend")}
    assert loaded & others == set()
    assert not any(m.startswith(("openai", "matplotlib")) for m in loaded), sorted(loaded)


def test_anchor_help_lists_every_command_with_its_summary():
    from anchor.cli.app import COMMANDS

    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    rows = {line.strip("│ ").split(" ", 1)[0]: line for line in result.stdout.splitlines() if line.startswith("│ ")}
    for name in COMMANDS:
        assert name in rows and len(rows[name].strip("│ ").split()) > 2, (name, result.stdout)
    assert "Did you mean 'infer'?" in CliRunner().invoke(app, ["infr"]).stderr


def test_the_sdk_types_are_read_on_first_use():
    """anchor.llm.sdk: openai.types' re-exports still resolve, each importing its own module then."""
    snippet = textwrap.dedent("""
        import json, sys
        from anchor.llm.sdk import install_lazy_types
        assert install_lazy_types()
        import openai
        before = "openai.types.batch" in sys.modules
        batch = openai.types.Batch
        from openai.types.chat import ChatCompletion
        print(json.dumps({"before": before, "after": "openai.types.batch" in sys.modules,
                          "batch": batch.__module__, "chat": ChatCompletion.__name__,
                          "responses": "openai.types.responses.response" in sys.modules}))
    """)
    proc = subprocess.run([sys.executable, "-c", snippet], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout) == {"before": False, "after": True, "batch": "openai.types.batch",
                                       "chat": "ChatCompletion", "responses": False}


def test_a_program_importing_anchor_as_a_library_gets_the_sdk_as_it_ships():
    """The lazy type packages are the command line's: the library's backend imports the stock SDK, and
    the finder is not left in the process."""
    snippet = textwrap.dedent("""
        import json, sys
        import anchor.llm.openai_backend
        from anchor.llm.sdk import _LazyTypesFinder, install_lazy_types
        print(json.dumps({"finder": any(isinstance(f, _LazyTypesFinder) for f in sys.meta_path),
                          "batch": "openai.types.batch" in sys.modules, "late": install_lazy_types()}))
    """)
    proc = subprocess.run([sys.executable, "-c", snippet], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Once openai is imported whole, the finder is not put in afterwards either.
    assert json.loads(proc.stdout) == {"finder": False, "batch": True, "late": False}


def test_a_package_init_that_does_more_than_reexport_runs_as_it_is():
    from anchor.llm.sdk import reexports

    assert reexports(b'"""Doc."""\nfrom __future__ import annotations\nfrom .a import B as B, C\n') == {
        "B": ("a", "B"), "C": ("a", "C")}
    assert reexports(b"from .a import B as B\nB.model_rebuild()\n") is None
    assert reexports(b"from .a import *\n") is None
    assert reexports(b"from typing import Any\n") is None


def test_abort_is_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    """An abort (Ctrl-C at a prompt, a closed pipe while help prints) ends with one line and exit 1:
    the handler once named an exception typer's click copy does not have, so it crashed instead."""
    import typer

    from anchor.cli.app import _OneLineErrors

    aborting = typer.Typer(cls=_OneLineErrors)

    @aborting.command()
    def stop() -> None:
        raise typer.Abort()

    @aborting.command()
    def other() -> None:  # a second command, so the group dispatches by name
        pass

    with pytest.raises(SystemExit) as exit_info:
        aborting(["stop"])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert "aborted" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
