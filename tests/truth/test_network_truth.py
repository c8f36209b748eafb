"""Network worlds: published networks pgmpy ships as worlds. Their truth is checked against pgmpy's own
variable elimination on the network as pgmpy ships it, and against anchor's own enumeration on many
evidence sets (factors present and absent); the world file round-trips and is the same for the same seed;
the file's checks refuse what a network world cannot be."""

from __future__ import annotations

import functools
import json
import random
import warnings

import pytest

pytest.importorskip("pgmpy")
from pgmpy.inference import VariableElimination  # noqa: E402

from anchor.truth import exact  # noqa: E402
from anchor.truth.generate import generate_worlds  # noqa: E402
from anchor.truth.networks import network_world, network_worlds  # noqa: E402
from anchor.truth.networks.enumeration import MAX_JOINT_STATES, enumerate_conditional  # noqa: E402
from anchor.truth.networks.select import MAX_FACTORS, distances  # noqa: E402
from anchor.truth.networks.source import read_network  # noqa: E402
from anchor.truth.world import World, WorldFileError, load_worlds, save_worlds  # noqa: E402


@functools.lru_cache(maxsize=4)
def shipped(name: str):  # noqa: ANN201
    """The network exactly as pgmpy ships it, by pgmpy's own loader (not anchor's reading of it)."""
    from pgmpy.utils import get_example_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return get_example_model(name)


def reference(infer: VariableElimination, node: str, state: str, evidence: dict[str, str]) -> float:
    result = infer.query([node], evidence=evidence or None, show_progress=False)
    return float(result.get_value(**{node: state}))


@pytest.mark.parametrize("name", ["asia", "sachs", "alarm", "insurance", "child"])
def test_p_true_is_pgmpy_variable_elimination_on_the_shipped_network(name: str) -> None:
    world = network_world(name, seed=2, n_conditions=40)
    net = world.network
    assert net is not None
    infer = VariableElimination(shipped(name))
    for cond in world.conditions:
        evidence = {world.factor(f).node: world.factor(f).state for f in cond.present}
        assert len(evidence) == len(cond.present)  # never two states of one node
        truth = reference(infer, net.outcome_node, net.outcome_state, evidence)  # type: ignore[arg-type]
        assert abs(cond.p_true - truth) <= 1e-9, (cond.id, evidence)
    # "nothing" conditions: the network's prior, which is not one half
    prior = reference(infer, net.outcome_node, net.outcome_state, {})
    nothing = [c for c in world.conditions if c.kind == "nothing"]
    assert nothing and all(abs(c.p_true - prior) <= 1e-9 for c in nothing)
    assert abs(prior - 0.5) > 0.01


def test_the_absent_factor_is_the_other_states_of_its_node() -> None:
    world = network_world("asia", n_conditions=8)
    smoker = next(f.id for f in world.factors if (f.node, f.state) == ("smoke", "yes"))
    no_either = next(f.id for f in world.factors if (f.node, f.state) == ("either", "no"))
    table = exact.joint(world)
    # asia's table: P(lung = yes | smoke = no) = 0.01; lung cancer makes "either" yes for certain
    assert table.conditional({"O": 1}, {smoker: 0}) == pytest.approx(0.01, abs=1e-15)
    assert table.conditional({"O": 1}, {no_either: 1}) == 0.0
    assert exact.prior_outcome1(world) == pytest.approx(0.055, abs=1e-15)
    with pytest.raises(ValueError, match="probability zero"):
        table.conditional({"O": 1}, {smoker: 1, next(f.id for f in world.factors if f.node == "smoke"
                                                      and f.state == "no"): 1})


def constraints(world: World, values: dict[str, int]) -> dict[str, list[str]]:
    """The states each node may be in under binary evidence, worked out here from the factors' meaning."""
    assert world.network is not None
    out: dict[str, list[str]] = {}
    for name, value in values.items():
        node, state = ((world.network.outcome_node, world.network.outcome_state) if name == "O"
                       else (world.factor(name).node, world.factor(name).state))
        states = out.get(node, world.network.node(node).states)  # type: ignore[arg-type]
        out[node] = [s for s in states if (s == state) == bool(value)]  # type: ignore[index]
    return out


