"""The registry of evaluation methods: every family's specs, in a fixed order, whatever is imported
first, without loading any method's heavy dependencies (the CLI imports it to list the methods)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anchor.evaluation.report import display_name
from anchor.methods import contract
from anchor.methods.registry import FAMILIES, METHODS, paper_table, register, table_order

SRC = Path(__file__).resolve().parents[2] / "src"
ORDER = ["anchor", "vanilla", "vanilla-direct", "cot", "cot-direct", "logits", "compare", "factor-based", "bird",
         "bird-relaxed", "bird-on-anchor"]


def test_methods_are_every_familys_specs_in_the_listed_order() -> None:
    assert list(METHODS) == ORDER
    assert [s.name for family in FAMILIES for s in family.SPECS] == ORDER
    assert all(METHODS[s.fallback] for s in METHODS.values() if s.fallback)


def test_a_name_is_registered_once_and_a_fallback_must_exist() -> None:
    with pytest.raises(ValueError, match="'cot' is registered already"):
        register(contract.MethodSpec("cot", METHODS["cot"].factory, "again"))
    with pytest.raises(ValueError, match="falls back on 'nowhere'"):
        register(contract.MethodSpec("new", METHODS["cot"].factory, "new", fallback="nowhere"))
    assert list(METHODS) == ORDER


def test_the_tables_take_names_and_rows_from_the_registry(monkeypatch) -> None:
    """The report's rows, the paper's names and the methods ``anchor reproduce`` runs for Tables 1 and 2
    are read from each method's entry: a method registered later joins them with nothing else to edit."""
    assert table_order() == ("vanilla", "vanilla-direct", "cot", "cot-direct", "logits", "compare", "factor-based",
                             "bird", "bird-relaxed", "bird-on-anchor", "anchor")
    assert set(paper_table("1")) == {"cot", "vanilla", "logits", "compare", "factor-based", "bird", "bird-relaxed",
                                     "anchor"}
    assert set(paper_table("2")) == {"vanilla", "vanilla-direct", "cot", "cot-direct", "bird", "anchor"}
    assert [display_name(m) for m in ("vanilla-direct", "factor-based", "bird", "anchor")] == [
        "Vanilla⋆", "Factor-based†", "BIRD (strict)", "ANCHOR"]
    spec = contract.MethodSpec("mine", METHODS["cot"].factory, "a new baseline", title="Mine", direct=True,
                               paper_tables=("1",))
    monkeypatch.setitem(METHODS, "mine", spec)
    assert display_name("mine") == "Mine⋆" and display_name("unlisted") == "unlisted"
    assert table_order()[-2:] == ("mine", "anchor") and paper_table("1")[-2:] == ("mine", "anchor")


def _python(code: str) -> object:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_a_family_imported_before_the_registry_changes_nothing() -> None:
    assert _python("import json; import anchor.methods.bird_on_anchor; "
                   "from anchor.methods.registry import METHODS; print(json.dumps(list(METHODS)))") == ORDER


def test_listing_the_methods_loads_neither_the_pipeline_nor_bird() -> None:
    assert _python("import json, sys; import anchor.cli; print(json.dumps(sorted(m for m in sys.modules "
                   "if m.startswith(('anchor.bird', 'anchor.pipeline')))))") == []
