"""A *world*: one scenario with two outcomes and a hidden probabilistic model over binary factors,
so that the true P(O1 | condition) of every condition can be computed exactly.

The hidden model is a small Bayesian network over binary variables, written out in full: the
outcome ``O`` (1 = outcome 1 holds), optional latent concepts ``L1, L2, ...`` and the factors
``f1, f2, ...``. Each variable lists its parents and a conditional probability table with one entry
per parent state: ``cpt[i] = P(variable = 1 | parents in state i)``, where state ``i`` reads the
parents' values as a binary number with the first parent as the most significant bit. A world with
no parents for ``O`` has a prior on the outcome; a world whose factors are parents of ``O`` (factors
that matter only together) has a prior on each factor instead. Nothing else is assumed, so one
exact enumeration (:mod:`anchor.truth.exact`) serves every structure.

A *network world* (structure ``network``) has a published Bayesian network instead
(:class:`~anchor.truth.networks.spec.NetworkSpec`, written out in full in ``network``): outcome 1 is
"the outcome node is in the outcome state", and each factor is one state of another node (its ``node``
and ``state``), present when the node is in that state. Its ``variables`` and ``latents`` are empty.

A factor has the text an LLM would name it by, the theme it belongs to, and *mentions*: clauses a
condition uses to say that the factor is present. A condition records which factors it makes
present, the exact probability of outcome 1 given them, and a label drawn from that probability.

Worlds are data: :func:`save_worlds` writes them as indented JSON a person can read, with a schema
version; :func:`load_worlds` reads them back and checks them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from anchor.errors import AnchorError
from anchor.files import write_atomic
from anchor.truth.networks.spec import NetworkSpec

# The structures a world's hidden model can have, beside the generator's settings (light to import).
from anchor.truth.settings import STRUCTURES as STRUCTURES
from anchor.truth.settings import Structure as Structure

#: Version 2 added network worlds (``World.network``, ``WorldFactor.node`` and ``state``); a version 1
#: file is read as a version 2 file without them.
WORLD_SCHEMA_VERSION = 2
READABLE_SCHEMA_VERSIONS = (1, 2)

OUTCOME = "O"

#: What a condition is made of: ``factors`` states some factors plainly; ``paraphrase`` states them in
#: other words; ``distractor`` adds content that matches no factor to stated factors; ``nothing``
#: states no factor at all (its truth is the outcome's prior, and a method should say "unknown").
ConditionKind = Literal["factors", "paraphrase", "distractor", "nothing"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Variable(_Model):
    """A binary variable of the hidden network and its conditional probability table."""

    name: str = Field(pattern=r"^(O|L[0-9]+|f[0-9]+)$")
    parents: list[str] = Field(default_factory=list)
    cpt: list[float] = Field(description="P(name = 1 | parents in state i); state i reads the parents as a "
                                         "binary number, the first parent most significant.")

    @model_validator(mode="after")
    def _table(self) -> Variable:
        if len(self.cpt) != 2 ** len(self.parents):
            raise ValueError(f"{self.name}: cpt has {len(self.cpt)} entries, {2 ** len(self.parents)} expected "
                             f"for {len(self.parents)} parent(s)")
        if any(not 0.0 <= p <= 1.0 for p in self.cpt):
            raise ValueError(f"{self.name}: every cpt entry must be a probability in [0, 1]")
        if len(set(self.parents)) != len(self.parents) or self.name in self.parents:
            raise ValueError(f"{self.name}: parents must be distinct and not the variable itself")
        return self


class WorldFactor(_Model):
    """A factor: its variable's name, the phrase an LLM would name it by, its theme, and the clauses a
    condition uses to say it is present."""

    id: str = Field(pattern=r"^f[0-9]+$")
    text: str = Field(min_length=1)
    theme: str = Field(min_length=1)
    mentions: list[str] = Field(min_length=1, description="Clauses stating the factor is present, as a "
                                                          "condition words it (the first is the plain one).")
    node: str | None = Field(default=None, description="Network worlds: the node this factor is a state of.")
    state: str | None = Field(default=None, description="Network worlds: the factor is present when the node "
                                                        "is in this state.")


class WorldLatent(_Model):
    """A latent concept of a ``latent`` world: its variable's name and the concept's name."""

    id: str = Field(pattern=r"^L[0-9]+$")
    name: str = Field(min_length=1)


class WorldCondition(_Model):
    """A condition of the world's cases: its text, the factors it makes present, and the truth."""

    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    present: list[str] = Field(description="Ids of the factors the condition states are present.")
    kind: ConditionKind
    p_true: float = Field(ge=0.0, le=1.0, description="P(O1 | the present factors), exact.")
    label: Literal[1, 2] = Field(description="The outcome drawn from p_true with the world's seed.")