@pytest.mark.parametrize("name", ["asia", "cancer", "earthquake", "survey", "sachs"])
def test_own_enumeration_equals_variable_elimination(name: str) -> None:
    world = network_world(name, seed=1, n_conditions=8)
    net = world.network
    assert net is not None
    table = exact.joint(world)
    rng = random.Random(7)
    ids = [f.id for f in world.factors]
    checked = 0
    for cond in world.conditions:  # the truth written in the file
        own = enumerate_conditional(net, constraints(world, {"O": 1}), constraints(world, {f: 1 for f in cond.present}))
        assert abs(own - cond.p_true) <= 1e-12
    while checked < 60:
        # Factors present and absent, sometimes two of one node (one present and one absent, or both absent).
        evidence = {fid: rng.randint(0, 1) for fid in rng.sample(ids, rng.randint(1, min(4, len(ids))))}
        given = constraints(world, evidence)
        if any(not states for states in given.values()) or enumerate_conditional(net, given, {}) == 0.0:
            continue  # impossible evidence: both sides refuse it (below)
        own = enumerate_conditional(net, constraints(world, {"O": 1}), given)
        assert abs(table.conditional({"O": 1}, evidence) - own) <= 1e-12, evidence
        assert abs(table.probability(evidence) - enumerate_conditional(net, given, {})) <= 1e-12, evidence
        # and the other way round, as exact.likelihoods asks: P(evidence | O2)
        own = enumerate_conditional(net, given, constraints(world, {"O": 0}))
        assert abs(table.conditional(evidence, {"O": 0}) - own) <= 1e-12, evidence
        checked += 1
    impossible = next(ev for ev in ({a: 1, b: 1} for a in ids for b in ids
                                    if a != b and world.factor(a).node == world.factor(b).node))
    with pytest.raises(ValueError, match="probability zero"):
        table.conditional({"O": 1}, impossible)


def test_the_file_says_which_conditions_were_cross_checked() -> None:
    file = network_worlds(["cancer", "alarm"], n_conditions=6)
    # cancer's joint is 32 states; alarm's outcome (BP) has 23 ancestors, a joint far beyond the limit
    assert file.generator["cross_checked"] == {"cancer": 6, "alarm": 0}
    alarm = file.worlds[1].network
    assert alarm is not None and MAX_JOINT_STATES < 3 ** 20


def test_the_world_file_round_trips_and_is_the_same_for_the_same_seed(tmp_path) -> None:
    first = save_worlds(network_worlds(["cancer", "earthquake"], seed=3, n_conditions=10), tmp_path / "a.json")
    again = save_worlds(network_worlds(["cancer", "earthquake"], seed=3, n_conditions=10), tmp_path / "b.json")
    assert first.read_bytes() == again.read_bytes()
    loaded = load_worlds(first)
    assert loaded == network_worlds(["cancer", "earthquake"], seed=3, n_conditions=10)
    assert [c.p_true for c in loaded.worlds[0].conditions] == [exact.p_outcome1(loaded.worlds[0], c.present)
                                                               for c in loaded.worlds[0].conditions]
    other = network_worlds(["cancer", "earthquake"], seed=4, n_conditions=10)
    assert [c.text for c in other.worlds[0].conditions] != [c.text for c in loaded.worlds[0].conditions]
    doc = json.loads(first.read_text())
    assert doc["schema_version"] == 2 and doc["worlds"][0]["structure"] == "network"
    assert "CC BY-SA 3.0" in doc["worlds"][0]["network"]["source"]


def test_a_version_1_file_is_read(tmp_path) -> None:
    path = save_worlds(generate_worlds("naive-bayes", 1, seed=1, n_conditions=4), tmp_path / "w.json")
    doc = json.loads(path.read_text())
    doc["schema_version"] = 1
    for world in doc["worlds"]:
        del world["network"]
        for factor in world["factors"]:
            del factor["node"], factor["state"]
    path.write_text(json.dumps(doc))
    assert load_worlds(path).worlds[0].id == "naive-bayes-1"
    doc["schema_version"] = 3
    path.write_text(json.dumps(doc))
    with pytest.raises(WorldFileError, match="schema_version 3, this anchor reads 1 and 2"):
        load_worlds(path)


