"""The simulated LLM on network worlds, with no error: ANCHOR's phi prompt answered with P(O1 | f) by exact
inference on the shipped network, latent groups read off the graph, and `anchor predict --method vanilla`
on a network world's cases giving the truth."""

from __future__ import annotations

import asyncio
import functools
import warnings
from pathlib import Path

import pytest

pytest.importorskip("pgmpy")
from pgmpy.inference import VariableElimination  # noqa: E402

from anchor.inference.elicit import discover_latents, elicit_phis  # noqa: E402
from anchor.llm.client import LLMClient  # noqa: E402
from anchor.llm.settings import LLMSettings  # noqa: E402
from anchor.predict.config import CasesInput, make_predict_config  # noqa: E402
from anchor.predict.runner import PredictRunner  # noqa: E402
from anchor.rundir import RunDirectory  # noqa: E402
from anchor.runs.session import RunOptions
from anchor.truth.cases import write_cases  # noqa: E402
from anchor.truth.networks import network_worlds  # noqa: E402
from anchor.truth.simulate import SimErrors, SimulatedBackend, SimulatedLLM  # noqa: E402
from anchor.truth.simulate.errors import OPEN_EDGE  # noqa: E402
from anchor.truth.world import WorldFile, load_worlds, save_worlds  # noqa: E402
from anchor.truth_bench.runner import OneBackend  # noqa: E402
from anchor.types import Factor, Scenario  # noqa: E402


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory) -> WorldFile:
    # Through the file, as `anchor truth serve --worlds` reads it: asia has written texts, alarm plain ones.
    path = save_worlds(network_worlds(["asia", "alarm"], seed=0, n_conditions=24),
                       tmp_path_factory.mktemp("net") / "worlds.json")
    return load_worlds(path)


def client_of(worlds: WorldFile) -> LLMClient:
    return LLMClient(SimulatedBackend(SimulatedLLM(worlds, SimErrors.zero(), seed=0)), seed=0)


@functools.lru_cache(maxsize=2)
def shipped(name: str) -> VariableElimination:
    """Variable elimination on the network as pgmpy ships it, by pgmpy's own loader."""
    from pgmpy.utils import get_example_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return VariableElimination(get_example_model(name))


def shipped_phi(name: str, node: str, state: str, outcome: tuple[str, str]) -> float:
    result = shipped(name).query([outcome[0]], evidence={node: state}, show_progress=False)
    return float(result.get_value(**{outcome[0]: outcome[1]}))


@pytest.mark.parametrize("index", [0, 1])
def test_phi_is_p_outcome1_given_the_factor_by_exact_inference(worlds: WorldFile, index: int) -> None:
    world = worlds.worlds[index]
    net = world.network
    assert net is not None
    scenario = Scenario(text=world.scenario, outcome1=world.outcome1, outcome2=world.outcome2)
    factors = [Factor(id=f.id, text=f.text) for f in world.factors]
    phis = asyncio.run(elicit_phis(client_of(worlds), scenario, factors))
    for f, phi in zip(world.factors, phis, strict=True):
        truth = shipped_phi(net.name, f.node, f.state, (net.outcome_node, net.outcome_state))  # type: ignore[arg-type]
        # the simulator keeps every number strictly inside (0, 1), by OPEN_EDGE
        assert abs(phi - min(max(truth, OPEN_EDGE), 1 - OPEN_EDGE)) <= 1e-9, (f.node, f.state)
    assert len({round(p, 6) for p in phis}) > 5  # the factors really differ


def test_latent_groups_are_the_branches_of_the_graph(worlds: WorldFile) -> None:
    asia = worlds.worlds[0]
    scenario = Scenario(text=asia.scenario, outcome1=asia.outcome1, outcome2=asia.outcome2)
    factors = [Factor(id=f.id, text=f.text) for f in asia.factors]
    grouping = asyncio.run(discover_latents(client_of(worlds), scenario, factors))
    named = {name: sorted({asia.factors[i].node for i in group}) for name, group in
             zip(grouping.names, grouping.groups, strict=True)}
    # lung cancer's neighbours are smoke and either; bronchitis hangs off smoke, the rest off either
    assert named == {"smoking": ["bronc", "smoke"], "tuberculosis or cancer": ["asia", "dysp", "either", "tub", "xray"]}


def test_vanilla_predict_on_a_network_worlds_cases_is_the_truth(worlds: WorldFile, tmp_path: Path) -> None:
    cases = write_cases(worlds, tmp_path / "cases.csv")
    backend = SimulatedBackend(SimulatedLLM(worlds, SimErrors.zero(), seed=0))
    settings = LLMSettings(model=backend.model, cache_dir=tmp_path / "cache", seed=0)
    source = CasesInput.of(cases)
    config = make_predict_config(cases=source, method="vanilla", settings=settings, anchor_config=None,
                                 command="anchor predict cases.csv --method vanilla (test)")
    runner = PredictRunner(config, tmp_path / "run", RunOptions(settings, backends=OneBackend(backend)), cases=source)
    runner.check_input()
    asyncio.run(runner.run())
    predictions = {p.id: p for p in RunDirectory(tmp_path / "run").iter_predictions(without_cost=True)}
    conditions = [c for w in worlds.worlds for c in w.conditions]
    assert len(predictions) == len(conditions) == 48
    for cond in conditions:
        pred = predictions[cond.id]
        assert pred.status == "ok" and pred.p_true == cond.p_true
        assert abs(pred.p_outcome1 - min(max(cond.p_true, OPEN_EDGE), 1 - OPEN_EDGE)) <= 1e-12, cond.id
    assert any(c.p_true < 0.2 for c in conditions) and any(c.p_true > 0.5 for c in conditions)
