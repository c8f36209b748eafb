"""Every JSON output for machines carries the ``schema_version`` docs/schemas.md gives it, and the keys
that page lists: each command's ``--json`` and each JSON file a user reads, made here for real against
the local test server. A key renamed, added or dropped without the page (and with it the rule: the old
key kept for one version, or a new version) fails here.

The page's tables are read as written: one row per output, ``| `name` | version | `key`, `key`* |``,
where ``*`` marks a key present only in some cases (the row says when).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from anchor.analysis.estimator import EstimatorAnalysis
from anchor.analysis.retrieval import RetrievalAnalysis
from anchor.bird.types import BirdModel
from anchor.cli import app
from anchor.cli.console import emit_json
from anchor.cli.schemas import JSON_OUTPUTS, SERVICE_BODIES
from anchor.methods.bird_on_anchor import TransplantArtefact
from anchor.truth_bench.results import BenchResults
from tests.fakeserver import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "schemas.md"
runner = CliRunner()
ROW = re.compile(r"^\| `([^`]+)` \| (\d+) \| ([^|]*) \|")
KEY = re.compile(r"`([^`]+)`(\*?)")

SCENARIO = ["--scenario", "Cooking noodles in hot vs warm water.", "--outcome1", "Hot water is more efficient.",
            "--outcome2", "Warm water is more efficient."]
CONDITION = "You are at a high altitude."
TINY = ["--n-target", "8", "--batch-size", "4", "--max-rounds", "2", "--vote-samples", "1"]

pytestmark = pytest.mark.usefixtures("clean_anchor_env")


def documented() -> dict[str, tuple[int, set[str], set[str]]]:
    """Output name -> (schema version, every key, the keys present only in some cases), from docs/schemas.md."""
    rows = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        found = ROW.match(line)
        if found:
            name, version, keys = found.groups()
            listed = KEY.findall(keys)
            rows[name] = (int(version), {k for k, _ in listed}, {k for k, star in listed if star})
    return rows


def ok(*args: str) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (args[:2], result.output, result.exception)
    return result


def one(result: Any) -> dict[str, Any]:
    (line,) = [x for x in result.stdout.splitlines() if x.strip()]
    return json.loads(line)


def read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every output the page lists, made by the commands: name -> the JSON object."""
    tmp = tmp_path_factory.mktemp("schemas")
    got: dict[str, dict[str, Any]] = {}
    with FakeOpenAIServer(deterministic=True) as server:
        llm = ["--base-url", server.base_url, "--cache-dir", str(tmp / "cache"), "--parse-retries", "3"]
        got["anchor llm ping --json"] = one(ok("llm", "ping", "--json", "--base-url", server.base_url))
        got["anchor warm-up --json"] = one(ok("warm-up", "--json"))

        space = tmp / "spaces" / "noodles" / "space.json"
        got["anchor build --json"] = one(ok("build", *SCENARIO, "--out", str(space), *TINY, "--json", *llm))
        got["SPACE.json"] = read(space)
        got["anchor infer --json"] = one(ok("infer", "--space", str(space), "-c", CONDITION, "--json", *llm))
        got["anchor explain --json"] = one(ok("explain", "--space", str(space), "-c", CONDITION, "--out",
                                              str(tmp / "page.html"), "--json", *llm))
        got["anchor demo --json"] = one(ok("demo", *TINY, "--json", *llm))

        runs = {}
        for method in ("vanilla", "cot"):
            runs[method] = tmp / "runs" / method
            metrics = one(ok("eval", "--dataset", "today", "--method", method, "--sample", "6", "--limit", "6",
                             "--out", str(runs[method]), "--json", *llm))
        got["anchor eval --json"] = metrics
        for name in ("config.json", "metrics.json", "sample.json"):
            got[f"DIR/{name}"] = read(runs["cot"] / name)
        got["anchor cost --json"] = one(ok("cost", str(runs["vanilla"]), str(runs["cot"]), "--json"))

        calibrator = tmp / "calibrator.json"
        got["anchor calibrate fit --json"] = one(ok("calibrate", "fit", str(runs["vanilla"]), "--out", str(calibrator),
                                                    "--json"))
        got["CALIBRATOR.json"] = read(calibrator)
        got["anchor calibrate report --json"] = one(ok("calibrate", "report", str(runs["vanilla"]), "--out",
                                                       str(tmp / "calibration"), "--json"))
        got["calibration-report.json"] = read(tmp / "calibration" / "calibration-report.json")
        got["DIR/calibration.json"] = read(runs["vanilla"] / "calibration.json")

        cases = ROOT / "src" / "anchor" / "data" / "examples" / "decisions.csv"
        got["anchor predict --check --json"] = one(ok("predict", str(cases), "--method", "vanilla", "--check",
                                                      "--json", *llm))
        got["anchor predict --json"] = one(ok("predict", str(cases), "--method", "vanilla", "--limit", "3", "--out",
                                              str(tmp / "predict"), "--json", *llm))

        got["anchor analyze clustering --json"] = one(ok("analyze", "clustering", "--spaces", str(space.parent.parent),
                                                  "--out", str(tmp / "clustering"), "--json"))
        got["clustering.json"] = read(tmp / "clustering" / "clustering.json")

        repro = ["reproduce", "--figures", "factors", "--quick", "--runs", "1", "--base-url", server.base_url,
                 "--out", str(tmp / "reproduce")]
        got["anchor reproduce --plan --json"] = one(ok(*repro, "--plan", "--json"))
        got["anchor reproduce --json"] = one(ok(*repro, "--json"))
        worlds, world_cases = tmp / "worlds.json", tmp / "worlds.csv"
        ok("truth", "make", "--structure", "naive-bayes", "--worlds", "1", "--conditions", "4", "--out", str(worlds),
           "--cases", str(world_cases))
        got["WORLDS.json"] = read(worlds)
        ok("predict", str(world_cases), "--method", "vanilla", "--out", str(tmp / "truth-run"), *llm)
        got["anchor truth score --json"] = one(ok("truth", "score", str(tmp / "truth-run"), "--json"))
        got["state.json"] = read(tmp / "reproduce" / "state.json")
        analysis = tmp / "reproduce" / "analyses" / "factors-common2sense-pairwise"
        got["factors.json"] = read(analysis / "factors.json")
        got["analyses/*/reproduce.json"] = read(analysis / "reproduce.json")
        # Resumed: the analysis is recognised as finished whatever its file's version, and asks nothing again.
        asked = server.completions
        assert one(ok(*repro, "--json"))["states"] == {"factors-common2sense-pairwise": "finished"}
        assert server.completions == asked
        got.update(service_bodies(server, tmp, space))
    return got