@pytest.mark.parametrize("change, message", [
    (lambda w: w["factors"][0].update(state="maybe"), "is not a node and state of the network"),
    (lambda w: w["factors"][1].update(node=w["factors"][0]["node"], state=w["factors"][0]["state"]),
     "two factors are"),
    (lambda w: w["factors"][0].update(node="Cancer", state="True"), "the outcome node Cancer cannot be a factor"),
    (lambda w: w["network"]["nodes"][0]["cpt"][0].__setitem__(0, 0.5), "sums to"),
    (lambda w: w.update(structure="latent"), "exactly when its structure is 'network'"),
    (lambda w: w["conditions"][0].update(present=[f["id"] for f in w["factors"] if f["node"] == "Smoker"],
                                         kind="factors"), "two present factors are states of one node"),
])
def test_a_broken_network_world_is_refused(tmp_path, change, message) -> None:
    path = save_worlds(network_worlds(["cancer"], n_conditions=4), tmp_path / "w.json")
    doc = json.loads(path.read_text())
    change(doc["worlds"][0])
    path.write_text(json.dumps(doc))
    with pytest.raises(WorldFileError, match=message):
        load_worlds(path)


def test_factors_are_the_nearest_nodes_each_with_all_its_states() -> None:
    world = network_world("alarm", n_conditions=4)
    net = world.network
    assert net is not None and net.outcome_node == "BP"
    published = read_network("alarm")
    assert len(world.factors) <= MAX_FACTORS
    by_node: dict[str, list[str]] = {}
    for f in world.factors:
        by_node.setdefault(f.node, []).append(f.state)  # type: ignore[arg-type]
    assert all(states == published.by_name[n].states for n, states in by_node.items())
    dist = distances(published.nodes, "BP")
    spare = MAX_FACTORS - len(world.factors)
    left = [n.name for n in published.nodes if n.name not in by_node and n.name != "BP"]
    # every node left out is farther than every node taken, or would not fit into what is left
    assert all(dist[n] >= max(dist[m] for m in by_node) or len(published.by_name[n].states) > spare for n in left)
    # the file writes only the outcome's and the factors' nodes and their ancestors
    written = {n.name for n in net.nodes}
    assert set(by_node) | {"BP"} <= written and len(written) < len(published.nodes)
    assert all(p in written for n in net.nodes for p in n.parents)


def test_the_default_outcome_without_texts_follows_the_stated_rule() -> None:
    import networkx as nx

    model = shipped("insurance")
    graph = nx.DiGraph(model.edges())
    most = max(len(nx.ancestors(graph, n)) for n in model.nodes())
    world = network_world("insurance", n_conditions=4)
    net = world.network
    assert net is not None
    assert len(nx.ancestors(graph, net.outcome_node)) == most
    prior = VariableElimination(model).query([net.outcome_node], show_progress=False)
    values = {s: float(prior.get_value(**{net.outcome_node: s})) for s in net.node(net.outcome_node).states}
    inside = {s: p for s, p in values.items() if 0.1 <= p <= 0.9}
    assert net.outcome_state == min(inside, key=lambda s: abs(inside[s] - 0.5))
    assert world.outcome1 == f'The variable "{net.outcome_node}" is "{net.outcome_state}".'


def test_the_truth_is_the_same_to_the_last_bit_whatever_the_process_hash_seed():
    """A world file, and a bench's results.json, must be the same file on every run: the truth may not follow
    the iteration order of sets of node names, which Python's string hashing changes from process to process
    (pgmpy's own elimination order does)."""
    import os
    import subprocess
    import sys

    script = ("from anchor.truth.networks import network_worlds\n"
              "w = network_worlds(['child', 'sachs'], seed=0, n_conditions=24)\n"
              "print([repr(c.p_true) for world in w.worlds for c in world.conditions])\n")
    outputs = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout
               for seed in (1, 2, 3, 4)}
    assert len(outputs) == 1
