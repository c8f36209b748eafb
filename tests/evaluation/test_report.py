"""The Markdown/PNG report over run directories, built from synthetic runs written through the real models."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from anchor.evaluation.report import (
    COST_PLOT,
    RELIABILITY_PLOT,
    ReportError,
    build_report,
    display_name,
    format_delta,
    format_mean_std,
    load_run,
)
from anchor.rundir.records import METRIC_KEYS, Kind, MetricsReport, RunConfig
from anchor.types import StageCost

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
EMBEDDED = {"backend": "embedded", "base_url": None, "model": None}  # what LLMSettings.describe() gives
SERVER = {"backend": "openai-compatible", "base_url": "http://localhost:8000/v1", "model": "Qwen2.5-72B"}
COVERED = ("f1_context1", "f1_context2", "f1_same", "f1_micro")

# Turn matplotlib's "Glyph missing" and similar warnings into failures: every label must render.
pytestmark = pytest.mark.filterwarnings("error::UserWarning")


def _summary(runs: list[dict[str, Any]], keys: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Mean and sample std per key, null when any run is null (what the runner reports)."""
    mean: dict[str, Any] = {}
    std: dict[str, Any] = {}
    for key in keys:
        values = [r.get(key) for r in runs]
        if any(v is None for v in values):
            mean[key] = std[key] = None
        else:
            mean[key] = statistics.mean(values)
            std[key] = statistics.stdev(values) if len(values) > 1 else 0.0
    return mean, std


def write_run(
    root: Path,
    name: str,
    *,
    kind: Kind = "pairwise",
    dataset: str = "common2sense",
    method: str = "anchor",
    ablations: list[str] | None = None,
    values: list[dict[str, float | None]] | None = None,
    llm: dict[str, Any] | None = None,
    small_model: bool = False,
    calibration: dict[str, Any] | None = None,
    cost: dict[str, StageCost] | None = None,
    n_instances: int = 20,
    write_metrics: bool = True,
) -> Path:
    """A run directory written through RunConfig / MetricsReport (so it cannot drift from the models)."""
    directory = root / name
    directory.mkdir(parents=True)
    llm = llm if llm is not None else SERVER
    ablations = ablations or []
    values = values or [{}]
    keys = METRIC_KEYS[kind]
    runs: list[dict[str, Any]] = []
    for i, v in enumerate(values):
        row: dict[str, Any] = {"run": i, "seed": 100 + i, **{k: v.get(k) for k in keys}}
        if kind == "pairwise":
            row["covered"] = {k: v.get(f"covered_{k}") for k in COVERED}
        runs.append(row)
    flat = [{**{k: r[k] for k in keys}, **{f"covered_{k}": r.get("covered", {}).get(k) for k in COVERED}}
            for r in runs]
    all_keys = keys + (tuple(f"covered_{k}" for k in COVERED) if kind == "pairwise" else ())
    mean, std = _summary(flat, all_keys)
    config = RunConfig(
        anchor_version="0.1.0", dataset=dataset, data_sha256="0" * 64, kind=kind, method=method,
        ablations=ablations, runs=len(values), seed=100, llm=llm,
    )
    (directory / "config.json").write_text(config.model_dump_json(indent=2), encoding="utf-8")
    if not write_metrics:
        (directory / "predictions.jsonl").write_text('{"run": 0}\n{"run": 0}\n', encoding="utf-8")
        return directory
    metrics = MetricsReport(
        dataset=dataset, kind=kind, method=method, ablations=ablations, llm=llm, small_model=small_model,
        oracle=method == "factor-based", n_instances=n_instances, n_runs=len(values),
        scope="all pairs; an unknown side counts as p=0.5" if kind == "pairwise" else "all instances",
        runs=runs, mean=mean, std=std, calibration=calibration, cost=cost or {},
    )
    (directory / "metrics.json").write_text(metrics.model_dump_json(indent=2), encoding="utf-8")
    return directory


