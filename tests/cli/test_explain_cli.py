"""`anchor explain` and the HTML index of `anchor report`, from the command line, against the local
OpenAI-compatible server of tests/fakeserver.py.

The explanation tests script the server's answers (the planned case of tests/audit/planned_case.py, sent over
HTTP), so the posteriors the page must show are known. The report tests run `anchor eval` on a
tiny slice first, so the index reads exactly what the current runner writes.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.audit import space_html
from anchor.cli import app
from anchor.evaluation.datasets import load_dataset
from anchor.evaluation.report.run_index import page_name
from anchor.rundir.records import Prediction
from anchor.space.io import load_space, save_space
from tests.audit.planned_case import (
    COLD,
    EB,
    GP,
    HOT,
    KB,
    WT,
    assert_drawn,
    assert_self_contained,
    audit_space,
    expected_posteriors,
    make_script,
    needs_chromium,
    one,
    render,
    section,
    texts,
)
from tests.fakeserver import FakeOpenAIServer, random_from_schema
from tests.run_helpers import server_responder

runner = CliRunner()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in list(os.environ):
        if name.startswith("ANCHOR_") and name != "ANCHOR_SCREENSHOT_DIR":
            monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def space_file(embedder, tmp_path_factory) -> Path:
    return save_space(audit_space(embedder), tmp_path_factory.mktemp("space") / "s.json")


def server_args(server: FakeOpenAIServer, cache: Path) -> list[str]:
    return ["--base-url", server.base_url, "--cache-dir", str(cache), "--concurrency", "1"]


def assert_one_line_error(result, *needles: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert result.stdout == "" and "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# --------------------------------------------------------------------------- anchor explain


@pytest.fixture(scope="module")
def explained(space_file, tmp_path_factory):
    """`anchor explain --space s.json -c HOT -c COLD --out e.html` against the scripted server,
    then the same with --json (answered from the cache)."""
    work = tmp_path_factory.mktemp("explain")
    pages = work / "pages"
    with FakeOpenAIServer(model="served-model", responder=server_responder(make_script())) as server:
        args = ["explain", "--space", str(space_file), "-c", HOT, "-c", COLD, "--inference", "paper",
                *server_args(server, work / "cache")]
        human = runner.invoke(app, [*args, "--out", str(pages / "e.html")])
        requests = server.stats()["requests"]
        as_json = runner.invoke(app, [*args, "--out", str(pages / "again.html"), "--json"])
        requests_after = server.stats()["requests"]
    return pages, human, as_json, requests, requests_after


def test_explain_writes_one_self_contained_page_with_funnel_network_and_posteriors(explained):
    pages, human, _, requests, _ = explained
    assert human.exit_code == 0, (human.output, human.exception)
    assert requests > 0
    page = pages / "e.html"
    html_text = page.read_text(encoding="utf-8")
    assert_self_contained(html_text)
    assert "http://" not in html_text and "https://" not in html_text and "127.0.0.1" not in html_text
    for ident, cond, mapped in (("cond-1", HOT, [WT, KB]), ("cond-2", COLD, [GP, EB])):
        part = section(html_text, ident)
        assert part.startswith("<section") and cond in part
        assert len(texts(part, "data-stage")) == 10  # the stage strip and the funnel steps
        assert '<svg class="network"' in part
        nb, cbn, pooled = expected_posteriors(mapped)
        assert one(part, "data-model", "nb").startswith(f"Naive Bayes P(O1) = {nb:.3f}")
        assert f"{cbn:.3f}" in one(part, "data-model", "cbn")
        assert one(part, "data-model", "pooled").startswith(f"Pooled (linear opinion pool) P(O1) = {pooled:.3f}")
    # The readable output: one line per condition and where the page is, with its size.
    size = page.stat().st_size
    lines = [line for line in human.stdout.splitlines() if line.strip()]
    _, _, pooled_hot = expected_posteriors([WT, KB])
    assert lines[0].startswith(f"  P(O1) = {pooled_hot:.3f}, P(O2) = {1 - pooled_hot:.3f}  The water is")
    assert lines[-1] == f"wrote {page} ({size / 1000:.1f} kB; explanation of 2 condition(s)); open it in a browser"


def test_explain_json_names_the_page_and_the_answers(explained):
    pages, _, as_json, requests, requests_after = explained
    assert as_json.exit_code == 0, (as_json.output, as_json.exception)
    assert requests_after == requests  # every answer came from the cache
    obj = json.loads(as_json.stdout)
    page = pages / "again.html"
    assert obj["path"] == str(page) and obj["bytes"] == page.stat().st_size and obj["page"] == "explanation"
    assert [c["condition"] for c in obj["conditions"]] == [HOT, COLD]
    for c, mapped in zip(obj["conditions"], ([WT, KB], [GP, EB]), strict=True):
        nb, cbn, pooled = expected_posteriors(mapped)
        assert c["p_outcome1"] == pytest.approx(pooled) and c["nb"] == pytest.approx(nb)
        assert c["cbn"] == pytest.approx(cbn) and c["n_factors"] == 2 and not c["unknown"]
    _, _, pooled = expected_posteriors([GP, EB])
    assert one(section(page.read_text(encoding="utf-8"), "cond-2"), "data-model", "pooled").startswith(
        f"Pooled (linear opinion pool) P(O1) = {pooled:.3f}")


def test_explain_without_a_condition_writes_the_space_page_and_asks_nothing(space_file, tmp_path):
    with FakeOpenAIServer() as server:
        result = runner.invoke(app, ["explain", "--space", str(space_file), "--out", str(tmp_path / "sp.html"),
                                     *server_args(server, tmp_path / "cache"), "--json"])
        assert server.stats()["requests"] == 0
    assert result.exit_code == 0, (result.output, result.exception)
    html_text = (tmp_path / "sp.html").read_text(encoding="utf-8")
    assert html_text == space_html(load_space(space_file))
    obj = json.loads(result.stdout)
    assert obj["page"] == "space" and obj["conditions"] == [] and obj["n_factors"] == 9
    assert obj["bytes"] == len(html_text.encode("utf-8"))


@pytest.mark.parametrize(("out", "needles"), [
    ("a-dir", ["--out", "is a directory", "explain.html"]),
    ("a-file/e.html", ["--out", "a-file is not a directory"]),
])
@pytest.mark.parametrize("source", ["space", "scenario"])
def test_bad_out_is_one_line_before_any_request(space_file, tmp_path, out, needles, source):
    (tmp_path / "a-dir").mkdir()
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    given = (["--space", str(space_file)] if source == "space"
             else ["--scenario", "Noodles.", "--outcome1", "Hot water.", "--outcome2", "Warm water."])
    with FakeOpenAIServer() as server:
        result = runner.invoke(app, ["explain", *given, "-c", HOT, "--out", str(tmp_path / out),
                                     *server_args(server, tmp_path / "cache")])
        assert server.stats()["requests"] == 0
    assert_one_line_error(result, *needles)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-dir", "a-file"]


@pytest.mark.parametrize(("argv", "needles"), [
    (["-c", HOT], ["give --space FILE, or --scenario/--outcome1/--outcome2"]),
    (["--space", "{space}", "--scenario", "x", "--outcome1", "a", "--outcome2", "b"], ["not both"]),
    (["--space", "{space}", "--save-space", "{tmp}/x.json"], ["--save-space only applies when building first"]),
    (["--space", "{space}", "-c", HOT, "--no-nb", "--no-cbn"], ["--no-nb", "cannot be combined with --no-cbn"]),
    (["--space", "{tmp}/none.json"], ["none.json: no such file"]),
])
def test_usage_errors_are_one_line(space_file, tmp_path, argv, needles):
    argv = [a.format(space=space_file, tmp=tmp_path) for a in argv]
    with FakeOpenAIServer() as server:
        result = runner.invoke(app, ["explain", *argv, "--out", str(tmp_path / "e.html"),
                                     *server_args(server, tmp_path / "cache")])
        assert server.stats()["requests"] == 0
    assert_one_line_error(result, *needles)
    assert not (tmp_path / "e.html").exists()


def test_explain_builds_first_and_saves_the_space(tmp_path):
    # Random (schema-valid) answers from the server; a small flat build keeps it quick.
    with FakeOpenAIServer(deterministic=True) as server:
        result = runner.invoke(app, [
            "explain", "--scenario", "Cooking noodles.", "--outcome1", "Hot water is better.", "--outcome2",
            "Warm water is better.", "-c", "The stove is weak.", "--n-target", "5", "--batch-size", "3",
            "--max-rounds", "2", "--no-cluster", "--vote-ratio", "0.3", "--save-space", str(tmp_path / "sp.json"),
            "--out", str(tmp_path / "e.html"), "--json", *server_args(server, tmp_path / "cache")])
    assert result.exit_code == 0, (result.output, result.exception)
    obj = json.loads(result.stdout)
    space = load_space(tmp_path / "sp.json")
    assert obj["space_saved_to"] == str(tmp_path / "sp.json") and obj["n_factors"] == len(space.factors) > 0
    html_text = (tmp_path / "e.html").read_text(encoding="utf-8")
    assert_self_contained(html_text)
    assert "Condition 1: The stove is weak." in html_text and 'id="space"' in html_text
    assert html_text.count('data-cluster="') == len(space.clusters) == 1 and not space.params.cluster  # flat
    assert space.scenario.outcome1 == "Hot water is better."


# --------------------------------------------------------------------------- anchor report: the HTML index

TINY = ["--n-target", "6", "--batch-size", "3", "--max-rounds", "2", "--vote-ratio", "0.3"]


@pytest.fixture(scope="module")
def anchor_run(tmp_path_factory) -> Path:
    """A real `anchor eval` directory: ANCHOR on three Common2Sense pairs, against the server."""
    work = tmp_path_factory.mktemp("eval")
    out = work / "run"
    with FakeOpenAIServer(deterministic=True) as server:
        result = runner.invoke(app, ["eval", "--dataset", "common2sense-pairwise", "--method", "anchor", "--limit",
                                     "3", *TINY, "--out", str(out), "--json",
                                     *server_args(server, work / "cache")])
    assert result.exit_code == 0, (result.output, result.exception)
    return out


def read_predictions(run: Path) -> list[Prediction]:
    return [Prediction.model_validate_json(line)
            for line in (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]


def index_rows(html_text: str) -> list[tuple[str, str, str]]:
    """(data-status, data-state, id cell) per row of the index table."""
    return re.findall(r'<tr class="\w+" data-status="(\w+)" data-state="(\w+)"><td>([^<]*)</td>', html_text)


def test_report_writes_the_index_of_an_eval_directory(anchor_run, tmp_path):
    result = runner.invoke(app, ["report", str(anchor_run), "--out", str(tmp_path / "report")])
    assert result.exit_code == 0, (result.output, result.exception)
    index = anchor_run / "index.html"
    html_text = index.read_text(encoding="utf-8")
    preds = read_predictions(anchor_run)
    ids = [f"common2sense-pairwise:{i}" for i in range(3)]
    assert sorted(p.id for p in preds) == ids
    rows = index_rows(html_text)
    assert [r[2] for r in rows] == ids  # one row per instance, in dataset order
    by_id = {p.id: p for p in preds}
    for status, state, iid in rows:
        p = by_id[iid]
        expected = ("unknown" if p.unknown else "correct" if p.prediction == p.human else "wrong")
        assert (status, state) == (expected, p.status)
    # Every row links to its page; every page exists, shows both conditions of the pair and
    # links back; nothing in any of them is fetched from elsewhere.
    links = re.findall(r'<a href="([^"]+)">explain</a>', html_text)
    assert links == [f"explain/{page_name(0, i)}" for i in ids]
    pairs = {inst.id: inst for inst in load_dataset("common2sense-pairwise")}
    for link, iid in zip(links, ids, strict=True):
        page = (anchor_run / link).read_text(encoding="utf-8")
        inst = pairs[iid]
        assert f"Instance {iid} (run 0)" in page
        assert (f"Condition u1: {inst.condition1}" in page or f"Condition u1: {inst.condition1[:40]}" in page)
        assert '<a href="../index.html">' in page
        space_link = re.search(r'<a href="(space-[^"]+\.html)">', page).group(1)
        assert (anchor_run / "explain" / space_link).exists()
        assert_self_contained(page)
    assert_self_contained(html_text)
    assert "127.0.0.1" not in html_text
    size = index.stat().st_size
    counts = {s: sum(1 for r in rows if r[0] == s) for s in ("correct", "wrong", "unknown")}
    assert result.stderr.strip().splitlines()[-1] == (
        f"wrote {index} ({size / 1000:.1f} kB; 3 row(s): {counts['correct']} correct, {counts['wrong']} wrong, "
        f"{counts['unknown']} unknown; 3 explanation page(s))")


def test_report_no_html_writes_no_index(anchor_run, tmp_path):
    before = sorted(p.name for p in anchor_run.iterdir())
    result = runner.invoke(app, ["report", str(anchor_run), "--out", str(tmp_path / "r"), "--no-html"])
    assert result.exit_code == 0, (result.output, result.exception)
    assert sorted(p.name for p in anchor_run.iterdir()) == before
    assert "index.html" not in result.stderr


def test_index_of_a_baseline_run_tells_failed_from_answered(tmp_path):
    # vanilla on two pairs; the server answers the first pair's requests (schema-valid) and garbles
    # the second's, so that prediction fails: the index shows it as failed, with the reason. A
    # baseline writes no traces, so the rows have no pages but the dataset's condition texts.
    first, second = list(load_dataset("common2sense-pairwise"))[:2]

    def respond(body: dict) -> str:
        user = body["messages"][-1]["content"]
        if first.condition1 in user or first.condition2 in user:
            schema = body["response_format"]["json_schema"]["schema"]
            return json.dumps(random_from_schema(schema, random.Random(0)))
        return "not json at all"

    out = tmp_path / "run"
    with FakeOpenAIServer(responder=respond) as server:
        result = runner.invoke(app, ["eval", "--dataset", "common2sense-pairwise", "--method", "vanilla", "--limit",
                                     "2", "--parse-retries", "0", "--retries", "0", "--out", str(out), "--json",
                                     *server_args(server, tmp_path / "cache")])
    assert result.exit_code == 0, (result.output, result.exception)
    preds = {p.id: p for p in read_predictions(out)}
    assert preds[first.id].status == "ok" and preds[second.id].status == "failed"
    report = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "r")])
    assert report.exit_code == 0, (report.output, report.exception)
    html_text = (out / "index.html").read_text(encoding="utf-8")
    rows = index_rows(html_text)
    assert [(state, iid) for _, state, iid in rows] == [("ok", first.id), ("failed", second.id)]
    assert rows[1][0] == "unknown"
    assert "explain</a>" not in html_text and "no traces.jsonl" in html_text
    assert first.condition1 in html_text and second.condition2 in html_text  # texts from the dataset file
    failed_row = re.search(r'<tr class="unknown" data-status="unknown" data-state="failed">.*?</tr>', html_text,
                           re.S).group(0)
    assert '<span class="state failed">failed</span>' in failed_row
    assert re.search(r'<td class="err failed">condition \d failed: ', failed_row), failed_row
    assert "(of the unknown: 1 failed, 0 abstained)" in html_text


# --------------------------------------------------------------------------- in a real browser


@needs_chromium
def test_cli_pages_render_in_chromium(explained, anchor_run, tmp_path):
    pages = explained[0]
    shots = Path(os.environ.get("ANCHOR_SCREENSHOT_DIR", tmp_path))
    seen = render((pages / "e.html").as_uri(), tmp_path, screenshot=shots / "cli-explain.png")
    assert seen.console == [] and seen.page_requests == []
    for ident, mapped in (("cond-1", [WT, KB]), ("cond-2", [GP, EB])):
        part = section(seen.dom, ident)
        assert len(texts(part, "data-stage")) == 10 and '<svg class="network"' in part
        _, _, pooled = expected_posteriors(mapped)
        assert f"{pooled:.3f}" in one(part, "data-model", "pooled")
    assert_drawn(shots / "cli-explain.png")

    result = runner.invoke(app, ["report", str(anchor_run), "--out", str(tmp_path / "report")])
    assert result.exit_code == 0, (result.output, result.exception)
    index = render((anchor_run / "index.html").as_uri(), tmp_path, screenshot=shots / "cli-index.png")
    assert index.console == [] and index.page_requests == []
    assert "3 of 3 rows shown" in index.dom
    link = re.search(r'<a href="([^"]+)">explain</a>', index.dom).group(1)
    page = render((anchor_run / link).as_uri(), tmp_path)
    assert page.console == [] and page.page_requests == []
    assert len(texts(section(page.dom, "cond-1"), "data-stage")) == 10
    assert_drawn(shots / "cli-index.png")
