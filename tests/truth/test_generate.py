"""World generation: seeded and reproducible, the sizes and structures the design asks for, conditions of
the four kinds with their exact truth, and labels drawn from it."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from pydantic import ValidationError

from anchor.truth import exact
from anchor.truth.conditions import ConditionSettings, make_conditions
from anchor.truth.generate import PHI_BOUNDS, generate_worlds
from anchor.truth.vocabulary import DISTRACTORS, bank_digest
from anchor.truth.world import OUTCOME, World, WorldFile, load_worlds, save_worlds


@pytest.fixture(scope="module")
def worlds() -> WorldFile:
    return generate_worlds("all", 4, seed=3, n_conditions=30)


def by_structure(worlds: WorldFile, structure: str) -> list[World]:
    return [w for w in worlds.worlds if w.structure == structure]


def dump(file: WorldFile) -> str:
    return json.dumps(file.model_dump(mode="json"), sort_keys=True)


def test_the_same_settings_give_the_same_file_and_another_seed_another(worlds):
    assert dump(generate_worlds("all", 4, seed=3, n_conditions=30)) == dump(worlds)
    other = generate_worlds("all", 4, seed=4, n_conditions=30)
    assert [w.scenario for w in other.worlds] != [w.scenario for w in worlds.worlds]
    # A world depends on its own seed, not on how many others the file holds.
    fewer = generate_worlds("all", 2, seed=3, n_conditions=30)
    assert dump(fewer) != dump(worlds)  # the file differs (fewer worlds) ...
    assert [w.id for w in fewer.worlds] == ["naive-bayes-1", "naive-bayes-2", "latent-1", "latent-2",
                                            "interaction-1", "interaction-2"]


def test_the_file_records_how_it_was_made_and_reads_back(worlds, tmp_path):
    g = worlds.generator
    assert g["structure"] == "all" and g["n_worlds"] == 4 and g["seed"] == 3 and g["n_conditions"] == 30
    assert g["vocabulary"] == bank_digest() and set(g["condition_kinds"]) == {"factors", "paraphrase",
                                                                                "distractor", "nothing"}
    path = save_worlds(worlds, tmp_path / "w.json")
    assert dump(load_worlds(path)) == dump(worlds)


def test_sizes_and_distinct_scenarios(worlds):
    assert Counter(w.structure for w in worlds.worlds) == {"naive-bayes": 4, "latent": 4, "interaction": 4}
    assert len({w.scenario for w in worlds.worlds}) == len(worlds.worlds)
    for w in worlds.worlds:
        assert 8 <= len(w.factors) <= 14 and len(w.variables) <= exact.MAX_VARIABLES
        themes = Counter(f.theme for f in w.factors)
        assert 2 <= len(themes) <= 4 and min(themes.values()) >= 2, w.id
        assert len({f.text for f in w.factors}) == len(w.factors)
        assert all(2 <= len(f.mentions) <= 3 and f.text in f.mentions[0] for f in w.factors)


def test_every_factor_truth_stays_inside_the_clip_free_bounds(worlds):
    for w in worlds.worlds:
        for f in w.factors:
            assert PHI_BOUNDS[0] <= exact.factor_phi(w, f.id) <= PHI_BOUNDS[1], (w.id, f.id)


def test_naive_bayes_worlds_have_a_fair_outcome_and_mostly_leaning_factors(worlds):
    for w in by_structure(worlds, "naive-bayes"):
        assert w.variable(OUTCOME).cpt == [0.5] and not w.latents
        assert all(w.variable(f.id).parents == [OUTCOME] for f in w.factors)
        phis = [exact.factor_phi(w, f.id) for f in w.factors]
        assert sum(abs(p - 0.5) >= 0.1 for p in phis) >= len(phis) / 2, w.id
        # Factors independent given the outcome: the truth of two is Naive Bayes' product of odds.
        a, b = w.factors[0].id, w.factors[1].id
        pa, pb = exact.factor_phi(w, a), exact.factor_phi(w, b)
        nb = pa * pb / (pa * pb + (1 - pa) * (1 - pb))
        assert exact.p_outcome1(w, [a, b]) == pytest.approx(nb, abs=1e-12)


def test_latent_worlds_link_each_theme_to_one_latent_symmetrically(worlds):
    leaning = Counter()
    for w in by_structure(worlds, "latent"):
        assert w.variable(OUTCOME).cpt == [0.5]
        assert sorted(lat.name for lat in w.latents) == sorted({f.theme for f in w.factors})
        theme_of = {lat.id: lat.name for lat in w.latents}
        for f in w.factors:
            var = w.variable(f.id)
            assert len(var.parents) == 1 and theme_of[var.parents[0]] == f.theme
            off, on = var.cpt
            assert off == pytest.approx(1 - on, abs=1e-12) and 0.6 <= on <= 0.95
        for lat in w.latents:
            beta, alpha = w.variable(lat.id).cpt
            leaning["O1" if alpha > beta else "O2"] += 1
            assert abs(alpha - beta) >= 0.5
    assert leaning["O1"] > 0 and leaning["O2"] > 0


def test_interaction_worlds_have_factors_that_matter_together(worlds):
    for w in by_structure(worlds, "interaction"):
        outcome = w.variable(OUTCOME)
        assert outcome.parents == [f.id for f in w.factors] and all(not w.variable(f.id).parents for f in w.factors)
        assert exact.prior_outcome1(w) == pytest.approx(0.5, abs=1e-14)  # a tie at 0.5 is a tie
        # Somewhere two factors together move the truth far from what independent evidence would give.
        gaps = []
        for i, a in enumerate(w.factors):
            for b in w.factors[i + 1:]:
                pa, pb = exact.factor_phi(w, a.id), exact.factor_phi(w, b.id)
                nb = pa * pb / (pa * pb + (1 - pa) * (1 - pb))
                gaps.append(abs(exact.p_outcome1(w, [a.id, b.id]) - nb))
        assert max(gaps) > 0.2, w.id


def test_conditions_come_in_four_kinds_with_their_exact_truth(worlds):
    counts = ConditionSettings(n_conditions=30).counts()
    assert sum(counts.values()) == 30 and min(counts.values()) >= 1
    for w in worlds.worlds:
        assert Counter(c.kind for c in w.conditions) == counts
        assert len({c.text for c in w.conditions}) == len(w.conditions)
        for c in w.conditions:
            assert c.p_true == exact.p_outcome1(w, c.present)
            mentions = [w.factor(f).mentions for f in c.present]
            text = c.text.casefold()
            if c.kind in ("factors", "distractor"):
                assert all(m[0].casefold() in text for m in mentions), c.text
            if c.kind == "paraphrase":
                assert all(any(p.casefold() in text for p in m[1:]) for m in mentions), c.text
                assert not any(w.factor(f).text.casefold() in text for f in c.present), c.text
            has_distractor = any(d in c.text for d in DISTRACTORS)
            assert has_distractor == (c.kind in ("distractor", "nothing")), c.text
            if c.kind == "nothing":
                assert c.present == [] and c.p_true == pytest.approx(exact.prior_outcome1(w), abs=1e-15)
            else:
                assert 1 <= len(c.present) <= 3
            # No factor that is absent is mentioned.
            others = [f for f in w.factors if f.id not in c.present]
            assert not any(m.casefold() in text for f in others for m in f.mentions), c.text


def test_labels_are_drawn_from_the_truth_with_the_worlds_seed():
    many = generate_worlds("all", 2, seed=8, n_conditions=300)
    conds = [c for w in many.worlds for c in w.conditions]
    ones = sum(c.label == 1 for c in conds)
    expected = sum(c.p_true for c in conds)
    # 1,800 draws: the count of label 1 is within 4 standard deviations of its expectation.
    sd = sum(c.p_true * (1 - c.p_true) for c in conds) ** 0.5
    assert abs(ones - expected) < 4 * sd
    # Confident truths give the expected label almost always.
    sure = [c for c in conds if c.p_true > 0.95 or c.p_true < 0.05]
    assert sure and sum((c.label == 1) == (c.p_true > 0.5) for c in sure) >= 0.9 * len(sure)
    # The labels are the world seed's: drawing the conditions again gives the same ones.
    w = many.worlds[0]
    again = make_conditions(w, random.Random(0), ConditionSettings(n_conditions=8))
    first = [c for c in again]
    assert [c.label for c in first] == [c.label for c in make_conditions(w, random.Random(0),
                                                                        ConditionSettings(n_conditions=8))]


@pytest.mark.parametrize("kwargs", [dict(n_worlds=0), dict(n_worlds=81), dict(n_conditions=3),
                                    dict(n_conditions=301), dict(seed=-1)])
def test_settings_out_of_range_are_refused(kwargs):
    args = {"n_worlds": 1, "seed": 0, **kwargs}
    with pytest.raises(ValidationError):
        generate_worlds("latent", args.pop("n_worlds"), args.pop("seed"), **args)


def test_one_structure_only():
    file = generate_worlds("interaction", 3, seed=0, n_conditions=4)
    assert [w.structure for w in file.worlds] == ["interaction"] * 3
    assert file.generator["structure"] == "interaction"


@pytest.mark.parametrize("prior", [0.15, 0.3, 0.85])
def test_every_structure_has_the_prior_asked_for(prior):
    file = generate_worlds("all", 2, seed=4, n_conditions=12, prior=prior)
    assert file.generator["prior"] == prior
    for w in file.worlds:
        assert w.id.startswith(f"{w.structure}-p{round(prior * 1000):03d}-")
        assert exact.prior_outcome1(w) == pytest.approx(prior, abs=1e-14), w.id
        assert all(c.p_true == pytest.approx(prior, abs=1e-14) for c in w.conditions if c.kind == "nothing")
        for f in w.factors:
            assert PHI_BOUNDS[0] <= exact.factor_phi(w, f.id) <= PHI_BOUNDS[1], (w.id, f.id)
    # factors keep their likelihood ratio: the naive-Bayes worlds lean both ways against the prior
    ratios = [exact.likelihoods(w, {f.id: 1}) for w in file.worlds if w.structure == "naive-bayes" for f in w.factors]
    assert any(a > b for a, b in ratios) and any(a < b for a, b in ratios)


def test_groups_of_several_priors_share_one_file_with_distinct_scenarios_and_conditions():
    from anchor.truth.generate import generate_groups
    from anchor.truth.settings import GenerationSettings

    groups = [(s, p) for p in (0.5, 0.2) for s in ("naive-bayes", "latent")]
    file = generate_groups(groups, GenerationSettings(n_worlds=6, seed=1, n_conditions=16))
    assert [round(exact.prior_outcome1(w), 12) for w in file.worlds] == [p for _, p in groups for _ in range(6)]
    texts = [c.text for w in file.worlds for c in w.conditions]
    assert len(texts) == len(set(texts))  # a condition names its world, even among worlds of one domain
    # even odds keep the worlds they had before a prior could be set
    plain = generate_worlds("naive-bayes", 6, seed=1, n_conditions=16)
    assert [w.variables for w in file.worlds[:6]] == [w.variables for w in plain.worlds]
