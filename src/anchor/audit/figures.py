"""The two drawings of the audit pages, as inline SVG: a 2-D map of the factor embeddings and the
network of one condition (outcome -> latent concepts -> mapped factors).

The map is a principal-component projection of the stored MiniLM vectors, computed with NumPy's
SVD: it is deterministic, needs no fitted model and keeps the page independent of UMAP's random
state. It is a picture of the space, not the space the clusters were found in.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from anchor.audit.markup import LABEL_SHORT, NEUTRAL_COLOUR, O1_COLOUR, O2_COLOUR, esc
from anchor.types import FactorSpace, InferenceResult

#: Categorical colours for themes (a colour-blind-aware ten-colour set); themes past the tenth
#: reuse the colours with another marker shape.
THEME_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                 "#9c755f", "#8c8c8c")
SHAPES = ("circle", "square", "triangle", "diamond")
UNCLUSTERED_COLOUR = "#9aa0a6"

MAP_WIDTH, MAP_HEIGHT, MAP_PAD = 760, 440, 26
#: Up to this many points get a short text label next to them (more would only overlap); every
#: point keeps its full text as a hover title.
MAP_LABEL_LIMIT = 40


@dataclass(frozen=True)
class ThemeStyle:
    colour: str
    shape: str


def theme_style(index: int) -> ThemeStyle:
    return ThemeStyle(THEME_COLOURS[index % len(THEME_COLOURS)],
                      SHAPES[(index // len(THEME_COLOURS)) % len(SHAPES)])


def project_2d(vectors: np.ndarray) -> tuple[np.ndarray, tuple[float, float]]:
    """The first two principal components of ``vectors`` (rows) and the share of variance each
    explains. Signs are fixed so the point farthest along a component lies on its positive side,
    which keeps the picture the same from run to run."""
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError("vectors must be a 2-D array")
    coords = np.zeros((x.shape[0], 2))
    if x.shape[0] == 0:
        return coords, (0.0, 0.0)
    centred = x - x.mean(axis=0)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)
    k = min(2, s.size)
    coords[:, :k] = u[:, :k] * s[:k]
    for j in range(k):
        far = int(np.argmax(np.abs(coords[:, j])))
        if coords[far, j] < 0:
            coords[:, j] *= -1.0
    variance = s**2
    total = float(variance.sum())
    ratios = [float(variance[j] / total) if total > 0 and j < k else 0.0 for j in range(2)]
    return coords, (ratios[0], ratios[1])


def _marker(shape: str, x: float, y: float, colour: str, title: str, r: float = 5.0) -> str:
    t = f"<title>{title}</title>"
    if shape == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{colour}">{t}</circle>'
    if shape == "square":
        return f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r}" height="{2 * r}" fill="{colour}">{t}</rect>'
    if shape == "triangle":
        d = f"M{x:.1f},{y - r - 1:.1f} L{x + r + 1:.1f},{y + r:.1f} L{x - r - 1:.1f},{y + r:.1f} Z"
        return f'<path d="{d}" fill="{colour}">{t}</path>'
    if shape == "diamond":
        d = f"M{x:.1f},{y - r - 1:.1f} L{x + r + 1:.1f},{y:.1f} L{x:.1f},{y + r + 1:.1f} L{x - r - 1:.1f},{y:.1f} Z"
        return f'<path d="{d}" fill="{colour}">{t}</path>'
    if shape == "ring":
        return (f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r - 0.5}" fill="#fff" stroke="{colour}" '
                f'stroke-width="2">{t}</circle>')
    if shape == "cross":
        return (f'<path d="M{x - r:.1f},{y - r:.1f} L{x + r:.1f},{y + r:.1f} M{x - r:.1f},{y + r:.1f} '
                f'L{x + r:.1f},{y - r:.1f}" stroke="{colour}" stroke-width="2.2" fill="none">{t}</path>')
    raise ValueError(f"unknown marker shape {shape!r}")


def _swatch(shape: str, colour: str) -> str:
    """A 12x12 legend swatch drawn with the same marker as the map."""
    return (f'<svg class="swatch" width="12" height="12" viewBox="0 0 12 12" aria-hidden="true">'
            f'{_marker(shape, 6, 6, colour, "", r=4.2)}</svg> ')


def embedding_map(space: FactorSpace, highlight: Collection[str] = ()) -> str:
    """A figure: every factor with a stored vector as a point, coloured and shaped by its theme;
    unclustered factors as rings, pruned ones as crosses in their former theme's colour, and the
    ``highlight`` factor ids (e.g. those mapped by a condition) circled in black."""
    emb = space.embeddings
    if emb is None or not emb.factor_ids:
        return '<p class="muted">No stored factor vectors in this space, so there is no map.</p>'
    vectors = emb.factors.to_array()
    if vectors.shape[0] != len(emb.factor_ids):
        return '<p class="muted">The stored vectors do not match the factor ids; no map drawn.</p>'
    coords, (var1, var2) = project_2d(vectors)

    by_id = space.by_id()
    style_of: dict[str, tuple[str, str, str]] = {}  # factor id -> (shape, colour, where)
    for i, cluster in enumerate(space.clusters):
        st = theme_style(i)
        for fid in cluster.factor_ids:
            style_of[fid] = (st.shape, st.colour, cluster.theme)
        for pruned in cluster.pruned:
            style_of[pruned.factor_id] = ("cross", st.colour, f"{cluster.theme}, pruned")
    for fid in space.unclustered:
        style_of[fid] = ("ring", UNCLUSTERED_COLOUR, "unclustered")

    lo, hi = coords.min(axis=0), coords.max(axis=0)
    span = np.where(hi - lo > 1e-12, hi - lo, 1.0)
    scale = min((MAP_WIDTH - 2 * MAP_PAD) / span[0], (MAP_HEIGHT - 2 * MAP_PAD) / span[1])
    offset_x = (MAP_WIDTH - scale * span[0]) / 2
    offset_y = (MAP_HEIGHT - scale * span[1]) / 2

    marks: list[str] = []
    rings: list[str] = []
    labels: list[str] = []
    with_labels = len(emb.factor_ids) <= MAP_LABEL_LIMIT
    for fid, (cx, cy) in zip(emb.factor_ids, coords, strict=True):
        x = offset_x + (cx - lo[0]) * scale
        y = MAP_HEIGHT - (offset_y + (cy - lo[1]) * scale)  # SVG's y grows downwards
        factor = by_id.get(fid)
        shape, colour, where = style_of.get(fid, ("ring", UNCLUSTERED_COLOUR, "not placed"))
        text = factor.text if factor else "(unknown factor)"
        label = LABEL_SHORT[factor.label] if factor else "?"
        title = esc(f"{fid}: {text} [{where}; vote {label}]")
        marks.append(_marker(shape, x, y, colour, title))
        if with_labels:
            right = x > MAP_WIDTH - 170  # near the right edge: write the label leftwards
            anchor = ' text-anchor="end"' if right else ""
            labels.append(f'<text x="{x - 11 if right else x + 11:.1f}" y="{y + 3.5:.1f}" font-size="10" '
                          f'fill="#4a5058"{anchor}>{esc(_clip(text, 28))}</text>')
        if fid in highlight:
            rings.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="9" fill="none" stroke="#111" stroke-width="1.6"/>')

    legend = []
    for i, cluster in enumerate(space.clusters):
        st = theme_style(i)
        legend.append(f"<li>{_swatch(st.shape, st.colour)}{esc(cluster.theme)} "
                      f'<span class="muted">({len(cluster.factor_ids)})</span></li>')
    if space.unclustered:
        legend.append(f'<li>{_swatch("ring", UNCLUSTERED_COLOUR)}unclustered '
                      f'<span class="muted">({len(space.unclustered)})</span></li>')
    if any(c.pruned for c in space.clusters):
        legend.append(f'<li>{_swatch("cross", "#555")}pruned (colour of its former theme)</li>')
    if highlight:
        legend.append('<li><svg class="swatch" width="12" height="12" viewBox="0 0 12 12" aria-hidden="true">'
                      '<circle cx="6" cy="6" r="4.6" fill="none" stroke="#111" stroke-width="1.4"/></svg> '
                      "mapped by a condition on this page</li>")
    svg = (f'<svg class="map" viewBox="0 0 {MAP_WIDTH} {MAP_HEIGHT}" width="{MAP_WIDTH}" height="{MAP_HEIGHT}" '
           f'role="img" aria-label="2-D map of {len(emb.factor_ids)} factor embeddings">'
           f'<rect x="0.5" y="0.5" width="{MAP_WIDTH - 1}" height="{MAP_HEIGHT - 1}" fill="#fbfcfd" '
           f'stroke="#d7dbe0"/>{"".join(labels)}{"".join(marks)}{"".join(rings)}</svg>')
    caption = (f"Factor embeddings ({esc(emb.factors.model)}, {emb.factors.dim}-d) projected on their first two "
               f"principal components ({100 * var1:.0f}% and {100 * var2:.0f}% of the variance). Hover a point "
               "for its text. Distances here are only indicative: clustering ran in its own reduced space.")
    return (f'<figure class="map-figure">{svg}<ul class="legend">{"".join(legend)}</ul>'
            f"<figcaption>{caption}</figcaption></figure>")


# --------------------------------------------------------------------------- the network

NET_WIDTH = 980
ROW = 36
TOP = 24
OUTCOME_X, OUTCOME_W = 8, 128
LATENT_X, LATENT_W = 210, 250
FACTOR_X = 540
CHAR_PX = 6.4  # rough width of one character at the 12px labels, for truncation


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(1, limit - 1)].rstrip() + "…"


def _direction_colour(p_o1: float, p_o2: float) -> str:
    if p_o1 > p_o2:
        return O1_COLOUR
    if p_o2 > p_o1:
        return O2_COLOUR
    return NEUTRAL_COLOUR


def _curve(x1: float, y1: float, x2: float, y2: float) -> str:
    mid = (x1 + x2) / 2
    return f"M{x1:.1f},{y1:.1f} C{mid:.1f},{y1:.1f} {mid:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"


def network_svg(result: InferenceResult, outcomes: Sequence[str] = ("", "")) -> str:
    """Outcome -> latents -> mapped factors, with P(L=1|O1) and P(L=1|O2) on each latent and
    phi = P(O1|f) on each factor. Without latents (the Naive Bayes-only variant) every factor
    hangs straight off the outcome. ``outcomes`` are the two outcome texts, for the hover title."""
    factors = {f.factor_id: f for f in result.factors}
    groups: list[tuple[str | None, list[str], tuple[float, float] | None]] = []
    placed: set[str] = set()
    for lat in result.latents:
        members = [fid for fid in lat.factor_ids if fid not in placed]
        placed.update(members)
        groups.append((lat.name, members, (lat.p_given_o1, lat.p_given_o2)))
    loose = [fid for fid in factors if fid not in placed]
    if loose:
        groups.append((None, loose, None))
    rows = [fid for _, members, _ in groups for fid in members]
    height = max(TOP * 2 + len(rows) * ROW, 110)
    y_of = {fid: TOP + ROW * i + ROW / 2 for i, fid in enumerate(rows)}
    outcome_y = height / 2
    parts: list[str] = []
    edges: list[str] = []
    nodes: list[str] = []
    text_room = int((NET_WIDTH - FACTOR_X - 62) / CHAR_PX)

    # Factor nodes: a phi pill coloured by the side it favours, then the text.
    for fid in rows:
        f = factors.get(fid)
        y = y_of[fid]
        if f is None:  # a latent names a factor the result does not carry: show the id only
            nodes.append(f'<g class="factor"><text x="{FACTOR_X}" y="{y + 4:.1f}" font-size="12" '
                         f'fill="{NEUTRAL_COLOUR}">{esc(fid)} (no evidence)</text></g>')
            continue
        colour = _direction_colour(f.phi, 1 - f.phi)
        title = esc(f"{f.factor_id}: {f.text} | phi = P(O1|f) = {f.phi:.3f}"
                    + (f" (elicited {f.phi_raw:.3f})" if f.phi_raw is not None and f.phi_raw != f.phi else "")
                    + f" | theme: {f.theme or 'unclustered'} | vote {LABEL_SHORT[f.label]}")
        nodes.append(
            f'<g class="factor" data-factor="{esc(f.factor_id)}"><title>{title}</title>'
            f'<rect x="{FACTOR_X}" y="{y - 10:.1f}" width="54" height="20" rx="10" fill="{colour}"/>'
            f'<text x="{FACTOR_X + 27}" y="{y + 4:.1f}" font-size="11.5" font-weight="700" fill="#fff" '
            f'text-anchor="middle">φ {f.phi:.2f}</text>'
            f'<text x="{FACTOR_X + 62}" y="{y + 4:.1f}" font-size="12" fill="#1d2127">'
            f"{esc(_clip(f.text, text_room))}</text></g>")

    outcome_right = OUTCOME_X + OUTCOME_W
    for name, members, params in groups:
        if not members:
            continue
        ys = [y_of[fid] for fid in members]
        if name is None or params is None:
            # No latent: the factor is direct evidence on the outcome (Naive Bayes structure).
            for y in ys:
                edges.append(f'<path d="{_curve(outcome_right, outcome_y, FACTOR_X, y)}" stroke="#b7bcc3" '
                             'stroke-width="1.2" fill="none"/>')
            continue
        p1, p2 = params
        ly = sum(ys) / len(ys)
        colour = _direction_colour(p1, p2)
        width = 1.2 + 4.0 * abs(p1 - p2)
        edges.append(f'<path class="edge-ol" d="{_curve(outcome_right, outcome_y, LATENT_X, ly)}" '
                     f'stroke="{colour}" stroke-width="{width:.2f}" fill="none" opacity="0.8"/>')
        for y in ys:
            edges.append(f'<path d="{_curve(LATENT_X + LATENT_W, ly, FACTOR_X, y)}" stroke="#b7bcc3" '
                         'stroke-width="1.2" fill="none"/>')
        title = esc(f"latent '{name}': P(L=1|O1) = {p1:.3f}, P(L=1|O2) = {p2:.3f}; "
                    f"{len(members)} factor(s)")
        nodes.append(
            f'<g class="latent" data-latent="{esc(name)}"><title>{title}</title>'
            f'<rect x="{LATENT_X}" y="{ly - 16:.1f}" width="{LATENT_W}" height="32" rx="5" fill="#f4f6f8" '
            f'stroke="{colour}" stroke-width="1.5"/>'
            f'<text x="{LATENT_X + 8}" y="{ly - 3:.1f}" font-size="12" font-weight="700" fill="#1d2127">'
            f"{esc(_clip(name, 36))}</text>"
            f'<text x="{LATENT_X + 8}" y="{ly + 11:.1f}" font-size="11" fill="#3d434b">'
            f'P(L|O1) <tspan font-weight="700" fill="{O1_COLOUR}">{p1:.2f}</tspan>'
            f'  ·  P(L|O2) <tspan font-weight="700" fill="{O2_COLOUR}">{p2:.2f}</tspan></text></g>')

    o1, o2 = outcomes
    outcome_title = esc(f"Outcome: O1 = {o1} | O2 = {o2}") if o1 or o2 else "Outcome: O1 or O2"
    nodes.append(
        f'<g class="outcome"><title>{outcome_title}</title>'
        f'<rect x="{OUTCOME_X}" y="{outcome_y - 22:.1f}" width="{OUTCOME_W}" height="44" rx="6" fill="#2c5d8f"/>'
        f'<text x="{OUTCOME_X + OUTCOME_W / 2}" y="{outcome_y - 4:.1f}" font-size="13" font-weight="700" '
        f'fill="#fff" text-anchor="middle">Outcome</text>'
        f'<text x="{OUTCOME_X + OUTCOME_W / 2}" y="{outcome_y + 12:.1f}" font-size="11" fill="#fff" '
        f'text-anchor="middle">O1 vs O2</text></g>')
    parts.extend(edges)
    parts.extend(nodes)
    kind = "latent network" if result.latents else "Naive Bayes structure"
    return (f'<svg class="network" viewBox="0 0 {NET_WIDTH} {height:.0f}" width="{NET_WIDTH}" height="{height:.0f}" '
            f'role="img" aria-label="{kind}: outcome, {len(result.latents)} latent(s), {len(rows)} factor(s)">'
            f'{"".join(parts)}</svg>')
