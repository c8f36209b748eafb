"""A run that took its factor space from a shared store keeps that space's build cost in metrics.json
when it is run again with nothing left to answer (the rerun rewrites metrics.json: it must find the
space its predictions name even though no instance asked for it). On the simulated LLM in process
(real MiniLM, UMAP and HDBSCAN)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from anchor.config import AnchorConfig
from anchor.llm.settings import LLMSettings
from anchor.predict.config import CasesInput, make_predict_config
from anchor.predict.runner import PredictRunner
from anchor.runs.session import RunOptions
from anchor.settings.space import default_build_params
from anchor.truth.cases import write_cases
from anchor.truth.simulate import SimErrors, SimulatedBackend, SimulatedLLM
from tests.truth.sim_worlds import nb_world, world_file

pytestmark = pytest.mark.usefixtures("clean_anchor_env")


def predict(tmp_path: Path, backend: SimulatedBackend, cases: Path, out: Path, ablations: list[str]) -> dict:
    settings = LLMSettings(model=backend.model, cache_dir=tmp_path / "cache")
    config_ = AnchorConfig(build=default_build_params("cases", 0, "quick")).with_ablations(ablations)
    source = CasesInput.of(cases)
    config = make_predict_config(cases=source, method="anchor", settings=settings, anchor_config=config_,
                                 ablations=ablations, spaces=tmp_path / "store")
    runner = PredictRunner(config, out, RunOptions(settings, config_, backends=lambda s: backend), cases=source)
    asyncio.run(runner.run())
    return json.loads((out / "metrics.json").read_text(encoding="utf-8"))


def test_a_rerun_with_nothing_left_keeps_the_reused_spaces_cost(tmp_path: Path) -> None:
    worlds = world_file(nb_world())
    cases = write_cases(worlds, tmp_path / "cases.csv")
    backend = SimulatedBackend(SimulatedLLM(worlds, SimErrors.zero(), seed=0))
    predict(tmp_path, backend, cases, tmp_path / "full", [])  # builds the space into the store
    first = predict(tmp_path, backend, cases, tmp_path / "nb", ["no-cbn"])  # takes it from there
    assert first["cost_reused"]["total"]["logical_requests"] > 0
    again = predict(tmp_path, backend, cases, tmp_path / "nb", ["no-cbn"])  # every row already answered
    assert again["cost_reused"] == first["cost_reused"]
    assert again["cost_scope"] == first["cost_scope"]
