"""Building blocks for BIRD on ANCHOR's factor space (the paper's Table 4).

ANCHOR factors are standalone statements, not slots with exclusive values, so each active factor
becomes one binary 'present' variable with one parameter, initialised from its vote label (0.75 /
0.25 / 0.5). A complete assignment is a set of present factors; the CPT is trained by the
structured Monte-Carlo scheme: each of the ``m`` assignments takes the base set of one mapped
condition (cycling over them) and adds a random number of random extra factors, up to ``L``
factors in all. Absent factors contribute nothing to P(O1 | f).

The three variants the runner offers are made of these parts:

* ``factors``: BIRD-double-dagger on ANCHOR's factors - ``map_condition_on_space`` (BIRD's strict
  per-factor mapping with the relaxed fallback), ``train_on_space``, ``transplant_probability``;
* ``mapping``: the same with ANCHOR's ``ConditionMapper`` supplying the mapped factor ids;
* ``pool``: that probability pooled with ANCHOR's Naive Bayes and CBN posteriors (``pool_with_anchor``).
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from anchor.bird.builder import training_seed
from anchor.bird.cpt import class_balance_note, copy_indices, cpt_output, fit_cpt, judge_all, label_sign
from anchor.bird.mapping import MappingSlot, map_condition
from anchor.bird.types import (
    BirdConfig,
    BirdMappingTrace,
    PresenceParameter,
    TrainingRecord,
    TransplantModel,
    TransplantSample,
)
from anchor.extras import require_extra
from anchor.inference.bayes import linear_opinion_pool
from anchor.llm.client import LLMClient
from anchor.llm.ledger import summarize
from anchor.progress import Reporter, silent
from anchor.types import Factor, FactorSpace

#: Default L. The paper does not give it; BIRD's assignments hold at most 7 values (one per factor).
DEFAULT_MAX_LENGTH = 7


def presence_factors(space: FactorSpace) -> list[Factor]:
    """The space's active factors (survivors of pruning), in the space's order."""
    active = set(space.active_factor_ids())
    return [f for f in space.factors if f.id in active]


def space_slots(space: FactorSpace) -> list[MappingSlot]:
    """ANCHOR factors as BIRD mapping slots: one value each (the factor), shown under its theme."""
    return [MappingSlot(key=f.id, name=space.theme_of(f.id) or f.text, values=(f.text,))
            for f in presence_factors(space)]


async def map_condition_on_space(client: LLMClient, space: FactorSpace, condition: str,
                                 config: BirdConfig | None = None, *, relaxed: bool = True
                                 ) -> tuple[list[str], BirdMappingTrace]:
    """BIRD's mapping (one call per factor and round, votes, reflection, and by default the relaxed
    fallback) over ANCHOR's factors; returns the mapped factor ids and the trace."""
    trace = await map_condition(client, space.scenario, space_slots(space), condition, config or BirdConfig(),
                                relaxed=relaxed)
    return list(dict.fromkeys(m.factor for m in trace.mapped)), trace


def sample_structured_assignments(pool: Sequence[str], base_sets: Sequence[Sequence[str]], m: int,
                                  max_length: int, rng: random.Random) -> list[tuple[list[str], list[str]]]:
    """``m`` pairs (base set, complete assignment), in pool order.

    Base sets are cycled; each gets k extra factors, k drawn uniformly from 0 .. L - |base| (at least
    one factor in all), the extras drawn uniformly without replacement from the rest of the pool.
    Factors outside the pool are dropped from the bases; empty bases are skipped, and with no base
    at all every assignment is a random subset of 1 .. L factors.
    """
    order = {fid: i for i, fid in enumerate(pool)}
    bases = [sorted({f for f in b if f in order}, key=order.__getitem__) for b in base_sets]
    bases = [b for b in bases if b] or [[]]
    out = []
    for i in range(m):
        base = bases[i % len(bases)]
        others = [f for f in pool if f not in base]
        room = min(max(0, max_length - len(base)), len(others))
        low = 0 if base else min(1, room)
        extra = rng.sample(others, rng.randint(low, room)) if room else []
        out.append((list(base), sorted([*base, *extra], key=order.__getitem__)))
    return out


