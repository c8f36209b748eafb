"""Seeded generation of worlds: a domain and themes from the bank, a hidden network of the asked
structure, its factors' texts and mentions, then the conditions with their exact truth.

Everything is drawn from generators seeded by the file's seed (``random.Random``; never the global
state), so the same settings and the same bank (:func:`~anchor.truth.vocabulary.bank_digest`) give
the same file, byte for byte.

The three structures (binary variables; ``O`` = 1 when outcome 1 holds):

* ``naive-bayes``: ``O`` -> every factor. A factor leans to one outcome with a / (a + b) in
  [0.62, 0.92] (or its mirror), or is near neutral (in [0.45, 0.55]); a = P(f | O1), b = P(f | O2).
  That is its P(O1 | f present) at even odds; at another prior the factor keeps its likelihood ratio
  a / b (and is drawn again where P(O1 | f) would leave the bounds below).
* ``latent``: ``O`` -> one latent per theme -> that theme's factors. A latent leans to
  O1 or O2: one of P(L | O1), P(L | O2) is in [0.75, 0.95], the other in [0.05, 0.25]. Each factor's
  link to its latent is symmetric, P(f | L) = c and P(f | not L) = 1 - c with c in [0.6, 0.95].
* ``interaction``: the factors are independent roots (priors in [0.1, 0.35]: a factor is usually
  absent) and every one is a parent of ``O``: P(O1 | f) = sigmoid(w0 + sum w_j f_j + sum w_jk f_j f_k),
  with main effects, a few near-neutral factors, and two to four strong pair terms: *reversals* (two
  factors that each lean mildly one way and together strongly the other) and *synergies* (two
  near-neutral factors that matter only together). w0 is set so that P(O1) is the prior.

The outcome's prior P(O1) is the settings' ``prior`` (0.5 unless asked). Every structure keeps each
factor's P(O1 | f present) inside [0.02, 0.98] (ANCHOR clips elicited probabilities at 0.01 and
0.99: the truth never reaches the clip).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from anchor.truth import exact
from anchor.truth.conditions import ConditionSettings, derive_seed, make_conditions
from anchor.truth.settings import (
    MAX_FACTORS,
    MAX_THEMES,
    MIN_FACTORS,
    MIN_THEMES,
    GenerationSettings,
    Structure,
    StructureChoice,
)
from anchor.truth.vocabulary import DOMAINS, FILLERS, PLAIN_TEMPLATES, Domain, FactorWords, Theme, bank_digest
from anchor.truth.world import Variable, World, WorldFactor, WorldFile, WorldLatent
from anchor.version import __version__

#: Every factor's P(O1 | f present) stays inside these bounds.
PHI_BOUNDS = (0.02, 0.98)
_MAX_TRIES = 200


def generate_worlds(structure: StructureChoice, n_worlds: int, seed: int, *, n_conditions: int = 24,
                    min_factors: int = MIN_FACTORS, max_factors: int = MAX_FACTORS, prior: float = 0.5) -> WorldFile:
    """``n_worlds`` worlds of ``structure`` (of each structure for ``"all"``), each with ``n_conditions``
    conditions, drawn from ``seed``. ValueError when the settings are out of range or the bank has too
    few distinct scenarios for the worlds asked for."""
    settings = GenerationSettings(structure=structure, n_worlds=n_worlds, seed=seed, n_conditions=n_conditions,
                                  min_factors=min_factors, max_factors=max_factors, prior=prior)
    return generate_groups([(s, prior) for s in settings.structures], settings)


def group_world_id(structure: str, prior: float, i: int) -> str:
    """The id of world ``i`` of a structure at a prior: ``latent-2``, or ``latent-p150-2`` at P(O1) = 0.15."""
    return f"{structure}-{i}" if prior == 0.5 else f"{structure}-p{round(prior * 1000):03d}-{i}"


def generate_groups(groups: Sequence[tuple[Structure, float]], settings: GenerationSettings) -> WorldFile:
    """``settings.n_worlds`` worlds of each (structure, prior) in ``groups``, in one file: every world has a
    scenario and conditions of its own (a prompt that names no scenario still names its world), drawn from
    ``settings.seed`` (the settings' own structure and prior are not read)."""
    plan = [(s, prior, i) for s, prior in groups for i in range(1, settings.n_worlds + 1)]
    places = _scenarios(len(plan), random.Random(derive_seed(settings.seed, "scenarios")))
    taken: set[str] = set()  # condition texts are unique across the file, not only within a world
    worlds = [generate_world(s, _world_seed(settings.seed, s, prior, i), world_id=group_world_id(s, prior, i),
                             domain=dom, name=name, settings=settings.model_copy(update={"prior": prior}),
                             taken=taken)
              for (s, prior, i), (dom, name) in zip(plan, places, strict=True)]
    described = settings.model_dump()
    if len(groups) > 1 and len({p for _, p in groups}) > 1:
        described.update(structure=sorted({s for s, _ in groups}), prior=sorted({p for _, p in groups}))
    generator: dict[str, object] = {
        "generator": "anchor.truth.generate", "anchor_version": __version__, "vocabulary": bank_digest(),
        **described, "condition_kinds": dict(ConditionSettings().shares),
    }
    return WorldFile(generator=generator, worlds=worlds)


def _world_seed(seed: int, structure: str, prior: float, i: int) -> int:
    # Even odds keep the seeds worlds had before priors could be set (the same file for the same settings).
    return derive_seed(seed, structure, i) if prior == 0.5 else derive_seed(seed, structure, prior, i)


def _scenarios(n: int, rng: random.Random) -> list[tuple[Domain, str]]:
    """``n`` distinct (domain, filler name) pairs, spread over the domains before any repeats."""
    capacity = sum(len(FILLERS[d.filler]) for d in DOMAINS)
    if n > capacity:
        raise ValueError(f"{n} worlds asked for; the bank has {capacity} distinct scenarios")
    names = {d.key: rng.sample(FILLERS[d.filler], len(FILLERS[d.filler])) for d in DOMAINS}
    order = rng.sample(DOMAINS, len(DOMAINS))
    out: list[tuple[Domain, str]] = []
    while len(out) < n:
        for d in order:
            if names[d.key] and len(out) < n:
                out.append((d, names[d.key].pop()))
    return out


def generate_world(structure: Structure, seed: int, *, world_id: str, domain: Domain, name: str,
                   settings: GenerationSettings, taken: set[str] | None = None) -> World:
    """One world of ``structure`` in ``domain`` (its scenario filled with ``name``), drawn from ``seed``."""
    rng = random.Random(seed)
    themes, picked = _pick_factors(domain, rng, settings)
    factors = [WorldFactor(id=f"f{j}", text=words.text, theme=th.name,
                           mentions=[rng.choice(PLAIN_TEMPLATES).format(text=words.text), *words.paraphrases])
               for j, (th, words) in enumerate(picked, start=1)]
    for _ in range(_MAX_TRIES):
        variables, latents = _NETWORKS[structure](rng, themes, factors, settings.prior)
        world = World(id=world_id, structure=structure, seed=seed, scenario=domain.scenario_for(name),
                      outcome1=domain.outcome1, outcome2=domain.outcome2, variables=variables, factors=factors,
                      latents=latents)
        if all(PHI_BOUNDS[0] <= exact.factor_phi(world, f.id) <= PHI_BOUNDS[1] for f in factors):
            break
    else:  # pragma: no cover - the draws below stay inside the bounds by construction
        raise RuntimeError(f"world {world_id}: no network within the phi bounds after {_MAX_TRIES} draws")
    conditions = make_conditions(world, random.Random(derive_seed(seed, "conditions")),
                                 ConditionSettings(n_conditions=settings.n_conditions), taken)
    return World.model_validate({**world.model_dump(), "conditions": [c.model_dump() for c in conditions]})


def _pick_factors(domain: Domain, rng: random.Random, settings: GenerationSettings
                  ) -> tuple[list[Theme], list[tuple[Theme, FactorWords]]]:
    """Themes of the domain and factors of those themes (shuffled), as many as the settings allow."""
    per_theme = min(len(t.factors) for t in domain.themes)
    fitting = [k for k in range(MIN_THEMES, min(MAX_THEMES, len(domain.themes)) + 1)
               if k * per_theme >= settings.min_factors]
    n_themes = rng.choice(fitting)
    themes = rng.sample(list(domain.themes), n_themes)
    n_factors = rng.randint(settings.min_factors, min(settings.max_factors, n_themes * per_theme))
    # Every theme gets at least two factors (a latent with one child is not a group), the rest at random.
    counts = [2] * n_themes
    pool = [i for i in range(n_themes) for _ in range(per_theme - 2)]
    for i in rng.sample(pool, n_factors - 2 * n_themes):
        counts[i] += 1
    picked = [(th, words) for th, k in zip(themes, counts, strict=True) for words in rng.sample(th.factors, k)]
    rng.shuffle(picked)
    return themes, picked


# --------------------------------------------------------------------------- the networks

def _leaning_phi(rng: random.Random, neutral_share: float = 0.15) -> float:
    """A factor's P(O1 | f present): mostly leaning one way, some near neutral."""
    if rng.random() < neutral_share:
        return rng.uniform(0.45, 0.55)
    phi = rng.uniform(0.62, 0.92)
    return phi if rng.random() < 0.5 else 1.0 - phi


def _round(p: float) -> float:
    return round(p, 3)


def _inside(p: float) -> bool:
    return PHI_BOUNDS[0] <= p <= PHI_BOUNDS[1]


def _naive_bayes(rng: random.Random, themes: list[Theme], factors: list[WorldFactor], prior: float
                 ) -> tuple[list[Variable], list[WorldLatent]]:
    variables = [Variable(name="O", cpt=[prior])]
    for f in factors:
        while True:
            lean = _leaning_phi(rng)
            # The likelier of a = P(f | O1) and b = P(f | O2) is drawn; the other follows from lean = a / (a + b).
            high = rng.uniform(0.3, 0.85)
            low = high * min(lean, 1 - lean) / max(lean, 1 - lean)
            a, b = (high, low) if lean >= 0.5 else (low, high)
            a, b = _round(a), _round(b)
            if _inside(prior * a / (prior * a + (1 - prior) * b)):
                break
        variables.append(Variable(name=f.id, parents=["O"], cpt=[b, a]))  # state 0 = O2
    return variables, []


def _latent(rng: random.Random, themes: list[Theme], factors: list[WorldFactor], prior: float
            ) -> tuple[list[Variable], list[WorldLatent]]:
    variables = [Variable(name="O", cpt=[prior])]
    latents = []
    leans = [i % 2 == 0 for i in range(len(themes))]  # some latents lean to O1, some to O2
    rng.shuffle(leans)
    for i, (th, to_o1) in enumerate(zip(themes, leans, strict=True), start=1):
        strong, weak = rng.uniform(0.75, 0.95), rng.uniform(0.05, 0.25)
        alpha, beta = (strong, weak) if to_o1 else (weak, strong)  # P(L | O1), P(L | O2)
        variables.append(Variable(name=f"L{i}", parents=["O"], cpt=[_round(beta), _round(alpha)]))
        latents.append(WorldLatent(id=f"L{i}", name=th.name))
    parent = {th.name: f"L{i}" for i, th in enumerate(themes, start=1)}
    for f in factors:
        c = _round(rng.uniform(0.6, 0.95))
        variables.append(Variable(name=f.id, parents=[parent[f.theme]], cpt=[_round(1 - c), c]))
    return variables, latents


def _interaction(rng: random.Random, themes: list[Theme], factors: list[WorldFactor], prior: float
                 ) -> tuple[list[Variable], list[WorldLatent]]:
    n = len(factors)
    priors = [_round(rng.uniform(0.1, 0.35)) for _ in factors]
    main = [0.0] * n
    for j in range(n):
        main[j] = rng.uniform(-0.15, 0.15) if rng.random() < 0.15 else rng.choice((-1, 1)) * rng.uniform(1.0, 2.2)
    pairs: dict[tuple[int, int], float] = {}
    order = rng.sample(range(n), n)
    for k in range(rng.randint(2, min(4, n // 2))):
        j, m = sorted(order[2 * k: 2 * k + 2])
        sign = rng.choice((-1, 1))
        if k % 2 == 0:  # a reversal: each leans mildly one way, together strongly the other
            main[j], main[m] = sign * rng.uniform(0.6, 1.0), sign * rng.uniform(0.6, 1.0)
            pairs[(j, m)] = -sign * (abs(main[j]) + abs(main[m]) + rng.uniform(2.0, 3.0))
        else:  # a synergy: near neutral apart, decisive together
            main[j], main[m] = rng.uniform(-0.15, 0.15), rng.uniform(-0.15, 0.15)
            pairs[(j, m)] = sign * rng.uniform(3.0, 4.0)
    # Every parent state i reads the factors as bits, f1 most significant (world.py's convention).
    states = np.arange(2 ** n)
    bits = ((states[:, None] >> np.arange(n - 1, -1, -1)[None, :]) & 1).astype(float)
    score = bits @ np.asarray(main)
    for (j, m), w in pairs.items():
        score += w * bits[:, j] * bits[:, m]
    p = np.asarray(priors)
    weight = np.prod(np.where(bits == 1, p, 1 - p), axis=1)
    w0 = _centre(score, weight, prior)
    # Not rounded: the table then gives P(O1) = prior to the last bits, so that a condition stating
    # nothing has exactly the prior as its truth (a tie at 0.5 is a tie, not 0.5 - 1e-7).
    cpt = _outcome_table(w0, score)
    variables = [Variable(name=f.id, cpt=[p_f]) for f, p_f in zip(factors, priors, strict=True)]
    variables.append(Variable(name="O", parents=[f.id for f in factors], cpt=[float(x) for x in cpt]))
    return variables, []


def _outcome_table(w0: float, score: np.ndarray) -> np.ndarray:
    """P(O1 | each parent state): the logistic of w0 + score, kept inside [1e-6, 1 - 1e-6]."""
    return np.clip(1.0 / (1.0 + np.exp(-(w0 + score))), 1e-6, 1 - 1e-6)


def _centre(score: np.ndarray, weight: np.ndarray, prior: float) -> float:
    """The intercept w0 with sum(weight * sigmoid(w0 + score)) = prior, by bisection (it is monotone)."""
    lo, hi = -20.0, 20.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if float(np.sum(weight * _outcome_table(mid, score))) < prior:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


_NETWORKS = {"naive-bayes": _naive_bayes, "latent": _latent, "interaction": _interaction}
