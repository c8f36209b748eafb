"""The HTML pages against markup in every string that comes from outside (the data, the LLM, the
server): scenario, outcomes, themes, factors, latent names, conditions, claims, ids, reasons and
model names all show as text and never as markup; and a fact-checking run's index names the claim
each row checks."""

from __future__ import annotations

import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from anchor.audit import explain_html, space_html
from anchor.evaluation.datasets import scenario_key
from anchor.evaluation.report import write_run_index
from anchor.llm.client import LLMClient
from anchor.llm.ledger import CostLedger
from anchor.llm.scripted import ScriptedBackend
from anchor.pipeline import Anchor
from anchor.rundir.records import Prediction, RunConfig
from anchor.space.io import save_space
from anchor.types import LLMIdentity, Scenario
from tests.conftest import build_space
from tests.helpers import ScriptedLLM


def evil(where: str) -> str:
    """An outside string that is also markup: shown as text, it reads exactly like this."""
    return f'{where} <b data-injected="{where}">bold</b> & <script>alert("{where}")</script>'


PLACES = ("scenario", "outcome1", "outcome2", "theme", "factor", "latent", "condition", "id", "reason", "model")


class _Page(HTMLParser):
    """The text of a page, apart from script bodies, and the elements and scripts that came from data."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.injected: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):  # noqa: ANN001
        if any(name == "data-injected" for name, _ in attrs):
            self.injected.append(tag)
        self._in_script = tag == "script"

    def handle_endtag(self, tag):  # noqa: ANN001
        self._in_script = False

    def handle_data(self, data):  # noqa: ANN001
        if self._in_script:
            if "alert(" in data:
                self.injected.append("script")
        else:
            self.text.append(data)


def read_page(html_text: str) -> str:
    """The page's text (whitespace collapsed); fails if data became an element or a script."""
    parser = _Page()
    parser.feed(html_text)
    assert parser.injected == [], parser.injected
    return " ".join(" ".join(parser.text).split())


@pytest.fixture(scope="module")
def evil_case(embedder):
    """A space, its scripted results and a fact-checking run directory, every outside string markup."""
    scenario = Scenario(text=evil("scenario"), outcome1=evil("outcome1"), outcome2=evil("outcome2"))
    space = build_space(embedder, [(evil("theme"), [evil("factor"), "The water is hot."])], ["The pot is small."],
                        labels={evil("factor"): "outcome1", "The water is hot.": "outcome1"}, scenario=scenario)
    space.llm = LLMIdentity(backend="openai-compatible", model=evil("model"))
    script = ScriptedLLM(select=lambda condition, candidates: list(candidates)[:2],
                         partition=lambda texts: [{"name": evil("latent"), "factors": list(texts)}])
    client = LLMClient(ScriptedBackend(script), cache=None, ledger=CostLedger())
    results = Anchor(client=client, embedder=embedder).infer(space, [evil("condition"), "The water boils."])
    return space, results


def test_every_outside_string_is_text_on_every_page(evil_case, tmp_path):
    space, results = evil_case
    assert [lat.name for lat in results[0].latents] == [evil("latent")]  # the script ran as planned
    key = scenario_key(space.scenario)
    run = tmp_path / "run"
    save_space(space, run / "spaces" / f"{key}.json")
    config = RunConfig(anchor_version="0.1.0", dataset="factcheck", data_sha256="0" * 64, kind="factcheck",
                       method="anchor", runs=1, seed=0, llm={"backend": "openai-compatible", "model": evil("model")})
    (run / "config.json").write_text(config.model_dump_json(), encoding="utf-8")
    preds = [Prediction(run=0, id=evil("id"), seed=0, kind="factcheck", label=1, p_outcome1=results[0].p_outcome1,
                        prediction=1),
             Prediction(run=0, id="plain", seed=0, kind="factcheck", label=2, unknown=True, status="abstained",
                        error=evil("reason"))]
    (run / "predictions.jsonl").write_text("".join(p.model_dump_json() + "\n" for p in preds), encoding="utf-8")
    traces = [{"run": 0, "id": p.id, "side": 0, "condition": r.condition, "space": key,
               "result": r.model_dump(mode="json")} for p, r in zip(preds, results, strict=True)]
    (run / "traces.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces), encoding="utf-8")
    written = write_run_index(run)

    # In a fact-checking run the claim is outcome 1; the index takes it from the space here (the data
    # file the run names is not there).
    pages = {
        "space": (space_html(space), ("scenario", "outcome1", "outcome2", "theme", "factor", "model")),
        "explain": (explain_html(space, results), ("scenario", "outcome1", "outcome2", "theme", "factor", "latent",
                                                   "condition")),
        "index": (written.index.read_text(encoding="utf-8"), ("outcome1", "id", "condition", "reason", "model")),
        "instance": (written.pages[0].read_text(encoding="utf-8"), ("outcome1", "id", "condition", "latent",
                                                                    "theme", "factor", "outcome2")),
        "space page": (written.space_pages[0].read_text(encoding="utf-8"), ("scenario", "theme", "factor", "model")),
    }
    for name, (html_text, expected) in pages.items():
        text = read_page(html_text)
        for where in expected:
            assert " ".join(evil(where).split()) in text, (name, where)
    assert {where for _, expected in pages.values() for where in expected} == set(PLACES)


def write_factcheck_run(run: Path, rows: list[dict], preds: list[Prediction]) -> None:
    data = run.parent / "claims.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    config = RunConfig(anchor_version="0.1.0", dataset="factcheck", data_path=str(data),
                       data_sha256=hashlib.sha256(data.read_bytes()).hexdigest(), kind="factcheck",
                       method="vanilla", runs=1, seed=0, llm={"backend": "openai-compatible", "model": "m"})
    run.mkdir(parents=True)
    (run / "config.json").write_text(config.model_dump_json(), encoding="utf-8")
    (run / "predictions.jsonl").write_text("".join(p.model_dump_json() + "\n" for p in preds), encoding="utf-8")


def test_a_fact_checking_index_shows_the_claim_and_the_reason_for_no_answer(tmp_path):
    rows = [{"claim": "The bridge opened in 1932.", "label": "SUPPORTED", "evidence": ["It opened in 1932."]},
            {"claim": "The bridge is made of wood.", "label": "REFUTED", "evidence": ["It is a steel bridge."]}]
    preds = [Prediction(run=0, id="claims:0", seed=0, kind="factcheck", label=1, p_outcome1=0.95, prediction=1),
             Prediction(run=0, id="claims:1", seed=0, kind="factcheck", label=2, unknown=True, status="abstained",
                        error="the model said it cannot tell")]
    run = tmp_path / "run"
    write_factcheck_run(run, rows, preds)
    result = write_run_index(run)
    html_text = result.index.read_text(encoding="utf-8")
    heads = re.findall(r"<th(?: [^>]*)?>(.*?)</th>", html_text.split("</thead>")[0])
    assert heads == ["id", "claim", "evidence", "gold", "prediction", "probabilities", "unknown", "reason", "result",
                     ""]
    assert [r.claim for r in result.rows] == [r["claim"] for r in rows]
    text = read_page(html_text)
    assert "claims:0 The bridge opened in 1932. It opened in 1932. supported supported (P > 0.9)" in text
    assert ("claims:1 The bridge is made of wood. It is a steel bridge. not supported unknown P(O1) – abstained "
            "the model said it cannot tell unknown") in text
