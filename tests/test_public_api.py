"""The public API stays where the documentation says it is: every import in a Python block of the
README and of docs/, and every ``anchor.x.y`` name the Python API page mentions, resolves; and
``import anchor`` stays cheap.

Each import runs in a fresh interpreter, so a name that only works once something else happened to
be imported first is caught.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


#: Resolves each dotted name of argv[1] (a JSON list): the longest importable module, then attributes.
RESOLVE = """
import importlib, json, sys
out = {}
for name in json.loads(sys.argv[1]):
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            out[name] = False
        else:
            out[name] = True
        break
    else:
        out[name] = False
print(json.dumps(out))
"""


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120)


def documented_imports() -> list[tuple[str, str]]:
    """(page, import statement) for every ``import``/``from ... import`` of anchor in a Python block."""
    out = []
    for page in PAGES:
        for block in PYTHON_BLOCK.findall(page.read_text(encoding="utf-8")):
            for node in ast.parse(block).body:
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "anchor":
                    out.append((page.name, f"from {node.module} import {', '.join(a.name for a in node.names)}"))
                elif isinstance(node, ast.Import) and any(a.name.split(".")[0] == "anchor" for a in node.names):
                    out.append((page.name, ast.unparse(node)))
    return out


IMPORTS = documented_imports()


def test_the_pages_that_promise_imports_are_read():
    pages = {page for page, _ in IMPORTS}
    assert {"README.md", "python-api.md", "your-data.md", "configuration.md", "explain.md"} <= pages
    assert ("README.md", "from anchor import Anchor, LLMSettings, Scenario, save_space") in IMPORTS


@pytest.mark.parametrize(("page", "statement"), IMPORTS, ids=[f"{p}: {s}" for p, s in IMPORTS])
def test_a_documented_import_works(page, statement):
    done = _python(statement)
    assert done.returncode == 0, f"{page}: {statement}\n{done.stderr[-2000:]}"


def test_everything_the_python_api_page_lists_comes_from_anchor_itself():
    text = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    listed = text.split("Everything a user needs is importable from `anchor` itself:")[1].split("`import anchor`")[0]
    names = re.findall(r"`(\w+)`", listed)
    assert {"Anchor", "AnchorConfig", "BuildParams", "InferenceConfig", "MappingConfig", "save_space"} <= set(names)
    done = _python(f"import anchor; from anchor import {', '.join(names)}; print(sorted(anchor.__all__))")
    assert done.returncode == 0, done.stderr[-2000:]
    assert set(names) <= set(json.loads(done.stdout.replace("'", '"')))


def test_every_dotted_name_on_the_python_api_page_resolves():
    """``anchor.audit.space_html(space)``, ``anchor.evaluation.report.write_run_index``, ...: the module
    part is imported, the rest looked up on it."""
    text = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    dotted = sorted(set(re.findall(r"`(anchor(?:\.\w+)+)", text)))
    assert "anchor.evaluation.report.write_run_index" in dotted and "anchor.cases.read_cases" in dotted
    done = _python(RESOLVE, json.dumps(dotted))
    assert done.returncode == 0, done.stderr[-2000:]
    assert [name for name, ok in json.loads(done.stdout).items() if not ok] == []


def test_import_anchor_stays_cheap():
    """The settings of every stage come with ``import anchor``; the pipeline, the stages' code, numpy's
    heavy friends and the LLM stack do not."""
    done = _python("import json, sys; import anchor; from anchor import BuildParams, InferenceConfig, MappingConfig; "
                   "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('anchor', 'sklearn', 'umap', "
                   "'openai', 'torch')))))")
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(done.stdout)
    assert loaded == ["anchor", "anchor.lazy", "anchor.settings", "anchor.settings.inference", "anchor.settings.mapping",
                      "anchor.settings.space", "anchor.text", "anchor.types", "anchor.version"], loaded