async def train_on_space(client: LLMClient, space: FactorSpace, base_sets: Sequence[Sequence[str]],
                         config: BirdConfig | None = None, *, max_length: int = DEFAULT_MAX_LENGTH,
                         report: Reporter = silent) -> TransplantModel:
    """BIRD-style CPT training on an ANCHOR space. ``base_sets`` are the mapped factor ids of the
    scenario's conditions (from either mapping). The margin term averages over the training
    assignments (the full space of subsets is far too large to enumerate)."""
    config = config or BirdConfig()
    if max_length < 1:
        raise ValueError("max_length must be at least 1")
    require_extra("bird")  # before the first request: the fit at the end needs torch
    await client.ensure_ready()
    factors = presence_factors(space)
    model = TransplantModel(scenario=space.scenario, config=config, max_length=max_length,
                            base_sets=[list(b) for b in base_sets], llm=client.identity)
    if not factors:
        model.notes.append("no usable factor: the factor space has no active factor")
        return model
    pool = [f.id for f in factors]
    text_of = {f.id: f.text for f in factors}
    if not any(f in text_of for b in base_sets for f in b):
        model.notes.append("no condition was mapped to any factor: assignments are random subsets of the pool")
    seed, seeded = training_seed(config)
    rng = random.Random(seed)
    timings: dict[str, float] = {}
    with client.ledger.scope() as records:
        pairs = sample_structured_assignments(pool, base_sets, config.samples, max_length, rng)
        t0 = time.perf_counter()
        judgements = await judge_all(client, space.scenario, [[text_of[f] for f in a] for _, a in pairs], config,
                                     report)
        timings["cpt_data"] = round(time.perf_counter() - t0, 6)
    model.cost = summarize(records)

    for i, ((base, a), copy_index, j) in enumerate(zip(pairs, copy_indices([a for _, a in pairs]), judgements,
                                                       strict=True)):
        model.samples.append(TransplantSample(
            index=i, base=base, factor_ids=a, copy_index=copy_index, reasoning=j.reasoning,
            raw_outcome1=j.raw_outcome1, raw_outcome2=j.raw_outcome2, level1=j.level1, level2=j.level2,
            reconciled1=j.reconciled1, reconciled2=j.reconciled2, target=j.target, used=j.target is not None,
            note=j.note))
    used = [s for s in model.samples if s.used]
    dropped_scale = sum(1 for j in judgements if j.out_of_scale)
    if dropped_scale:
        model.notes.append(f"{dropped_scale} of {len(judgements)} judgements named no level of the verbal scale and "
                           "were dropped")
    column = {fid: i for i, fid in enumerate(pool)}

    def rows(assignments: Sequence[Sequence[str]]) -> np.ndarray:
        out = np.zeros((len(assignments), len(pool)), dtype=bool)
        for r, a in enumerate(assignments):
            out[r, [column[f] for f in a]] = True
        return out

    train_rows = rows([s.factor_ids for s in used])
    init = np.array([config.init_for(f.label) for f in factors], dtype=np.float64)
    signs = np.array([label_sign(f.label) for f in factors], dtype=np.float64)
    t0 = time.perf_counter()
    fit = fit_cpt(train_rows, np.array([s.target for s in used], dtype=np.float64), init, train_rows, signs,
                  epochs=config.epochs, lr=config.lr, batch_size=config.batch_size,
                  margin_weight=config.margin_weight, constrained=config.constrain_parameters,
                  eps=config.param_eps, seed=seed)
    timings["training"] = round(time.perf_counter() - t0, 6)
    model.compute_seconds = timings
    counts = train_rows.sum(axis=0)
    model.parameters = [
        PresenceParameter(factor_id=f.id, text=f.text, label=f.label, init=float(init[i]), p=float(fit.params[i]),
                          n_samples=int(counts[i]))
        for i, f in enumerate(factors)]
    model.training = TrainingRecord(
        trained=bool(used), seed=seed, seeded=seeded, epochs=config.epochs, lr=config.lr,
        batch_size=config.batch_size, margin_weight=config.margin_weight, constrained=config.constrain_parameters,
        param_eps=config.param_eps if config.constrain_parameters else None, reconciliation=config.reconciliation,
        case_sensitive_labels=config.case_sensitive_labels, product_size=None, cycled=False,
        n_samples=len(model.samples), n_used=len(used), n_dropped=len(model.samples) - len(used),
        margin_configs=int(train_rows.shape[0]), margin_sampled=True, steps=fit.steps,
        loss_per_epoch=[round(v, 10) for v in fit.loss_per_epoch])
    unseen = int(np.sum(counts == 0))
    if unseen:
        model.notes.append(f"{unseen} of {len(pool)} factors appear in no training assignment and keep their prior")
    if not used:
        model.notes.append(f"the CPT could not be trained: none of the {len(model.samples)} judgements was usable")
    balance = class_balance_note([s.target for s in used if s.target is not None])
    model.notes.extend(fit.notes)
    model.warnings.extend([balance] if balance else [])
    model.warnings.extend(fit.notes)
    return model


