"""The pages in a real browser (headless Chromium): drawn without console errors or network requests,
and the run index filtering with JavaScript and showing every row without it. Skipped, saying why,
where Chromium is not installed."""

from __future__ import annotations

import os
import re
from pathlib import Path

from anchor.evaluation.report import write_run_index
from tests.audit.planned_case import (
    assert_drawn,
    dom_via_devtools,
    needs_chromium,
    one,
    render,
    section,
    texts,
)


@needs_chromium
def test_browser_detects_console_errors_and_network_requests(tmp_path):
    # The checks below must be able to fail: a page with a script error and a remote stylesheet.
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><head><link rel="stylesheet" href="https://cdn.invalid/x.css"></head>'
                   "<body><p>x</p><script>console.error('broken'); notAFunction();</script></body></html>",
                   encoding="utf-8")
    seen = render(bad.as_uri(), tmp_path)
    assert any("broken" in line for line in seen.console)
    assert any("Uncaught ReferenceError" in line for line in seen.console)
    assert seen.page_requests == ["https://cdn.invalid/x.css"]


@needs_chromium
def test_explanation_page_renders_in_chromium(case, page, tmp_path):
    _, (hot, cold, _), _ = case
    path = tmp_path / "explain.html"
    path.write_text(page, encoding="utf-8")
    shot = Path(os.environ.get("ANCHOR_SCREENSHOT_DIR", tmp_path)) / "explain.png"
    seen = render(path.as_uri(), tmp_path, screenshot=shot)
    assert seen.console == [] and seen.page_requests == []
    dom = seen.dom
    assert "<script" not in dom.lower()  # the escaped condition stayed text
    for ident, result in (("cond-1", hot), ("cond-2", cold)):
        html_text = section(dom, ident)
        assert len(texts(html_text, "data-stage")) == 10  # 5 in the strip, 5 funnel steps
        assert re.search(r'<svg class="network"', html_text)
        assert len(texts(html_text, "data-latent")) == len(result.latents)
        assert one(html_text, "data-model", "nb").startswith(f"Naive Bayes P(O1) = {result.nb:.3f}")
        assert f"{result.cbn:.3f}" in one(html_text, "data-model", "cbn")
        assert f"{result.p_outcome1:.3f}" in one(html_text, "data-model", "pooled")
    assert_drawn(shot)


@needs_chromium
def test_run_index_filters_in_chromium_and_shows_everything_without_javascript(run_dir, tmp_path):
    result = write_run_index(run_dir)
    url = result.index.as_uri()

    def visible(dom: str) -> list[str]:
        return re.findall(r'<tr class="\w+" data-status="(\w+)" data-state="\w+">', dom)  # rows without `hidden`

    with_js = render(url, tmp_path, screenshot=Path(os.environ.get("ANCHOR_SCREENSHOT_DIR", tmp_path)) / "index.png")
    assert with_js.console == [] and with_js.page_requests == []
    assert '<div class="filters" id="filters">' in with_js.dom  # the script revealed the boxes
    assert visible(with_js.dom) == ["correct", "wrong", "unknown", "unknown"]
    assert "4 of 4 rows shown" in with_js.dom

    only_wrong = render(url + "#wrong", tmp_path)
    assert only_wrong.console == []
    assert visible(only_wrong.dom) == ["wrong"]
    assert only_wrong.dom.count('hidden="">') == 3 and "1 of 4 rows shown" in only_wrong.dom

    # With JavaScript off every row shows (even when the address asks for a filter) and the
    # filter boxes, which could not work, stay hidden. The same load with JavaScript on is the
    # control: it filters.
    no_js = dom_via_devtools(url + "#wrong", tmp_path, javascript=False)
    assert visible(no_js) == ["correct", "wrong", "unknown", "unknown"]
    assert '<div class="filters" id="filters" hidden="">' in no_js
    assert visible(dom_via_devtools(url + "#wrong", tmp_path, javascript=True)) == ["wrong"]

    page_dom = render((run_dir / result.pages[0].relative_to(run_dir)).as_uri(), tmp_path)
    assert page_dom.console == [] and page_dom.page_requests == []
    assert len(texts(page_dom.dom, "data-latent")) == 3  # Heat, Safety (u1) and Money (u2)
