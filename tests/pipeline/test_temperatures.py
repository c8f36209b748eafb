"""Each sampled ANCHOR stage's temperature is a setting: abduction (0.9), label votes (0.7), mapping
selections (0.7), elicitation (0.5). The defaults are the values the prompts always used, so cache
keys do not change; a flag changes what is sent, is recorded in config.json, and a resume with
another value is refused."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from typer.testing import CliRunner

from anchor import prompts
from anchor.cli import app
from anchor.config import AnchorConfig
from anchor.evaluation.run_config import make_run_config
from anchor.llm.settings import LLMSettings
from anchor.runs.identity import first_difference, run_identity
from anchor.settings.inference import InferenceConfig
from anchor.settings.mapping import MappingConfig
from anchor.settings.space import BuildParams
from tests.fakeserver import FakeOpenAIServer
from tests.helpers import ScriptedLLM
from tests.run_helpers import eval_args, server_responder

runner = CliRunner()
TINY = ["--n-target", "4", "--batch-size", "2", "--max-rounds", "1", "--vote-samples", "1", "--rounds", "1"]
TEMPERATURES = ["--abduction-temperature", "0.6", "--vote-temperature", "0.3", "--selection-temperature", "0.4",
                "--elicit-temperature", "0.2"]


#: The tests pass every setting as a flag: variables of the user's shell must not leak in.
pytestmark = pytest.mark.usefixtures("clean_anchor_env")


def test_defaults_are_the_temperatures_the_prompts_always_sent():
    build, mapping, inference = BuildParams(), MappingConfig(), InferenceConfig()
    assert (build.abduction_temperature, build.vote_temperature) == (0.9, 0.7)
    assert (mapping.selection_temperature, inference.temperature) == (0.7, 0.5)
    assert build.abduction_temperature == prompts.GENERATE_SENTENCES.temperature
    assert build.vote_temperature == prompts.VOTE_LABELS.temperature
    assert mapping.selection_temperature == prompts.SELECT_FACTORS.temperature
    assert inference.temperature == prompts.ELICIT_PHI.temperature == prompts.ELICIT_LATENT_PARAMS.temperature


def test_temperature_flags_reach_the_requests_and_config_json(tmp_path):
    script = ScriptedLLM(rounds=[["boiling point", "starch release", "pot size", "stove power"]])
    out, cache = tmp_path / "run", tmp_path / "cache"
    with FakeOpenAIServer(responder=server_responder(script)) as server:
        args = eval_args(server, cache, out, "--dataset", "common2sense-pairwise", "--method", "anchor",
                         "--limit", "1", *TINY)
        result = runner.invoke(app, [*args, *TEMPERATURES])
        assert result.exit_code == 0, (result.stderr, result.exception)
        sent: dict[str, set[float]] = defaultdict(set)
        for body in server.requests:
            name = body["response_format"]["json_schema"]["name"].rstrip("0123456789")
            sent[name].add(body["temperature"])
        # Another temperature gives other answers: resuming with it is refused, naming the setting.
        again = runner.invoke(app, [*args, *TEMPERATURES[:-1], "0.5"])
    assert sent["Sentences"] == {0.6}
    assert sent["Votes"] == {0.3}
    assert sent["Selection"] == {0.4}
    assert sent["FactorProbabilities"] == {0.2} and sent["LatentParams"] == {0.2}
    assert sent["Factors"] == {prompts.EXTRACT_FACTORS.temperature}  # not a sampled stage: unchanged
    anchor_config = json.loads((out / "config.json").read_text())["anchor_config"]
    assert anchor_config["build"]["abduction_temperature"] == 0.6
    assert anchor_config["build"]["vote_temperature"] == 0.3
    assert anchor_config["mapping"]["selection_temperature"] == 0.4
    assert anchor_config["inference"]["temperature"] == 0.2
    assert again.exit_code == 2
    error = again.stderr.strip().splitlines()[-1]
    assert error.startswith("error: ") and "anchor_config.inference.temperature" in error, error


def test_runs_and_spaces_written_before_the_settings_read_as_the_defaults():
    """A config.json or a stored space without the temperature fields is what the defaults give, so
    the same command resumes it and reuses the space."""
    config = make_run_config(dataset="today", method="anchor", data_path=None, ablations=[], limit=2, runs=1, seed=0,
                             settings=LLMSettings(), anchor_config=AnchorConfig()).model_dump(mode="json")
    old = json.loads(json.dumps(config))
    build, mapping, inference = (old["anchor_config"][k] for k in ("build", "mapping", "inference"))
    del build["abduction_temperature"], build["vote_temperature"], mapping["selection_temperature"]
    del inference["temperature"]
    assert first_difference(run_identity(old), run_identity(config)) is None
    assert BuildParams.model_validate(build) == BuildParams()
