"""`anchor analyze` end to end against the local OpenAI-compatible server, with scripted answers so
that every number in the results is known in advance.

The script (tests.helpers.ScriptedLLM behind the HTTP server) builds one Today scenario's space
from made-up words that share nothing with the condition, so BM25 finds no candidate while the
vector search finds them all; every factor is selected and kept, and phi is chosen per factor.
Runs use --no-cbn, so P(O1) is the Naive Bayes posterior of the phis, and --no-cluster with
K2 = 8, so every factor of the space is a candidate.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.llm.scripted import ScriptedRequest
from anchor.rundir.records import RunConfig
from anchor.space.io import load_space
from tests.fakeserver import FakeOpenAIServer
from tests.helpers import ScriptedLLM

runner = CliRunner()

WORDS = ["zorblax quimble", "frindle wabbet", "snorkum plibber", "vorpal gunkle",
         "blicket tazzle", "mimsy borogove", "grommish flurb", "wuggle snaffin"]
FIRST, SECOND = WORDS[:4], WORDS[4:]
BASE = ["--dataset", "today", "--limit", "1", "--batch-size", "4", "--vote-samples", "1", "--no-cluster",
        "--no-cbn", "--dedup-threshold", "0.99", "--vote-ratio", "0.3", "--json"]
SLICE = [*BASE, "--k2", "8"]


#: The tests pass every setting as a flag: variables of the user's shell must not leak in.
pytestmark = pytest.mark.usefixtures("clean_anchor_env")


def http_script(script: ScriptedLLM):
    """The fake server's responder: the request as ScriptedLLM sees it, answered as JSON."""
    lock = threading.Lock()

    def answer(body: dict) -> str:
        name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
        request = ScriptedRequest(messages=body["messages"], schema_name=name, json_schema=None,
                                  temperature=body.get("temperature") or 0.0, max_tokens=body.get("max_tokens") or 0,
                                  seed=body.get("seed"), top_logprobs=None)
        with lock:
            return json.dumps(script(request))

    return answer


def two_rounds(phi) -> ScriptedLLM:
    return ScriptedLLM(rounds=[list(FIRST), list(SECOND)], phi=phi)


def invoke(*args: str):
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (result.stderr, result.exception)
    return result


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def assert_files(out: Path, name: str) -> None:
    for suffix in ("json", "md", "png"):
        assert (out / f"{name}.{suffix}").stat().st_size > 200, suffix
    assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"({name}.png)" in (out / f"{name}.md").read_text()


# --------------------------------------------------------------------------- factors (+ clustering on its spaces)


@pytest.fixture(scope="module")
def factors_run(tmp_path_factory):
    """Factors 1-4 argue for O1 (phi 0.9), factors 5-8 more strongly for O2 (phi 0.05): the first
    N factors give O1 (correct) up to N = 6 (odds 9^4 / 19^2 > 1) and O2 at N = 8 (9^4 / 19^4)."""
    tmp = tmp_path_factory.mktemp("factors")
    with FakeOpenAIServer(responder=http_script(two_rounds(lambda t: 0.9 if t in FIRST else 0.05))) as server:
        args = ["analyze", "factors", "--base-url", server.base_url, "--cache-dir", str(tmp / "cache"), "--out",
                str(tmp / "out"), "--n-target", "8", "--max-rounds", "2", "--points", "4", *SLICE]
        first = invoke(*args)
        requests = server.completions
        again = invoke(*args)  # resumed: every cell is finished, nothing is asked again
        assert server.completions == requests
    return tmp / "out", json.loads(first.stdout), json.loads(again.stdout)


def test_factors_scores_per_factor_count(factors_run):
    out, result, again = factors_run
    assert_files(out, "factors")
    assert read(out / "factors.json") == {k: v for k, v in result.items() if k != "files"}
    assert result["built_sizes"] == [8]
    points = {p["n_factors"]: p for p in result["points"]}
    assert sorted(points) == [2, 4, 6, 8]
    assert {n: p["scores"]["score"] for n, p in points.items()} == {2: 1.0, 4: 1.0, 6: 1.0, 8: 0.0}
    assert {n: p["scores"]["unknown_rate"] for n, p in points.items()} == {2: 0.0, 4: 0.0, 6: 0.0, 8: 0.0}
    assert {n: p["mean_searchable"] for n, p in points.items()} == {2: 2.0, 4: 4.0, 6: 6.0, 8: 8.0}
    assert all(p["scores"]["metric"] == "accuracy" for p in points.values())
    assert again["points"] == result["points"]
    # One build (cell full); the smaller cells reuse its space, truncated, and record N.
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["full", "n2", "n4", "n6"]
    assert not (out / "runs" / "n4" / "spaces").exists()
    config = RunConfig.model_validate_json((out / "runs" / "n4" / "config.json").read_text())
    # Named from the cell's own directory, so that the analysis's folder can be moved.
    assert config.max_factors == 4 and (config.spaces_from, config.spaces_from_base) == ("../full", "run")
    assert config.spaces_source(out / "runs" / "n4").resolve() == (out / "runs" / "full").resolve()
    traces = [json.loads(line) for line in (out / "runs" / "n4" / "traces.jsonl").read_text().splitlines()]
    assert sorted(f["text"] for f in traces[0]["result"]["factors"]) == sorted(FIRST)


