"""A world file of network worlds, one world per published network, as ``anchor truth make --network``
writes it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict

from anchor.truth.conditions import ConditionSettings
from anchor.truth.networks import select
from anchor.truth.networks.build import build_world
from anchor.truth.networks.source import NetworkError, check_name, pgmpy_version
from anchor.truth.networks.words import WRITTEN
from anchor.truth.vocabulary import bank_digest
from anchor.truth.world import WorldFile
from anchor.version import __version__


def written_networks() -> list[str]:
    """The networks with texts written for this project, sorted."""
    return sorted(WRITTEN)


def words_digest() -> str:
    """A digest of every text written for the networks (a world file records it)."""
    blob = json.dumps({name: asdict(words) for name, words in sorted(WRITTEN.items())}, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def network_worlds(names: list[str], *, outcome: tuple[str, str] | None = None, seed: int = 0,
                   n_conditions: int = 24, max_factors: int = select.MAX_FACTORS) -> WorldFile:
    """One world per network of ``names`` (an ``outcome`` only with one network), each with ``n_conditions``
    conditions drawn from ``seed``. ``generator["cross_checked"]`` says, per world, how many conditions'
    truth anchor's own enumeration checked (the others' joint was too large to enumerate)."""
    if not names:
        raise NetworkError("name at least one network")
    if len(set(names)) != len(names):
        raise NetworkError(f"a network is named twice ({', '.join(names)}); a file holds one world per network")
    if outcome is not None and len(names) != 1:
        raise NetworkError("an outcome is given for one network at a time")
    for name in names:
        check_name(name)
    built = [build_world(name, outcome=outcome, seed=seed, n_conditions=n_conditions, max_factors=max_factors,
                         world_id=None) for name in names]
    generator: dict[str, object] = {
        "generator": "anchor.truth.networks", "anchor_version": __version__, "pgmpy_version": pgmpy_version(),
        "vocabulary": bank_digest(), "network_words": words_digest(), "networks": list(names),
        "outcome": None if outcome is None else f"{outcome[0]}={outcome[1]}", "seed": seed,
        "n_conditions": n_conditions, "max_factors": max_factors,
        "condition_kinds": dict(ConditionSettings().shares),
        "cross_checked": {world.id: checked for world, checked in built},
    }
    return WorldFile(generator=generator, worlds=[world for world, _ in built])
