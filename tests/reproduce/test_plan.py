"""``anchor reproduce`` without a server: the plan a selection makes (what runs, what they share), the
options refused before anything runs, the budget rule and the claims checked on given numbers."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.reproduce.cells import Value
from anchor.reproduce.claims import check_claim
from anchor.reproduce.estimate import Spent
from anchor.reproduce.execute import Budget
from anchor.reproduce.plan import changes_the_build, make_plan
from anchor.reproduce.published import load_published
from anchor.reproduce.selection import SelectionError, make_selection, paper_model_for
from anchor.runs.identity import identity_difference

runner = CliRunner()
C2S = "common2sense-pairwise"


#: The tests pass every setting as a flag: variables of the user's shell must not leak in.
pytestmark = pytest.mark.usefixtures("clean_anchor_env")


def test_tables_1_and_4_and_the_cost_figure_share_runs_and_keep_table_4s_costs_apart():
    plan = make_plan(make_selection(tables="1,4", figures="cost", runs=1, quick=True))
    names = [r.name for r in plan.runs]
    assert names == [f"{C2S}-{m}" for m in ("vanilla", "cot", "logits", "compare", "factor-based", "bird",
                                            "bird-relaxed", "anchor")] + [
        f"{C2S}-bird-on-anchor-{s}" for s in ("factors", "mapping", "pool")]
    assert plan.analyses == ()
    by = {r.name: r for r in plan.runs}
    # One run serves several parts, and says which.
    assert by[f"{C2S}-anchor"].parts == ("1", "4", "cost") and by[f"{C2S}-bird"].parts == ("1", "4", "cost")
    # BIRD‡ reuses BIRD†'s models; the transplants reuse ANCHOR's spaces; Table 4's four runs have own caches.
    assert by[f"{C2S}-bird-relaxed"].spaces_from == f"{C2S}-bird"
    for stage in ("factors", "mapping", "pool"):
        run = by[f"{C2S}-bird-on-anchor-{stage}"]
        assert run.spaces_from == f"{C2S}-anchor" and run.own_cache and run.stage == stage
    assert [r.name for r in plan.runs if r.own_cache] == [f"{C2S}-bird-relaxed", *(
        f"{C2S}-bird-on-anchor-{s}" for s in ("factors", "mapping", "pool"))]
    assert all(r.limit == 2 and r.runs == 1 for r in plan.runs)


def test_ablations_reuse_the_full_runs_spaces_except_the_one_that_changes_the_build():
    plan = make_plan(make_selection(tables="3"))
    assert [r.ablations for r in plan.runs] == [(), ("no-cbn",), ("no-nb",), ("no-cluster",), ("no-hierarchy",),
                                                 ("no-pe-llm",), ("bma",)]
    assert {r.ablations[0]: r.spaces_from for r in plan.runs if r.ablations} == {
        "no-cbn": f"{C2S}-anchor", "no-nb": f"{C2S}-anchor", "no-cluster": None, "no-hierarchy": f"{C2S}-anchor",
        "no-pe-llm": f"{C2S}-anchor", "bma": f"{C2S}-anchor"}
    assert changes_the_build("no-cluster") and not changes_the_build("no-cbn")
    # The paper's slice and runs unless told otherwise.
    assert all(r.limit is None and r.runs == 5 for r in plan.runs)


def test_table_2_runs_every_method_on_the_six_sets_and_reads_a_given_file(tmp_path):
    data = tmp_path / "covid.jsonl"
    data.write_text("{}\n")
    plan = make_plan(make_selection(tables="2", appendix="estimator", quick=True,
                                    data=[f"covid={data}"]))
    datasets = list(dict.fromkeys(r.dataset for r in plan.runs))
    assert datasets == ["expertqa", "xsum", "covid", "cnn", "today", "plasma"]
    assert len(plan.runs) == 36 and {r.method for r in plan.runs} == {
        "vanilla", "vanilla-direct", "cot", "cot-direct", "bird", "anchor"}
    assert {r.data_path for r in plan.runs if r.dataset == "covid"} == {data}
    assert {r.dataset for r in plan.runs if r.balance_outcomes} == {"today", "plasma"}
    assert {r.limit for r in plan.runs if r.dataset in ("cnn", "covid")} == {1}
    assert [a.name for a in plan.analyses] == ["estimator-cnn", "estimator-expertqa", "estimator-plasma",
                                               "estimator-today"]


def test_clustering_alone_plans_the_anchor_run_whose_spaces_it_reads():
    plan = make_plan(make_selection(appendix="clustering", quick=True))
    assert [r.name for r in plan.runs] == [f"{C2S}-anchor"] and [a.name for a in plan.analyses] == ["clustering"]


@pytest.mark.parametrize(("args", "message"), [
    (["--tables", "1,5"], "--tables '1,5': unknown '5'"),
    (["--figures", "costs"], "--figures 'costs': unknown 'costs'"),
    (["--tables", "none"], "select nothing"),
    (["--data", "covid"], "--data 'covid': give DATASET=FILE"),
    (["--data", "covid=/nowhere/file.jsonl"], "no such file"),
    (["--data", "imdb=x"], "unknown dataset 'imdb'"),
    (["--appendix", "estimator"], "--appendix estimator needs --estimator-base-url"),
    (["--paper-model", "GPT-5"], "--paper-model 'GPT-5'"),
    (["--runs", "0"], "--runs"),
    (["--budget-requests", "0"], "--budget-requests"),
    # Given twice, a list option adds up (it does not keep the last one).
    (["--tables", "1", "--tables", "5"], "--tables '1,5': unknown '5'"),
    (["--model-runs", "Qwen2.5-32B=/nowhere"], "'Qwen2.5-32B=/nowhere': '/nowhere' holds no reproduction"),
    (["--model-runs", "GPT-5=/tmp"], "the paper has cells for"),
])
def test_bad_options_are_one_error_line_before_anything_runs(tmp_path, args, message):
    out = tmp_path / "repro"
    result = runner.invoke(app, ["reproduce", "--base-url", "http://127.0.0.1:9/v1", "--out", str(out), *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], result.stderr
    assert "Traceback" not in result.output and not out.exists()


def test_selection_defaults_and_the_paper_model_the_served_name_points_to():
    s = make_selection()
    assert s.tables == ("1", "2", "3", "4") and s.figures == ("cost", "factors")
    assert s.appendix == ("retrieval", "clustering") and s.runs == 5 and not s.quick
    assert make_selection(tables="2").parts == ("2",)  # naming a part selects that part only
    assert make_selection(quick=True).runs == 1 and make_selection(quick=True, runs=3).runs == 3
    models = ("DeepSeek-V3-671B", "GPT-4", "Qwen2.5-32B", "Qwen2.5-72B")
    assert paper_model_for("Qwen/Qwen2.5-32B-Instruct", models) == "Qwen2.5-32B"
    assert paper_model_for("qwen2.5-72b-instruct", models) == "Qwen2.5-72B"
    assert paper_model_for("llama-3-8b", models) == "Qwen2.5-72B"
    with pytest.raises(SelectionError, match="--tables"):
        make_selection(tables="")


def test_a_budget_stops_before_what_would_cross_it_and_says_what_is_left():
    budget = Budget(requests=100, tokens=None)
    assert budget.crossed_by(Spent(requests=60, tokens=9), Spent(requests=40, tokens=10**9)) is None
    why = budget.crossed_by(Spent(requests=60, tokens=9), Spent(requests=41, tokens=1))
    assert why == "it is expected to need about 41 requests, and 60 of the 100 allowed by --budget-requests are " \
                  "spent (40 left)"
    assert Budget(tokens=5).crossed_by(Spent(tokens=4), Spent(tokens=2)).endswith("(1 left)")
    # Resumed with a cap already reached: nothing is left, whatever the next run is expected to need.
    assert Budget(tokens=1).crossed_by(Spent(tokens=500), Spent(tokens=0)) == (
        "the 500 tokens spent already reach the 1 allowed by --budget-tokens")
    assert Budget(tokens=5).crossed_by(Spent(tokens=5), Spent(tokens=1)).startswith("the 5 tokens spent already")


def _values(mapping: dict[tuple[str, str], Value]):
    return lambda cell: mapping.get((cell.row, cell.metric))


def test_claims_are_checked_on_our_means_with_the_spread_and_the_run_count():
    published = load_published()
    claim = published.claim("t1-anchor-coverage-above-bird")
    two_runs = {("anchor", "coverage"): Value(95.0, 1.0, 2, (94.0, 96.0)),
                ("bird", "coverage"): Value(95.5, 0.5, 2, (95.0, 96.5))}
    check = check_claim(claim, published, _values(two_runs), our_runs=2, model="Qwen2.5-72B")
    assert check.verdict == "did not hold"
    assert "ANCHOR Coverage 95.00 ± 1.00% against BIRD† Coverage 95.50 ± 0.50%" in check.ours
    assert "held in 0 of 2 run-by-run comparisons" in check.ours
    assert check.caveat == "from 2 runs; the paper's table used 5: indicative, not a verdict"

    fine = {("anchor", "coverage"): Value(99.5, None, 5, (99.0, 99.2, 99.5, 99.8, 100.0)),
            ("bird", "coverage"): Value(88.0, None, 5, (87.0, 88.0, 88.0, 88.5, 88.5))}
    check = check_claim(claim, published, _values(fine), our_runs=5, model="Qwen2.5-72B")
    # Held on our model; ANCHOR with 32B against BIRD with 72B needs runs of both.
    assert check.verdict == "partly checked" and check.caveat == "" and "held in 5 of 5" in check.ours

    missing = check_claim(claim, published, _values({("anchor", "coverage"): Value(99.0)}), our_runs=1,
                          model="Qwen2.5-72B")
    assert missing.verdict == "not checked" and missing.ours == "missing: BIRD† Coverage"

    bma = published.claim("t3-bma-comparable")  # within 0.01 of no change
    near = check_claim(bma, published, _values({("anchor:bma", "f1_micro_delta"): Value(-0.004)}), our_runs=1)
    far = check_claim(bma, published, _values({("anchor:bma", "f1_micro_delta"): Value(0.02)}), our_runs=1)
    assert (near.verdict, far.verdict) == ("held", "did not hold")
    timed = check_claim(published.claim("cost-anchor-cheaper-than-bird"), published,
                        lambda cell: Value(cell.value), our_runs=1)
    assert timed.verdict == "held" and timed.timed


def test_the_help_explains_itself_at_80_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    result = runner.invoke(app, ["reproduce", "--help"])
    assert result.exit_code == 0
    text = result.output
    assert "…" not in text and max(len(x) for x in text.splitlines()) <= 80
    for flag in ("--tables", "--figures", "--appendix", "--runs", "--quick", "--data", "--plan", "--budget-requests",
                 "--budget-tokens", "--keep-failed", "--base-url", "--estimator-base-url"):
        assert flag in text, flag


def test_data_for_a_dataset_no_selected_part_reads_is_refused_and_two_lists_add_up(tmp_path):
    data = tmp_path / "covid.jsonl"
    data.write_text("{}\n")
    out = tmp_path / "repro"
    result = runner.invoke(app, ["reproduce", "--base-url", "http://127.0.0.1:9/v1", "--out", str(out), "--tables",
                                 "1", "--data", f"covid={data}"])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (f"error: --data covid={data}: none of the selected parts reads covid (they "
                                     f"read {C2S}); select a part that does, or leave it out")
    assert not out.exists()
    plan = make_plan(make_selection(tables="1,2", data=[f"covid={data}"]))
    assert {r.dataset for r in plan.runs} == {C2S, "expertqa", "xsum", "covid", "cnn", "today", "plasma"}


def test_a_reused_run_is_the_same_however_its_directory_is_written(tmp_path):
    """Runs now name the run they reuse from their own directory; a folder written before (an absolute path
    from the working directory) still resumes in place, and one that points elsewhere does not."""
    (tmp_path / "runs" / "a").mkdir(parents=True)
    run_dir = tmp_path / "runs" / "b"
    base = {"anchor_version": "0", "dataset": C2S, "data_sha256": "x", "kind": "pairwise", "method": "bird-relaxed",
            "runs": 1, "seed": 0}
    new = {**base, "spaces_from": "../a", "spaces_from_base": "run"}
    assert identity_difference({**base, "spaces_from": str(tmp_path / "runs" / "a")}, new, run_dir) is None
    assert identity_difference(new, new, tmp_path / "moved" / "runs" / "b") is None
    elsewhere = {**base, "spaces_from": str(tmp_path / "old" / "runs" / "a")}
    assert identity_difference(elsewhere, new, run_dir) == ("spaces_from", str(tmp_path / "old" / "runs" / "a"),
                                                             "../a")
