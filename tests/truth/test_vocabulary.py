"""The bank of texts worlds are made of: its shape, that no text can be mistaken for another's, and (with
the real MiniLM) that factors of one theme sit together while no two factors are near-duplicates."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from anchor.truth.generate import generate_worlds
from anchor.truth.vocabulary import (
    DISTRACTORS,
    DOMAINS,
    FILLERS,
    PLAIN_TEMPLATES,
    SENTENCE_FRAMES,
    bank_digest,
)

#: Below this cosine two factor texts are not near-duplicates (ANCHOR's own dedup threshold is 0.85 too).
NEAR_DUPLICATE = 0.85
#: Each theme's factors are closer to each other, on average, than to any other theme's by at least this.
THEME_MARGIN = 0.02


def domain_factors(domain):
    return [(th.name, f) for th in domain.themes for f in th.factors]


def test_every_domain_has_four_themes_of_five_factors_with_short_names_and_paraphrases():
    assert len(DOMAINS) >= 5 and len({d.key for d in DOMAINS}) == len(DOMAINS)
    for d in DOMAINS:
        assert d.scenario.count("{name}") == 1 and d.filler in FILLERS
        assert d.outcome1 != d.outcome2
        assert len(d.themes) == 4 and all(len(th.factors) == 5 for th in d.themes)
        for _, f in domain_factors(d):
            assert 2 <= len(f.text.split()) <= 6, f.text
            assert 1 <= len(f.paraphrases) <= 2, f.text
            assert f.text == f.text.strip() and f.text[0].islower(), f.text
            # A paraphrase says it in other words: never the factor's text itself.
            assert all(f.text.casefold() not in p.casefold() for p in f.paraphrases), f.text
    for kind, names in FILLERS.items():
        assert len(names) == len(set(names)) >= 40, kind
    assert all(t.count("{text}") == 1 for t in PLAIN_TEMPLATES)
    assert all(t.count("{clause}") == 1 for t in SENTENCE_FRAMES)


def test_no_mention_of_a_domain_is_found_inside_another_or_inside_a_distractor():
    # A condition's factors are recognised by their mentions in its text: none may hide inside another's.
    for d in DOMAINS:
        texts = {f.text.casefold(): f for _, f in domain_factors(d)}
        assert len(texts) == 20
        clauses = [(f.text, c.casefold()) for _, f in domain_factors(d) for c in (f.text, *f.paraphrases)]
        for (owner_a, a), (owner_b, b) in itertools.permutations(clauses, 2):
            if owner_a != owner_b:
                assert a not in b, (d.key, a, b)
        for sentence in DISTRACTORS:
            assert not any(c in sentence.casefold() for _, c in clauses), (d.key, sentence)
    assert len(set(DISTRACTORS)) == len(DISTRACTORS) >= 20


def test_the_bank_digest_names_the_words():
    assert len(bank_digest()) == 16 and bank_digest() == bank_digest()


def theme_separation(vectors: np.ndarray, themes: list[str]) -> dict[str, tuple[float, float]]:
    """Per theme: mean cosine among its factors, and the highest mean cosine to another theme's."""
    sims = vectors @ vectors.T
    labels = np.array(themes)
    out = {}
    for t in dict.fromkeys(themes):
        own = labels == t
        idx = np.where(own)[0]
        within = sims[np.ix_(idx, idx)][~np.eye(idx.size, dtype=bool)].mean()
        across = max(sims[np.ix_(own, labels == o)].mean() for o in set(themes) if o != t)
        out[t] = (float(within), float(across))
    return out


@pytest.mark.parametrize("domain", DOMAINS, ids=lambda d: d.key)
def test_minilm_keeps_a_domains_factors_apart_and_its_themes_together(embedder, domain):
    pairs = domain_factors(domain)
    vectors = embedder.encode([f.text for _, f in pairs])
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -1.0)
    i, j = np.unravel_index(np.argmax(sims), sims.shape)
    assert sims[i, j] < NEAR_DUPLICATE, (pairs[i][1].text, pairs[j][1].text, float(sims[i, j]))
    for theme, (within, across) in theme_separation(vectors, [t for t, _ in pairs]).items():
        assert within > across + THEME_MARGIN, (domain.key, theme, within, across)


def test_minilm_on_generated_worlds(embedder):
    # What the pipeline will see: each world's own factor texts.
    worlds = generate_worlds("all", 3, seed=4, n_conditions=4)
    for world in worlds.worlds:
        vectors = embedder.encode([f.text for f in world.factors])
        sims = vectors @ vectors.T
        np.fill_diagonal(sims, -1.0)
        assert sims.max() < NEAR_DUPLICATE, world.id
        themes = [f.theme for f in world.factors]
        labels = np.array(themes)
        same = (labels[:, None] == labels[None, :]) & ~np.eye(len(themes), dtype=bool)
        assert sims[same].mean() > sims[labels[:, None] != labels[None, :]].mean() + THEME_MARGIN, world.id
