"""The README is the front door and docs/ holds the rest: every relative link in README.md and in
docs/*.md must lead to a file that exists (and, with a #fragment, to a heading of that file, as
GitHub names it), every docs page must be reachable from the README and listed in docs/README.md,
and the README must stay short and keep the two set-up commands that CI and newcomers run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code, where brackets are not links."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def links(path: Path) -> list[str]:
    return LINK.findall(prose(path.read_text(encoding="utf-8")))


def local_links(path: Path) -> list[str]:
    return [t for t in links(path) if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.I)]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: markup dropped, lower case, punctuation removed, spaces
    turned into hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    broken = []
    for target in local_links(path):
        file_part, _, fragment = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target}: no heading #{fragment} in {dest.relative_to(ROOT)}")
    assert not broken, f"{path.relative_to(ROOT)}: " + "; ".join(broken)


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in local_links(README)}
    assert PAGES and not [p.name for p in PAGES if p.resolve() not in linked and p.name != "README.md"]


def test_the_docs_index_lists_every_page():
    index = DOCS / "README.md"
    listed = {(DOCS / t.partition("#")[0]).resolve() for t in local_links(index)}
    assert [p.name for p in PAGES if p.resolve() not in listed and p != index] == []


def test_readme_is_short_and_keeps_the_setup_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 220
    assert re.search(r"^make demo\b", text, re.M) and re.search(r"^make test\b", text, re.M)


def test_the_readme_picture_is_small():
    pictures = [t for t in local_links(README) if t.endswith(".png")]
    assert pictures, "the README shows one picture"
    for target in pictures:
        assert (README.parent / target).stat().st_size < 200_000, target


def test_the_checks_can_fail(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## A `flag`: here\n\nSee [x](missing.md), [y](#a-flag-here), [z](#nope), "
                    "`[not](a-link.md)`.\n\n```\n[nor](this.md)\n```\n", encoding="utf-8")
    assert local_links(page) == ["missing.md", "#a-flag-here", "#nope"]
    assert anchors(page) == {"title", "a-flag-here"}
    assert slug("`--abduction-window`: abduction rounds in flight") == "--abduction-window-abduction-rounds-in-flight"
