"""BIRD's CPT: assignment sampling and the fit (recovery, margin term, constraints, determinism)."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter

import numpy as np
import pytest

from anchor.bird.cpt import (
    class_balance_note,
    condition_text,
    cpt_output,
    decode_assignment,
    fit_cpt,
    margin_rows,
    one_hot_rows,
    sample_assignments,
)
from anchor.bird.types import BirdConfig
from anchor.bird.verbal import mirror
from tests.bird.test_model import CONFIG, build, nearest_level, script
from tests.bird.test_model import TRUE as JUDGED_P

# --------------------------------------------------------------------------- sampling


def test_small_product_is_cycled_to_the_budget():
    sizes = [2, 3, 2]  # 12 assignments
    drawn, cycled = sample_assignments(sizes, 128, random.Random(0))
    full = list(itertools.product(range(2), range(3), range(2)))
    assert cycled and len(drawn) == 128
    assert drawn[:12] == full and drawn[12:24] == full  # listed in order, then repeated
    counts = Counter(drawn)
    # 128 = 10 * 12 + 8: the first 8 assignments get an eleventh copy.
    assert [counts[a] for a in full] == [11] * 8 + [10] * 4


def test_product_of_exactly_the_budget_is_listed_once():
    drawn, cycled = sample_assignments([2] * 7, 128, random.Random(0))
    assert not cycled and sorted(drawn) == list(itertools.product(range(2), repeat=7))


def test_large_product_gives_128_distinct_valid_assignments():
    sizes = [3, 4, 2, 5, 3]  # 360 assignments
    drawn, cycled = sample_assignments(sizes, 128, random.Random(7))
    assert not cycled and len(drawn) == 128 == len(set(drawn))
    assert all(len(a) == 5 and all(0 <= v < s for v, s in zip(a, sizes, strict=True)) for a in drawn)


def test_large_product_sampling_is_uniform():
    # 300 seeded draws of 128 from 3^6 = 729 assignments: each assignment is expected 300*128/729
    # = 52.7 times. Pearson's statistic over 729 cells (728 degrees of freedom) stays far below
    # the 0.1% critical value (~857) for a uniform draw; a draw biased towards low indices (for
    # example "the first 128") gives tens of thousands.
    sizes = [3] * 6
    counts = Counter()
    for seed in range(300):
        drawn, _ = sample_assignments(sizes, 128, random.Random(seed))
        counts.update(drawn)
    expected = 300 * 128 / 729
    chi2 = sum((counts.get(a, 0) - expected) ** 2 / expected for a in itertools.product(range(3), repeat=6))
    assert chi2 < 857
    # Every value of every factor is drawn about a third of the time.
    for f in range(6):
        shares = Counter(a[f] for a in counts.elements())
        assert all(abs(shares[v] / (300 * 128) - 1 / 3) < 0.01 for v in range(3))


def test_sampling_is_bounded_at_the_budget_for_any_product():
    for sizes in ([2] * 8, [6] * 7, [12] * 7):
        drawn, _ = sample_assignments(sizes, 128, random.Random(1))
        assert len(drawn) == 128 == len(set(drawn))


def test_sampling_is_deterministic_under_a_seed():
    sizes = [4, 4, 4, 4]
    assert sample_assignments(sizes, 128, random.Random(3)) == sample_assignments(sizes, 128, random.Random(3))
    assert sample_assignments(sizes, 128, random.Random(3)) != sample_assignments(sizes, 128, random.Random(4))


def test_decode_follows_product_order():
    sizes = [2, 3, 4]
    assert [decode_assignment(i, sizes) for i in range(24)] == list(itertools.product(range(2), range(3), range(4)))


def test_margin_rows_use_the_full_product_or_a_sample_above_the_cap():
    rows, sampled = margin_rows([2, 3], 100, random.Random(0))
    assert not sampled and rows.shape == (6, 5) and rows.sum(axis=1).tolist() == [2] * 6
    rows, sampled = margin_rows([4] * 5, 100, random.Random(0))  # 1024 > 100
    assert sampled and rows.shape == (100, 20) and len({r.tobytes() for r in rows}) == 100


def test_condition_text_ends_every_value_with_a_period():
    assert condition_text(["boiling water", "Lid on.", "Is it done?"]) == "boiling water. Lid on. Is it done?"


# --------------------------------------------------------------------------- the fit

SIZES = [2, 2, 3]
TRUE = np.array([0.8, 0.3, 0.7, 0.4, 0.6, 0.5, 0.2])
LABEL_INIT = np.array([0.75, 0.25, 0.75, 0.25, 0.75, 0.5, 0.25])
SIGNS = np.array([1, -1, 1, -1, 1, 0, -1], dtype=float)


def fit(rows, targets, margin, *, epochs=20, lr=0.01, weight=10.0, constrained=True, seed=0, init=LABEL_INIT,
        signs=SIGNS):
    return fit_cpt(rows, targets, init, margin, signs, epochs=epochs, lr=lr, batch_size=4, margin_weight=weight,
                   constrained=constrained, eps=1e-3, seed=seed)


def logit(p):
    return np.log(p / (1 - p))


def test_output_formula_by_hand():
    rows = one_hot_rows([(0, 0, 0), (1, 1, 2)], SIZES)
    p1 = 0.8 * 0.7 * 0.6 / (0.8 * 0.7 * 0.6 + 0.2 * 0.3 * 0.4)
    p2 = 0.3 * 0.4 * 0.2 / (0.3 * 0.4 * 0.2 + 0.7 * 0.6 * 0.8)
    assert cpt_output(rows, TRUE) == pytest.approx([p1, p2], abs=1e-12)


def test_fit_recovers_the_generating_model():
    """Targets generated by known parameters are fitted back.

    P(O1|f) depends on the parameters only through their odds ratios within each factor (scaling
    one factor's odds up and another's down changes nothing), so recovery is checked on what is
    identifiable: the output on every assignment and the within-factor log-odds differences.
    With BIRD's schedule (20 epochs, lr 0.01, 640 steps from the label initialisation) the largest
    output error is about 0.013, so 0.02 is asserted; a longer schedule fits exactly.
    """
    drawn, _ = sample_assignments(SIZES, 128, random.Random(0))
    rows = one_hot_rows(drawn, SIZES)
    targets = cpt_output(rows, TRUE)
    full, _ = margin_rows(SIZES, 1000, random.Random(0))
    short = fit(rows, targets, full)
    assert short.steps == 20 * 32
    assert np.max(np.abs(cpt_output(full, short.params) - cpt_output(full, TRUE))) < 0.02
    long = fit(rows, targets, full, epochs=50, lr=0.5)
    assert np.max(np.abs(cpt_output(full, long.params) - cpt_output(full, TRUE))) < 1e-6
    fitted, true = logit(long.params), logit(TRUE)
    for a, b in ((0, 1), (2, 3), (4, 5), (4, 6)):
        assert fitted[a] - fitted[b] == pytest.approx(true[a] - true[b], abs=1e-4)
    assert long.loss_per_epoch[-1] < 1e-12 < short.loss_per_epoch[0]


def test_margin_keeps_each_value_on_its_labels_side():
    # Value 0 is labelled outcome 1 and value 1 outcome 2, but the data says the opposite.
    sizes = [2, 2]
    true = np.array([0.2, 0.7, 0.8, 0.3])
    init, signs = np.array([0.75, 0.25, 0.75, 0.25]), np.array([1.0, -1.0, 1.0, -1.0])
    drawn, _ = sample_assignments(sizes, 128, random.Random(0))
    rows = one_hot_rows(drawn, sizes)
    full, _ = margin_rows(sizes, 100, random.Random(0))
    targets = cpt_output(rows, true)

    def mean_with(params, v):
        out = cpt_output(full, params)
        return float(out[full[:, v]].mean())

    # BIRD's step size (lr 0.01), its 20 epochs and a five times longer run, with several batch orders.
    for epochs, seed in ((20, 0), (100, 0), (100, 1), (100, 2)):
        free = fit(rows, targets, full, epochs=epochs, weight=0.0, init=init, signs=signs, seed=seed)
        held = fit(rows, targets, full, epochs=epochs, weight=10.0, init=init, signs=signs, seed=seed)
        # Without the margin the data drags both values across 0.5 ...
        assert free.params[0] < 0.35 and free.params[1] > 0.65
        assert mean_with(free.params, 0) < 0.35 and mean_with(free.params, 1) > 0.65
        # ... with it, each stays on its label's side (the hinge is zero from 0.5 on, so SGD hovers
        # just inside the boundary; with much larger steps it overshoots, see README).
        assert held.params[0] > 0.5 > held.params[1]
        assert mean_with(held.params, 0) > 0.5 - 1e-3 and mean_with(held.params, 1) < 0.5 + 1e-3


def test_neutral_values_have_no_margin_pull():
    sizes = [2]
    rows = one_hot_rows([(0,), (1,)] * 8, sizes)
    targets = np.array([0.5, 0.5] * 8)
    init = np.array([0.5, 0.5])
    full, _ = margin_rows(sizes, 10, random.Random(0))
    result = fit(rows, targets, full, init=init, signs=np.zeros(2))
    assert result.params.tolist() == [0.5, 0.5]


def test_fit_is_deterministic_under_a_seed():
    drawn, _ = sample_assignments(SIZES, 128, random.Random(0))
    rows = one_hot_rows(drawn, SIZES)
    targets = np.round(cpt_output(rows, TRUE) * 5) / 5  # coarse, like verbal targets
    full, _ = margin_rows(SIZES, 1000, random.Random(0))
    a, b, c = fit(rows, targets, full, seed=5), fit(rows, targets, full, seed=5), fit(rows, targets, full, seed=6)
    assert a.params.tobytes() == b.params.tobytes() and a.loss_per_epoch == b.loss_per_epoch
    assert a.params.tobytes() != c.params.tobytes()  # another batch order


def test_constrained_parameters_stay_inside_the_unit_interval():
    sizes = [2, 2]
    drawn, _ = sample_assignments(sizes, 128, random.Random(0))
    rows = one_hot_rows(drawn, sizes)
    targets = np.array([1.0 if a[0] == 0 else 0.0 for a in drawn])
    full, _ = margin_rows(sizes, 100, random.Random(0))
    init, signs = np.array([0.75, 0.25, 0.5, 0.5]), np.array([1.0, -1.0, 0.0, 0.0])
    bounded = fit(rows, targets, full, lr=1.0, init=init, signs=signs)
    assert np.all((bounded.params >= 1e-3) & (bounded.params <= 1 - 1e-3)) and not bounded.notes
    assert bounded.params[0] == pytest.approx(1 - 1e-3) and bounded.params[1] == pytest.approx(1e-3)
    # The reference behaviour (no projection) lets the same run leave (0, 1), and says so.
    free = fit(rows, targets, full, lr=1.0, init=init, signs=signs, constrained=False)
    assert np.any((free.params < 0) | (free.params > 1))
    assert free.notes and "outside (0, 1)" in free.notes[0]


def test_no_training_rows_leaves_the_initial_parameters():
    full, _ = margin_rows(SIZES, 1000, random.Random(0))
    result = fit(np.zeros((0, 7), dtype=bool), np.zeros(0), full)
    assert result.params.tolist() == LABEL_INIT.tolist() and result.steps == 0


def test_one_class_training_set_is_noted():
    assert class_balance_note([0.8, 0.6, 0.2]) is None
    note = class_balance_note([0.8, 1.0, 0.5, 0.6])
    assert note is not None and "outcome 1 (3 of 4" in note and note.startswith("one-class training set")
    assert "outcome 2 (2 of 2" in class_balance_note([0.2, 0.0])
    assert "all 3 usable judgements are neutral" in class_balance_note([0.5] * 3)
    assert class_balance_note([]) is None


def test_output_formula_matches_math_on_random_rows():
    rng = np.random.default_rng(0)
    params = rng.uniform(0.05, 0.95, 6)
    rows = rng.random((20, 6)) < 0.5
    for row, out in zip(rows, cpt_output(rows, params), strict=True):
        num = math.prod(p for p, on in zip(params, row, strict=True) if on)
        den = num + math.prod(1 - p for p, on in zip(params, row, strict=True) if on)
        assert out == pytest.approx(num / den, rel=1e-12)


def test_constrained_shortcut_matches_the_product_form():
    # Constrained training computes outputs as a sigmoid of summed log-odds; while no parameter
    # reaches the bounds it must follow exactly the path of the reference's product form.
    drawn, _ = sample_assignments(SIZES, 128, random.Random(0))
    rows = one_hot_rows(drawn, SIZES)
    targets = np.round(cpt_output(rows, TRUE) * 5) / 5
    full, _ = margin_rows(SIZES, 1000, random.Random(0))
    fast = fit(rows, targets, full, constrained=True)
    reference = fit(rows, targets, full, constrained=False)
    assert np.all((reference.params > 1e-3) & (reference.params < 1 - 1e-3))
    np.testing.assert_allclose(fast.params, reference.params, rtol=0, atol=1e-10)
    np.testing.assert_allclose(fast.loss_per_epoch, reference.loss_per_epoch, rtol=1e-9)


# --------------------------------------------------------------------------- the default margin weight, built


def test_the_default_margin_weight_is_the_one_the_build_trains_with(scripted_client):
    """Not only recorded: a model built with BirdConfig's default margin weight is the model built with
    weight 10, and its margin holds a value on its label's side where the judgements pull it across."""
    contradicted = {**JUDGED_P, "lid on": 0.2}  # labelled outcome 1 by the voters, judged against it

    def judge(values: list[str]) -> tuple[str, str]:
        ps = [contradicted[v.rstrip(".")] for v in values]
        level = nearest_level(float(np.prod(ps) / (np.prod(ps) + np.prod([1 - p for p in ps]))))
        return level.value, mirror(level).value

    def lid_on(config: BirdConfig) -> tuple[float, list[float]]:
        model, _ = build(scripted_client, script(judge=judge), config)
        return next(p.p for p in model.parameters if p.value == "lid on"), [p.p for p in model.parameters]

    assert BirdConfig().margin_weight == CONFIG.margin_weight
    default, default_params = lid_on(CONFIG)
    ten, ten_params = lid_on(CONFIG.model_copy(update={"margin_weight": 10.0}))
    free, _ = lid_on(CONFIG.model_copy(update={"margin_weight": 0.0}))
    assert default_params == ten_params
    assert free < 0.5 < default  # without the margin the data drags 'lid on' across 0.5
