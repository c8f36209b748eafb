"""The page of a factor space: themes, votes, pruned and unclustered factors, the statistics, and the map of
its vectors."""

from __future__ import annotations

import re

import numpy as np
import pytest
from sklearn.decomposition import PCA

from anchor.audit import space_html
from anchor.audit.figures import MAP_LABEL_LIMIT, project_2d
from tests.audit.planned_case import BP, EB, EVIL_FACTOR, HT, NT, WT, one, texts


def test_space_page_shows_themes_votes_pruned_unclustered_and_stats(case):
    space, _, _ = case
    html_text = space_html(space)
    ids = {f.text: f.id for f in space.factors}
    theme = one(html_text, "data-cluster", "0")
    assert theme.startswith("Water Temperature cluster 0, 2 factor(s)")
    assert f"O1 {WT} O1 3 · O2 0 · n 0" in theme and f"O1 {BP} O1 2 · O2 0 · n 1" in theme
    assert HT not in theme and "1 pruned as redundant" in theme
    assert f"O2 {EB} O1 1 · O2 2 · n 0" in one(html_text, "data-cluster", "2")
    assert html_text.count('class="factor o2"') == 2 and html_text.count('class="factor o1"') == 4
    unclustered = one(html_text, "id", "space-unclustered")
    assert f"neutral {NT} O1 1 · O2 0 · n 2" in unclustered and f"neutral {EVIL_FACTOR} O1 0" in unclustered

    pruned = one(html_text, "class", "pruned-table")
    assert f"{HT} ({ids[HT]}) Water Temperature redundant within its cluster {WT} ({ids[WT]})" in pruned

    stats = one(html_text, "class", "clustering")
    for expected in ("method umap+hdbscan", "silhouette 0.432", "UMAP components 5", "UMAP neighbours 7",
                     "HDBSCAN min cluster size 2", "seed 11", "note small space"):
        assert expected in stats
    rounds = one(html_text, "class", "rounds")
    assert "1 10 8 6 2 duplicate 1, irrelevant 1" in rounds and "2 10 4 3 1 near duplicate 1" in rounds
    assert "Stopped after 2 round(s): <b>saturated</b> (several rounds in a row added nothing new)" in html_text
    cost = one(html_text, "data-cost", "space")
    # A cost recorded without logical requests (as before they were counted): a dash, not a made-up 0.
    assert "abduction.generate – 2 0 0 900 410 3.25" in cost and "total – 6 1 2 1200 470 4.75" in cost


def test_space_map_has_a_titled_point_per_vector_and_a_legend(case):
    space, _, _ = case
    html_text = space_html(space)
    svg = re.search(r'<svg class="map".*?</svg>', html_text, re.S).group(0)
    titles = re.findall(r"<title>(.*?)</title>", svg)
    assert len(titles) == len(space.embeddings.factor_ids) == 9
    ht = next(f for f in space.factors if f.text == HT)
    assert f"{ht.id}: {HT} [Water Temperature, pruned; vote O1]" in titles
    assert "factors clustered 9" in one(html_text, "class", "clustering")
    assert any(t.endswith("[unclustered; vote neutral]") and t.startswith(f"f008: {NT}") for t in titles)
    legend = texts(html_text, "class", "legend")[0]
    assert legend == ("Water Temperature (2) Food Safety (2) Energy Cost (2) unclustered (2) "
                      "pruned (colour of its former theme)")
    # Every point is labelled in a space this small.
    assert svg.count("<text") == 9 <= MAP_LABEL_LIMIT


def test_space_without_vectors_says_so(case):
    space, _, _ = case
    bare = space.model_copy(update={"embeddings": None})
    assert "No stored factor vectors in this space, so there is no map." in space_html(bare)


def test_projection_matches_principal_components():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, 12)) * np.linspace(3, 0.1, 12)
    coords, (r1, r2) = project_2d(x)
    pca = PCA(n_components=2).fit(x)
    reference = pca.transform(x)
    for j in range(2):
        assert np.allclose(np.abs(coords[:, j]), np.abs(reference[:, j]), atol=1e-8)
        far = np.argmax(np.abs(coords[:, j]))
        assert coords[far, j] > 0  # sign convention: the farthest point is on the positive side
    assert (r1, r2) == pytest.approx(tuple(pca.explained_variance_ratio_))
    line = np.outer(np.arange(5.0), np.ones(4))
    coords, (r1, r2) = project_2d(line)
    assert r1 == pytest.approx(1.0) and r2 == pytest.approx(0.0, abs=1e-12)
    assert project_2d(np.zeros((0, 4)))[0].shape == (0, 2)