def service_bodies(server: FakeOpenAIServer, tmp: Path, space: Path) -> dict[str, dict[str, Any]]:
    """Each JSON body of anchor serve, from the real service (vanilla answers; the tiny space above stored)."""
    from tests.serve.helpers import SCENARIO, running, wait_for

    state = tmp / "serve-state"
    (state / "store" / "spaces").mkdir(parents=True)
    (state / "store" / "spaces" / "noodles-tiny.json").write_text(space.read_text())
    got: dict[str, dict[str, Any]] = {}
    case = {**SCENARIO, "condition": "The bus drivers strike.", "method": "vanilla"}
    with running(state, server, cache=tmp / "cache") as live, live.client() as http:
        got["POST /v1/predictions"] = http.post("/v1/predictions", json=case).json()
        got["POST /v1/predictions (cases)"] = http.post("/v1/predictions", json={"cases": [SCENARIO | {
            "condition": "Her bike has a flat tyre."}], "method": "vanilla"}).json()
        got["GET /v1/spaces"] = http.get("/v1/spaces").json()
        got["GET /v1/spaces/{id}"] = http.get("/v1/spaces/noodles-tiny").json()
        job = http.post("/v1/jobs?method=vanilla&id=schema-job", headers={"Content-Type": "text/csv"},
                        content=b"outcome1,outcome2,condition\nIt rains.,It is dry.,Clouds gather.\n").json()
        wait_for(lambda: http.get("/v1/jobs/schema-job").json()["state"] == "done", what="the job")
        got["GET /v1/jobs/{id}"] = http.get(f"/v1/jobs/{job['id']}").json()
        got["GET /v1/jobs"] = http.get("/v1/jobs").json()
        got["GET /v1/methods"] = http.get("/v1/methods").json()
        got["GET /healthz"] = http.get("/healthz").json()
        got["any error"] = http.get("/v1/jobs/no-such-job").json()
    got["STATE/jobs/ID/job.json"] = read(state / "jobs" / "schema-job" / "job.json")
    got["STATE/answers/ID.json"] = read(state / "answers" / f"{got['POST /v1/predictions']['id']}.json")
    return got


#: Files these tests do not make (BIRD's need torch and many requests; the retrieval and estimator analyses
#: many runs): their keys and version are their models' (the same classes write them).
MODELS = {"DIR/bird/*.json": BirdModel, "DIR/bird-on-anchor/*.json": TransplantArtefact,
          "retrieval.json": RetrievalAnalysis, "estimator.json": EstimatorAnalysis,
          # The benchmark takes minutes; its results.json and --json are BenchResults (tests/truth run a tiny one).
          "anchor truth bench --json": BenchResults, "BENCH/results.json": BenchResults}


def test_the_page_and_this_test_cover_the_same_outputs(outputs):
    rows = documented()
    assert set(rows) == set(outputs) | set(MODELS)
    # Every command's own object is on the page, at the version the code gives it.
    for command, version in JSON_OUTPUTS.items():
        assert rows[f"anchor {command} --json"][0] == version, command
    for body, version in SERVICE_BODIES.items():
        assert rows[body][0] == version, body


@pytest.mark.parametrize("name", sorted(documented()))
def test_each_output_carries_its_documented_schema_version_and_keys(outputs, name):
    version, keys, optional = documented()[name]
    if name in MODELS:
        model = MODELS[name]
        assert model.model_fields["schema_version"].default == version
        assert set(model.model_fields) == keys
        return
    obj = outputs[name]
    assert obj["schema_version"] == version
    assert set(obj) <= keys, f"not on the page: {sorted(set(obj) - keys)}"
    assert keys - optional <= set(obj), f"on the page, not in the output: {sorted(keys - optional - set(obj))}"


def test_the_cost_comparison_keeps_the_renamed_calls_for_one_version(outputs):
    doc = outputs["anchor cost --json"]
    assert doc["schema_version"] == 2 and "calls" in doc["deprecated"]
    rows = [*doc["per_scenario"]["phases"].values(), doc["per_scenario"]["total"], *doc["stages"].values(),
            *doc["scenarios"].values()]
    assert rows
    for row in rows:
        for side in ("a", "b"):
            # What version 1 called calls: every request sent with a known outcome, retries included.
            assert row[side]["calls"] == row[side]["attempts"] and "requests" in row[side]
        assert "calls" in row["ratio"] and "requests" in row["ratio"]


def test_json_for_machines_without_a_schema_version_is_refused(capsys):
    with pytest.raises(AssertionError, match="schema_version"):
        emit_json({"answer": 1})
    emit_json({"answer": 1}, "llm ping")
    assert json.loads(capsys.readouterr().out) == {"schema_version": JSON_OUTPUTS["llm ping"], "answer": 1}
