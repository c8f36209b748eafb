"""The paper's published numbers bundled with the package (anchor.reproduce.published).

The values were checked against the paper's .tex once, by scripts/check_paper_numbers.py; the
suite never reads the paper. Here: structure, a handful of known cells, the harness's names, the
internal consistency of the tables, and that every claim refers to cells and holds on the paper's
own numbers.
"""

from __future__ import annotations

import csv
import io
import re
from importlib import resources

import pytest
import typer.main

from anchor.analysis.estimator import EstimatorComparison, PhiDistributionStats
from anchor.cli.app import app
from anchor.config import ABLATIONS
from anchor.evaluation.datasets import DATASET_NAMES
from anchor.methods import METHODS
from anchor.metrics import decision_accuracy, factcheck_metrics, pairwise_metrics
from anchor.reproduce.published import (
    DERIVED_METRICS,
    UNITS,
    PublishedCell,
    PublishedNumbers,
    load_published,
    parse_published,
)

T1, T2, T3, T4 = "tab:main-results", "tab:combined_comparison", "tab:ablation_results", "tab:bird_on_harbor"
Q32, Q72 = "Qwen2.5-32B", "Qwen2.5-72B"


@pytest.fixture(scope="module")
def paper() -> PublishedNumbers:
    return load_published()


