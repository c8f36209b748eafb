"""ANCHOR through the service, against a deterministic test server: a space built on request (202, then
stored), answers equal to `anchor infer`'s on the stored space, the explanation page, and the store shared
with `anchor predict --spaces` (which then builds nothing)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from tests.fakeserver import FakeOpenAIServer
from tests.serve.helpers import SCENARIO, running, wait_for

pytestmark = pytest.mark.usefixtures("clean_anchor_env")
runner = CliRunner()
OTHER = {"scenario": "A bakery decides what to bake on Sunday.", "outcome1": "It bakes bread.",
         "outcome2": "It bakes cakes."}


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-anchor")
    with FakeOpenAIServer(deterministic=True) as server, running(root / "state", server) as service:
        yield service, server, root


@pytest.fixture(scope="module")
def built(live):
    """The space of SCENARIO, built through POST /v1/spaces (202, then polled until stored)."""
    service, _, _ = live
    with service.client() as http:
        started = http.post("/v1/spaces", json={**SCENARIO, "wait": 0})
        assert started.status_code == 202, started.text
        location = started.headers["location"]
        wait_for(lambda: http.get(location).status_code == 200, what="the space to be built")
        space = http.get(location).json()
    return started, space


def test_a_space_is_built_on_request_and_stored_where_predict_finds_it(live, built):
    service, _, _ = live
    started, space = built
    assert started.json()["state"] == "building" and started.headers["location"].startswith("/v1/spaces/")
    assert space["state"] == "stored" and space["schema_version"] == 1 and space["factors"]
    assert "embeddings" not in space and space["scenario"]["outcome1"] == SCENARIO["outcome1"]
    path = service.service.settings.store_dir / "spaces" / f"{space['id']}.json"
    assert path.exists()
    with service.client() as http:
        listing = http.get("/v1/spaces").json()
        again = http.post("/v1/spaces", json=SCENARIO)  # stored: nothing to build
        page = http.get(f"/v1/spaces/{space['id']}/page")
    assert [s["id"] for s in listing["spaces"]] == [space["id"]] and listing["building"] == []
    assert again.status_code == 200 and again.json()["id"] == space["id"]
    assert page.status_code == 200 and space["factors"][0]["text"].split()[0] in page.text


def test_a_new_scenario_answers_202_while_its_space_is_built_then_the_answer(live):
    service, _, _ = live
    with service.client() as http:
        first = http.post("/v1/predictions", json={**OTHER, "condition": "Flour is cheap this week.", "wait": 0})
        assert first.status_code == 202, first.text
        body = first.json()
        assert body["state"] == "pending" and "factor space" in body["waiting_for"]
        wait_for(lambda: http.get(first.headers["location"]).status_code == 200, what="the answer")
        done = http.get(first.headers["location"]).json()
    assert done["state"] == "done" and done["space"] and done["links"]["space"] == f"/v1/spaces/{done['space']}"


def test_answers_equal_anchor_infer_on_the_stored_space_and_explain_themselves(live, built, tmp_path):
    service, server, _ = live
    _, space = built
    conditions = ["Heavy rain is forecast for the whole morning.", "The bus drivers are on strike.",
                  "Her bike has a flat tyre."]
    with service.client() as http:
        answers = http.post("/v1/predictions", json={"cases": [{**SCENARIO, "condition": c} for c in conditions]})
        assert answers.status_code == 200, answers.text
        answers = answers.json()["predictions"]
        page = http.get(answers[0]["links"]["explanation"])
    path = service.service.settings.store_dir / "spaces" / f"{space['id']}.json"
    # anchor infer on the stored space, with a cache of its own: every request asked again of the server.
    args = ["infer", "--space", str(path), "--base-url", server.base_url, "--cache-dir", str(tmp_path / "own"), "--json"]
    result = runner.invoke(app, [*args, *[a for c in conditions for a in ("-c", c)]])
    assert result.exit_code == 0, result.output
    infer = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    for answer, expected in zip(answers, infer, strict=True):
        assert answer["space"] == space["id"]
        assert answer["p_outcome1"] == expected["p_outcome1"]
        assert answer["unknown"] == expected["unknown"]
        assert [(f["id"], f["phi"]) for f in answer["factors"]] == [(f["id"], f["phi"]) for f in expected["factors"]]
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert conditions[0] in page.text and "Naive Bayes" in page.text


def test_anchor_predict_with_the_store_builds_nothing_and_answers_the_same(live, built, tmp_path):
    service, server, root = live
    _, space = built
    condition = "A colleague offers her a lift."
    with service.client() as http:
        online = http.post("/v1/predictions", json={**SCENARIO, "condition": condition}).json()
    cases = tmp_path / "cases.csv"
    cases.write_text("id,scenario,outcome1,outcome2,condition\n"
                     f"r1,{SCENARIO['scenario']},{SCENARIO['outcome1']},{SCENARIO['outcome2']},{condition}\n")
    requests_before = server.completions
    result = runner.invoke(app, ["predict", str(cases), "--base-url", server.base_url, "--sizes", "quick",
                                 "--cache-dir", str(root / "cache"), "--spaces", str(service.service.settings.store_dir),
                                 "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert server.completions == requests_before  # the same cache, and the space from the store: nothing asked
    record = json.loads((tmp_path / "run" / "predictions.jsonl").read_text())
    assert record["sides"][0]["artefact"] == space["id"]
    assert not list((tmp_path / "run").glob("spaces/*.json"))  # nothing built
    assert record["p_outcome1"] == online["p_outcome1"]


@pytest.mark.parametrize("method", ["anchor", "vanilla"])
def test_online_answers_are_made_under_the_configuration_anchor_predict_records(live, built, tmp_path, method):
    """The configuration the online worker answers under equals the config.json `anchor predict` writes for
    the same settings, but for what names its cases file and command: an answer online and a row of a
    predict run (or a job) are the same computation."""
    import asyncio

    from anchor.rundir import RunDirectory

    service, server, root = live
    s = service.service
    condition = "The forecast says it will be windy."
    with service.client() as http:
        online = http.post("/v1/predictions", json={**SCENARIO, "condition": condition, "method": method})
    assert online.status_code == 200, online.text
    worker = asyncio.run(s.engine.worker(method, None, None))  # made by the answer above
    cases = tmp_path / "cases.csv"
    cases.write_text("id,scenario,outcome1,outcome2,condition\n"
                     f"r1,{SCENARIO['scenario']},{SCENARIO['outcome1']},{SCENARIO['outcome2']},{condition}\n")
    result = runner.invoke(app, ["predict", str(cases), "--method", method, "--base-url", server.base_url,
                                 "--sizes", "quick", "--cache-dir", str(root / "cache"),
                                 "--spaces", str(s.settings.store_dir), "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    recorded = RunDirectory(tmp_path / "run").read_config()
    file_only = {"data_path", "data_sha256", "cases", "command", "spaces_from", "schema_version"}
    assert worker.config.model_dump(exclude=file_only) == recorded.model_dump(exclude=file_only)
    if method == "anchor":
        assert worker.config.embedder and worker.config.embedder["dimension"]


def test_every_row_of_a_job_links_to_its_explanation_whatever_its_id(live, built):
    """Ids holding '/', '%', '?', '#', spaces or other scripts: each row's link on the job's page opens its
    explanation (a '/' in an id once gave a link that matched no route)."""
    import csv
    import html
    import io
    import re

    service, _, _ = live
    ids = ["a/b", "50%", "what?", "#1", "with space", "ünï/ç", "a/explanation", "%2F"]
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["id", "scenario", "outcome1", "outcome2", "condition"])
    writer.writerows([i, SCENARIO["scenario"], SCENARIO["outcome1"], SCENARIO["outcome2"], f"Reading number {n}."]
                     for n, i in enumerate(ids))
    with service.client() as http:
        sent = http.post("/v1/jobs?id=odd-ids", content=text.getvalue().encode(), headers={"Content-Type": "text/csv"})
        assert sent.status_code == 202, sent.text
        wait_for(lambda: http.get("/v1/jobs/odd-ids").json()["state"] == "done", what="the job")
        page = http.get("/jobs/odd-ids").text
        links = {html.unescape(row): html.unescape(href) for row, href in
                 re.findall(r'<tr data-row="([^"]*)">.*?<a href="([^"]*)">explanation</a>', page)}
        opened = {row: http.get(href) for row, href in links.items()}
    assert sorted(links) == sorted(ids)
    for row, answer in opened.items():
        assert answer.status_code == 200, (row, links[row], answer.text[:300])
        assert f"Row <code>{html.escape(row)}</code>" in answer.text
