"""The reproduction report as a list of blocks, written out twice: as Markdown (``report.md``) and as
one self-contained HTML page (``report.html``), whose figures are embedded as data and which loads
nothing from anywhere (like the run index of :mod:`anchor.evaluation.report.index_page`)."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from anchor.audit.markup import esc, page
from anchor.audit.pages import footer

Align = str  # "l" or "r", one per column


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    anchor: str = ""


@dataclass(frozen=True)
class Para:
    text: str
    strong: bool = False


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    align: str = ""


@dataclass(frozen=True)
class Image:
    file: str
    """A PNG in the report's folder."""
    alt: str


Block = Heading | Para | Bullets | Table | Image


@dataclass
class Document:
    title: str
    blocks: list[Block] = field(default_factory=list)

    def heading(self, level: int, text: str, anchor: str = "") -> None:
        self.blocks.append(Heading(level, text, anchor))

    def para(self, text: str, strong: bool = False) -> None:
        self.blocks.append(Para(text, strong))

    def bullets(self, items: Sequence[str]) -> None:
        if items:
            self.blocks.append(Bullets(tuple(items)))

    def table(self, header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> None:
        self.blocks.append(Table(tuple(header), tuple(tuple(r) for r in rows), align or "l" * len(header)))

    def image(self, file: str, alt: str) -> None:
        self.blocks.append(Image(file, alt))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(doc: Document) -> str:
    lines = [f"# {doc.title}", ""]
    for b in doc.blocks:
        if isinstance(b, Heading):
            lines += [f"{'#' * (b.level + 1)} {b.text}", ""]
        elif isinstance(b, Para):
            lines += [f"**{b.text}**" if b.strong else b.text, ""]
        elif isinstance(b, Bullets):
            lines += [f"- {item}" for item in b.items] + [""]
        elif isinstance(b, Table):
            marks = {"l": ":--", "r": "--:"}
            lines.append("| " + " | ".join(_cell(h) for h in b.header) + " |")
            lines.append("|" + "|".join(marks[a] for a in b.align) + "|")
            lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in b.rows]
            lines.append("")
        else:
            lines += [f"![{b.alt}]({b.file})", ""]
    return "\n".join(lines).rstrip() + "\n"


def to_html(doc: Document, folder: Path) -> str:
    """The page; each image is read from ``folder`` and embedded (a missing one is said to be missing)."""
    parts = [f"<header><h1>{esc(doc.title)}</h1></header>"]
    toc = [b for b in doc.blocks if isinstance(b, Heading) and b.level == 1]
    if toc:
        parts.append('<nav class="toc">' + " · ".join(
            f'<a href="#{esc(_anchor(b))}">{esc(b.text)}</a>' for b in toc) + "</nav>")
    for b in doc.blocks:
        if isinstance(b, Heading):
            tag = f"h{min(b.level + 1, 4)}"
            parts.append(f'<{tag} id="{esc(_anchor(b))}">{esc(b.text)}</{tag}>')
        elif isinstance(b, Para):
            parts.append(f"<p><b>{esc(b.text)}</b></p>" if b.strong else f"<p>{esc(b.text)}</p>")
        elif isinstance(b, Bullets):
            parts.append("<ul>" + "".join(f"<li>{esc(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Table):
            head = "".join(f'<th{" class=num" if a == "r" else ""}>{esc(h)}</th>' for h, a in zip(b.header, b.align,
                                                                                                     strict=True))
            body = "".join("<tr>" + "".join(f'<td{" class=num" if a == "r" else ""}>{esc(c)}</td>'
                                            for c, a in zip(row, b.align, strict=True)) + "</tr>" for row in b.rows)
            parts.append(f'<table class="runs"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>')
        else:
            path = folder / b.file
            if path.exists():
                data = base64.b64encode(path.read_bytes()).decode("ascii")
                parts.append(f'<figure><img alt="{esc(b.alt)}" src="data:image/png;base64,{data}" '
                             f'style="max-width:100%"><figcaption>{esc(b.alt)}</figcaption></figure>')
            else:
                parts.append(f'<p class="muted">({esc(b.alt)}: {esc(b.file)} is missing)</p>')
    parts.append(footer())
    return page(doc.title, "".join(parts))


def _anchor(b: Heading) -> str:
    return b.anchor or "".join(ch if ch.isalnum() else "-" for ch in b.text.lower()).strip("-")
