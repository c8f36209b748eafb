"""Build a ``BirdModel`` for one scenario: abduction, CPT data, training."""

from __future__ import annotations

import random
import time

import numpy as np

from anchor.bird.abduction import BirdAbductor
from anchor.bird.cpt import (
    class_balance_note,
    copy_indices,
    fit_cpt,
    judge_all,
    label_sign,
    margin_rows,
    one_hot_rows,
    product_size,
    sample_assignments,
)
from anchor.bird.types import BirdConfig, BirdFactor, BirdModel, TrainedValue, TrainingRecord, TrainingSample
from anchor.extras import require_extra
from anchor.llm.client import LLMClient
from anchor.llm.ledger import summarize
from anchor.progress import Reporter, silent
from anchor.types import Scenario


def training_seed(config: BirdConfig) -> tuple[int, bool]:
    """The seed for the assignment draw and batch order, and whether it is the configured one
    (unseeded sampling draws a fresh seed, recorded in the model so a run can still be audited)."""
    if config.seeded_sampling:
        return config.seed, True
    return random.SystemRandom().randrange(2**31), False


async def build_bird_model(client: LLMClient, scenario: Scenario, config: BirdConfig | None = None,
                           report: Reporter = silent) -> BirdModel:
    """Run BIRD's per-scenario stages. Never returns a half-built model silently: a scenario without
    a usable factor, or with no usable judgement, gives a model whose notes say so (estimates then
    fail with that reason)."""
    config = config or BirdConfig()
    require_extra("bird")  # before the first request: the fit at the end needs torch
    await client.ensure_ready()
    timings: dict[str, float] = {}
    with client.ledger.scope() as records:
        t0 = time.perf_counter()
        abduction = await BirdAbductor(client, config, report).run(scenario)
        timings["abduction"] = round(time.perf_counter() - t0, 6)
        model = BirdModel(scenario=scenario, config=config, factors=abduction.factors, pruned=abduction.pruned,
                          abduction=abduction.record, notes=list(abduction.notes), llm=client.identity)
        if abduction.factors:
            await _train(client, model, config, timings, report)
    model.cost = summarize(records)
    model.compute_seconds = timings
    return model


async def _train(client: LLMClient, model: BirdModel, config: BirdConfig, timings: dict[str, float],
                 report: Reporter) -> None:
    factors = model.factors
    sizes = [len(f.values) for f in factors]
    seed, seeded = training_seed(config)
    rng = random.Random(seed)
    assignments, cycled = sample_assignments(sizes, config.samples, rng)
    statements = [[f.values[i].text for f, i in zip(factors, a, strict=True)] for a in assignments]

    t0 = time.perf_counter()
    judgements = await judge_all(client, model.scenario, statements, config, report)
    timings["cpt_data"] = round(time.perf_counter() - t0, 6)

    samples: list[TrainingSample] = []
    for i, (a, copy_index, j) in enumerate(zip(assignments, copy_indices(assignments), judgements, strict=True)):
        samples.append(TrainingSample(
            index=i, values=list(a), copy_index=copy_index, reasoning=j.reasoning, raw_outcome1=j.raw_outcome1,
            raw_outcome2=j.raw_outcome2, level1=j.level1, level2=j.level2, reconciled1=j.reconciled1,
            reconciled2=j.reconciled2, target=j.target, used=j.target is not None, note=j.note))
    model.samples = samples
    used = [s for s in samples if s.used]
    out_of_scale = sum(1 for j in judgements if j.out_of_scale)
    failed = sum(1 for j in judgements if j.target is None and not j.out_of_scale)
    if out_of_scale:
        example = next(s.note for s, j in zip(samples, judgements, strict=True) if j.out_of_scale)
        model.notes.append(f"{out_of_scale} of {len(samples)} judgements named no level of the verbal scale and were "
                           f"dropped (first: {example})")
    if failed:
        model.notes.append(f"{failed} of {len(samples)} judgement calls gave no valid answer and were dropped")

    init = np.array([config.init_for(v.label) for f in factors for v in f.values], dtype=np.float64)
    signs = np.array([label_sign(v.label) for f in factors for v in f.values], dtype=np.float64)
    margin, margin_sampled = margin_rows(sizes, config.margin_max_configs, rng)
    t0 = time.perf_counter()
    fit = fit_cpt(
        one_hot_rows([s.values for s in used], sizes), np.array([s.target for s in used], dtype=np.float64),
        init, margin, signs, epochs=config.epochs, lr=config.lr, batch_size=config.batch_size,
        margin_weight=config.margin_weight, constrained=config.constrain_parameters, eps=config.param_eps,
        seed=seed)
    timings["training"] = round(time.perf_counter() - t0, 6)

    model.parameters = _parameters(factors, init, fit.params)
    model.training = TrainingRecord(
        trained=bool(used), seed=seed, seeded=seeded, epochs=config.epochs, lr=config.lr,
        batch_size=config.batch_size, margin_weight=config.margin_weight, constrained=config.constrain_parameters,
        param_eps=config.param_eps if config.constrain_parameters else None, reconciliation=config.reconciliation,
        case_sensitive_labels=config.case_sensitive_labels, product_size=product_size(sizes), cycled=cycled,
        n_samples=len(samples), n_used=len(used), n_dropped=len(samples) - len(used),
        margin_configs=int(margin.shape[0]), margin_sampled=margin_sampled, steps=fit.steps,
        loss_per_epoch=[round(v, 10) for v in fit.loss_per_epoch])
    model.notes.extend(fit.notes)
    if not used:
        model.notes.append(f"the CPT could not be trained: none of the {len(samples)} judgements was usable")
    balance = class_balance_note([s.target for s in used if s.target is not None])
    if balance:
        model.notes.append(balance)
        model.warnings.append(balance)
    if fit.notes:
        model.warnings.extend(fit.notes)


def _parameters(factors: list[BirdFactor], init: np.ndarray, params: np.ndarray) -> list[TrainedValue]:
    out = []
    i = 0
    for f in factors:
        for v in f.values:
            out.append(TrainedValue(factor=f.name, value=v.text, label=v.label, init=float(init[i]),
                                    p=float(params[i])))
            i += 1
    return out