def pair(
    avg: float, c1: float = 0.6, c2: float = 0.59, same: float = 0.15, cov: float = 1.0
) -> dict[str, float]:
    return {"f1_context1": c1, "f1_context2": c2, "f1_same": same, "f1_micro": avg, "coverage": cov,
            "covered_f1_context1": c1 + 0.01, "covered_f1_context2": c2, "covered_f1_same": same,
            "covered_f1_micro": avg + 0.01}


def anchor_cost() -> dict[str, StageCost]:
    stages = {
        "abduction.generate": StageCost(stage="abduction.generate", llm_calls=12, logical_requests=12,
                                        prompt_tokens=3000, completion_tokens=1500, wall_seconds=9.5,
                                        llm_seconds=12.0),
        "voting": StageCost(stage="voting", llm_calls=30, logical_requests=30, cache_hits=4, prompt_tokens=2000,
                            completion_tokens=300, wall_seconds=4.0, llm_seconds=6.0),
        "mapping.select": StageCost(stage="mapping.select", llm_calls=20, logical_requests=19, failed_attempts=1,
                                    prompt_tokens=2500, completion_tokens=200, wall_seconds=3.0, llm_seconds=3.5),
        "inference.phi": StageCost(stage="inference.phi", llm_calls=40, logical_requests=40, prompt_tokens=4000,
                                   completion_tokens=400, wall_seconds=5.5, llm_seconds=8.0),
    }
    total = StageCost(
        stage="total",
        llm_calls=sum(c.llm_calls for c in stages.values()),
        logical_requests=sum(c.logical_requests or 0 for c in stages.values()),
        failed_attempts=1, cache_hits=4,
        prompt_tokens=sum(c.prompt_tokens for c in stages.values()),
        completion_tokens=sum(c.completion_tokens for c in stages.values()),
        wall_seconds=sum(c.wall_seconds for c in stages.values()),
        llm_seconds=sum(c.llm_seconds for c in stages.values()),
    )
    return {**stages, "total": total}


def calibration(shift: float = 0.0) -> dict[str, Any]:
    bins = []
    for b in range(10):
        lo, hi = b / 10, (b + 1) / 10
        count = 0 if b == 4 else 3 + b
        bins.append({"lo": lo, "hi": hi, "count": count,
                     "mean_confidence": (lo + hi) / 2 if count else None,
                     "observed": min(1.0, max(0.0, (lo + hi) / 2 + shift)) if count else None})
    return {"event": "outcome1", "brier": 0.2134, "ece": 0.0412, "n_skipped": 3, "reliability": bins}


def assert_png(path: Path) -> None:
    assert path.is_file()
    data = path.read_bytes()
    assert len(data) > 1000
    assert data.startswith(PNG_SIGNATURE)


# --------------------------------------------------------------------------- formatting helpers


def test_cell_formatting() -> None:
    assert format_mean_std(0.6064, 0.0121) == "0.606 ± 0.012"
    assert format_mean_std(0.6064, 0.0121, show_std=False) == "0.606"
    assert format_mean_std(None, None) == "–"
    assert format_mean_std(float("nan"), 0.1) == "–"
    assert format_mean_std(0.9995, 0.0004, percent=True) == "99.95 ± 0.04%"
    assert format_mean_std(0.9995, None, percent=True) == "99.95%"
    assert format_delta(0.558, 0.572) == "0.558 (−0.014)"
    assert format_delta(0.575, 0.572) == "0.575 (+0.003)"
    assert format_delta(0.572, 0.572) == "0.572 (±0.000)"
    assert format_delta(None, 0.572) == "–"
    assert display_name("vanilla-direct") == "Vanilla⋆"
    assert display_name("factor-based", oracle=True) == "Factor-based†"
    assert display_name("anchor", ["no-cbn"]) == "ANCHOR (w/o cbn)"
    assert display_name("anchor", ["bma"]) == "ANCHOR (BMA)"


