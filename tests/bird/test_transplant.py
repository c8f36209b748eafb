"""BIRD on ANCHOR's factor space: structured Monte-Carlo sampling, CPT training on presence
variables, inference on mapped factor ids, BIRD-style mapping over ANCHOR factors, pooling."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import numpy as np
import pytest

from anchor.bird import (
    BirdConfig,
    BirdModelFileError,
    load_model,
    load_transplant_model,
    map_condition_on_space,
    pool_with_anchor,
    sample_structured_assignments,
    save_model,
    train_on_space,
    transplant_probability,
)
from anchor.bird.cpt import cpt_output
from anchor.bird.verbal import SCALE, TARGET, mirror
from anchor.settings.space import BuildParams
from anchor.types import (
    Cluster,
    ClusteringStats,
    Factor,
    FactorLabel,
    FactorSpace,
    LLMIdentity,
    Scenario,
    StopReason,
)
from tests.bird.script import BirdScript

SCENARIO = Scenario(text="Cooking noodles in hot or in warm water.", outcome1="Hot water cooks noodles faster.",
                    outcome2="Warm water cooks noodles faster.")
FACTORS = [
    ("f1", "rolling boil", FactorLabel.OUTCOME1),
    ("f2", "lukewarm start", FactorLabel.OUTCOME2),
    ("f3", "starch release", FactorLabel.NEUTRAL),
    ("f4", "lid on the pot", FactorLabel.OUTCOME1),
    ("f5", "thin noodles", FactorLabel.OUTCOME2),
    ("f6", "pot colour", FactorLabel.NEUTRAL),  # pruned from the space: not a variable
]
TRUE = {"rolling boil": 0.9, "lukewarm start": 0.2, "starch release": 0.5, "lid on the pot": 0.65, "thin noodles": 0.3}


def make_space() -> FactorSpace:
    factors = [Factor(id=fid, text=text, label=label, cluster_id=0 if fid in ("f1", "f2") else None, round=1)
               for fid, text, label in FACTORS]
    return FactorSpace(
        scenario=SCENARIO, factors=factors, clusters=[Cluster(id=0, theme="Water heat", factor_ids=["f1", "f2"])],
        unclustered=["f3", "f4", "f5"], stop_reason=StopReason.TARGET_REACHED, params=BuildParams(),
        clustering=ClusteringStats(method="flat", n_factors=6, n_clusters=1, n_unclustered=3),
        llm=LLMIdentity(backend="scripted", model="scripted-model"), embedding_model="none")


def nearest(p: float):
    return min(SCALE, key=lambda level: (abs(TARGET[level] - p), TARGET[level]))


def judge(values: list[str]) -> tuple[str, str]:
    ps = [TRUE[v.rstrip(".")] for v in values]
    level = nearest(float(np.prod(ps) / (np.prod(ps) + np.prod([1 - p for p in ps]))))
    return level.value, mirror(level).value


POOL = ["f1", "f2", "f3", "f4", "f5"]

# --------------------------------------------------------------------------- sampling


def test_structured_sampling_completes_cycled_base_sets():
    pairs = sample_structured_assignments(POOL, [["f1"], ["f5", "f2"], ["f9"]], 128, 3, random.Random(0))
    assert len(pairs) == 128
    # "f9" is not in the pool, so that base set is dropped; the other two alternate.
    assert [b for b, _ in pairs[:4]] == [["f1"], ["f2", "f5"], ["f1"], ["f2", "f5"]]
    for base, a in pairs:
        assert set(base) <= set(a) and len(a) <= 3 and len(set(a)) == len(a)
        assert a == sorted(a, key=POOL.index)
    # k extra factors, uniform over 0 .. L - |base|.
    extra = Counter(len(a) - 1 for b, a in sample_structured_assignments(POOL, [["f1"]], 3000, 3, random.Random(1)))
    assert set(extra) == {0, 1, 2} and all(abs(n / 3000 - 1 / 3) < 0.04 for n in extra.values())


def test_structured_sampling_without_bases_draws_random_subsets():
    pairs = sample_structured_assignments(POOL, [[], ["f9"]], 500, 2, random.Random(0))
    assert all(b == [] and 1 <= len(a) <= 2 for b, a in pairs)
    assert Counter(f for _, a in pairs for f in a).keys() == set(POOL)


def test_structured_sampling_is_seeded_and_never_trims_a_base():
    a = sample_structured_assignments(POOL, [["f1", "f2", "f3", "f4"]], 10, 2, random.Random(3))
    assert all(x == ["f1", "f2", "f3", "f4"] for _, x in a)  # longer than L: no extras, base intact
    assert sample_structured_assignments(POOL, [["f1"]], 50, 4, random.Random(3)) == \
        sample_structured_assignments(POOL, [["f1"]], 50, 4, random.Random(3))


# --------------------------------------------------------------------------- training and inference


def train(scripted_client, base_sets, *, max_length=3, script_judge=judge, config=None):
    client = scripted_client(BirdScript(judge=script_judge))
    model = asyncio.run(train_on_space(client, make_space(), base_sets, config or BirdConfig(),
                                       max_length=max_length))
    return model, client


def test_training_on_presence_variables(scripted_client):
    model, client = train(scripted_client, [["f1"], ["f2", "f5"]])
    assert [p.factor_id for p in model.parameters] == POOL  # f6 was pruned from the space
    assert [p.init for p in model.parameters] == [0.75, 0.25, 0.5, 0.75, 0.25]
    assert len(model.samples) == 128 and model.training.trained and model.training.n_used == 128
    assert [s.base for s in model.samples[:2]] == [["f1"], ["f2", "f5"]]
    assert all(set(s.base) <= set(s.factor_ids) and len(s.factor_ids) <= 3 for s in model.samples)
    assert {c.stage: c.llm_calls for c in model.cost} == {"bird.cpt_data": 128}
    first = next(r for r in client.backend.requests if r.schema_name == "BirdJudgement")
    texts = [t for fid, t, _ in FACTORS if fid in model.samples[0].factor_ids]
    assert "Condition: " + " ".join(t + "." for t in texts) in first.user
    # The fit moves towards the judgements: lower squared error than the label priors on the training set.
    params = np.array([p.p for p in model.parameters])
    init = np.array([p.init for p in model.parameters])
    rows = np.array([[fid in s.factor_ids for fid in POOL] for s in model.samples])
    targets = np.array([s.target for s in model.samples])
    assert np.mean((cpt_output(rows, params) - targets) ** 2) < 0.5 * np.mean((cpt_output(rows, init) - targets) ** 2)
    assert params[0] > 0.75 and params[1] < 0.25  # the strongest factors move outwards
    counts = {p.factor_id: p.n_samples for p in model.parameters}
    assert counts["f1"] >= 64 and counts["f2"] >= 64 and sum(counts.values()) == int(rows.sum())


def test_transplant_model_saves_and_loads_back_identically(scripted_client, tmp_path):
    model, _ = train(scripted_client, [["f1"], ["f2", "f5"]])
    path = save_model(model, tmp_path / "transplant.json")
    loaded = load_transplant_model(path)
    assert loaded == model and save_model(loaded, tmp_path / "again.json").read_bytes() == path.read_bytes()
    with pytest.raises(BirdModelFileError, match="not a valid BIRD model"):
        load_model(path)  # a transplant is not a per-scenario BIRD model


def test_factors_never_sampled_keep_their_prior(scripted_client):
    model, _ = train(scripted_client, [["f1"]], max_length=1)
    assert all(s.factor_ids == ["f1"] for s in model.samples)
    assert [p.p == p.init for p in model.parameters] == [False, True, True, True, True]
    assert "4 of 5 factors appear in no training assignment and keep their prior" in model.notes
    # Every target is the same (rolling boil alone is "very likely"): a one-class set, noted.
    assert model.warnings and model.warnings[0].startswith("one-class training set")


def test_transplant_probability_by_hand(scripted_client):
    model, _ = train(scripted_client, [["f1"], ["f2", "f5"]])
    p = {q.factor_id: q.p for q in model.parameters}
    alone = transplant_probability(model, ["f1", "f4"], draws=0)
    expected = p["f1"] * p["f4"] / (p["f1"] * p["f4"] + (1 - p["f1"]) * (1 - p["f4"]))
    assert alone.p_outcome1 == pytest.approx(expected, abs=1e-12) and alone.n_assignments == 1
    # With L equal to the mapped set's size there is no room for extras: every completion is the set.
    full = transplant_probability(model.model_copy(update={"max_length": 2}), ["f1", "f4"], draws=16)
    assert full.p_outcome1 == pytest.approx(expected, abs=1e-12) and full.n_assignments == 16
    # Otherwise the completions are drawn by the training scheme, seeded by the mapped ids.
    mixed = transplant_probability(model, ["f4", "f1"])
    assert mixed.n_assignments == 128 and mixed == transplant_probability(model, ["f1", "f4"])
    assert mixed.p_outcome1 != pytest.approx(expected)


def test_transplant_probability_ignores_unknown_ids_and_reports_nothing_mapped(scripted_client):
    model, _ = train(scripted_client, [["f1"]])
    est = transplant_probability(model, ["f6", "f1"], draws=0)
    assert est.n_factors == 1 and "1 mapped id(s) are not factors of the model; ignored" in est.notes
    none = transplant_probability(model, ["f6"])
    assert none.p_outcome1 is None and "no mapped factor" in none.notes


def test_untrained_transplant_gives_no_probability(scripted_client):
    model, _ = train(scripted_client, [["f1"]], script_judge=lambda values: ("maybe", "maybe"))
    assert not model.training.trained and model.notes[0].startswith("128 of 128 judgements named no level")
    est = transplant_probability(model, ["f1"])
    assert est.p_outcome1 is None and "the transplanted CPT is not trained" in est.notes


def test_space_without_active_factors(scripted_client):
    space = make_space().model_copy(update={"clusters": [], "unclustered": []})
    client = scripted_client(BirdScript())
    model = asyncio.run(train_on_space(client, space, [["f1"]]))
    assert model.parameters == [] and model.notes == ["no usable factor: the factor space has no active factor"]
    assert client.backend.requests == []


# --------------------------------------------------------------------------- mapping and pooling


def test_bird_mapping_over_anchor_factors(scripted_client):
    seen = []

    def choose(condition, factor, values, r):
        seen.append((factor, tuple(values)))
        return values[0] if values == ["rolling boil"] or values == ["lid on the pot"] else "none"

    client = scripted_client(BirdScript(choose=choose, closest=lambda c, o: ("thin noodles", "thin noodles")))
    ids, trace = asyncio.run(map_condition_on_space(client, make_space(), "The pot is covered and boiling hard."))
    assert ids == ["f1", "f4"] and [m.value for m in trace.mapped] == ["rolling boil", "lid on the pot"]
    # One call per active factor and round; clustered factors are shown under their theme.
    assert len(seen) == 15 and ("Water heat", ("rolling boil",)) in seen and ("starch release", ("starch release",)) in seen

    quiet = scripted_client(BirdScript(choose=lambda *a: "none", closest=lambda c, o: ("thin noodles", "thin noodles")))
    ids, trace = asyncio.run(map_condition_on_space(quiet, make_space(), "Something unrelated."))
    assert ids == ["f5"] and trace.relaxed_used
    ids, trace = asyncio.run(map_condition_on_space(quiet, make_space(), "Something unrelated.", relaxed=False))
    assert ids == [] and not trace.relaxed_used


def test_pool_with_anchor():
    assert pool_with_anchor(0.8, {"nb": 0.6, "cbn": None}) == pytest.approx(0.7)
    assert pool_with_anchor(0.8, {"nb": 0.6, "cbn": 0.4}) == pytest.approx(0.6)
    assert pool_with_anchor(0.9, {"nb": 0.5, "cbn": 0.2}, {"bird_cpt": 2, "nb": 1, "cbn": 1}) == pytest.approx(0.625)
