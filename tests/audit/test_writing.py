"""Writing the pages: the Python API, a path that cannot be written, and an explanation against an
OpenAI-compatible server."""

from __future__ import annotations

import re

import pytest

from anchor.audit import PageWriteError, space_html, space_page
from anchor.config import AnchorConfig
from anchor.llm.client import LLMClient
from anchor.llm.ledger import CostLedger
from anchor.llm.scripted import ScriptedBackend
from anchor.llm.settings import LLMSettings
from anchor.mapping.mapper import MappingConfig
from anchor.pipeline import Anchor
from tests.audit.planned_case import (
    COLD,
    HOT,
    KB,
    WT,
    assert_self_contained,
    expected_posteriors,
    make_script,
    one,
)
from tests.fakeserver import FakeOpenAIServer


def test_python_api_writes_the_pages(case, embedder, tmp_path):
    space, _, _ = case
    path = tmp_path / "out" / "space.html"
    assert space_page(space, path) == path.read_text(encoding="utf-8") == space_html(space)
    client = LLMClient(ScriptedBackend(make_script()), cache=None, ledger=CostLedger())
    target = tmp_path / "explain.html"
    html_text = Anchor(client=client, embedder=embedder, config=AnchorConfig()).explain(space, HOT, path=target)
    assert target.read_text(encoding="utf-8") == html_text
    nb, cbn, pooled = expected_posteriors([WT, KB])
    assert one(html_text, "data-model", "pooled").startswith(f"Pooled (linear opinion pool) P(O1) = {pooled:.3f}")
    assert f"Condition 1: {HOT}" in html_text and 'id="space"' in html_text


def test_unwritable_page_path_is_a_clear_error(case, tmp_path):
    space, _, _ = case
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    with pytest.raises(PageWriteError, match=r"a-file/space\.html: cannot write the page \("):
        space_page(space, tmp_path / "a-file" / "space.html")
    with pytest.raises(PageWriteError, match=r"cannot write the page \(Is a directory\)"):
        space_page(space, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # no temporary file left behind


def test_explain_against_an_openai_compatible_server(case, embedder, tmp_path):
    # The server answers with random JSON in the requested schemas; a vote threshold of 1 of 3
    # lets some of its selections through, so the page has real traces to show.
    space, _, _ = case
    out = tmp_path / "e.html"
    with FakeOpenAIServer(seed=3) as server:
        settings = LLMSettings(base_url=server.base_url, model="served-model", use_cache=False, parse_retries=3)
        engine = Anchor(settings=settings, embedder=embedder,
                        config=AnchorConfig(mapping=MappingConfig(vote_ratio=0.3)))
        html_text = engine.explain(space, [HOT, COLD], path=out)
        completions = server.completions
    assert [p.name for p in tmp_path.iterdir()] == ["e.html"] and out.read_text(encoding="utf-8") == html_text
    assert_self_contained(html_text)
    assert "127.0.0.1" not in html_text
    assert [one(html_text, "id", f"cond-{i}").split(" P(O1)")[0].split(" Unknown")[0] for i in (1, 2)] == [
        f"Condition 1: {HOT}", f"Condition 2: {COLD}"]
    # Every request the server answered is in one condition's cost table.
    totals = [int(re.search(r" total (\d+) ", one(html_text, "data-cost", f"cond-{i}")).group(1)) for i in (1, 2)]
    assert sum(totals) == completions > 0