def test_clustering_reads_stored_spaces_without_any_llm_call(factors_run, tmp_path, monkeypatch):
    out, _, _ = factors_run
    with FakeOpenAIServer() as server:
        monkeypatch.setenv("ANCHOR_LLM_BASE_URL", server.base_url)  # where a stray request would go
        result = invoke("analyze", "clustering", "--spaces", str(out), "--out", str(tmp_path / "clu"), "--json")
        assert server.completions == 0
    assert_files(tmp_path / "clu", "clustering")
    data = json.loads(result.stdout)
    (space,) = data["spaces"]
    assert space["dataset"] == "today" and space["n_factors"] == 8 and space["n_distinct"] == 8
    scores = {s["algorithm"]: s for s in space["scores"]}
    assert list(scores) == ["hdbscan", "dbscan", "kmeans", "agglomerative"]
    # The fixed-k rule: round(sqrt(8 / 2)) = 2 clusters for KMeans and Agglomerative.
    assert scores["kmeans"]["params"]["k"] == 2 and scores["kmeans"]["n_clusters"] == 2
    assert scores["agglomerative"]["n_clusters"] == 2
    assert {(s["dataset"], s["algorithm"]) for s in data["summary"]} == {
        ("today", a) for a in ("hdbscan", "dbscan", "kmeans", "agglomerative")}


def test_clustering_refuses_a_folder_without_spaces(tmp_path):
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, ["analyze", "clustering", "--spaces", str(tmp_path / "empty"), "--out",
                                 str(tmp_path / "clu")])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "no factor spaces found" in result.stderr


# --------------------------------------------------------------------------- retrieval


def test_retrieval_backends_and_k_settings(tmp_path):
    """Every factor argues for O1: the vector search finds them and answers O1 for every (K1, K2);
    BM25 finds no factor sharing a word with the condition, so it leaves it unknown."""
    script = ScriptedLLM(rounds=[list(FIRST)], phi=lambda t: 0.9)
    with FakeOpenAIServer(responder=http_script(script)) as server:
        result = invoke("analyze", "retrieval", "--base-url", server.base_url, "--cache-dir", str(tmp_path / "cache"),
                        "--out", str(tmp_path / "out"), "--n-target", "4", "--max-rounds", "1",
                        "--retrievers", "knn", "--retrievers", "bm25", *BASE)
    out = tmp_path / "out"
    assert_files(out, "retrieval")
    data = json.loads(result.stdout)
    assert data["retrievers"] == ["knn", "bm25"] and data["k_settings"] == [[2, 3], [3, 5], [4, 8]]
    cells = {(c["retriever"], c["k1"], c["k2"]): c["scores"] for c in data["cells"]}
    assert len(cells) == 6
    for (name, _, _), scores in cells.items():
        expected = (0.0, 1.0) if name == "knn" else (1.0, 0.0)
        assert (scores["unknown_rate"], scores["score"]) == expected, name
    # The backend and (K1, K2) are recorded in each cell's config.json and in its traces.
    config = RunConfig.model_validate_json((out / "runs" / "bm25-k4-8" / "config.json").read_text())
    mapping = config.anchor_config["mapping"]
    assert (mapping["retriever"], mapping["k1"], mapping["k2"]) == ("bm25", 4, 8)
    trace = json.loads((out / "runs" / "bm25-k4-8" / "traces.jsonl").read_text().splitlines()[0])
    assert trace["result"]["mapping"]["retriever"] == "bm25" and trace["result"]["unknown"]
    knn = json.loads((out / "runs" / "knn-k2-3" / "traces.jsonl").read_text().splitlines()[0])
    assert len(knn["result"]["mapping"]["candidates"]) == 3  # K2 = 3 of the 4 factors
    # Only the first cell built the space.
    assert [p.parent.name for p in (out / "runs").glob("*/spaces")] == ["knn-k2-3"]


