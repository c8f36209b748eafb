"""Answering in helper processes (--workers N) and on a real local Ray instance (--ray): the same
predictions, metrics and ledger totals as one process, the run directory written by the runner alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from tests.fakeserver import FakeOpenAIServer
from tests.test_predict import COLUMNS, vanilla, write_csv

pytestmark = pytest.mark.usefixtures("clean_anchor_env")
runner = CliRunner()
TOTALS = ("logical_requests", "llm_calls", "prompt_tokens", "completion_tokens", "cache_hits", "samples")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def outcome(run: Path) -> tuple[list, dict, dict]:
    """What must not depend on where the instances were answered: each prediction (in (run, id) order,
    its measured times aside, its cost per stage in stage order: stages that ran at once are listed
    in the order they first answered), the scores and the cost totals."""
    preds = sorted(read_jsonl(run / "predictions.jsonl"), key=lambda r: (r["run"], r["id"]))
    timeless = [{**{k: v for k, v in p.items() if k not in ("seconds", "cost")},
                 "cost": sorted(({k: v for k, v in c.items() if not k.endswith("seconds")} for c in p["cost"]),
                                key=lambda c: c["stage"])}
                for p in preds]
    metrics = json.loads((run / "metrics.json").read_text())
    return timeless, metrics["mean"], {k: metrics["cost"]["total"][k] for k in TOTALS}


def run_cli(*args: str) -> None:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output


@pytest.mark.slow
def test_an_anchor_eval_in_two_processes_equals_one_in_one(tmp_path):
    with FakeOpenAIServer(deterministic=True) as server:
        for workers in ("1", "2"):
            run_cli("eval", "--dataset", "today", "--method", "anchor", "--limit", "6", "--sizes", "quick",
                    "--balance-outcomes", "--base-url", server.base_url, "--cache-dir", str(tmp_path / f"cache{workers}"),
                    "--out", str(tmp_path / f"w{workers}"), "--workers", workers)
    one, two = outcome(tmp_path / "w1"), outcome(tmp_path / "w2")
    assert one == two
    assert sorted(p.name for p in (tmp_path / "w1" / "spaces").glob("*.json")) == \
        sorted(p.name for p in (tmp_path / "w2" / "spaces").glob("*.json"))
    # The runner alone wrote the call log: every request once, as many as the server saw.
    assert one[2]["llm_calls"] > 0


def test_a_predict_run_in_two_processes_equals_one_in_one(tmp_path):
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    with FakeOpenAIServer(responder=vanilla) as server:
        for workers in ("1", "2"):
            run_cli("predict", str(cases), *COLUMNS, "--method", "vanilla", "--base-url", server.base_url,
                    "--cache-dir", str(tmp_path / f"cache{workers}"), "--out", str(tmp_path / f"w{workers}"),
                    "--workers", workers)
        assert server.completions == 24
    assert outcome(tmp_path / "w1") == outcome(tmp_path / "w2")
    assert (tmp_path / "w2" / "predictions.jsonl").read_text().count("\n") == 12


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_a_predict_run_on_a_local_ray_instance_equals_one_in_one_process(tmp_path, local_ray):
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    store = tmp_path / "store"
    with FakeOpenAIServer(deterministic=True) as server:
        for where in (("--workers", "1"), ("--ray", "auto", "--workers", "2")):
            out = tmp_path / where[1]
            run_cli("predict", str(cases), *COLUMNS, "--sizes", "quick", "--base-url", server.base_url,
                    "--cache-dir", str(tmp_path / f"cache-{where[1]}"), "--out", str(out), "--spaces", str(store / where[1]),
                    *where)
    assert outcome(tmp_path / "1") == outcome(tmp_path / "auto")
    # The actors built the spaces; the runner saved them in the run directory and in the store.
    names = sorted(p.name for p in (tmp_path / "1" / "spaces").glob("*.json"))
    assert len(names) == 3
    assert sorted(p.name for p in (tmp_path / "auto" / "spaces").glob("*.json")) == names
    assert sorted(p.name for p in (store / "auto" / "spaces").glob("*.json")) == names