def _files() -> tuple[str, str]:
    folder = resources.files("anchor").joinpath("data").joinpath("paper")
    return (folder.joinpath("published.csv").read_text(encoding="utf-8"),
            folder.joinpath("published.json").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- known cells


def test_table1_anchor_72b_average(paper: PublishedNumbers) -> None:
    cell = paper.cell(T1, "anchor", "f1_micro", Q72)
    assert (cell.value, cell.std, cell.runs, cell.unit) == (0.606, 0.030, 5, "fraction")
    assert cell.text() == "0.606 ± 0.030"
    assert (cell.row_label, cell.column_label, cell.source_line, cell.std_line) == ("ANCHOR", "Average", 511, 511)
    assert cell.key == "tab:main-results|anchor|common2sense-pairwise|f1_micro|Qwen2.5-72B"


def test_bird_strict_coverage_and_the_text_that_rounds_it(paper: PublishedNumbers) -> None:
    cell = paper.cell(T1, "bird", "coverage", Q72)
    assert (cell.value, cell.unit, cell.text(), cell.row_label) == (87.77, "percent", "87.77%", "BIRD†")
    assert cell.in_metric_scale() == pytest.approx(0.8777)
    claim = paper.claim("t1-anchor-coverage-above-bird")
    assert cell.key in claim.reference and claim.stated == f"{cell.value:.1f}" == "87.8"


def test_a_handful_of_other_cells(paper: PublishedNumbers) -> None:
    assert paper.cell(T1, "random", "f1_same").value == 0.333
    assert paper.cell(T1, "compare", "f1_same", "GPT-4").value == 0.302
    today = paper.cell(T2, "anchor", "today", Q72)
    assert (today.metric, today.value, today.std, today.std_line, today.runs) == ("accuracy", 0.817, 0.031, 645, 5)
    assert paper.cell(T2, "cot-direct", "plasma", "DeepSeek-V3-671B").value == 0.850
    assert paper.cell(T2, "vanilla-direct", "covid", Q72).metric == "balanced_accuracy"
    assert paper.cell(T3, "anchor:no-cbn", "f1_micro_delta", Q32).value == -0.014
    assert paper.cell(T3, "anchor:bma", "f1_micro_delta", Q32).value == 0.003
    assert paper.cell(T3, "anchor", "f1_micro", Q32).value == 0.572  # Table 3's full model, not Table 1's 0.563
    assert paper.cell(T4, "bird-on-anchor:pool", "f1_micro", Q72).value == 0.568
    assert paper.cell(T4, "bird-on-anchor:factors", "mapping_tokens_ratio", Q72).value == 2.98
    assert [c.value for c in paper.table("fig:time_token_api_cost_left")] == [0.74, 0.24, 0.37]
    delta = paper.cell("tab:llm-calib-performance", "anchor", "today", "GPT-4o-mini vs Qwen2.5-72B")
    assert (delta.metric, delta.value, delta.unit, delta.in_metric_scale()) == ("difference", 1.1, "points",
                                                                                pytest.approx(0.011))
    ks = paper.cell("tab:llm-calib-distribution", "anchor", "ks_pvalue", "GPT-4o-mini vs Qwen2.5-72B", dataset="cnn")
    assert (ks.value, ks.decimals, ks.text()) == (0.0001, 4, "0.0001")


def test_cell_lookup_refuses_missing_and_ambiguous_cells(paper: PublishedNumbers) -> None:
    with pytest.raises(KeyError, match="no published cell"):
        paper.cell(T1, "anchor", "f1_micro", "GPT-4")
    with pytest.raises(KeyError, match="4 published cells"):
        paper.cell(T2, "anchor", "balanced_accuracy", Q72)  # four datasets share that metric
    assert paper.cell(T2, "anchor", "balanced_accuracy", Q72, dataset="cnn").value == 0.621
    with pytest.raises(TypeError, match="unknown field"):
        paper.find(tabel=T1)


# --------------------------------------------------------------------------- structure


def test_cells_per_table(paper: PublishedNumbers) -> None:
    counts = {s.id: len(paper.table(s.id)) for s in paper.sources if paper.table(s.id)}
    assert counts == {T1: 88, T2: 60, T3: 74, T4: 16, "fig:time_token_api_cost_left": 3,
                      "tab:llm-calib-performance": 12, "tab:llm-calib-distribution": 12}
    assert [s.label for s in paper.sources if s.id in (T1, T2, T3, T4)] == ["Table 1", "Table 2", "Table 3",
                                                                              "Table 4"]
    assert re.fullmatch(r"[0-9a-f]{64}", paper.paper_sha256)


def test_every_value_reads_back_as_printed(paper: PublishedNumbers) -> None:
    cells_csv, _ = _files()
    rows = list(csv.DictReader(io.StringIO(cells_csv)))
    assert len(rows) == len(paper.cells)
    for row, cell in zip(rows, paper.cells, strict=True):
        value, _, std = cell.text().rstrip("%").partition(" ± ")
        assert (value, std) == (row["value"].lstrip("+"), row["std"]), cell.key
        assert cell.unit in UNITS


def test_table_cells_lie_within_their_table(paper: PublishedNumbers) -> None:
    for cell in paper.cells:
        source = paper.source(cell.table)
        if source.kind == "table":
            assert source.lines[0] <= cell.source_line <= source.lines[1], cell.key
        if cell.std_line is not None:
            assert cell.source_line <= cell.std_line <= source.lines[1], cell.key


def test_duplicate_keys_and_dangling_claims_are_refused() -> None:
    cells_csv, meta = _files()
    first_row = cells_csv.splitlines()[1]
    with pytest.raises(ValueError, match="duplicate cell"):
        parse_published(cells_csv + first_row + "\n", meta)
    broken = meta.replace('"tab:main-results|anchor|common2sense-pairwise|f1_micro|Qwen2.5-72B"',
                          '"tab:main-results|anchor|common2sense-pairwise|f1_micro|GPT-5"', 1)
    assert broken != meta
    with pytest.raises(ValueError, match="no cell"):
        parse_published(cells_csv, broken)


def test_ids_follow_the_harness(paper: PublishedNumbers) -> None:
    assert {c.method for c in paper.cells} - set(METHODS) == {"random"}
    for cell in paper.cells:
        if cell.method == "anchor":
            assert cell.variant in ("", *ABLATIONS), cell.key
        elif cell.method == "bird-on-anchor":
            assert cell.variant in METHODS["bird-on-anchor"].stages, cell.key
        else:
            assert cell.variant == "", cell.key
    assert {c.dataset for c in paper.cells} <= set(DATASET_NAMES)
    harness_metrics = (set(pairwise_metrics([1, 2, 3], [1, 2, 3])) | set(decision_accuracy([1], [0.7]))
                       | set(factcheck_metrics([1, 2], [0.95, 0.1])) | set(PhiDistributionStats.model_fields)
                       | set(EstimatorComparison.model_fields))
    metrics = {c.metric for c in paper.cells}
    assert metrics - harness_metrics == set(DERIVED_METRICS) - {"difference"}
    assert "difference" in harness_metrics
    datasets = {d for s in paper.settings for d in s.datasets} | {d for s in paper.sources for d in s.datasets}
    assert datasets <= set(DATASET_NAMES)


def test_setting_options_are_eval_options(paper: PublishedNumbers) -> None:
    command = typer.main.get_command(app).commands["eval"]  # type: ignore[attr-defined]
    options = {o for p in command.params for o in getattr(p, "opts", [])}
    assert {s.option for s in paper.settings if s.option} <= options
    assert paper.setting("pairs", dataset="common2sense-pairwise").value == 530
    assert paper.setting("pairs_original", dataset="common2sense-pairwise").value == 350
    assert paper.setting("sample", dataset="covid").option == "--sample"
    assert paper.setting("w_nb", model=Q32).value == 0.8
    assert paper.setting("n_target", dataset="today").value == 40
    with pytest.raises(KeyError):
        paper.setting("w_nb")  # one per model


def test_ablation_subscripts_are_differences_from_the_full_model(paper: PublishedNumbers) -> None:
    deltas = paper.find(table=T3, metric="f1_micro_delta")
    assert len(deltas) == 12
    for delta in deltas:
        variant = paper.cell(T3, delta.row, "f1_micro", delta.model).value
        full = paper.cell(T3, "anchor", "f1_micro", delta.model).value
        assert round(variant - full, 3) == delta.value, delta.key


# --------------------------------------------------------------------------- claims


def test_every_claim_refers_to_cells_and_holds_on_the_papers_numbers(paper: PublishedNumbers) -> None:
    keys = paper.by_key
    for claim in paper.claims:
        assert set(claim.subject) | set(claim.reference) <= set(keys), claim.id
        assert claim.source_lines, claim.id
        expected = None if claim.comparison == "qualitative" else True
        assert paper.holds(claim) is expected, claim.id
    headline = {c.id for c in paper.claims if c.headline}
    assert {"t1-anchor-above-probability-baselines", "t1-anchor-coverage-near-full", "t1-anchor-coverage-above-bird",
            "t3-each-ablation-costs-f1", "cost-anchor-cheaper-than-bird", "t4-pool-best"} <= headline


def test_claims_turn_false_when_the_numbers_do(paper: PublishedNumbers) -> None:
    values = paper.paper_values()
    anchor72 = paper.cell(T1, "anchor", "f1_micro", Q72).key
    assert paper.holds(paper.claim("t1-anchor-highest-f1"), {**values, anchor72: 0.55}) is False
    tokens = paper.cell("fig:time_token_api_cost_left", "anchor", "tokens_ratio", Q72).key
    assert paper.holds(paper.claim("cost-anchor-cheaper-than-bird"), {**values, tokens: 1.3}) is False
    # Matching by model: the 72B full model is compared with the 72B variants only.
    claim = paper.claim("t3-each-ablation-costs-f1")
    assert len(paper.pairs(claim)) == 10
    full32 = paper.cell(T3, "anchor", "f1_micro", Q32).key
    assert paper.holds(claim, {**values, full32: 0.55}) is False  # below 32B's w/o cbn (0.558)
    # Matching by dataset: ANCHOR's CNN score is compared with CNN cells only.
    best = paper.claim("t2-anchor-best-at-72b")
    assert len(paper.pairs(best)) == 30
    # A missing value gives no verdict.
    assert paper.holds(best, {k: v for k, v in values.items() if k != best.subject[0]}) is None


def test_provenance_records_the_same_paper(paper: PublishedNumbers) -> None:
    text = resources.files("anchor").joinpath("data").joinpath("paper").joinpath("PROVENANCE.md") \
        .read_text(encoding="utf-8")
    assert paper.paper_sha256 in text


def test_loaded_once(paper: PublishedNumbers) -> None:
    assert load_published() is paper
    assert isinstance(paper.cells[0], PublishedCell)
