"""The planned case (tests/audit/planned_case.py), built once for the folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from anchor.audit import explain_html
from tests.audit.planned_case import build_case, write_run_dir


@pytest.fixture(scope="package")
def case(embedder):
    """(space, [HOT, COLD, EVIL results], the scripted client)."""
    return build_case(embedder)


@pytest.fixture(scope="package")
def page(case) -> str:
    space, results, _ = case
    return explain_html(space, results)


@pytest.fixture
def run_dir(case, tmp_path) -> Path:
    """A pairwise run directory written by hand (see ``write_run_dir``)."""
    return write_run_dir(case, tmp_path)
