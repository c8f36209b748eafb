"""The house rules of the source tree, checked with scripts/check_import_cycles.py's own code: no
import circle between anchor's modules (imports inside functions count), no file in src/ over 550
lines.

One test per part of the package (``anchor.cli``, ``anchor.evaluation``, ... and ``anchor`` for the
top-level modules), so a failure names the part to fix, and ``-k "not evaluation"`` checks the rest
while one part is being reorganised.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


def _load_checker():
    spec = importlib.util.spec_from_file_location("check_import_cycles", ROOT / "scripts" / "check_import_cycles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


checker = _load_checker()
GRAPH = checker.import_graph(SRC)
CIRCLES = checker.cycles(GRAPH)
LONG = checker.long_files(SRC, checker.MAX_LINES)


def part_of(module: str) -> str:
    """``anchor.cli.build`` -> ``cli``; a top-level module (``anchor.types``) -> ``anchor``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (SRC / "anchor" / parts[1]).is_dir()) else "anchor"


PARTS = sorted({part_of(name) for name in GRAPH})


def test_the_checker_sees_the_whole_package():
    assert {"anchor", "cli", "evaluation", "llm", "prompts", "audit"} <= set(PARTS)
    assert "anchor.prompts.space" in GRAPH["anchor.prompts"]  # a package's __init__ and its imports
    assert "anchor.types" in GRAPH["anchor.pipeline"]


@pytest.mark.parametrize("part", PARTS)
def test_no_import_circle(part):
    touching = [circle for circle in CIRCLES if any(part_of(m) == part for m in circle)]
    assert not touching, "import circles:\n" + "\n".join(
        " <-> ".join(circle) + "\n  " + "\n  ".join(f"{m} imports {', '.join(sorted(GRAPH[m] & set(circle)))}"
                                                 for m in circle)
        for circle in touching)


@pytest.mark.parametrize("part", PARTS)
def test_no_file_over_550_lines(part):
    assert checker.MAX_LINES == 550
    long = {name: n for name, n in LONG.items() if part_of(name) == part}
    assert not long, f"files over {checker.MAX_LINES} lines: {long}"


def test_a_circle_dodged_by_a_late_import_is_found(tmp_path):
    pkg = tmp_path / "anchor"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "model.py").write_text("def page():\n    from anchor.sub.html import render\n    return render()\n")
    (pkg / "sub" / "html.py").write_text("from anchor import model\n\n\ndef render():\n    return ''\n")
    (pkg / "leaf.py").write_text("from .sub import html\n" + "x = 1\n" * 560)
    graph = checker.import_graph(tmp_path)
    assert checker.cycles(graph) == [["anchor.model", "anchor.sub.html"]]
    assert checker.cycles(checker.import_graph(tmp_path, ["sub"])) == []
    assert checker.long_files(tmp_path) == {"anchor.leaf": 561}
    assert checker.main([str(tmp_path), "--ignore", "anchor.sub", "--max-lines", "600"]) == 0
    assert checker.main([str(tmp_path)]) == 1