def test_unknown_retriever_is_one_line(tmp_path):
    for args in (["analyze", "retrieval", "--retrievers", "annoy"], ["eval", "--dataset", "today", "--retriever",
                                                                      "annoy"]):
        result = runner.invoke(app, [*args, "--out", str(tmp_path / "x")])
        assert result.exit_code == 2, args
        assert result.stderr.count("\n") == 1 and "'annoy' is not one of" in result.stderr
        assert "--retriever" in result.stderr
    assert not (tmp_path / "x").exists()


def test_retrieval_refuses_the_settings_it_varies(tmp_path):
    result = runner.invoke(app, ["analyze", "retrieval", "--dataset", "today", "--k1", "2", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "--k1" in result.stderr and "varies" in result.stderr


# --------------------------------------------------------------------------- estimator


def test_estimator_with_two_servers(tmp_path):
    """The main model says phi = 0.9 for the four factors, the estimator 0.2: disjoint samples, so
    JS = 1 bit, Wasserstein = 0.7, KS statistic 1 with the exact p-value 2 / C(8, 4) = 1/35."""
    main = two_rounds(lambda t: 0.9)
    other = two_rounds(lambda t: 0.2)
    with FakeOpenAIServer(responder=http_script(main)) as a, \
            FakeOpenAIServer(responder=http_script(other), model="judge-b") as b:
        result = invoke("analyze", "estimator", "--base-url", a.base_url, "--estimator-base-url", b.base_url,
                        "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out"), "--n-target", "4",
                        "--max-rounds", "1", *SLICE)
        asked_b = [((r.get("response_format") or {}).get("json_schema") or {}).get("name") for r in b.requests]
    # The estimator only elicited phi; the space and the mapping came from the main model.
    assert asked_b == ["FactorProbabilities4"]  # one request: the four mapped factors
    out = tmp_path / "out"
    assert_files(out, "estimator")
    (c,) = json.loads(result.stdout)["comparisons"]
    assert (c["main_model"], c["estimator_model"]) == ("fake-model", "judge-b")
    assert c["main"]["score"] == 1.0 and c["estimator"]["score"] == 0.0 and c["difference"] == -1.0
    phi = c["phi"]
    assert (phi["n_main"], phi["n_estimator"]) == (4, 4)
    assert phi["mean_main"] == pytest.approx(0.9) and phi["mean_estimator"] == pytest.approx(0.2)
    assert phi["js_divergence"] == pytest.approx(1.0)
    assert phi["wasserstein"] == pytest.approx(0.7)
    assert phi["ks_statistic"] == 1.0 and phi["ks_pvalue"] == pytest.approx(1 / 35) and phi["significant"]
    assert any("1 of 1 condition(s)" in n for n in json.loads(result.stdout)["notes"])
    config = RunConfig.model_validate_json((out / "runs" / "estimator" / "config.json").read_text())
    assert config.estimator["model"] == "judge-b" and config.spaces_from == "../main"
    assert load_space(next((out / "runs" / "main" / "spaces").glob("*.json"))).llm.model == "fake-model"


def test_estimator_needs_its_server(tmp_path):
    result = runner.invoke(app, ["analyze", "estimator", "--dataset", "today", "--base-url", "http://127.0.0.1:9/v1",
                                 "--out", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "--estimator-base-url" in result.stderr
    same = runner.invoke(app, ["analyze", "estimator", "--dataset", "today", "--base-url", "http://127.0.0.1:9/v1",
                               "--estimator-base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "x")])
    assert same.exit_code == 2 and "same seed" in same.stderr
    assert not (tmp_path / "x").exists()


def test_estimator_key_is_redacted_from_the_recorded_command():
    from anchor.secrets import redact_argv

    assert redact_argv(["anchor", "--estimator-api-key", "sk-secret"]) == ["anchor", "--estimator-api-key", "***"]


# --------------------------------------------------------------------------- resuming older run directories


def test_runs_written_before_the_new_settings_still_resume():
    """A config.json without mapping.retriever, max_factors and estimator (an older version's) is
    read with their defaults, so the same command resumes it; a real change is still refused."""
    from anchor.config import AnchorConfig
    from anchor.evaluation.run_config import make_run_config
    from anchor.llm.settings import LLMSettings
    from anchor.runs.identity import first_difference, run_identity

    config = make_run_config(dataset="today", method="anchor", data_path=None, ablations=[], limit=2, runs=1, seed=0,
                             settings=LLMSettings(), anchor_config=AnchorConfig()).model_dump(mode="json")
    old = json.loads(json.dumps(config))
    del old["max_factors"], old["estimator"], old["anchor_config"]["mapping"]["retriever"]
    assert first_difference(run_identity(old), run_identity(config)) is None
    changed = json.loads(json.dumps(config))
    changed["anchor_config"]["mapping"]["retriever"] = "bm25"
    assert first_difference(run_identity(old), run_identity(changed)) == ("anchor_config.mapping.retriever", "knn", "bm25")