class World(_Model):
    """One scenario, its hidden model, its factors and its conditions."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    structure: Structure
    seed: int
    scenario: str = Field(min_length=1)
    outcome1: str = Field(min_length=1)
    outcome2: str = Field(min_length=1)
    variables: list[Variable] = Field(description="The hidden network, parents before children (empty in a "
                                                  "network world).")
    factors: list[WorldFactor]
    latents: list[WorldLatent] = Field(default_factory=list)
    conditions: list[WorldCondition] = Field(default_factory=list)
    network: NetworkSpec | None = Field(default=None, description="Network worlds: the published network.")

    @model_validator(mode="after")
    def _consistent(self) -> World:
        if (self.structure == "network") != (self.network is not None):
            raise ValueError("a world has a network exactly when its structure is 'network'")
        ids = [f.id for f in self.factors]
        if len(set(ids)) != len(ids):
            raise ValueError("factor ids repeat")
        if self.network is not None:
            self._network_factors(self.network)
        else:
            self._variable_factors()
        texts = [f.text.casefold() for f in self.factors]
        if len(set(texts)) != len(texts):
            raise ValueError("two factors have the same text")
        known = set(ids)
        ids = [c.id for c in self.conditions]
        if len(set(ids)) != len(ids):
            raise ValueError("condition ids repeat")
        for cond in self.conditions:
            unknown = [f for f in cond.present if f not in known]
            if unknown:
                raise ValueError(f"condition {cond.id} names unknown factor(s) {', '.join(unknown)}")
            if (cond.kind == "nothing") != (not cond.present):
                raise ValueError(f"condition {cond.id}: kind 'nothing' exactly when no factor is present")
        return self

    def _network_factors(self, network: NetworkSpec) -> None:
        if self.variables or self.latents:
            raise ValueError("a network world keeps its model in 'network': no variables or latents")
        states = {n.name: n.states for n in network.nodes}
        taken: set[tuple[str, str]] = set()
        for f in self.factors:
            if f.node is None or f.state is None:
                raise ValueError(f"factor {f.id}: a network world's factor names its node and state")
            if f.state not in states.get(f.node, ()):
                raise ValueError(f"factor {f.id}: {f.node} = {f.state} is not a node and state of the network")
            if f.node == network.outcome_node:
                raise ValueError(f"factor {f.id}: the outcome node {f.node} cannot be a factor")
            if (f.node, f.state) in taken:
                raise ValueError(f"factor {f.id}: two factors are {f.node} = {f.state}")
            taken.add((f.node, f.state))
        node_of = {f.id: f.node for f in self.factors}
        for cond in self.conditions:
            nodes = [node_of.get(fid) for fid in cond.present]
            if len(set(nodes)) != len(nodes):
                raise ValueError(f"condition {cond.id}: two present factors are states of one node")

    def _variable_factors(self) -> None:
        if any(f.node is not None or f.state is not None for f in self.factors):
            raise ValueError("only a network world's factors name a node and state")
        names: set[str] = set()
        for var in self.variables:
            missing = [p for p in var.parents if p not in names]
            if missing:
                raise ValueError(f"variable {var.name} comes before its parent(s) {', '.join(missing)}")
            if var.name in names:
                raise ValueError(f"variable {var.name} is defined twice")
            names.add(var.name)
        if OUTCOME not in names:
            raise ValueError("the network has no outcome variable O")
        if sorted(f.id for f in self.factors) != sorted(n for n in names if n.startswith("f")):
            raise ValueError("the factors listed are not the network's factor variables")
        if sorted(lat.id for lat in self.latents) != sorted(n for n in names if n.startswith("L")):
            raise ValueError("the latents listed are not the network's latent variables")

    def variable(self, name: str) -> Variable:
        for var in self.variables:
            if var.name == name:
                return var
        raise KeyError(name)

    def factor(self, factor_id: str) -> WorldFactor:
        for f in self.factors:
            if f.id == factor_id:
                return f
        raise KeyError(factor_id)

    def latent_of(self, factor_id: str) -> str | None:
        """The latent parent of a factor in a ``latent`` world (None elsewhere, network worlds included)."""
        if self.network is not None:
            return None
        parents = [p for p in self.variable(factor_id).parents if p.startswith("L")]
        return parents[0] if parents else None


class WorldFile(_Model):
    """What a world file holds: its schema version, how the worlds were made, and the worlds."""

    schema_version: int = WORLD_SCHEMA_VERSION
    generator: dict[str, object] = Field(default_factory=dict, description="The settings the worlds were "
                                                                          "generated with (for the record).")
    worlds: list[World] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> WorldFile:
        ids = [w.id for w in self.worlds]
        if len(set(ids)) != len(ids):
            raise ValueError("world ids repeat")
        scenarios = [(w.scenario, w.outcome1, w.outcome2) for w in self.worlds]
        if len(set(scenarios)) != len(scenarios):
            raise ValueError("two worlds have the same scenario and outcomes (the simulated LLM could not tell "
                             "them apart)")
        return self


class WorldFileError(AnchorError):
    """A world file that cannot be read: missing, not JSON, another schema version, or inconsistent."""


def save_worlds(worlds: WorldFile, path: str | Path) -> Path:
    """Write ``worlds`` as indented JSON (atomically); returns the path."""
    target = Path(path)
    write_atomic(target, json.dumps(worlds.model_dump(mode="json"), indent=1, ensure_ascii=False) + "\n")
    return target


def load_worlds(path: str | Path) -> WorldFile:
    """Read and check a world file; every failure is one :class:`WorldFileError` line naming the file."""
    source = Path(path)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise WorldFileError(f"{source}: no such world file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WorldFileError(f"{source}: not a readable JSON world file ({exc})") from None
    if not isinstance(data, dict):
        raise WorldFileError(f"{source}: a world file is a JSON object with 'schema_version' and 'worlds'")
    version = data.get("schema_version")
    if version not in READABLE_SCHEMA_VERSIONS:
        raise WorldFileError(f"{source}: schema_version {version!r}, this anchor reads "
                             f"{' and '.join(map(str, READABLE_SCHEMA_VERSIONS))}")
    try:
        # A version 1 file is a version 2 file without network worlds: read as the current version.
        return WorldFile.model_validate({**data, "schema_version": WORLD_SCHEMA_VERSION})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise WorldFileError(f"{source}: {where}: {first['msg']}") from None
