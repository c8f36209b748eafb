"""The contract every registered method keeps, checked for each one (as scikit-learn's ``check_estimator``
is run over every estimator): a method added to the registry is checked by these tests with nothing else
to write, and one that breaks a clause fails here.

Each method answers two pairs of Common2Sense through ``anchor eval`` against the local test server
(schema-valid answers, the same for the same request), and:

1. **answers in schema**: every prediction reads back as a ``Prediction``; each side is a probability in
   [0, 1] or, when the method gave none, says why (a method judging a pair together chooses 1, 2 or 3);
2. **cost recorded**: the run's call log holds every request the server answered, no more;
3. **resumable**: the same command on the same ``--out`` finds the run done, asks nothing, changes nothing;
4. **the same answer from the cache**: a fresh ``--out`` over the same cache asks nothing and answers the same;
5. **refuses what it cannot do in one line**: a ``--stage`` it does not have (or none, when it needs one)
   is one error line naming ``--stage``, before any request.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.methods import METHODS
from anchor.rundir import RunDirectory
from anchor.rundir.records import Prediction
from tests.fakeserver import FakeOpenAIServer
from tests.helpers import refused_in_one_line

runner = CliRunner()
#: Small factor spaces for the methods that build one (their answers, not their size, are checked).
SMALL_SPACE = ("--n-target", "6", "--batch-size", "3", "--max-rounds", "2")


def eval_command(method: str, server: FakeOpenAIServer, cache: Path, out: Path) -> list[str]:
    spec = METHODS[method]
    argv = ["eval", "--dataset", "common2sense-pairwise", "--method", method, "--limit", "2",
            "--base-url", server.base_url, "--cache-dir", str(cache), "--out", str(out)]
    if spec.stages:
        argv += ["--stage", spec.stages[-1]]
    if spec.uses_anchor_config:
        argv += list(SMALL_SPACE)
    return argv


def predictions(out: Path) -> list[Prediction]:
    lines = (out / "predictions.jsonl").read_text().splitlines()
    return sorted((Prediction.model_validate_json(line) for line in lines), key=lambda p: (p.run, p.id))


def answers(preds: list[Prediction]) -> list[tuple]:
    return [(p.id, p.status, p.prediction, [(s.p_outcome1, s.status) for s in p.sides]) for p in preds]


@pytest.mark.parametrize("method", list(METHODS))
def test_every_registered_method_keeps_the_contract(method: str, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first, again = tmp_path / "first", tmp_path / "again"
    with FakeOpenAIServer(deterministic=True) as server:
        result = runner.invoke(app, eval_command(method, server, cache, first))
        assert result.exit_code == 0, result.output
        asked = server.completions

        # 1. In schema.
        preds = predictions(first)
        assert [p.id for p in preds] == [f"common2sense-pairwise:{i}" for i in range(2)]
        for pred in preds:
            if not pred.sides:  # a method that judges the two conditions together: a choice, no probabilities
                assert pred.status != "ok" or pred.prediction in (1, 2, 3), pred
            for side in pred.sides:
                if side.p_outcome1 is None:
                    assert side.status != "ok" and side.reason, (pred.id, side)
                else:
                    assert 0.0 <= side.p_outcome1 <= 1.0, (pred.id, side)

        # 2. Cost recorded: every request the server answered is in the call log, once.
        assert asked > 0
        logged = RunDirectory(first).call_log()
        assert sum(1 for r in logged if r.outcome == "ok") == asked

        # 3. Resumable: the finished run is found done.
        result = runner.invoke(app, eval_command(method, server, cache, first))
        assert result.exit_code == 0, result.output
        assert server.completions == asked
        assert answers(predictions(first)) == answers(preds)

        # 4. The same answers from the cache, into a new directory.
        result = runner.invoke(app, eval_command(method, server, cache, again))
        assert result.exit_code == 0, result.output
        assert server.completions == asked
        assert answers(predictions(again)) == answers(preds)

        # 5. A stage it does not have, or none when it needs one: one line naming --stage, nothing asked.
        refused = tmp_path / "refused"
        refused.mkdir()
        argv = eval_command(method, server, cache, refused)
        if METHODS[method].stages:
            argv = argv[:argv.index("--stage")] + argv[argv.index("--stage") + 2:]
        else:
            argv += ["--stage", "factors"]
        refused_in_one_line(runner.invoke(app, argv), "--stage", refused)
        assert server.completions == asked
