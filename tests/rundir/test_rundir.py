"""The run directory's one owner (anchor.rundir): the schema version every reader checks,
strict readers that name a damaged line, lenient ones that say what they left out, one TraceRecord,
and run directories of the first layout (no schema_version, metrics.json's older cost names) still
read and resumed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.evaluation.datasets.selection import select_instances
from anchor.evaluation.report import RunIndexError, load_run, write_run_index
from anchor.evaluation.report.transplant import mapping_cost
from anchor.reproduce import estimate as est
from anchor.rundir import SCHEMA_VERSION, RunDirectory, RunDirError, Skipped
from anchor.rundir.records import AnchorTrace, MetricsReport, RunConfig, TraceRecord
from anchor.types import CalibratedProbability, InferenceResult, StageCost
from tests.fakeserver import FakeOpenAIServer
from tests.run_helpers import eval_args

pytestmark = pytest.mark.usefixtures("clean_anchor_env")

runner = CliRunner()


def one_error(result, *needles: str) -> str:
    """Exit code 2 and one ``error:`` line naming every needle, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Finished runs against the fake server: vanilla and cot on the same 6 plasma instances, vanilla on 4
    of them (another selection), and a predict run of the shipped decision cases."""
    tmp = tmp_path_factory.mktemp("rundir")
    out: dict[str, Path] = {}
    with FakeOpenAIServer(deterministic=True) as server:
        for name, extra in (("vanilla", ["--method", "vanilla", "--limit", "6"]),
                            ("cot", ["--method", "cot", "--limit", "6"]),
                            ("vanilla4", ["--method", "vanilla", "--limit", "4"])):
            result = runner.invoke(app, eval_args(server, tmp / "cache", tmp / name, "--dataset", "plasma", *extra))
            assert result.exit_code == 0, result.output
            out[name] = tmp / name
        result = runner.invoke(app, ["predict", "--example", "decisions", "--method", "vanilla", "--base-url",
                                     server.base_url, "--cache-dir", str(tmp / "cache"), "--out",
                                     str(tmp / "cases"), "--json"])
        assert result.exit_code == 0, result.output
        out["cases"] = tmp / "cases"
    return out


def copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    (dst / ".lock").unlink(missing_ok=True)
    return dst


def set_version(run: Path, version: object) -> None:
    path = run / "config.json"
    data = json.loads(path.read_text())
    data["schema_version"] = version
    path.write_text(json.dumps(data, indent=2))


def damage_line(path: Path, n: int, text: str = "this line is not JSON") -> None:
    lines = path.read_text().splitlines(keepends=True)
    lines[n - 1] = text + "\n"
    path.write_text("".join(lines))


# --------------------------------------------------------------------------- what a run writes


def test_a_run_records_its_schema_version_and_its_costs_as_stage_costs(runs):
    config = json.loads((runs["vanilla"] / "config.json").read_text())
    assert config["schema_version"] == SCHEMA_VERSION == 3
    metrics = json.loads((runs["vanilla"] / "metrics.json").read_text())
    total = metrics["cost"]["total"]
    assert total["stage"] == "total" and "llm_seconds" in total and "request_seconds" not in total
    assert metrics["cost_per_instance"]["stage"] == "total"
    assert all(c["stage"] == stage for stage, c in metrics["cost"].items())
    # The same record as a prediction's per-stage cost.
    line = json.loads((runs["vanilla"] / "predictions.jsonl").read_text().splitlines()[0])
    assert set(line["cost"][0]) == set(total)


# --------------------------------------------------------------------------- a newer layout


def test_a_directory_of_a_newer_schema_is_refused_in_one_line_by_every_reader(runs, tmp_path):
    newer = copy_run(runs["vanilla"], tmp_path / "newer")
    set_version(newer, SCHEMA_VERSION + 1)
    config_before = (newer / "config.json").read_text()
    named = (str(newer / "config.json"), f"schema version {SCHEMA_VERSION + 1}", "upgrade anchor")
    one_error(runner.invoke(app, ["report", str(newer), "--out", str(tmp_path / "rep")]), *named)
    one_error(runner.invoke(app, ["cost", str(runs["cot"]), str(newer)]), *named)
    one_error(runner.invoke(app, ["calibrate", "report", str(newer), "--out", str(tmp_path / "cal")]), *named)
    one_error(runner.invoke(app, ["calibrate", "fit", str(newer), "--out", str(tmp_path / "c.json")]), *named)
    with pytest.raises(RunIndexError, match="upgrade anchor"):
        write_run_index(newer)
    # Resuming it is refused too, before anything is written.
    with FakeOpenAIServer(deterministic=True) as server:
        result = runner.invoke(app, eval_args(server, tmp_path / "cache", newer, "--dataset", "plasma",
                                              "--method", "vanilla", "--limit", "6"))
    one_error(result, *named)
    assert (newer / "config.json").read_text() == config_before


def test_a_newer_predict_directory_is_refused_on_resume(runs, tmp_path):
    newer = copy_run(runs["cases"], tmp_path / "newer")
    set_version(newer, SCHEMA_VERSION + 1)
    with FakeOpenAIServer(deterministic=True) as server:
        result = runner.invoke(app, ["predict", "--example", "decisions", "--method", "vanilla", "--base-url",
                                     server.base_url, "--cache-dir", str(tmp_path / "cache"), "--out", str(newer)])
        assert server.completions == 0
    one_error(result, str(newer / "config.json"), "upgrade anchor")


@pytest.mark.parametrize("version", ["two", 0, True, 1.5])
def test_a_schema_version_that_is_not_one_is_named(runs, tmp_path, version):
    bad = copy_run(runs["vanilla"], tmp_path / "bad")
    set_version(bad, version)
    with pytest.raises(RunDirError, match=r"config\.json: schema_version .* is not a run-directory schema version"):
        RunDirectory(bad).read_config()


# --------------------------------------------------------------------------- the first layout


def as_first_layout(run: Path) -> None:
    """What an anchor before the schema version wrote: no schema_version, costs without their stage and
    with request_seconds."""
    config = json.loads((run / "config.json").read_text())
    del config["schema_version"]
    (run / "config.json").write_text(json.dumps(config, indent=2))
    metrics = json.loads((run / "metrics.json").read_text())

    def old(c: dict) -> dict:
        c = {k: v for k, v in c.items() if k != "stage"}
        c["request_seconds"] = c.pop("llm_seconds")
        return c

    for key in ("cost", "cost_reused"):
        metrics[key] = {stage: old(c) for stage, c in metrics[key].items()}
    metrics["cost_per_instance"] = old(metrics["cost_per_instance"])
    (run / "metrics.json").write_text(json.dumps(metrics, indent=2))


def test_a_first_layout_directory_reads_as_version_1_with_the_same_figures(runs, tmp_path):
    first = copy_run(runs["vanilla"], tmp_path / "first")
    as_first_layout(first)
    assert RunDirectory(first).schema_version() == 1
    old, new = load_run(first), load_run(runs["vanilla"])
    assert old.config.schema_version == 1
    assert old.metrics.cost == new.metrics.cost and old.metrics.cost_per_instance == new.metrics.cost_per_instance
    assert old.metrics.cost["total"].llm_seconds == new.metrics.cost["total"].llm_seconds > 0
    # The commands read it as they read the current layout.
    result = runner.invoke(app, ["cost", str(runs["cot"]), str(first), "--json"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["calibrate", "report", str(first), str(runs["cot"]), "--out", str(tmp_path / "c"),
                                 "--folds", "2", "--no-html"])
    assert result.exit_code == 0, result.output


def test_a_first_layout_directory_resumes_and_is_rewritten_in_this_layout(runs, tmp_path):
    first = copy_run(runs["vanilla"], tmp_path / "first")
    as_first_layout(first)
    before = load_run(first).metrics
    with FakeOpenAIServer(deterministic=True) as server:
        result = runner.invoke(app, eval_args(server, tmp_path / "cache", first, "--dataset", "plasma",
                                              "--method", "vanilla", "--limit", "6"))
        assert result.exit_code == 0, result.output
        assert server.completions == 0  # every instance was answered already
    assert json.loads((first / "config.json").read_text())["schema_version"] == SCHEMA_VERSION
    assert "stage" in json.loads((first / "metrics.json").read_text())["cost"]["total"]
    after = load_run(first).metrics
    assert after.mean == before.mean and after.cost["total"].llm_calls == before.cost["total"].llm_calls


def test_metrics_written_with_cost_summary_names_load():
    data = {"dataset": "plasma", "kind": "decision", "method": "vanilla", "small_model": False, "n_instances": 1,
            "n_runs": 1, "scope": "", "runs": [], "mean": {}, "std": {},
            "cost": {"baseline.vanilla": {"llm_calls": 2, "request_seconds": 1.5, "wall_seconds": 1.0},
                     "total": {"llm_calls": 2, "failed_attempts": 0, "cache_hits": 1, "prompt_tokens": 10,
                               "completion_tokens": 3, "wall_seconds": 1.0}},
            "cost_per_instance": {"llm_calls": 2, "request_seconds": 1.5}}
    m = MetricsReport.model_validate(data)
    assert m.cost["baseline.vanilla"] == StageCost(stage="baseline.vanilla", llm_calls=2, llm_seconds=1.5,
                                                   wall_seconds=1.0)
    assert m.cost["total"].stage == "total" and m.cost["total"].logical_requests is None
    assert m.cost_per_instance == StageCost(stage="total", llm_calls=2, llm_seconds=1.5)
    again = MetricsReport.model_validate_json(m.model_dump_json())
    assert again == m


# --------------------------------------------------------------------------- a damaged line


def test_a_damaged_middle_line_is_refused_by_the_strict_readers_naming_it(runs, tmp_path):
    damaged = copy_run(runs["vanilla"], tmp_path / "damaged")
    preds = damaged / "predictions.jsonl"
    damage_line(preds, 2)
    where = f"{preds}, line 2: not valid JSON"
    one_error(runner.invoke(app, ["calibrate", "report", str(damaged), "--out", str(tmp_path / "cal")]), where)
    with pytest.raises(RunIndexError, match=r"predictions\.jsonl, line 2: not valid JSON"):
        write_run_index(damaged)
    # The report scores it again beside a run of another selection: from every line, or not at all.
    other = copy_run(runs["vanilla4"], tmp_path / "vanilla4")
    one_error(runner.invoke(app, ["report", str(damaged), str(other), "--out", str(tmp_path / "rep")]), where)
    # Resuming names it, and says what to do.
    with FakeOpenAIServer(deterministic=True) as server:
        result = runner.invoke(app, eval_args(server, tmp_path / "cache", damaged, "--dataset", "plasma",
                                              "--method", "vanilla", "--limit", "6"))
    one_error(result, where, "move the file away")
    # A line that is JSON but not a record names the field.
    damage_line(preds, 3, '{"run": 0}')
    damage_line(preds, 2, (runs["vanilla"] / "predictions.jsonl").read_text().splitlines()[1])
    with pytest.raises(RunDirError, match=r"line 3: not a prediction record \(id: Field required \(\+2 more\)\)"):
        RunDirectory(damaged).latest_predictions()


def test_a_damaged_call_line_is_refused_by_cost_naming_it(runs, tmp_path):
    damaged = copy_run(runs["cot"], tmp_path / "damaged")
    damage_line(damaged / "calls.jsonl", 3, '{"stage": "x"}')
    one_error(runner.invoke(app, ["cost", str(runs["vanilla"]), str(damaged)]),
              f"{damaged / 'calls.jsonl'}, line 3: not a call record (outcome: Field required)")


def test_lenient_readers_leave_a_damaged_line_out_and_say_so(runs, tmp_path):
    damaged = copy_run(runs["vanilla"], tmp_path / "damaged")
    damage_line(damaged / "predictions.jsonl", 2)
    calls = (runs["vanilla"] / "calls.jsonl").read_text().splitlines()
    answered = next(n for n, line in enumerate(calls, 1) if json.loads(line)["outcome"] == "ok")
    damage_line(damaged / "calls.jsonl", answered)
    # The reproduction's estimate: from the lines that can be read, and its note says how many could not.
    config = RunDirectory(damaged).read_config()
    instances, _, _ = select_instances(config)
    found, rate = est.estimate_run("vanilla", damaged, instances, 1, finished=False)
    clean, _ = est.estimate_run("vanilla", runs["vanilla"], instances, 1, finished=False)
    assert rate is not None and rate.spent.damaged == 2 and clean.spent.damaged == 0
    assert "2 damaged ledger line(s) could not be read and are left out" in found.note
    assert "damaged" not in clean.note
    assert found.spent.requests == clean.spent.requests - 1  # the damaged call line ended a request
    # The report's BIRD-on-ANCHOR table: its row says so.
    loaded = load_run(damaged)
    cost = mapping_cost(loaded.config, loaded.metrics, damaged)
    assert cost.damaged == 1 and "1 damaged line(s) of calls.jsonl left out" in cost.source
    # anchor cost reads the calls strictly and the predictions (only to place instances) leniently, with a note.
    damage_line(damaged / "calls.jsonl", answered, calls[answered - 1])
    result = runner.invoke(app, ["cost", str(runs["cot"]), str(damaged)])
    assert result.exit_code == 0, result.output
    assert f"note: 1 damaged line(s) could not be read and are left out of these figures: {damaged}" \
           f"/predictions.jsonl line 2; their instances are placed by their data file's scenario" in result.stderr


def test_a_predict_run_survives_a_damaged_call_line_and_its_metrics_say_so(runs, tmp_path):
    run = copy_run(runs["cases"], tmp_path / "cases")
    damage_line(run / "calls.jsonl", 2)
    with FakeOpenAIServer(deterministic=True) as server:
        result = runner.invoke(app, ["predict", "--example", "decisions", "--method", "vanilla", "--base-url",
                                     server.base_url, "--cache-dir", str(tmp_path / "cache"), "--out", str(run),
                                     "--json"])
        assert result.exit_code == 0, result.output
        assert server.completions == 0
    notes = MetricsReport.model_validate_json((run / "metrics.json").read_text()).notes
    assert f"Cost: 1 damaged line(s) could not be read and are left out of these figures: {run}/calls.jsonl " \
           "line 2." in notes


def test_the_unfinished_last_line_a_kill_leaves_is_no_damage(tmp_path):
    log = RunDirectory(tmp_path).calls
    record = '{"stage": "voting", "outcome": "ok"}'
    (tmp_path / "calls.jsonl").write_text(record + "\n" + '{"stage": "vot')
    skipped = Skipped()
    assert len(log.read()) == 1 and len(log.read(skipped=skipped)) == 1 and not skipped
    # Complete JSON without its newline is a line like any other.
    (tmp_path / "calls.jsonl").write_text(record + "\n" + record)
    assert len(log.read()) == 2
    (tmp_path / "calls.jsonl").write_text(record + "\n" + '{"stage": "voting"}')
    with pytest.raises(RunDirError, match="line 2: not a call record"):
        log.read()
    # The writer cuts the unfinished line off before it appends.
    (tmp_path / "calls.jsonl").write_text(record + "\n" + '{"stage": "vot')
    log.repair()
    assert (tmp_path / "calls.jsonl").read_text() == record + "\n"


def test_skipped_names_files_and_lines(tmp_path):
    skipped = Skipped()
    assert skipped.note() is None
    for n in (3, 5, 7, 9, 11, 13, 15):
        skipped.add(tmp_path / "calls.jsonl", n)
    skipped.add(tmp_path / "predictions.jsonl", 2)
    assert skipped.count == 8
    assert skipped.note() == (f"8 damaged line(s) could not be read and are left out of these figures: "
                              f"{tmp_path}/calls.jsonl lines 3, 5, 7, 9, 11 and 2 more; "
                              f"{tmp_path}/predictions.jsonl line 2")


# --------------------------------------------------------------------------- one TraceRecord


def test_one_trace_record_round_trips_and_types_anchor_results(tmp_path):
    result = InferenceResult(condition="The pot is on a high flame.", p_outcome1=0.8, p_outcome2=0.2, unknown=False)
    calibration = CalibratedProbability(p_raw=0.8, p_calibrated=0.7, kind="platt", fitted_on="a run")
    written = TraceRecord(run=0, id="plasma:1", side=0, condition=result.condition, space="abc",
                          result=result.model_dump(mode="json"), calibration=calibration)
    read = TraceRecord.model_validate_json(written.model_dump_json())
    assert read == written and isinstance(read.result, dict)
    typed = AnchorTrace.model_validate_json(written.model_dump_json())
    assert typed.result == result and typed.calibration == calibration
    assert json.loads(typed.model_dump_json()) == json.loads(written.model_dump_json())

    # In a run directory: the last line of a (run, id, side) wins, another method's trail is counted apart.
    other = TraceRecord(run=0, id="plasma:2", side=0, condition="c", result={"method": "bird", "factors": {}})
    later = written.model_copy(update={"result": {**written.result, "p_outcome1": 0.9, "p_outcome2": 0.1}})
    lines = [written, other, later]
    (tmp_path / "traces.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in lines))
    run = RunDirectory(tmp_path)
    assert run.traces.read() == lines
    assert run.latest_traces() == {(0, "plasma:1", 0): later, (0, "plasma:2", 0): other}
    anchor, others = run.anchor_traces()
    assert others == 1 and list(anchor) == [(0, "plasma:1")]
    assert anchor[(0, "plasma:1")][0].result.p_outcome1 == 0.9
    # A side other than 0 or 1 is not a trace record, in either view.
    with pytest.raises(ValueError):
        TraceRecord.model_validate({**written.model_dump(mode="json"), "side": 2})


def test_a_run_configuration_without_a_version_is_version_1():
    config = RunConfig.model_validate({"anchor_version": "0.1", "dataset": "plasma", "data_sha256": "0" * 64,
                                       "kind": "decision", "method": "vanilla", "runs": 1, "seed": 0})
    assert config.schema_version == 1
