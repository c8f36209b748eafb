"""The house rules of the source tree, checked with scripts/check_import_cycles.py's own code: no
import circle between anchor's modules (imports inside functions count), no arrow running up the
layers the script declares, no knot between the parts of one layer, every module in a layer, and no
file in src/ over 550 lines.

One test per part of the package (``anchor.cli``, ``anchor.evaluation``, ... and ``anchor`` for the
top-level modules), so a failure names the part to fix, and ``-k "not evaluation"`` checks the rest
while one part is being reorganised.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
SCRIPT = ROOT / "scripts" / "check_import_cycles.py"


def _load_checker():
    spec = importlib.util.spec_from_file_location("check_import_cycles", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


checker = _load_checker()
GRAPH = checker.import_graph(SRC)
CIRCLES = checker.cycles(GRAPH)
LONG = checker.long_files(SRC, checker.MAX_LINES)
UP = checker.upward_arrows(GRAPH)


def part_of(module: str) -> str:
    """``anchor.cli.build`` -> ``cli``; a top-level module (``anchor.types``) -> ``anchor``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (SRC / "anchor" / parts[1]).is_dir()) else "anchor"


PARTS = sorted({part_of(name) for name in GRAPH})


def test_the_checker_sees_the_whole_package():
    assert {"anchor", "cli", "evaluation", "llm", "prompts", "audit", "embedding", "compute"} <= set(PARTS)
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
def test_no_arrow_up_the_layers(part):
    up = [f"{a} imports {b}" for a, b in UP if part_of(a) == part]
    assert not up, "imports of a higher layer (see LAYERS in scripts/check_import_cycles.py):\n" + "\n".join(up)


def test_every_module_has_a_layer_and_no_two_parts_lean_on_each_other():
    assert checker.unplaced(GRAPH) == []
    assert checker.knots(GRAPH) == []
    # Each part is named once, in one layer.
    named = [part for _, parts in checker.LAYERS for part in parts]
    assert len(named) == len(set(named))


def test_the_layers_in_the_docs_are_the_scripts():
    rows = re.findall(r"^\| \d+\. [^|]+\| (.+) \|$", (ROOT / "docs" / "layout.md").read_text(encoding="utf-8"), re.M)
    assert [re.findall(r"`([\w.]+)`", row) for row in rows] == [list(parts) for _, parts in checker.LAYERS]


@pytest.mark.parametrize("part", PARTS)
def test_no_file_over_550_lines(part):
    assert checker.MAX_LINES == 550
    long = {name: n for name, n in LONG.items() if part_of(name) == part}
    assert not long, f"files over {checker.MAX_LINES} lines: {long}"


def test_the_script_passes_on_the_source_tree():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith(
        "0 circle(s), 0 arrow(s) up, 0 knot(s), 0 module(s) in no layer, 0 folder(s) split, 0 file(s) over 550 lines"
    ), done.stdout


def test_a_circle_dodged_by_a_late_import_is_found(tmp_path):
    pkg = tmp_path / "anchor"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "model.py").write_text("def page():\n    from anchor.sub.html import render\n    return render()\n")
    (pkg / "sub" / "html.py").write_text("from anchor import model\n\n\ndef render():\n    return ''\n")
    (pkg / "leaf.py").write_text("from .sub import html\n" + "x = 1\n" * 560)
    layers = (("bottom", ("leaf", "model", "sub")), ("top", ("anchor",)))
    graph = checker.import_graph(tmp_path)
    assert checker.cycles(graph) == [["anchor.model", "anchor.sub.html"]]
    assert checker.cycles(checker.import_graph(tmp_path, ["sub"])) == []
    assert checker.long_files(tmp_path) == {"anchor.leaf": 561}
    assert checker.main([str(tmp_path), "--ignore", "anchor.sub", "--max-lines", "600"], layers) == 0
    assert checker.main([str(tmp_path)], layers) == 1


def test_an_arrow_up_a_knot_and_a_module_in_no_layer_fail(tmp_path, capsys):
    pkg = tmp_path / "anchor"
    for folder in ("low", "high", "side"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "config.py").write_text("X = 1\n")
    (pkg / "low" / "work.py").write_text("from anchor.low.config import X\n")
    (pkg / "high" / "run.py").write_text("from anchor.low import work\n")
    (pkg / "high" / "names.py").write_text("Y = 2\n")
    layers = (("settings", ("low.config",)), ("work", ("low", "side")), ("top", ("high", "anchor")))
    graph = checker.import_graph(tmp_path)
    assert checker.part_of("anchor.low.config", layers) == "low.config"  # the longest part that names it
    assert checker.part_of("anchor.low.work", layers) == "low"
    # low.config placed apart from low/: a folder on two floors.
    assert checker.split_folders(layers) == ["low.config"]
    assert checker.main([str(tmp_path)], layers) == 1
    assert "split folder: low.config is placed apart from the rest of low/" in capsys.readouterr().out
    whole = (("work", ("low", "side")), ("top", ("high", "anchor")))
    assert checker.split_folders(whole) == [] and checker.main([str(tmp_path)], whole) == 0

    # Deep inside a function, it still counts: the settings may not reach up into the work.
    (pkg / "low" / "config.py").write_text("X = 1\n\n\ndef later():\n    from anchor.high.names import Y\n    return Y\n")
    (pkg / "side" / "a.py").write_text("from anchor.low import work\n")
    (pkg / "low" / "more.py").write_text("from anchor.side import a\n")
    (pkg / "extra.py").write_text("")
    graph = checker.import_graph(tmp_path)
    assert checker.upward_arrows(graph, layers) == [("anchor.low.config", "anchor.high.names")]
    assert checker.knots(graph, layers) == [["low", "side"]]  # one layer, each importing the other
    assert checker.unplaced(graph, layers) == ["anchor.extra"]
    assert checker.cycles(graph) == []  # no module circle: only the parts lean on each other
    assert checker.main([str(tmp_path)], layers) == 1
    out = capsys.readouterr().out
    assert "arrow up: anchor.low.config (low.config, layer 1) imports anchor.high.names (high, layer 3)" in out
    assert "knot: low <-> side" in out and "in no layer: anchor.extra" in out