# --------------------------------------------------------------------------- the full report


def test_full_report_mixed_kinds(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    full = write_run(runs, "anchor-full", values=[pair(0.566, c1=0.61), pair(0.578, c1=0.614)],
                     cost=anchor_cost(), calibration=calibration(0.05))
    no_cbn = write_run(runs, "anchor-no-cbn", ablations=["no-cbn"], values=[pair(0.558)])
    bma = write_run(runs, "anchor-bma", ablations=["bma"], values=[pair(0.575)])
    oracle = write_run(runs, "factor", method="factor-based", values=[pair(0.55)])
    vanilla = write_run(runs, "vanilla-c2s", method="vanilla", values=[pair(0.47)],
                        cost={"baseline.vanilla": StageCost(stage="baseline.vanilla", llm_calls=40,
                                                            prompt_tokens=5000, completion_tokens=800,
                                                            wall_seconds=6.0),
                              "total": StageCost(stage="total", llm_calls=40, prompt_tokens=5000,
                                                 completion_tokens=800, wall_seconds=6.0)})
    today = write_run(runs, "anchor-today", kind="decision", dataset="today",
                      values=[{"accuracy": 0.7, "accuracy_covered": 0.72, "coverage": 0.97},
                              {"accuracy": 0.74, "accuracy_covered": 0.75, "coverage": 0.99}],
                      calibration=calibration(-0.1), cost=anchor_cost())
    direct = write_run(runs, "cot-direct-today", kind="decision", dataset="today", method="cot-direct",
                       values=[{"accuracy": 0.61, "accuracy_covered": 0.61, "coverage": 1.0}])
    covid = write_run(runs, "anchor-covid", kind="factcheck", dataset="covid",
                      values=[{"balanced_accuracy": 0.712, "accuracy": 0.7, "coverage": 1.0}])

    result = build_report([full, no_cbn, bma, oracle, vanilla, today, direct, covid], tmp_path / "report")
    md = result.markdown
    assert result.path == tmp_path / "report" / "report.md"
    assert result.path.read_text(encoding="utf-8") == md

    # Header: the LLM and no small-model warning (no run is small).
    assert "`Qwen2.5-72B` — openai-compatible backend at http://localhost:8000/v1" in md
    assert "135M-parameter embedded model" not in md

    # Table 1 header and a mean ± std cell by hand: Average (0.566 + 0.578) / 2 = 0.572,
    # sample std = |0.578 - 0.566| / sqrt(2) = 0.008485... -> "0.572 ± 0.008";
    # Context1 (0.61 + 0.614) / 2 = 0.612, std 0.004 / sqrt(2) = 0.00283 -> "0.612 ± 0.003".
    assert "| Method | Model | Context1 | Context2 | Same | Average | Coverage | Runs |" in md
    assert "| ANCHOR | Qwen2.5-72B | 0.612 ± 0.003 | 0.590 ± 0.000 | 0.150 ± 0.000 | 0.572 ± 0.008 | " \
           "100.00 ± 0.00% | 2 |" in md
    # Covered-only table: covered F1 avg is 0.01 higher -> 0.582.
    assert "F1 on covered pairs only" in md
    assert "| ANCHOR | Qwen2.5-72B | 0.622 ± 0.003 | 0.590 ± 0.000 | 0.150 ± 0.000 | 0.582 ± 0.008 |" in md
    # Single-run rows show no ±.
    assert "| Vanilla | Qwen2.5-72B | 0.600 | 0.590 | 0.150 | 0.470 | 100.00% | 1 |" in md
    assert "Scope (from metrics.json): all pairs; an unknown side counts as p=0.5" in md

    # The oracle is flagged with a dagger in the table and in bold in the header.
    assert "| Factor-based† | Qwen2.5-72B |" in md
    assert "**† Factor-based is an oracle baseline" in md
    assert "† oracle baseline" in md

    # Table 2: one column per dataset, naming its metric; ⋆ on the direct method; coverage note.
    assert "| Method | Model | covid (bal. acc.) | today (acc.) |" in md
    assert "| CoT⋆ | Qwen2.5-72B |  | 0.610 |" in md
    assert "| ANCHOR | Qwen2.5-72B | 0.712 (cov. 100.0%) | 0.720 ± 0.028 (cov. 98.0%) |" in md
    assert "⋆ direct decision" in md

    # Table 3: deltas against the full model (0.572): no-cbn 0.558 -> −0.014, BMA 0.575 -> +0.003.
    assert "## Ablations (cf. the paper's Table 3)" in md
    assert "| Variant | Context1 | Context2 | Same | Average (Δ vs full) | Coverage |" in md
    assert "| ANCHOR (w/o cbn) | 0.600 | 0.590 | 0.150 | 0.558 (−0.014) | 100.00% |" in md
    assert "| ANCHOR (BMA) | 0.600 | 0.590 | 0.150 | 0.575 (+0.003) | 100.00% |" in md
    assert "| ANCHOR (full) | 0.612 ± 0.003 |" in md
    # Variants in the paper's order (w/o cbn before BMA), whatever the directory names.
    assert md.index("| ANCHOR (w/o cbn) | 0.600") < md.index("| ANCHOR (BMA) | 0.600")

    # Cost: per stage rows, a total, per-instance averages: 101 requests / (20 instances × 2 runs) = 2.525 ->
    # 2.5, 102 attempts / 40 = 2.55 -> 2.5 (2.55 is stored just below 2.55); 13,900 tokens / 40 = 347.5 -> 348;
    # 29.5 request-s / 40 = 0.74 s.
    assert ("| Run | Phase | Stage | Requests | Attempts | Failed | Interrupted | Cache hits | Tokens (prompt + "
            "completion) | Wall s | Request s |") in md
    assert ("| ANCHOR · common2sense | factor space | abduction.generate | 12 | 12 | 0 | 0 | 0 "
            "| 4,500 (3,000 + 1,500) | 9.50 | 12.0 |") in md
    assert "| ANCHOR · common2sense | mapping | mapping.select | 19 | 20 | 1 | 0 | 0 |" in md
    assert ("| **ANCHOR · common2sense** |  | **total** | **101** | 102 | 1 | 0 | 4 | **13,900** | **22.0** "
            "| **29.5** |") in md
    assert "| ANCHOR · common2sense | 20 | 2.5 | 2.5 | 348 | 0.74 | total ÷ (20 instances × 2 runs) |" in md
    # A report written before requests were counted apart: a dash, and a note that says why.
    assert "| **Vanilla · common2sense** |  | **total** | **–** | 40 |" in md
    assert "Requests not known (–) for: Vanilla · common2sense" in md
    # The notes say what the table counts: requests once each, attempts with their retries.
    assert "counted once however many attempts the transport needed" in md and "exclude" not in md

    # Calibration lines and both plots.
    assert ("- ANCHOR · common2sense: Brier 0.213, ECE 0.041 (68 probabilities binned, 3 unknown skipped; "
            "event: outcome1)") in md
    assert f"![LLM cost per stage]({COST_PLOT})" in md
    assert f"![Reliability diagram]({RELIABILITY_PLOT})" in md
    assert [p.name for p in result.pngs] == [COST_PLOT, RELIABILITY_PLOT]
    for p in result.pngs:
        assert_png(p)


def factcheck(bal: list[float], cov: list[float] | None = None) -> list[dict[str, float | None]]:
    cov = cov or [1.0] * len(bal)
    return [{"balanced_accuracy": b, "accuracy": b, "coverage": c} for b, c in zip(bal, cov, strict=True)]


def test_fact_checking_sets_side_by_side_like_table_2(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    dirs = [
        # Written in an order unlike the paper's, to check the column order.
        write_run(runs, "anchor-cnn", kind="factcheck", dataset="cnn", values=factcheck([0.62, 0.64]),
                  n_instances=100, calibration=calibration()),
        write_run(runs, "anchor-covid", kind="factcheck", dataset="covid", values=factcheck([0.70, 0.74])),
        write_run(runs, "anchor-xsum", kind="factcheck", dataset="xsum", values=factcheck([0.58, 0.60])),
        write_run(runs, "anchor-expertqa", kind="factcheck", dataset="expertqa",
                  values=factcheck([0.61, 0.59], cov=[0.98, 0.96]), calibration=calibration(0.1)),
        write_run(runs, "anchor-expertqa-no-cbn", kind="factcheck", dataset="expertqa", ablations=["no-cbn"],
                  values=factcheck([0.55])),
        write_run(runs, "cot-direct-cnn", kind="factcheck", dataset="cnn", method="cot-direct",
                  values=factcheck([0.5])),
        write_run(runs, "vanilla-xsum", kind="factcheck", dataset="xsum", method="vanilla",
                  values=factcheck([0.537, 0.541], cov=[0.9, 1.0])),
        write_run(runs, "vanilla-today", kind="decision", dataset="today", method="vanilla",
                  values=[{"accuracy": 0.71, "accuracy_covered": 0.71, "coverage": 1.0}]),
    ]
    md = build_report(dirs, tmp_path / "report").markdown
    # The paper's column order (ExpertQA, XSum, COVID, CNN), then the decision sets; ExpertQA marked ‡.
    assert ("| Method | Model | expertqa‡ (bal. acc.) | xsum (bal. acc.) | covid (bal. acc.) | cnn (bal. acc.) "
            "| today (acc.) |") in md
    # Mean ± sample std over runs, with coverage: (0.61 + 0.59) / 2 = 0.600, std 0.02 / sqrt(2) = 0.014;
    # coverage (0.98 + 0.96) / 2 = 97.0%; XSum (0.58 + 0.60) / 2 = 0.590; COVID 0.720 ± 0.028; CNN 0.630.
    assert ("| ANCHOR | Qwen2.5-72B | 0.600 ± 0.014 (cov. 97.0%) | 0.590 ± 0.014 (cov. 100.0%) "
            "| 0.720 ± 0.028 (cov. 100.0%) | 0.630 ± 0.014 (cov. 100.0%) |  |") in md
    assert "| Vanilla | Qwen2.5-72B |  | 0.539 ± 0.003 (cov. 95.0%) |  |  | 0.710 |" in md
    assert "| CoT⋆ | Qwen2.5-72B |  |  |  | 0.500 (cov. 100.0%) |  |" in md
    assert "| ANCHOR (w/o cbn) | Qwen2.5-72B | 0.550 (cov. 100.0%) |" in md
    # Baselines above ANCHOR's variants, the full ANCHOR last, as in the paper.
    table2 = md[md.index("## Decisions and fact checking"):md.index("## Ablations")]
    assert table2.index("| Vanilla |") < table2.index("| ANCHOR (w/o cbn) |") < table2.index("| ANCHOR |")
    # The ExpertQA caveat: in bold in the header, under Table 2, in the ablation table and in the run list.
    caveat = ("expertqa is built from the ExpertQA release (claims with their cited evidence); it approximates, "
              "but is not, the LLM-AggreFact ExpertQA subset the paper most likely used")
    assert f"**‡ {caveat}" in md
    assert f"- ‡ {caveat}" in table2 and "922 characters against the paper's 2,399" in table2
    ablations = md[md.index("## Ablations"):md.index("## Cost")]
    assert "### expertqa‡ — Qwen2.5-72B" in ablations and f"- ‡ {caveat}" in ablations
    assert "| anchor-expertqa | factcheck | expertqa‡ | ANCHOR | Qwen2.5-72B | 20 | 2 |" in md
    assert "- ANCHOR · cnn: Brier 0.213" in md  # labels of other sets carry no mark
    assert "- ANCHOR · expertqa‡: Brier 0.213" in md  # the mark is drawn in the plot legend too


def test_no_expertqa_no_caveat(tmp_path: Path) -> None:
    run = write_run(tmp_path, "cnn", kind="factcheck", dataset="cnn", values=factcheck([0.6]))
    md = build_report([run], tmp_path / "out").markdown
    assert "‡" not in md and "| ANCHOR | Qwen2.5-72B | 0.600 (cov. 100.0%) |" in md


def test_single_small_model_run(tmp_path: Path) -> None:
    run = write_run(tmp_path, "only", method="vanilla", llm=EMBEDDED, small_model=True,
                    values=[pair(0.4)], cost=anchor_cost(), calibration=calibration())
    result = build_report([run], tmp_path / "out")
    md = result.markdown
    assert "`SmolLM2-135M-Instruct (embedded)` — embedded backend § (embedded 135M model)" in md
    assert ("**⚠ All runs in this report — numbers from a 135M-parameter embedded model: they show the "
            "pipeline works, not the method's accuracy.**") in md
    # The model cell carries the mark wherever numbers are shown.
    assert "| Vanilla | SmolLM2-135M-Instruct (embedded) § | 0.600 |" in md
    assert "| **Vanilla · common2sense §** |  | **total** |" in md
    assert "- Vanilla · common2sense §: Brier 0.213, ECE 0.041" in md
    assert "Factor-based" not in md
    assert "## Decisions" not in md and "## Ablations" not in md
    for p in result.pngs:
        assert_png(p)
    assert len(result.pngs) == 2


def test_all_null_metrics_and_zero_cost(tmp_path: Path) -> None:
    nothing = {k: None for k in ("f1_context1", "f1_context2", "f1_same", "f1_micro")}
    run = write_run(tmp_path, "unknowns", values=[{**nothing, "coverage": 0.0}, {**nothing, "coverage": 0.0}],
                    cost={"voting": StageCost(stage="voting", cache_hits=12),
                          "total": StageCost(stage="total", cache_hits=12)},
                    calibration={"brier": None, "ece": None, "n_skipped": 20,
                                 "reliability": [{"lo": 0.0, "hi": 1.0, "count": 0, "mean_confidence": None,
                                                  "observed": None}]})
    out = tmp_path / "out"
    out.mkdir()
    (out / RELIABILITY_PLOT).write_bytes(b"stale")  # from an earlier report: must not survive
    result = build_report([run], out)
    md = result.markdown
    assert "| ANCHOR | Qwen2.5-72B | – | – | – | – | 0.00 ± 0.00% | 2 |" in md
    assert "| ANCHOR | Qwen2.5-72B | – | – | – | – | 0.00 ± 0.00% |" in md  # covered-only table
    assert "No LLM requests were made by: ANCHOR · common2sense" in md
    assert "| voting | – | 0 | 0 | 0 | 12 | 0 (0 + 0) | 0.00 |" in md
    assert "Brier –, ECE – (no probabilities binned, 20 unknown skipped)" in md
    # Neither plot has data: both are skipped, and the Markdown says why.
    assert result.pngs == []
    assert "_LLM cost per stage not drawn: no run recorded any LLM calls" in md
    assert "_Reliability diagram not drawn: no run has reliability bins" in md
    assert not (out / COST_PLOT).exists() and not (out / RELIABILITY_PLOT).exists()


def test_duplicate_methods_disambiguated_by_directory(tmp_path: Path) -> None:
    # Marked names (⋆, †) also go through the plot: the glyphs must exist in the font (warnings are errors).
    a = write_run(tmp_path, "seedA", method="vanilla-direct", values=[pair(0.31)], cost=anchor_cost())
    b = write_run(tmp_path, "seedB", method="vanilla-direct", values=[pair(0.33)], cost=anchor_cost())
    c = write_run(tmp_path, "oracle", method="factor-based", values=[pair(0.5)], cost=anchor_cost())
    result = build_report([a, b, a, c], tmp_path / "out")  # the repeated directory is reported once
    md = result.markdown
    assert "| Vanilla⋆ [seedA] | Qwen2.5-72B |" in md
    assert "| Vanilla⋆ [seedB] | Qwen2.5-72B |" in md
    assert "| Factor-based† | Qwen2.5-72B |" in md
    assert "Generated from 3 run directories." in md
    assert "| **Vanilla⋆ · common2sense [seedA]** |" in md
    assert [p.name for p in result.pngs] == [COST_PLOT]
    assert_png(result.pngs[0])


def test_decision_ablation_delta(tmp_path: Path) -> None:
    full = write_run(tmp_path, "full", kind="decision", dataset="plasma",
                     values=[{"accuracy": 0.80, "accuracy_covered": 0.80, "coverage": 1.0}])
    abl = write_run(tmp_path, "pe", kind="decision", dataset="plasma", ablations=["no-pe-llm"],
                    values=[{"accuracy": 0.75, "accuracy_covered": 0.76, "coverage": 0.99}])
    md = build_report([abl, full], tmp_path / "out").markdown
    assert "| Variant | Accuracy (Δ vs full) | Coverage |" in md
    # 0.75 - 0.80 = -0.05
    assert "| ANCHOR (w/o pe-llm) | 0.750 (−0.050) | 99.00% |" in md
    assert "| ANCHOR (full) | 0.800 | 100.00% |" in md
    assert "| Method | Model | plasma (acc.) |" in md


def test_ablation_without_full_run_has_no_deltas(tmp_path: Path) -> None:
    abl = write_run(tmp_path, "abl", ablations=["no-nb"], values=[pair(0.48)])
    md = build_report([abl], tmp_path / "out").markdown
    assert "| ANCHOR (w/o nb) | Qwen2.5-72B |" in md
    assert "Ablation runs without a full ANCHOR run on the same dataset and model" in md
    assert "Δ vs full" not in md


# --------------------------------------------------------------------------- loading errors


def test_unfinished_run_gives_helpful_error(tmp_path: Path) -> None:
    run = write_run(tmp_path, "running", write_metrics=False)
    with pytest.raises(ReportError) as info:
        load_run(run)
    message = str(info.value)
    assert "metrics.json" in message and str(run) in message
    assert "no metrics.json yet — the run has not finished" in message
    assert "rerun `anchor eval` with the same arguments to resume" in message
    assert "2 predictions written so far" in message
    with pytest.raises(ReportError, match="no metrics.json yet"):
        build_report([run], tmp_path / "out")
    assert isinstance(info.value, ValueError)


def test_other_loading_errors(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="no such run directory"):
        load_run(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ReportError, match="not an evaluation run directory"):
        load_run(empty)

    run = write_run(tmp_path, "ok", values=[pair(0.5)])
    (run / "metrics.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ReportError, match=r"metrics\.json: not valid JSON"):
        load_run(run)

    (run / "metrics.json").write_text('{"dataset": "x"}', encoding="utf-8")
    with pytest.raises(ReportError, match=r"metrics\.json: not a metrics report \(kind: Field "):
        load_run(run)

    (run / "config.json").unlink()
    with pytest.raises(ReportError, match=r"config\.json: missing"):
        load_run(run)

    with pytest.raises(ReportError, match="no run directories given"):
        build_report([], tmp_path / "out")


def test_load_run_roundtrip(tmp_path: Path) -> None:
    run = write_run(tmp_path, "ok", method="logits", values=[pair(0.45)])
    loaded = load_run(run)
    assert loaded.path == run
    assert loaded.config.method == "logits" and loaded.metrics.method == "logits"
    assert loaded.metrics.mean["f1_micro"] == pytest.approx(0.45)
