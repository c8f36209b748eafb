"""``anchor predict`` end to end against a real local OpenAI-compatible server (scripted answers)."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, balanced_accuracy_score, brier_score_loss, log_loss
from typer.testing import CliRunner

from anchor.cli import app
from anchor.rundir import DirectoryLock
from anchor.rundir.records import MetricsReport, Prediction
from tests.fakeserver import FakeOpenAIServer

pytestmark = pytest.mark.usefixtures("clean_anchor_env")
runner = CliRunner()
CONDITION = re.compile(r"^Condition: (.*)$", re.MULTILINE)

SCENARIOS = [
    ("Mia plans how to get to work.", "Mia cycles.", "Mia takes the bus."),
    ("A bakery decides what to bake on Sunday.", "It bakes bread.", "It bakes cakes."),
    ("", "The bridge is open tonight.", "It is not true that the bridge is open tonight."),
]
#: Scripted P(O1) of each condition, and its label: 3 scenarios x 4 conditions, ties and certainties included.
CASES = [(s, f"condition {s}-{c}", p, label)
         for s, ps in enumerate([(0.9, 0.2, 0.5, 0.7), (0.1, 0.3, 0.8, 0.6), (1.0, 0.0, 0.4, 0.55)])
         for c, (p, label) in enumerate(zip(ps, (1, 2, 1, 2), strict=True))]
P = {cond: p for _, cond, p, _ in CASES}


def vanilla(body: dict) -> str:
    match = CONDITION.search(body["messages"][-1]["content"])
    return json.dumps({"probability": P[match.group(1)] if match else 0.5})


def write_csv(path: Path, *, labels: bool = True, order: list[int] | None = None) -> list[str]:
    """The cases under other column names; returns the ids in file order."""
    rows = [CASES[i] for i in (order or range(len(CASES)))]
    ids = [f"case-{CASES.index(r)}" for r in rows]
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["Key", "Situation", "A", "B", "Evidence", *(["Truth"] if labels else [])])
        for iid, (s, cond, _, label) in zip(ids, rows, strict=True):
            scen, o1, o2 = SCENARIOS[s]
            w.writerow([iid, scen, o1, o2, cond, *([label] if labels else [])])
    return ids


COLUMNS = ["--column", "id=Key", "--column", "scenario=Situation", "--column", "outcome1=A", "--column",
           "outcome2=B", "--column", "condition=Evidence", "--column", "label=Truth"]


def learn_the_format(predict: list[str], common: list[str], folder: Path, *, cwd: Path,
                     env: dict[str, str] | None = None) -> None:
    """Run ``predict`` (the command up to its table) on one case asked nowhere else, with ``common`` (the
    server and the cache folder), so that the server's output format is remembered in that cache folder.

    Until a process knows the format, its first request finds it out and its other requests wait for that
    one's verdict. A test that holds requests at the server from some count on would then hold, depending
    on which process's requests arrive first, a helper's first request and all its others with it: the
    point the test waits for comes only when that request times out."""
    warm = folder / "warm.csv"
    warm.write_text("Key,Situation,A,B,Evidence,Truth\nw,A first scenario asked only here.,Mia cycles.,"
                    "Mia takes the bus.,condition 0-0,1\n", encoding="utf-8")
    subprocess.run([*predict, str(warm), *common, "--out", str(folder / "warm")], cwd=cwd, env=env, check=True,
                   capture_output=True, timeout=300)


def predict(server: FakeOpenAIServer, tmp_path: Path, cases: Path, out: Path, *extra: str):
    args = ["predict", str(cases), "--base-url", server.base_url, "--cache-dir", str(tmp_path / "cache"),
            "--out", str(out), "--json", *extra]
    return runner.invoke(app, args)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_a_labelled_table_with_other_column_names_is_answered_in_input_order_and_scored(tmp_path):
    cases = tmp_path / "cases.csv"
    order = [5, 0, 11, 3, 8, 1, 10, 2, 7, 4, 9, 6]
    ids = write_csv(cases, order=order)
    with FakeOpenAIServer(responder=vanilla) as server:
        result = predict(server, tmp_path, cases, tmp_path / "run", "--method", "vanilla", "--format", "csv",
                         *COLUMNS)
        assert result.exit_code == 0, result.output
        assert server.completions == 12
    out = tmp_path / "run"
    preds = [Prediction.model_validate(r) for r in read_jsonl(out / "predictions.jsonl")]
    assert [p.id for p in preds] == ids
    assert [p.line for p in preds] == list(range(2, 14))
    assert [p.p_outcome1 for p in preds] == [CASES[i][2] for i in order]
    table = list(csv.DictReader((out / "predictions.csv").open(encoding="utf-8")))
    assert [r["id"] for r in table] == ids
    # The scores equal scikit-learn's on the predictions file: a tie at 0.5 decides nothing (wrong).
    y = np.array([int(r["label"]) for r in table])
    p = np.array([float(r["p_outcome1"]) for r in table])
    decided = np.where(p > 0.5, 1, np.where(p < 0.5, 2, 0))
    assert [int(r["prediction"] or 0) for r in table] == decided.tolist()
    metrics = MetricsReport.model_validate_json((out / "metrics.json").read_text())
    run = metrics.runs[0]
    assert run["labelled"] == 12 and metrics.n_unknown == 1
    assert run["accuracy"] == pytest.approx(accuracy_score(y, decided))
    with warnings.catch_warnings():  # the undecided row is a class no label has: scikit-learn says so
        warnings.simplefilter("ignore", UserWarning)
        assert run["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(y, decided))
    assert run["brier"] == pytest.approx(brier_score_loss((y == 1).astype(int), p))
    assert run["log_loss"] == pytest.approx(log_loss((y == 1).astype(int), p, labels=[0, 1]))
    # ECE: ten bins of width 0.1, a value on an edge in the bin above it (1.0 in the last).
    bins = np.minimum((p * 10 + 1e-9).astype(int), 9)
    ece = sum(abs(p[bins == b].mean() - (y[bins == b] == 1).mean()) * (bins == b).sum() for b in set(bins)) / 12
    assert run["ece"] == pytest.approx(ece)
    summary = json.loads(result.stdout)
    assert summary["rows"] == 12 and summary["rejected"] == 0 and summary["metrics"]["accuracy"] == run["accuracy"]


def test_a_json_array_on_one_line_is_answered_back_in_the_order_of_its_rows(tmp_path):
    """Every row of a JSON array written on one line starts on line 1: the order the predictions are put
    back in is the rows' own, not their line's. The first rows have the longest conditions and the server
    takes longer over longer prompts, so they are answered last."""
    rows = [{"id": f"r{i}", "scenario": "Mia plans how to get to work.", "outcome1": "Mia cycles.",
             "outcome2": "Mia takes the bus.", "condition": f"condition {i}" + " and more" * (25 * (11 - i))}
            for i in range(12)]
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps(rows), encoding="utf-8")
    with FakeOpenAIServer(responder=lambda body: json.dumps({"probability": 0.6}), per_prompt_token=0.002) as server:
        result = predict(server, tmp_path, cases, tmp_path / "run", "--method", "vanilla", "--concurrency", "12")
        assert result.exit_code == 0, result.output
    assert [r["id"] for r in read_jsonl(tmp_path / "run" / "predictions.jsonl")] == [f"r{i}" for i in range(12)]
    assert [r["id"] for r in read_jsonl(tmp_path / "run" / "instances.jsonl")] == [f"r{i}" for i in range(12)]


def test_the_same_cases_without_labels_as_json_lines_give_the_same_probabilities_and_no_scores(tmp_path):
    labelled = tmp_path / "cases.csv"
    write_csv(labelled)
    plain = tmp_path / "cases.jsonl"
    with plain.open("w", encoding="utf-8") as fh:
        for i, (s, cond, _, _) in enumerate(CASES):
            scen, o1, o2 = SCENARIOS[s]
            fh.write(json.dumps({"id": f"case-{i}", "scenario": scen, "outcome1": o1, "outcome2": o2,
                                 "condition": cond}) + "\n")
    with FakeOpenAIServer(responder=vanilla) as server:
        assert predict(server, tmp_path, labelled, tmp_path / "a", "--method", "vanilla", *COLUMNS).exit_code == 0
        result = predict(server, tmp_path, plain, tmp_path / "b", "--method", "vanilla")
        assert result.exit_code == 0, result.output
    a = read_jsonl(tmp_path / "a" / "predictions.jsonl")
    b = read_jsonl(tmp_path / "b" / "predictions.jsonl")
    assert [(r["id"], r["p_outcome1"]) for r in a] == [(r["id"], r["p_outcome1"]) for r in b]
    assert all(r["label"] is None for r in b)
    metrics = MetricsReport.model_validate_json((tmp_path / "b" / "metrics.json").read_text())
    assert metrics.runs[0]["labelled"] == 0 and metrics.runs[0]["accuracy"] is None and metrics.calibration is None
    assert json.loads(result.stdout)["metrics"] is None


def test_a_true_probability_column_is_kept_with_each_rows_prediction(tmp_path):
    # The cases of a synthetic world carry the true P(outcome1): the run keeps it, so that it can be scored
    # against the truth without the cases file. A row without one keeps none.
    cases = tmp_path / "cases.jsonl"
    truth = {}
    with cases.open("w", encoding="utf-8") as fh:
        for i, (s, cond, _, _) in enumerate(CASES):
            scen, o1, o2 = SCENARIOS[s]
            truth[f"case-{i}"] = None if i == 3 else round(0.05 + 0.07 * i, 2)
            fh.write(json.dumps({"id": f"case-{i}", "scenario": scen, "outcome1": o1, "outcome2": o2,
                                 "condition": cond, "Truth": truth[f"case-{i}"]}) + "\n")
    with FakeOpenAIServer(responder=vanilla) as server:
        result = predict(server, tmp_path, cases, tmp_path / "run", "--method", "vanilla", "--column",
                         "p_true=Truth", "--format", "csv")
        assert result.exit_code == 0, result.output
    records = read_jsonl(tmp_path / "run" / "predictions.jsonl")
    assert {r["id"]: r["p_true"] for r in records} == truth
    assert all(Prediction.model_validate(r).p_true == truth[r["id"]] for r in records)
    # The flat table carries it too, beside the label (empty where the row has none).
    rows = list(csv.DictReader((tmp_path / "run" / "predictions.csv").open(encoding="utf-8")))
    assert list(rows[0])[:5] == ["id", "line", "label", "p_true", "p_outcome1"]
    assert {r["id"]: (float(r["p_true"]) if r["p_true"] else None) for r in rows} == truth


BAD = [
    "k1,S,O1,O2,fine condition one,1",
    "k2,S,,O2,an empty outcome,1",
    "k3,S,O1,O2,,2",
    "k4,S,O1,o1,the same outcomes,1",
    "k5,S,O1,O2,a label that is neither,maybe",
    "k1,S,O1,O2,a duplicate id,1",
    "k7,S,O1,O2," + "x" * 20_000 + ",1",
    "k8,S,O1,O2,too,many,fields",
    "k9,S,O1,O2,fine condition two,2",
]


def test_bad_rows_are_listed_with_their_line_and_reason_and_the_good_rows_answered(tmp_path):
    cases = tmp_path / "bad.csv"
    raw = ("id,scenario,outcome1,outcome2,condition,label\n" + "\n".join(BAD) + "\n").encode()
    raw += b"k10,S,O1,O2,not utf-8 \xff\xfe here,1\n"
    cases.write_bytes(raw)
    answer = lambda body: json.dumps({"probability": 0.7})  # noqa: E731
    with FakeOpenAIServer(responder=answer) as server:
        result = predict(server, tmp_path, cases, tmp_path / "run", "--method", "vanilla")
        assert result.exit_code == 0, result.output
        assert server.completions == 2
    rejected = read_jsonl(tmp_path / "run" / "rejected.jsonl")
    assert [r["line"] for r in rejected] == [3, 4, 5, 6, 7, 8, 9, 11]
    reasons = " | ".join(r["reason"] for r in rejected)
    for words in ("outcome1 is empty", "condition is empty", "the same text", "label 'maybe'",
                  "duplicate id 'k1' (first on line 2)", "over the limit of 16,000", "has 7 fields",
                  "not valid UTF-8"):
        assert words in reasons
    assert [p["id"] for p in read_jsonl(tmp_path / "run" / "predictions.jsonl")] == ["k1", "k9"]
    assert json.loads(result.stdout)["rejected"] == 8


def test_strict_stops_at_the_first_bad_row_before_any_request(tmp_path):
    cases = tmp_path / "bad.csv"
    cases.write_text("id,scenario,outcome1,outcome2,condition,label\n" + "\n".join(BAD[:3]) + "\n")
    with FakeOpenAIServer(responder=vanilla) as server:
        result = predict(server, tmp_path, cases, tmp_path / "run", "--method", "vanilla", "--strict")
        assert server.completions == 0
    assert result.exit_code == 2
    assert "line 3: outcome1 is empty" in result.output and len(result.output.strip().splitlines()) == 1


def test_check_counts_and_estimates_without_asking_the_llm(tmp_path):
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    with FakeOpenAIServer(responder=vanilla) as server:
        result = predict(server, tmp_path, cases, tmp_path / "run", "--check", *COLUMNS)
        assert server.completions == 0
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["check"]["rows"], doc["check"]["good"], doc["check"]["groups"], doc["check"]["labelled"]) == (12, 12, 3, 12)
    assert doc["estimate"]["method"] == "anchor" and doc["estimate"]["requests"] > 12
    assert not (tmp_path / "run").exists()


def test_a_resumed_run_asks_only_for_the_rows_left_and_ends_as_an_uninterrupted_one(tmp_path):
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    with FakeOpenAIServer(responder=vanilla) as server:
        assert predict(server, tmp_path, cases, tmp_path / "whole", "--method", "vanilla", *COLUMNS).exit_code == 0
        whole = (tmp_path / "whole" / "predictions.jsonl").read_text()
        # As a kill leaves it: 5 rows answered in another order, and half a line.
        lines = whole.splitlines(keepends=True)
        out = tmp_path / "cut"
        assert predict(server, tmp_path, cases, out, "--method", "vanilla", *COLUMNS).exit_code == 0
        (out / "predictions.jsonl").write_text("".join([lines[4], lines[0], lines[7], lines[2], lines[9]])
                                               + lines[1][:40])
        (out / "metrics.json").unlink()
        server.reset_stats()
        result = predict(server, tmp_path, cases, out, "--method", "vanilla", "--no-cache", *COLUMNS)
        assert result.exit_code == 0, result.output
        assert server.completions == 7  # the 7 rows without a complete line, each once
    # The same records in the same order; only the measured times differ.
    assert [untimed(r) for r in read_jsonl(out / "predictions.jsonl")] == \
        [untimed(r) for r in read_jsonl(tmp_path / "whole" / "predictions.jsonl")]
    assert json.loads((out / "metrics.json").read_text())["mean"] == \
        json.loads((tmp_path / "whole" / "metrics.json").read_text())["mean"]


def untimed(record: dict) -> dict:
    """A prediction record without what a clock measured (request and instance seconds)."""
    cost = [{k: v for k, v in c.items() if not k.endswith("seconds")} for c in record["cost"]]
    return {**{k: v for k, v in record.items() if k != "seconds"}, "cost": cost}


def test_another_file_or_settings_on_the_same_out_are_refused_naming_what_differs(tmp_path):
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    other = tmp_path / "other.csv"
    write_csv(other, order=list(reversed(range(12))))
    with FakeOpenAIServer(responder=vanilla) as server:
        assert predict(server, tmp_path, cases, tmp_path / "run", "--method", "vanilla", *COLUMNS).exit_code == 0
        config = (tmp_path / "run" / "config.json").read_text()
        moved = predict(server, tmp_path, other, tmp_path / "run", "--method", "vanilla", *COLUMNS)
        remapped = predict(server, tmp_path, cases, tmp_path / "run", "--method", "vanilla", *COLUMNS[:-2])
    assert moved.exit_code == 2 and "data_sha256 was" in moved.output
    assert remapped.exit_code == 2 and "cases.columns" in remapped.output
    assert (tmp_path / "run" / "config.json").read_text() == config


def test_a_run_written_before_the_row_limit_existed_resumes(tmp_path):
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    with FakeOpenAIServer(responder=vanilla) as server:
        assert predict(server, tmp_path, cases, tmp_path / "run", "--method", "vanilla", *COLUMNS).exit_code == 0
        config = json.loads((tmp_path / "run" / "config.json").read_text())
        del config["cases"]["limits"]["max_row_bytes"]  # as a run of an earlier version recorded it
        (tmp_path / "run" / "config.json").write_text(json.dumps(config))
        again = predict(server, tmp_path, cases, tmp_path / "run", "--method", "vanilla", *COLUMNS)
    assert again.exit_code == 0, again.output


def test_a_second_process_on_the_same_out_is_refused(tmp_path):
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    out = tmp_path / "run"
    out.mkdir()
    with FakeOpenAIServer(responder=vanilla) as server, DirectoryLock(out):
        result = predict(server, tmp_path, cases, out, "--method", "vanilla", *COLUMNS)
        assert server.completions == 0
    assert result.exit_code == 2 and "in use by another anchor process" in result.output


def test_report_puts_two_methods_on_the_same_cases_side_by_side(tmp_path):
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    with FakeOpenAIServer(responder=vanilla) as server:
        for method in ("vanilla", "cot"):
            assert predict(server, tmp_path, cases, tmp_path / method, "--method", method, *COLUMNS).exit_code == 0
        short = predict(server, tmp_path, cases, tmp_path / "short", "--method", "cot", "--limit", "5", *COLUMNS)
        assert short.exit_code == 0
    result = runner.invoke(app, ["report", str(tmp_path / "vanilla"), str(tmp_path / "short"), "--no-html"])
    assert result.exit_code == 0, result.output
    section = result.stdout.split("## Your cases")[1].split("\n## ")[0]
    assert "| Vanilla | fake-model | 5 | 5 |" in section  # rescored on the 5 rows both answered
    assert "5 shared instances" in result.stdout or "share" in section


def test_a_parquet_table_holds_what_the_csv_table_holds(tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    cases = tmp_path / "cases.csv"
    write_csv(cases)
    with FakeOpenAIServer(responder=vanilla) as server:
        for fmt in ("csv", "parquet"):
            result = predict(server, tmp_path, cases, tmp_path / fmt, "--method", "vanilla", "--format", fmt, *COLUMNS)
            assert result.exit_code == 0, result.output
    table = pq.read_table(tmp_path / "parquet" / "predictions.parquet").to_pylist()
    rows = list(csv.DictReader((tmp_path / "csv" / "predictions.csv").open(encoding="utf-8")))
    assert [r["id"] for r in table] == [r["id"] for r in rows]
    assert [r["p_outcome1"] for r in table] == [float(r["p_outcome1"]) for r in rows]
    assert [r["unknown"] for r in table] == [r["unknown"] == "True" for r in rows]
    assert "p_true" not in table[0] and "p_true" not in rows[0]  # the cases have no true probability


def test_a_parquet_table_carries_the_true_probability_when_the_cases_do(tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    cases = tmp_path / "cases.jsonl"
    with cases.open("w", encoding="utf-8") as fh:
        for i, (s, cond, _, _) in enumerate(CASES[:4]):
            scen, o1, o2 = SCENARIOS[s]
            fh.write(json.dumps({"id": f"case-{i}", "scenario": scen, "outcome1": o1, "outcome2": o2,
                                 "condition": cond, "p_true": 0.25 * i}) + "\n")
    with FakeOpenAIServer(responder=vanilla) as server:
        result = predict(server, tmp_path, cases, tmp_path / "run", "--method", "vanilla", "--format", "parquet")
        assert result.exit_code == 0, result.output
    table = pq.read_table(tmp_path / "run" / "predictions.parquet")
    assert str(table.schema.field("p_true").type) == "double"
    assert [r["p_true"] for r in table.to_pylist()] == [0.0, 0.25, 0.5, 0.75]


CONSTRUCTION = ("abduction.", "voting", "themes")


def stages_asked(run: Path) -> list[str]:
    return [r["stage"] for r in read_jsonl(run / "calls.jsonl") if r["outcome"] == "ok"]


@pytest.mark.slow
def test_one_space_a_group_kept_in_a_store_that_later_runs_and_the_python_api_reuse(tmp_path):
    from anchor import Anchor, AnchorConfig, BuildParams, LLMSettings
    from anchor.settings.inference import USER_RULE, InferenceConfig

    cases = tmp_path / "cases.csv"
    write_csv(cases)
    store = tmp_path / "store"
    with FakeOpenAIServer(deterministic=True) as server:
        first = predict(server, tmp_path, cases, tmp_path / "first", "--sizes", "quick", "--spaces", str(store),
                        *COLUMNS)
        assert first.exit_code == 0, first.output
        builds = {r["scope"] for r in read_jsonl(tmp_path / "first" / "calls.jsonl") if r["scope"].startswith("space:")}
        assert len(builds) == 3 and len(list((store / "spaces").glob("*.json"))) == 3
        assert sorted(p.name for p in (tmp_path / "first" / "spaces").glob("*.json")) == \
            sorted(p.name for p in (store / "spaces").glob("*.json"))
        # Another run with another cache: the spaces come from the store, nothing of stage 1 is asked.
        second = predict(server, tmp_path, cases, tmp_path / "second", "--sizes", "quick", "--spaces", str(store),
                         "--no-cache", *COLUMNS)
        assert second.exit_code == 0, second.output
        assert stages_asked(tmp_path / "second") and not any(s.startswith(CONSTRUCTION)
                                                             for s in stages_asked(tmp_path / "second"))
        metrics = MetricsReport.model_validate_json((tmp_path / "second" / "metrics.json").read_text())
        # What the first run spent on the spaces: their construction and each scenario's base rate, kept with them.
        built = [r for r in read_jsonl(tmp_path / "first" / "calls.jsonl") if r["outcome"] == "ok"
                 and r["scope"].startswith("space:")]
        assert {r["stage"] for r in built if not r["stage"].startswith(CONSTRUCTION)} == {"inference.base_rate"}
        assert metrics.cost_reused["total"].llm_calls == len(built)
        # The Python API names spaces the same way, so it finds them too.
        engine = Anchor(settings=LLMSettings(base_url=server.base_url, cache_dir=tmp_path / "api-cache"),
                        config=AnchorConfig(build=BuildParams(n_target=16, batch_size=4, max_rounds=4, seed=0),
                                            inference=InferenceConfig(rule=USER_RULE)))
        answers = list(engine.predict(cases, spaces=store, columns={"id": "Key", "scenario": "Situation",
                                                                    "outcome1": "A", "outcome2": "B",
                                                                    "condition": "Evidence", "label": "Truth"}))
    assert sorted(a.id for a in answers) == sorted(f"case-{i}" for i in range(12))
    assert not any(r.stage.startswith(CONSTRUCTION) for r in engine.client.ledger.records)
    by_id = {r["id"]: r for r in read_jsonl(tmp_path / "second" / "predictions.jsonl")}
    assert {a.id: a.p_outcome1 for a in answers} == {i: r["p_outcome1"] for i, r in by_id.items()}
