"""A network world from a published network: its outcome, its factors and their texts, its themes, the
part of the network its questions depend on, and its conditions with their exact truth.

The truth (each condition's ``p_true``) is pgmpy's variable elimination (:mod:`.inference`); each is
cross-checked against anchor's own enumeration (:mod:`.enumeration`) where the joint it needs has at most
:data:`~anchor.truth.networks.enumeration.MAX_JOINT_STATES` states, and a disagreement above 1e-9 stops the
build. Everything is drawn from generators seeded by the world's seed: the same network, outcome, seed
and settings give the same world.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable

from anchor.truth.conditions import ConditionSettings, derive_seed, make_conditions
from anchor.truth.networks import enumeration, select
from anchor.truth.networks.inference import pgmpy_model, query_engine
from anchor.truth.networks.source import NetworkError, OutcomeError, PublishedNetwork, read_network
from anchor.truth.networks.spec import NetworkSpec
from anchor.truth.networks.words import WRITTEN, NetworkWords
from anchor.truth.world import World, WorldCondition, WorldFactor

#: The most probabilities (table entries) the part of a network a world writes may hold: it is written into
#: the world file, and pgmpy answers every question on it in well under a second below this size.
MAX_PARAMETERS = 1_000_000
#: A condition's truth and anchor's own enumeration may differ by this much (they agree to about 1e-15).
CROSS_CHECK_TOLERANCE = 1e-9


def parse_outcome(text: str) -> tuple[str, str]:
    """``NODE=STATE`` as (node, state); OutcomeError otherwise."""
    node, sep, state = text.partition("=")
    if not sep or not node.strip() or not state.strip():
        raise OutcomeError("give the outcome as NODE=STATE")
    return node.strip(), state.strip()


class _Priors:
    """Marginal distributions of the published network's nodes, by pgmpy's variable elimination."""

    def __init__(self, network: PublishedNetwork) -> None:
        self.network = network
        self._engine = query_engine(pgmpy_model(network.nodes))
        self._kept: dict[str, list[float]] = {}

    def __call__(self, node: str) -> list[float]:
        if node not in self._kept:
            result = self._engine.query([node], show_progress=False)
            self._kept[node] = [float(v) for v in result.values]
        return self._kept[node]


def network_world(name: str, *, outcome: tuple[str, str] | None = None, seed: int = 0, n_conditions: int = 24,
                  max_factors: int = select.MAX_FACTORS, world_id: str | None = None) -> World:
    """The network world of the published network ``name``: outcome 1 is ``outcome``'s node in its state
    (by default the network's written outcome, else :func:`select.default_outcome`). NetworkError for an
    unknown network, node or state, or a network too large; ValueError for settings out of range."""
    return build_world(name, outcome=outcome, seed=seed, n_conditions=n_conditions, max_factors=max_factors,
                       world_id=world_id)[0]


def build_world(name: str, *, outcome: tuple[str, str] | None, seed: int, n_conditions: int, max_factors: int,
                world_id: str | None) -> tuple[World, int]:
    """:func:`network_world`, and how many of its conditions anchor's own enumeration cross-checked."""
    settings = ConditionSettings(n_conditions=n_conditions)
    network = read_network(name)
    words = WRITTEN.get(name)
    priors = _Priors(network)
    node, state = outcome or (words.outcome if words else select.default_outcome(network.nodes, priors))
    _check_outcome(network, node, state, priors)
    picked = select.factor_nodes(network.nodes, node, random.Random(derive_seed(seed, name, node, state, "nodes")),
                                 priors, max_factors)
    keep = set(enumeration.ancestral_set(network.nodes, [node, *(n for n, _ in picked)]))
    spec = NetworkSpec(name=network.name, source=network.source, published_nodes=len(network.nodes),
                       outcome_node=node, outcome_state=state, nodes=[n for n in network.nodes if n.name in keep])
    size = sum(len(row) for n in spec.nodes for row in n.cpt)
    if size > MAX_PARAMETERS:
        raise NetworkError(f"{name}: the part of the network its questions depend on holds {size:,} probabilities; "
                           f"at most {MAX_PARAMETERS:,} are written into a world file and inferred exactly")
    heads = select.branches(network.nodes, node)
    factors = [_factor(j, n, s, words, heads[n]) for j, (n, s) in
               enumerate(((n, s) for n, states in picked for s in states), start=1)]
    is_default = outcome is None or (words is not None and tuple(outcome) == words.outcome)
    default_id = name if is_default else f"{name}-{_slug(node)}-{_slug(state)}"
    first, second = _outcome_sentences(network, node, state, words)
    world = World(id=world_id or default_id, structure="network", seed=seed, scenario=_scenario(name, words),
                  outcome1=first, outcome2=second, variables=[], factors=factors, network=spec)
    conditions = make_conditions(world, random.Random(derive_seed(seed, name, "conditions")), settings)
    checked = sum(_cross_check(world, c) for c in conditions)
    world = World.model_validate({**world.model_dump(), "conditions": [c.model_dump() for c in conditions]})
    return world, checked


def _check_outcome(network: PublishedNetwork, node: str, state: str, prior: Callable[[str], list[float]]) -> None:
    found = network.by_name.get(node)
    if found is None:
        raise OutcomeError(f"{network.name} has no node {node!r}; its nodes: {_listed(list(network.by_name))}")
    if state not in found.states:
        raise OutcomeError(f"{network.name}: {node} has no state {state!r}; its states: {', '.join(found.states)}")
    p = prior(node)[found.states.index(state)]
    if not 0.0 < p < 1.0:
        raise OutcomeError(f"{network.name}: {node} = {state} has prior probability {p:g}; the outcome must be "
                           "uncertain")


def plain_words(node: str, state: str) -> tuple[str, list[str]]:
    """The text and mentions of a factor of a network without written texts. Quotes around both names: no
    node or state name holds a quote, so no plain text can be found inside another factor's."""
    return f'"{node}" is "{state}"', [f'the variable "{node}" is "{state}"', f'"{node}" takes the value "{state}"']


def _listed(names: list[str], most: int = 30) -> str:
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown}, ... ({len(names)} in all)"


