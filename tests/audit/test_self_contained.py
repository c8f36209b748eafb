"""Every page reads alone: nothing fetched from outside, every outside text escaped, no script run."""

from __future__ import annotations

from anchor.audit import space_html
from tests.audit.planned_case import EVIL, assert_self_contained, one


def test_pages_reference_nothing_external(case, page):
    space, _, _ = case
    for html_text in (page, space_html(space)):
        assert_self_contained(html_text)
    # The factor that quotes a URL still reads as one.
    assert "https&#58;//example.org/x" in page


def test_texts_are_escaped_and_nothing_executes(case, page):
    assert "<script" not in page.lower()  # the explanation page has no script of its own
    assert "&lt;script&gt;alert(&#x27;condition&#x27;)&lt;/script&gt; a cat sleeps nearby" in page
    assert "&lt;script&gt;alert(&#x27;factor&#x27;)&lt;/script&gt; starch &lt;b&gt;release&lt;/b&gt;" in page
    heading = one(page, "id", "cond-3").split(" Unknown")[0]
    assert heading == f"Condition 3: {EVIL}"