@dataclass
class TransplantEstimate:
    p_outcome1: float | None
    n_factors: int
    n_assignments: int
    notes: list[str] = field(default_factory=list)


def transplant_probability(model: TransplantModel, mapped_ids: Sequence[str], *, draws: int | None = None
                           ) -> TransplantEstimate:
    """P(O1 | C) for ANCHOR-mapped factor ids: the mean model output over ``draws`` completions of
    the mapped set drawn by the training scheme (default ``config.samples``; 0 = the mapped set
    alone), seeded by the model's seed and the mapped ids. ``p_outcome1`` is None when no mapped
    id is a factor of the model or the model is not trained."""
    notes = list(model.warnings)
    if not model.usable:
        notes.append("the transplanted CPT is not trained")
        return TransplantEstimate(None, 0, 0, notes)
    pool = [p.factor_id for p in model.parameters]
    known = [f for f in dict.fromkeys(mapped_ids) if f in set(pool)]
    if len(known) < len(set(mapped_ids)):
        notes.append(f"{len(set(mapped_ids)) - len(known)} mapped id(s) are not factors of the model; ignored")
    if not known:
        notes.append("no mapped factor")
        return TransplantEstimate(None, 0, 0, notes)
    n = model.config.samples if draws is None else draws
    seed_text = f"{model.training.seed if model.training else 0}\x1f" + "\x1f".join(sorted(known))
    rng = random.Random(int.from_bytes(hashlib.sha256(seed_text.encode()).digest()[:8], "big"))
    assignments = [a for _, a in sample_structured_assignments(pool, [known], n, model.max_length, rng)] if n else \
        [sorted(known, key=pool.index)]
    column = {fid: i for i, fid in enumerate(pool)}
    rows = np.zeros((len(assignments), len(pool)), dtype=bool)
    for r, a in enumerate(assignments):
        rows[r, [column[f] for f in a]] = True
    p = float(np.mean(cpt_output(rows, np.array([q.p for q in model.parameters], dtype=np.float64))))
    if not np.isfinite(p):
        notes.append("the trained model gives no finite probability here (unconstrained parameters)")
        return TransplantEstimate(None, len(known), len(assignments), notes)
    if not 0.0 <= p <= 1.0:
        notes.append(f"model output {p:.4f} lies outside [0, 1] (unconstrained parameters); clipped")
        p = min(max(p, 0.0), 1.0)
    return TransplantEstimate(p, len(known), len(assignments), notes)


def pool_with_anchor(p_cpt: float, anchor_posteriors: Mapping[str, float | None],
                     weights: Mapping[str, float] | None = None) -> float:
    """Linear opinion pool of the transplanted CPT's P(O1) with ANCHOR's posteriors (e.g.
    ``{"nb": result.nb, "cbn": result.cbn}``; None entries are left out). Equal weights by default."""
    posteriors = {"bird_cpt": p_cpt, **{k: v for k, v in anchor_posteriors.items() if v is not None}}
    if weights is None:
        weights = {name: 1.0 for name in posteriors}
    else:
        weights = {name: weights.get(name, 0.0) for name in posteriors}
    return linear_opinion_pool(posteriors, weights)