def _factor(j: int, node: str, state: str, words: NetworkWords | None, head: str | None) -> WorldFactor:
    if words is not None:
        said = words.words(node, state)
        text, mentions = said.text, list(said.mentions)
        theme = words.topics[head] if head is not None else "unconnected to the outcome"
    else:
        text, mentions = plain_words(node, state)
        theme = f'via "{head}"' if head is not None else "unconnected to the outcome"
    return WorldFactor(id=f"f{j}", text=text, theme=theme, mentions=mentions, node=node, state=state)


def _scenario(name: str, words: NetworkWords | None) -> str:
    if words is not None:
        return words.scenario
    return (f'One case of the published Bayesian network "{name}" (bnlearn repository), of which some '
            "variables are observed.")


def _outcome_sentences(network: PublishedNetwork, node: str, state: str, words: NetworkWords | None
                       ) -> tuple[str, str]:
    if words is None:
        return f'The variable "{node}" is "{state}".', f'The variable "{node}" is not "{state}".'
    if (node, state) == words.outcome:
        return words.outcome1, words.outcome2
    said = words.words(node, state).mentions[0]
    others = [s for s in network.by_name[node].states if s != state]
    if len(others) == 1:  # a two-state node: outcome 2 is its other state
        return _sentence(said), _sentence(words.words(node, others[0]).mentions[0])
    return _sentence(said), f"It is not the case that {said}."


def _sentence(clause: str) -> str:
    return clause[:1].upper() + clause[1:] + "."


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.casefold()).strip("-") or "s"


def _cross_check(world: World, condition: WorldCondition) -> bool:
    """Whether anchor's own enumeration checked the condition's truth (it stops the build on a disagreement)."""
    spec = world.network
    assert spec is not None
    query = {spec.outcome_node: [spec.outcome_state]}
    evidence = {world.factor(f).node: [world.factor(f).state] for f in condition.present}
    try:
        own = enumeration.enumerate_conditional(spec, query, evidence)  # type: ignore[arg-type]
    except enumeration.TooLarge:
        return False
    if not math.isclose(own, condition.p_true, rel_tol=0.0, abs_tol=CROSS_CHECK_TOLERANCE):
        raise RuntimeError(f"{world.id}, condition {condition.id}: pgmpy says {condition.p_true!r}, anchor's "
                           f"enumeration {own!r}")
    return True
