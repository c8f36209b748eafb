"""``anchor calibrate fit|report``, ``anchor eval --calibrator`` and ``anchor infer --calibrator`` end to
end, against tests/fakeserver.py answering scripted probabilities, so every figure is known: the report's
JSON is recomputed from predictions.jsonl with scikit-learn, fold assignment included."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import brier_score_loss
from sklearn.metrics import log_loss as sk_log_loss
from sklearn.model_selection import GroupKFold
from typer.testing import CliRunner

from anchor.calibration import CalibratorFile, FittedOn, read_calibrator
from anchor.calibration.contract import LOGISTIC_C
from anchor.cli import app
from anchor.evaluation.datasets.instances import balance_outcome_order, scenario_key
from anchor.evaluation.datasets.loading import load_dataset
from anchor.inference.consistent import consistent_cbn_posterior
from anchor.rundir.records import RunConfig, TraceRecord
from anchor.space.io import save_space
from tests.fakeserver import FakeOpenAIServer
from tests.helpers import ScriptedLLM
from tests.run_helpers import eval_args, predictions_of, server_responder

runner = CliRunner()
N = 16
#: The instances `anchor eval --dataset today --balance-outcomes --limit 16` scores, in order.
INSTANCES = balance_outcome_order(load_dataset("today"))[:N]
LABEL = {i.condition: i.label for i in INSTANCES}
#: Scripted P(O1) per condition: vanilla always leans to O1 (over-confident when O2 is right), cot is
#: right-leaning but timid.
VANILLA = {i.condition: (0.92 if i.label == 1 else 0.74) - 0.04 * (k % 3) for k, i in enumerate(INSTANCES)}
COT = {i.condition: (0.62 if i.label == 1 else 0.41) + 0.03 * (k % 2) for k, i in enumerate(INSTANCES)}
CONDITION = re.compile(r"^Condition: (.*)$", re.MULTILINE)


#: The tests pass every setting as a flag: variables of the user's shell must not leak in.
pytestmark = pytest.mark.usefixtures("clean_anchor_env")


def respond(body: dict) -> str:
    user = body["messages"][-1]["content"]
    name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
    found = CONDITION.search(user)
    table = COT if name.startswith("ReasonedProbability") else VANILLA
    p = table.get(found.group(1), 0.5) if found else 0.5
    return json.dumps({"reasoning": "Scripted.", "probability": p} if table is COT else {"probability": p})


def run_eval(server, tmp_path, out, method, *extra):
    result = runner.invoke(app, eval_args(server, tmp_path / "cache", out, "--dataset", "today", "--method", method,
                                          "--balance-outcomes", "--limit", str(N), *extra))
    assert result.exit_code == 0, (result.stderr, result.exception)
    return result


def one_error(result, *needles):
    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]


def soft_platt(p: np.ndarray, y: np.ndarray) -> LogisticRegression:
    """Platt scaling as docs/calibration.md states it, written out with scikit-learn."""
    n1, n0 = y.sum(), len(y) - y.sum()
    t = np.where(y == 1, (n1 + 1) / (n1 + 2), 1 / (n0 + 2))
    x = np.log(p / (1 - p))[:, None]
    return LogisticRegression(C=LOGISTIC_C).fit(np.vstack([x, x]), np.r_[np.ones(len(p)), np.zeros(len(p))],
                                                sample_weight=np.r_[t, 1 - t])


def test_fit_report_apply_and_warn(tmp_path):
    with FakeOpenAIServer(responder=respond, model="model-a") as server:
        vanilla, cot = tmp_path / "vanilla", tmp_path / "cot"
        run_eval(server, tmp_path, vanilla, "vanilla", "--model", "model-a")
        run_eval(server, tmp_path, cot, "cot", "--model", "model-a")
        cal_path = tmp_path / "cal.json"
        fit = runner.invoke(app, ["calibrate", "fit", str(vanilla), "--kind", "platt", "--out", str(cal_path)])
        assert fit.exit_code == 0, (fit.stderr, fit.exception)
        assert "platt" in fit.stdout and "wrote" in fit.stdout
        report = runner.invoke(app, ["calibrate", "report", str(vanilla), str(cot), "--out", str(tmp_path / "rep"),
                                     "--json"])
        assert report.exit_code == 0, (report.stderr, report.exception)
        data = json.loads(report.stdout)

        # -- the calibrator file: what it was fitted on, and Platt's numbers as scikit-learn computes them
        preds = sorted(predictions_of(vanilla), key=lambda p: p.id)
        p = np.array([q.p_outcome1 for q in preds])
        y = np.array([1.0 if q.label == 1 else 0.0 for q in preds])
        assert p.tolist() == pytest.approx([VANILLA[i.condition] for i in sorted(INSTANCES, key=lambda i: i.id)])
        file = CalibratorFile.model_validate_json(cal_path.read_text())
        on = file.fitted_on
        assert (file.kind, on.method, on.model, on.datasets, on.kinds, on.n, on.n_outcome1) == (
            "platt", "vanilla", "model-a", ["today"], ["decision"], N, int(y.sum()))
        assert 0 < y.sum() < N  # the balanced sample has both gold outcomes
        model = soft_platt(p, y)
        assert [file.parameters["slope"], file.parameters["intercept"]] == pytest.approx(
            [model.coef_[0, 0], model.intercept_[0]], abs=1e-6)

        # -- the report: before = recomputation from predictions.jsonl, folds by scenario, after = Platt refitted
        by_scenario = {i.id: min(scenario_key(i.scenario), scenario_key(i.scenario.swapped())) for i in INSTANCES}
        ids = sorted(by_scenario, key=lambda s: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)])
        groups = np.array([by_scenario[i] for i in ids])
        expected_folds = {}
        for fold, (_, test) in enumerate(GroupKFold(n_splits=5).split(np.zeros(len(ids)), groups=groups)):
            expected_folds.update({g: fold for g in groups[test]})
        assert data["datasets"]["today"]["scenarios"] == expected_folds
        assert data["datasets"]["today"]["n_folds"] == 5
        fold_of_id = {}
        for group in data["groups"]:
            seen: dict[str, set[int]] = {}
            for row in group["instances"]:
                assert row["scenario"] == by_scenario[row["id"]]
                seen.setdefault(row["scenario"], set()).add(row["fold"])
                assert fold_of_id.setdefault(row["id"], row["fold"]) == row["fold"]  # the same folds for both methods
            assert all(len(f) == 1 for f in seen.values()), "a scenario was split across folds"
        g = next(x for x in data["groups"] if x["method"] == "vanilla")
        rows = sorted(g["instances"], key=lambda r: r["id"])
        assert [r["p_raw"] for r in rows] == pytest.approx(p.tolist())
        raw = g["scores"]["none"]
        assert raw["brier"] == pytest.approx(brier_score_loss(y, p))
        assert raw["brier"] == pytest.approx(float(np.mean((p - y) ** 2)))
        assert raw["log_loss"] == pytest.approx(sk_log_loss(y, p, labels=[0, 1]))
        assert raw["decision"] == pytest.approx(float(np.mean((p > 0.5) == (y == 1))))
        folds = np.array([r["fold"] for r in rows])
        oof = np.empty(N)
        for f in set(folds.tolist()):
            fitted = soft_platt(p[folds != f], y[folds != f])
            oof[folds == f] = fitted.predict_proba(np.log(p[folds == f] / (1 - p[folds == f]))[:, None])[:, 1]
        assert [r["calibrated"]["platt"] for r in rows] == pytest.approx(oof.tolist(), abs=1e-6)
        assert g["scores"]["platt"]["brier"] == pytest.approx(brier_score_loss(y, oof), abs=1e-6)
        assert g["scores"]["platt"]["log_loss"] == pytest.approx(sk_log_loss(y, oof, labels=[0, 1]), abs=1e-6)
        assert set(g["scores"]) == {"none", "platt", "isotonic", "beta", "temperature"}
        assert [c["max_coverage"] for c in data["risk_coverage"]] == [1.0, 1.0]
        rep = tmp_path / "rep"
        assert (rep / "calibration-report.md").exists() and (rep / "risk-coverage-today.png").stat().st_size > 0
        assert (rep / "calibration-today-vanilla-model-a.png").stat().st_size > 0
        page = (vanilla / "index.html").read_text()
        assert "Calibration, held out" in page and f"{raw['brier']:.3f}" in page
        assert json.loads((cot / "calibration.json").read_text())["method"] == "cot"

        # -- eval --calibrator: calibrated and raw side by side, the calibrator recorded, no warning
        applied = tmp_path / "applied"
        result = run_eval(server, tmp_path, applied, "vanilla", "--model", "model-a", "--calibrator", str(cal_path))
        assert "warning:" not in result.stderr
        cal = read_calibrator(cal_path)
        for pred in predictions_of(applied):
            assert pred.p_outcome1_raw == pytest.approx(VANILLA[INSTANCES[[i.id for i in INSTANCES].index(pred.id)]
                                                                .condition])
            assert pred.p_outcome1 == pytest.approx(cal.calibrate(pred.p_outcome1_raw))
            assert pred.sides[0].p_outcome1_raw == pred.p_outcome1_raw
        config = RunConfig.model_validate_json((applied / "config.json").read_text())
        assert config.calibrator["kind"] == "platt" and config.calibrator["sha256"] == cal.sha256
        metrics = json.loads((applied / "metrics.json").read_text())
        assert any("platt calibrator" in n for n in metrics["notes"])
        # Refitting on the calibrated run reads the raw probabilities: the same calibrator again.
        again = runner.invoke(app, ["calibrate", "fit", str(applied), "--out", str(tmp_path / "again.json")])
        assert again.exit_code == 0, again.stderr
        assert json.loads((tmp_path / "again.json").read_text())["parameters"] == pytest.approx(file.parameters)

        # -- resuming with another calibrator is refused (the calibrator is part of the run's identity)
        iso = tmp_path / "iso.json"
        assert runner.invoke(app, ["calibrate", "fit", str(vanilla), "--kind", "isotonic", "--out", str(iso)]).exit_code == 0
        refused = runner.invoke(app, eval_args(server, tmp_path / "cache", applied, "--dataset", "today", "--method",
                                               "vanilla", "--balance-outcomes", "--limit", str(N), "--model", "model-a",
                                               "--calibrator", str(iso)))
        one_error(refused, "calibrator")

        # -- another model: applied all the same, with one warning line naming both
        other = tmp_path / "other"
        result = run_eval(server, tmp_path, other, "vanilla", "--model", "model-b", "--calibrator", str(cal_path))
        warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
        assert len(warnings) == 1 and "'model-a'" in warnings[0] and "'model-b'" in warnings[0], result.stderr


def test_refusals_are_one_line_before_any_request(tmp_path):
    with FakeOpenAIServer(responder=respond) as server:
        result = runner.invoke(app, eval_args(server, tmp_path / "cache", tmp_path / "x", "--dataset", "today",
                                              "--method", "vanilla", "--limit", "2", "--calibrator",
                                              str(tmp_path / "missing.json")))
        one_error(result, "--calibrator", "missing.json")
        assert server.completions == 0
        pairs = tmp_path / "pairs"
        result = runner.invoke(app, eval_args(server, tmp_path / "cache", pairs, "--dataset", "common2sense-pairwise",
                                              "--method", "vanilla", "--limit", "1"))
        assert result.exit_code == 0, result.stderr
    one_error(runner.invoke(app, ["calibrate", "fit", str(pairs), "--out", str(tmp_path / "c.json")]),
              "pairwise", "no gold outcome")
    one_error(runner.invoke(app, ["calibrate", "report", str(pairs)]), "pairwise")
    one_error(runner.invoke(app, ["calibrate", "fit", str(pairs), "--kind", "magic"]), "--kind", "magic")
    one_error(runner.invoke(app, ["calibrate", "fit", str(tmp_path / "nowhere")]), "no such run directory")
    one_error(runner.invoke(app, ["calibrate", "report", str(pairs), "--folds", "1"]), "--folds")


def test_a_calibrator_with_a_nan_slope_is_refused_before_any_request(tmp_path):
    """The file is read and checked before the run starts: one error naming the file and the field, and
    not one request reaches the server (neither a completion nor the model lookup)."""
    fitted = FittedOn(runs=["r"], datasets=["today"], method="vanilla", model="fake-model", n=40, n_outcome1=20,
                      date="2025-01-01T00:00:00+00:00")
    data = json.loads(CalibratorFile(kind="platt", parameters={"slope": 1.0, "intercept": 0.0},
                                     fitted_on=fitted).model_dump_json())
    data["parameters"]["slope"] = float("nan")
    cal_path = tmp_path / "cal.json"
    cal_path.write_text(json.dumps(data))  # json writes the NaN as NaN, which json (and so anchor) reads back
    assert "NaN" in cal_path.read_text()
    with FakeOpenAIServer(responder=respond) as server:
        out = tmp_path / "run"
        result = runner.invoke(app, eval_args(server, tmp_path / "cache", out, "--dataset", "today", "--method",
                                              "vanilla", "--limit", "2", "--calibrator", str(cal_path)))
        one_error(result, f"--calibrator {cal_path}", "parameters.slope", "finite")
        assert server.completions == 0 and server.requests == []
    assert not out.exists()


def test_a_calibrator_fitted_on_decisions_warns_on_pairwise_data(tmp_path):
    fitted = FittedOn(runs=["r"], datasets=["today"], method="vanilla", model="fake-model", n=40, n_outcome1=20,
                      kinds=["decision"], date="2025-01-01T00:00:00+00:00")
    cal_path = tmp_path / "cal.json"
    cal_path.write_text(CalibratorFile(kind="platt", parameters={"slope": 1.0, "intercept": 0.0},
                                       fitted_on=fitted).model_dump_json())
    with FakeOpenAIServer(deterministic=True) as server:
        result = runner.invoke(app, eval_args(server, tmp_path / "cache", tmp_path / "pairs", "--dataset",
                                              "common2sense-pairwise", "--method", "vanilla", "--limit", "1",
                                              "--calibrator", str(cal_path)))
    assert result.exit_code == 0, (result.stderr, result.exception)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: the platt calibrator was fitted on decision data, applied to pairwise data: its "
                        "probabilities may be off for these answers"], result.stderr


def test_small_cut_and_broken_runs_are_named(tmp_path):
    """`calibrate report` on three instances notes how little that is, as `fit` does; a predictions.jsonl
    cut in half, or holding a probability that is not one, is one error naming the file (and the line),
    never a calibrator fitted on what is left."""
    with FakeOpenAIServer(responder=respond) as server:
        small = tmp_path / "small"
        result = runner.invoke(app, eval_args(server, tmp_path / "cache", small, "--dataset", "today", "--method",
                                              "vanilla", "--balance-outcomes", "--limit", "3"))
        assert result.exit_code == 0, (result.stderr, result.exception)
    fit = runner.invoke(app, ["calibrate", "fit", str(small), "--out", str(tmp_path / "c.json"), "--json"])
    assert fit.exit_code == 0, fit.stderr
    assert any("Fitted on 3 labelled instances only" in n for n in json.loads(fit.stdout)["notes"])
    report = runner.invoke(app, ["calibrate", "report", str(small), "--out", str(tmp_path / "rep"), "--json",
                                 "--no-html"])
    assert report.exit_code == 0, (report.stderr, report.exception)
    (group,) = json.loads(report.stdout)["groups"]
    assert any(n.startswith("Only 3 answered instance(s)") for n in group["notes"]), group["notes"]

    preds = small / "predictions.jsonl"
    whole = preds.read_bytes()
    lines = whole.splitlines(keepends=True)
    preds.write_bytes(whole[: len(whole) // 2])  # a copy or a disk that stopped half-way
    kept = len([line for line in whole[: len(whole) // 2].splitlines(keepends=True) if line.endswith(b"\n")])
    one_error(runner.invoke(app, ["calibrate", "fit", str(small), "--out", str(tmp_path / "c2.json")]),
              str(preds), f"predictions for {kept} of the 3 (run, instance) pairs", "cut short")
    assert not (tmp_path / "c2.json").exists()

    second = json.loads(lines[1])
    second["p_outcome1"] = 5.0
    preds.write_bytes(lines[0] + (json.dumps(second) + "\n").encode() + b"".join(lines[2:]))
    for command in (["calibrate", "fit", str(small), "--out", str(tmp_path / "c3.json")],
                    ["calibrate", "report", str(small), "--no-html"]):
        one_error(runner.invoke(app, command), f"{preds}, line 2", "p_outcome1 is 5.0", "not a probability")


def test_infer_prints_and_records_both_probabilities(tmp_path, make_space):
    space_file = save_space(make_space([("Water Temperature", ["water temperature", "boiling point"])],
                                       labels={"water temperature": "outcome1"}), tmp_path / "space.json")
    condition = "You are at a high altitude where water boils at a lower temperature."
    phi = {"water temperature": 0.8, "boiling point": 0.65}
    script = ScriptedLLM(select=lambda c, candidates: list(phi), phi=phi.__getitem__,
                         partition=lambda texts: [{"name": "Heat", "factors": list(texts)}],
                         latent_params=lambda line: (0.7, 0.4))
    # infer answers with the consistent rule by default: the network alone, the base rate (0.5 here) counted once
    raw = consistent_cbn_posterior(list(phi.values()), [0, 0], [(0.7, 0.4)], 0.5)
    fitted = FittedOn(runs=["r"], datasets=["today"], method="anchor", model="model-a", n=40, n_outcome1=20,
                      date="2025-01-01T00:00:00+00:00")
    cal_path = tmp_path / "cal.json"
    cal_path.write_text(CalibratorFile(kind="platt", parameters={"slope": 0.5, "intercept": -0.2},
                                       fitted_on=fitted).model_dump_json())
    calibrated = 1 / (1 + math.exp(-(0.5 * math.log(raw / (1 - raw)) - 0.2)))
    base = ["infer", "--space", str(space_file), "-c", condition, "--cache-dir", str(tmp_path / "cache"),
            "--calibrator", str(cal_path)]
    with FakeOpenAIServer(responder=server_responder(script)) as server:
        result = runner.invoke(app, [*base, "--json", "--base-url", server.base_url, "--model", "model-a"])
        assert result.exit_code == 0, (result.stderr, result.exception)
        assert "warning:" not in result.stderr
        obj = json.loads(result.stdout)
        assert obj["p_outcome1"] == pytest.approx(calibrated) and obj["p_outcome2"] == pytest.approx(1 - calibrated)
        assert obj["calibration"]["p_raw"] == pytest.approx(raw)
        assert obj["calibration"]["p_calibrated"] == pytest.approx(calibrated) and obj["calibration"]["kind"] == "platt"
        readable = runner.invoke(app, [*base, "--base-url", server.base_url, "--model", "model-b"], terminal_width=200)
    assert readable.exit_code == 0, readable.stderr
    assert f"P(O1) = {calibrated:.3f}" in readable.stdout and f"raw P(O1) = {raw:.3f}" in readable.stdout
    warnings = [line for line in readable.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "'model-a'" in warnings[0] and "'model-b'" in warnings[0]


def test_the_trace_of_a_calibrated_anchor_run_holds_both(tmp_path):
    """ANCHOR under `anchor eval --calibrator`: each traces.jsonl line keeps the raw and calibrated P(O1)."""
    fitted = FittedOn(runs=["r"], datasets=["today"], method="anchor", model="fake-model", n=40, n_outcome1=20,
                      date="2025-01-01T00:00:00+00:00")
    cal_path = tmp_path / "cal.json"
    cal_path.write_text(CalibratorFile(kind="temperature", parameters={"inverse_temperature": 0.5},
                                       fitted_on=fitted).model_dump_json())
    with FakeOpenAIServer(deterministic=True) as server:
        out = tmp_path / "anchor"
        result = runner.invoke(app, eval_args(server, tmp_path / "cache", out, "--dataset", "today", "--method",
                                              "anchor", "--limit", "2", "--n-target", "5", "--batch-size", "3",
                                              "--max-rounds", "2", "--vote-samples", "1", "--vote-ratio", "0.3",
                                              "--calibrator", str(cal_path)))
        assert result.exit_code == 0, (result.stderr, result.exception)
    traces = [TraceRecord.model_validate_json(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    answered = [t for t in traces if t.result.get("p_outcome1") is not None]
    assert answered, "no condition was answered; the check below would prove nothing"
    for t in answered:
        raw = t.result["p_outcome1"]
        assert t.calibration.p_raw == pytest.approx(raw)
        assert t.calibration.p_calibrated == pytest.approx(1 / (1 + math.exp(-0.5 * math.log(raw / (1 - raw)))))
    for t in traces:
        if t.result.get("p_outcome1") is None:
            assert t.calibration is None


@pytest.mark.parametrize("argv, mentions", [
    (["calibrate", "--help"], ["fit", "report"]),
    (["calibrate", "fit", "--help"], ["--kind", "--out", "platt", "isotonic", "beta", "temperature"]),
    (["calibrate", "report", "--help"], ["--folds", "--kind", "--no-html", "--json"]),
    (["infer", "--help"], ["--calibrator"]),
    (["eval", "--help"], ["--calibrator"]),
])
def test_help_explains_itself(argv, mentions):
    result = runner.invoke(app, argv, terminal_width=200)
    assert result.exit_code == 0, result.output
    for word in mentions:
        assert word in result.stdout, word


def test_fact_checking_scores_balanced_accuracy_at_the_runs_threshold(tmp_path):
    """On fact checking the decision metric is balanced accuracy of 'supported' iff P > --threshold."""
    from sklearn.metrics import balanced_accuracy_score

    with FakeOpenAIServer(seed=3) as server:  # random schema-valid answers: P(claim) uniform on [0, 1]
        out = tmp_path / "covid"
        result = runner.invoke(app, eval_args(server, tmp_path / "cache", out, "--dataset", "covid", "--method",
                                              "vanilla", "--sample", "all", "--threshold", "0.6"))
        assert result.exit_code == 0, (result.stderr, result.exception)
    report = runner.invoke(app, ["calibrate", "report", str(out), "--json", "--no-html"])
    assert report.exit_code == 0, (report.stderr, report.exception)
    (group,) = json.loads(report.stdout)["groups"]
    preds = predictions_of(out)
    y = [1 if p.label == 1 else 0 for p in preds]
    assert group["task"] == "factcheck" and "0.6" in group["decision_metric"]
    assert group["scores"]["none"]["decision"] == pytest.approx(
        balanced_accuracy_score(y, [int(p.p_outcome1 is not None and p.p_outcome1 > 0.6) for p in preds]))
    assert group["scores"]["none"]["brier"] == pytest.approx(brier_score_loss(y, [p.p_outcome1 for p in preds]))
    # Each claim is its own scenario: as many scenarios as instances, spread over the folds.
    assert len({r["scenario"] for r in group["instances"]}) == len(preds) and group["n_folds"] == 5
    assert not (out / "index.html").exists()  # --no-html
