"""``anchor truth bench`` end to end on a tiny plan (real MiniLM, UMAP and HDBSCAN; the simulated LLM in
process through anchor predict's runner; a published network through pgmpy): the same command gives the
same results.json byte for byte, a cell answered from an earlier run has exactly the figures its own run
gives, and every run directory is an ordinary predict run that anchor truth score reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.scoring.truth import run_truth_scores
from anchor.truth_bench import BenchPlan, run_bench
from anchor.truth_bench.runner import BenchError

pytestmark = pytest.mark.usefixtures("clean_anchor_env")

TINY = BenchPlan(quick=True, seed=0, worlds_per_group=2, conditions_per_world=6, structures=("naive-bayes", "latent"),
                 priors=(0.5, 0.2), networks=("cancer",), network_conditions=8,
                 methods=("anchor", "nb", "anchor-paper", "vanilla", "factor-based"),
                 levels={"direct": (0.0, 1.0), "factor": (1.0,), "base_rate": (0.0, 1.0)}, latent_link=False)
GROUPS = ["naive-bayes@0.5", "latent@0.5", "naive-bayes@0.2", "latent@0.2", "networks"]


@pytest.fixture(scope="module")
def benches(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for name, reuse in (("first", True), ("again", True), ("every cell", False)):
        out[name] = tmp_path_factory.mktemp("bench") / "b"
        run_bench(TINY, out[name], reuse=reuse)
    return out


def results(path: Path) -> dict[str, Any]:
    return json.loads((path / "results.json").read_text(encoding="utf-8"))


def test_the_same_plan_gives_the_same_results_json_byte_for_byte(benches: dict[str, Path]) -> None:
    first = (benches["first"] / "results.json").read_bytes()
    assert first == (benches["again"] / "results.json").read_bytes()
    assert (benches["first"] / "table.md").read_bytes() == (benches["again"] / "table.md").read_bytes()
    data = json.loads(first)
    assert data["schema_version"] == 2 and data["plan"] == TINY.model_dump(mode="json")
    assert list(data["groups"]) == GROUPS and data["groups"]["latent@0.2"]["prior"] == 0.2
    assert data["groups"]["networks"] == {"structure": "network", "prior": None, "cases_file": "cases/networks.csv",
                                          "worlds": ["cancer"]}
    # the timings live apart
    assert "seconds" in json.loads((benches["first"] / "timings.json").read_text())
    assert "seconds" not in first.decode()


def test_a_cell_answered_from_an_earlier_run_has_the_figures_of_its_own_run(benches: dict[str, Path]) -> None:
    reused, ran = results(benches["first"]), results(benches["every cell"])
    cells = {(c["group"], c["setting"], c["method"]): c for c in reused["cells"]}
    own = {(c["group"], c["setting"], c["method"]): c for c in ran["cells"]}
    assert cells.keys() == own.keys()
    # ANCHOR's prompts read nothing of the direct baselines' errors, and the direct baselines and the paper's
    # rule nothing of the base rate's. The consistent runs read it: they ask it, or take it from a factor space
    # another run built and stored (nb, here, after anchor).
    answered = sorted(k for k, c in cells.items() if c["answered_by"])
    expected = [(g, "direct-0", m) for g in GROUPS for m in ("anchor", "nb", "anchor-paper")] + \
        [(g, "base_rate-0", m) for g in GROUPS for m in ("anchor-paper", "vanilla")]
    assert answered == sorted(expected)
    assert all(c["answered_by"] is None for c in own.values())
    for key, cell in cells.items():
        mine = own[key]
        assert cell["p"] == mine["p"] and cell["status"] == mine["status"], key
        assert (cell["scores"] is None) == (mine["scores"] is None), key
        if cell["scores"] is not None:  # every figure but what the run itself sent, given the shared cache
            figures = {k: v for k, v in cell["scores"].items() if k not in ("requests", "tokens")}
            assert figures == {k: v for k, v in mine["scores"].items() if k not in ("requests", "tokens")}, key
            assert cell["cost"]["answers"] == mine["cost"]["answers"], key
    # vanilla reads the direct curve: its direct-0 cell is its own run, and exact there (no direct error)
    vanilla = cells[("latent@0.2", "direct-0", "vanilla")]
    assert vanilla["answered_by"] is None and vanilla["scores"]["mae"]["value"] < 1e-9


def test_each_cell_is_an_ordinary_predict_run_and_what_predict_refuses_says_why(benches: dict[str, Path]) -> None:
    data = results(benches["first"])
    for cell in data["cells"]:
        if cell["method"] == "factor-based":
            assert cell["run"] is None and cell["scores"] is None and "oracle" in cell["not_run"]
            continue
        scores = run_truth_scores(benches["first"] / cell["run"])
        assert scores is not None
        assert scores.model_dump(mode="json") == cell["scores"]
        assert len(cell["p"]) == len(data["cases"][cell["group"]]) == (8 if cell["group"] == "networks" else 12)
    assert {v["claim"] for v in data["verdicts"]} == {1, 2, 3, 4, 5}
    # BIRD is not in this plan: claim 1 says what it needs; so is the factor_curve sweep above the defaults (claim 4)
    verdicts = {v["claim"]: v for v in data["verdicts"]}
    assert verdicts[1]["verdict"] == "not checked" and "bird" in verdicts[1]["summary"]
    assert verdicts[4]["verdict"] == "not checked" and "factor_curve" in verdicts[4]["summary"]
    assert {(c["group"], c["direct"], c["factor"]) for c in data["map"]} == {(g, d, 1.0) for g in GROUPS for d in (0, 1)}
    assert [p["group"] for p in data["power"]] == [*GROUPS, "naive-bayes (every prior)", "latent (every prior)",
                                                   "every group"]
    for png in ("sweep-direct.png", "sweep-factor.png", "sweep-base_rate.png", "map.png", "reliability.png"):
        assert (benches["first"] / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_another_plan_in_the_same_directory_is_refused(benches: dict[str, Path]) -> None:
    other = TINY.model_copy(update={"seed": 1})
    with pytest.raises(BenchError, match="other settings"):
        run_bench(other, benches["first"])


def test_the_command_refuses_a_directory_that_holds_something_else(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    result = CliRunner().invoke(app, ["truth", "bench", "--quick", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "not empty and holds no bench" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
