"""The factor-space page and the explanation page (space plus one section per condition).

Both are single self-contained HTML documents: inline CSS and SVG, no script, nothing fetched.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from anchor.audit.figures import UNCLUSTERED_COLOUR, embedding_map, network_svg, theme_style
from anchor.audit.markup import (
    LABEL_CLASS,
    cost_table,
    esc,
    label_chip,
    num,
    page,
    prob_bar,
    table,
)
from anchor.files import write_text_atomic
from anchor.types import (
    AggregationMethod,
    Factor,
    FactorLabel,
    FactorSpace,
    InferenceResult,
    MappingTrace,
    Scenario,
    StopReason,
)
from anchor.version import __version__

STOP_REASONS = {
    StopReason.TARGET_REACHED: "reached the target number of factors",
    StopReason.MAX_ROUNDS: "hit the maximum number of rounds",
    StopReason.SATURATED: "several rounds in a row added nothing new",
}
AGGREGATION_NAMES = {AggregationMethod.LOP: "linear opinion pool", AggregationMethod.BMA: "Bayesian model averaging"}


def footer() -> str:
    return (f"<footer>Written by anchor {esc(__version__)}. Self-contained page: it loads nothing from the "
            "network and can be opened from disk, shared or printed.</footer>")


def scenario_card(scenario: Scenario) -> str:
    return ('<div class="scenario">'
            f'<p><span class="key">Scenario:</span> {esc(scenario.text) if scenario.text else "<i>(none)</i>"}</p>'
            f'<p><span class="key t-o1">Outcome 1 (O1):</span> {esc(scenario.outcome1)}</p>'
            f'<p><span class="key t-o2">Outcome 2 (O2):</span> {esc(scenario.outcome2)}</p></div>')


def _votes(f: Factor) -> str:
    v = f.votes
    return f'<span class="votes">O1 {v.outcome1} · O2 {v.outcome2} · n {v.neutral}</span>'


def _factor_item(f: Factor) -> str:
    return (f'<li class="factor {LABEL_CLASS[f.label]}" data-factor="{esc(f.id)}">{label_chip(f.label)}'
            f"{esc(f.text)} {_votes(f)}</li>")


# --------------------------------------------------------------------------- the factor space


def space_section(space: FactorSpace, *, highlight: Sequence[str] = (), heading: str = "Factor space") -> str:
    """The factor space without the scenario card: overview, map, themes, pruned and unclustered
    factors, clustering statistics, abduction rounds and the stage-1 LLM cost."""
    by_id = space.by_id()
    pruned = [(c, p) for c in space.clusters for p in c.pruned]
    active = space.active_factor_ids()
    st = space.clustering
    out: list[str] = [f'<section id="space"><h2>{esc(heading)}</h2>']
    out.append(
        '<ul class="stats">'
        f"<li><b>{len(space.factors)}</b> factors ({len(active)} kept)</li>"
        f"<li><b>{len(space.clusters)}</b> themes</li>"
        f"<li><b>{len(space.unclustered)}</b> unclustered</li>"
        f"<li><b>{len(pruned)}</b> pruned</li>"
        f"<li><b>{len(space.rounds)}</b> abduction rounds; stopped: {esc(space.stop_reason.value)}</li>"
        f"<li>LLM: {esc(space.llm.model)} ({esc(space.llm.backend)})</li>"
        f"<li>embeddings: {esc(space.embedding_model)}</li></ul>")

    out.append('<h3 id="space-map">Map of the factor embeddings</h3>')
    out.append(embedding_map(space, highlight=highlight))

    out.append('<h3 id="space-themes">Themes and their factors</h3>')
    out.append(f'<p class="muted small">Each factor carries the label its self-consistency vote gave it: '
               f"{label_chip(FactorLabel.OUTCOME1)}favours outcome 1, {label_chip(FactorLabel.OUTCOME2)}"
               f"favours outcome 2, {label_chip(FactorLabel.NEUTRAL)}neither; the counts are the votes "
               f"(of {space.params.vote_samples} per factor).</p>")
    cards: list[str] = []
    for i, cluster in enumerate(space.clusters):
        colour = theme_style(i).colour
        items = "".join(_factor_item(by_id[fid]) for fid in cluster.factor_ids if fid in by_id)
        note = ""
        if cluster.pruned:
            note = f'<div class="pruned">{len(cluster.pruned)} pruned as redundant (listed below)</div>'
        cards.append(f'<div class="theme" style="--tc:{colour}" data-cluster="{cluster.id}">'
                     f'<h3>{esc(cluster.theme)} <span class="muted small">cluster {cluster.id}, '
                     f"{len(cluster.factor_ids)} factor(s)</span></h3><ul>{items}</ul>{note}</div>")
    if space.unclustered:
        items = "".join(_factor_item(by_id[fid]) for fid in space.unclustered if fid in by_id)
        cards.append(f'<div class="theme unclustered" id="space-unclustered" style="--tc:{UNCLUSTERED_COLOUR}">'
                     f'<h3>Unclustered <span class="muted small">{len(space.unclustered)} factor(s) outside '
                     f"every theme</span></h3><ul>{items}</ul></div>")
    out.append(f'<div class="themes">{"".join(cards)}</div>' if cards
               else '<p class="muted">The space holds no factors.</p>')

    out.append('<h3 id="space-pruned">Pruned factors</h3>')
    if pruned:
        rows = []
        for cluster, p in pruned:
            original = by_id.get(p.duplicate_of) if p.duplicate_of else None
            dup = f"{esc(original.text)} <span class=muted>({esc(original.id)})</span>" if original else (
                esc(p.duplicate_of) if p.duplicate_of else "–")
            rows.append([f"{esc(p.text)} <span class=muted>({esc(p.factor_id)})</span>", esc(cluster.theme),
                         esc(p.reason), dup])
        out.append(table(["pruned factor", "theme", "why", "duplicate of"], rows, cls="pruned-table"))
    else:
        out.append('<p class="muted">None: no factor was removed as a repeat of another.</p>')

    out.append('<div class="cols"><div>')
    out.append('<h3 id="space-clustering">Clustering</h3>')
    stats = [("method", esc(st.method)), ("factors clustered", str(st.n_factors)), ("clusters", str(st.n_clusters)),
             ("unclustered", str(st.n_unclustered)), ("silhouette", num(st.silhouette)),
             ("UMAP components", esc(st.umap_n_components if st.umap_n_components is not None else "–")),
             ("UMAP neighbours", esc(st.umap_n_neighbors if st.umap_n_neighbors is not None else "–")),
             ("HDBSCAN min cluster size",
              esc(st.hdbscan_min_cluster_size if st.hdbscan_min_cluster_size is not None else "–")),
             ("seed", str(st.seed))]
    if st.note:
        stats.append(("note", esc(st.note)))
    out.append(table(["statistic", "value"], [[k, v] for k, v in stats], cls="clustering"))
    out.append("</div><div>")
    out.append('<h3 id="space-abduction">Abduction</h3>')
    p = space.params
    out.append(f"<p>Stopped after {len(space.rounds)} round(s): <b>{esc(space.stop_reason.value)}</b> "
               f"({esc(STOP_REASONS.get(space.stop_reason, ''))}). Target {p.n_target} factors, "
               f"{p.batch_size} sentences per round, at most {p.max_rounds} rounds, patience {p.patience}, "
               f"up to {p.abduction_window} round(s) in flight.</p>")
    if space.rounds_beyond_stop:
        out.append(f"<p>{len(space.rounds_beyond_stop)} more round(s) had started when the stop was decided "
                   f"(rounds {', '.join(str(r.round) for r in space.rounds_beyond_stop)}): they ran and are "
                   "paid for in the cost below, but nothing of theirs was merged.</p>")
    if space.rounds:
        rows = []
        for r in space.rounds:
            reasons: dict[str, int] = {}
            for rej in r.rejected:
                reason = rej.reason + (" at merge" if rej.at_merge else "")
                reasons[reason] = reasons.get(reason, 0) + 1
            why = ", ".join(f"{esc(k.replace('_', ' '))} {n}" for k, n in sorted(reasons.items())) or "–"
            rows.append([str(r.round), str(len(r.sentences)), str(len(r.extracted)), str(len(r.added)),
                         str(len(r.rejected)), why])
        out.append(table(["round", "sentences", "extracted", "added", "rejected", "rejected because"], rows,
                         cls="rounds", numeric=range(0, 5)))
    out.append("</div></div>")

    out.append('<h3 id="space-cost">LLM cost of building the space</h3>')
    out.append(cost_table(space.cost, caption="Stage 1: LLM calls per stage", ident="space"))
    if space.compute_seconds:
        secs = ", ".join(f"{esc(k)} {v:.2f} s" for k, v in space.compute_seconds.items())
        out.append(f'<p class="muted small">Compute time: {secs}.</p>')
    out.append("</section>")
    return "".join(out)


# --------------------------------------------------------------------------- one condition


def _posterior_card(cls: str, title: str, p: float | None, detail: str, off_reason: str = "") -> str:
    if p is None:
        return (f'<div class="post {cls} off" data-model="{cls}"><h4>{title}</h4><div class="p">–</div>'
                f'<div class="w">{off_reason}</div>{prob_bar(None)}</div>')
    side = "t-o1" if p > 0.5 else "t-o2" if p < 0.5 else "t-neu"  # colour of the outcome it favours
    return (f'<div class="post {cls}" data-model="{cls}"><h4>{title}</h4>'
            f'<div class="p"><span class="pl">P(O1) =</span> <span class="{side}">{p:.3f}</span></div>'
            f'<div class="small">P(O2) = {1 - p:.3f}</div>{prob_bar(p)}'
            f'<div class="w">{detail}</div></div>')


def posteriors(result: InferenceResult) -> str:
    w = result.weights
    method = AGGREGATION_NAMES.get(result.aggregation, str(result.aggregation))
    idle = "switched off for this run" if result.factors else "no mapped factors"
    nb = _posterior_card("nb", "Naive Bayes", result.nb, f"weight {num(w.get('nb'), 2)}", idle)
    cbn = _posterior_card("cbn", "Latent network (CBN)", result.cbn, f"weight {num(w.get('cbn'), 2)}", idle)
    weights = " + ".join(f"{num(v, 2)}·{esc(k.upper())}" for k, v in w.items()) or "–"
    if result.unknown:
        pooled = (f'<div class="post pooled off" data-model="pooled"><h4>Pooled ({esc(method)})</h4>'
                  f'<div class="p unknown">unknown</div><div class="w">{esc(result.unknown_reason or "")}</div>'
                  f"{prob_bar(None)}</div>")
    else:
        pooled = _posterior_card("pooled", f"Pooled ({esc(method)})", result.p_outcome1, f"= {weights}")
    return f'<div class="posteriors">{nb}{cbn}{pooled}</div>{reading(result)}'


def reading(result: InferenceResult) -> str:
    """One line on how the elicited numbers were read (the inference rule) and, for the consistent rule,
    the base rate it counted."""
    if result.rule == "paper":
        how = ("the paper's rule: even odds, each φ read as a symmetric likelihood pair and again as the link "
               "from its factor to its latent")
    else:
        how = "the consistent rule: each φ read as P(O1 | factor), the latent links solved from it"
        base = result.base_rate
        if base is not None:
            where = (f"elicited once for the scenario from {esc(base.model or 'the model')}"
                     if base.source == "elicited" else "given by the user")
            # The value used is the stated one kept inside [eps, 1 - eps]: say what was stated only where they differ.
            raw = f" (stated {base.p_raw:.3f})" if f"{base.p_raw:.3f}" != f"{base.p_outcome1:.3f}" else ""
            how += f"; base rate P(O1 | scenario) = {base.p_outcome1:.3f}{raw}, {where}, counted once"
    return f'<p class="small" data-model="rule">Inference: {how}.</p>'


def _names(trace: MappingTrace, result: InferenceResult, space: FactorSpace | None) -> dict[str, str]:
    """Factor id -> text, from every place that may know it."""
    names = {c.factor_id: c.text for c in trace.candidates}
    names.update({f.factor_id: f.text for f in result.factors})
    if space is not None:
        for f in space.factors:
            names.setdefault(f.id, f.text)
    return names


def _where(source: str, themes: dict[int, str]) -> str:
    if source.startswith("cluster:"):
        try:
            cid = int(source.split(":", 1)[1])
        except ValueError:
            return esc(source)
        return esc(themes.get(cid, source))
    return esc(source)


def funnel(result: InferenceResult, space: FactorSpace | None, anchor_id: str) -> str:
    """Clusters chosen -> candidates -> selection votes against the threshold -> reflection -> mapped."""
    trace = result.mapping
    if trace is None:
        return '<p class="muted">No mapping trace was recorded for this condition.</p>'
    names = _names(trace, result, space)
    themes = {h.cluster_id: h.theme for h in trace.clusters}
    if space is not None:
        themes.update({c.id: c.theme for c in space.clusters})
    rounds = len(trace.selection_rounds)
    removed = set(trace.reflection_removed)
    voted = set(trace.voted)

    strip = [
        ("clusters", f"<b>{len(trace.clusters)}</b> cluster(s)" if trace.retrieval == "hierarchical"
         else "<b>flat</b> search"),
        ("candidates", f"<b>{len(trace.candidates)}</b> candidates"),
        ("votes", f"<b>{len(trace.voted)}</b> with ≥ {trace.vote_threshold} of {rounds} votes"),
        ("reflection", f"<b>{len(trace.reflection_removed)}</b> removed by reflection"),
        ("mapped", f"<b>{len(trace.mapped)}</b> mapped"),
    ]
    out = ['<ul class="funnel-strip">' + "".join(f'<li data-stage="{k}">{v}</li>' for k, v in strip) + "</ul>"]
    out.append('<ol class="funnel">')

    # 1. clusters
    if trace.retrieval == "hierarchical":
        rows = [[esc(h.theme), str(h.cluster_id), f"{h.distance:.3f}"] for h in trace.clusters]
        body = (table(["theme", "cluster", "distance"], rows, numeric=(1, 2)) if rows
                else '<p class="muted">No cluster was near enough (or the space has none).</p>')
        note = ('<p class="muted small">Distance from the condition to each theme prototype '
                "(the theme and its members' mean vector); nearest first.</p>")
    else:
        body, note = '<p class="muted">Flat retrieval: every factor was searched directly.</p>', ""
    out.append(f'<li data-stage="clusters" id="{anchor_id}-clusters"><h4>Clusters chosen</h4>{note}{body}</li>')

    # 2. candidates
    rows = [[f"{esc(c.text)} <span class=muted>({esc(c.factor_id)})</span>", _where(c.source, themes),
             f"{c.distance:.3f}"] for c in trace.candidates]
    body = (table(["candidate factor", "from", "distance"], rows, numeric=(2,)) if rows
            else '<p class="muted">No candidates.</p>')
    out.append(f'<li data-stage="candidates" id="{anchor_id}-candidates"><h4>Candidates</h4>{body}</li>')

    # 3. votes per selection round against the threshold
    chosen_in = [set(r) for r in trace.selection_rounds]
    rows = []
    silent = 0
    for c in trace.candidates:
        n_votes = trace.votes.get(c.factor_id, 0)
        if n_votes == 0 and c.factor_id not in voted:
            silent += 1
            continue
        marks = "".join("<td class=y>✓</td>" if c.factor_id in s else "<td class=n>·</td>" for s in chosen_in)
        passed = c.factor_id in voted
        rows.append(f'<tr class="{"pass" if passed else "fail"}"><td>{esc(c.text)}</td>{marks}'
                    f'<td class="num">{n_votes}/{rounds}</td>'
                    f'<td>{"passes" if passed else "below threshold"}</td></tr>')
    head = "".join(f'<th class="num">R{i + 1}</th>' for i in range(rounds))
    intro = (f"<p>{rounds} selection round(s); a candidate passes with at least <b>{trace.vote_threshold}</b> "
             f"vote(s).")
    if trace.invalid_selections:
        intro += f" {trace.invalid_selections} selection(s) named no candidate and were discarded."
    if silent:
        intro += f" {silent} candidate(s) got no vote and are not listed."
    intro += "</p>"
    body = (f'<table class="votes-table"><thead><tr><th>candidate</th>{head}<th class="num">votes</th>'
            f'<th>vs threshold {trace.vote_threshold}</th></tr></thead><tbody>{"".join(rows)}</tbody></table>'
            if rows else '<p class="muted">No candidate received a vote.</p>')
    out.append(f'<li data-stage="votes" id="{anchor_id}-votes"><h4>Selection votes</h4>{intro}{body}</li>')

    # 4. reflection
    if trace.reflection_removed:
        items = "".join(f"<li>{esc(names.get(fid, fid))} <span class=muted>({esc(fid)})</span></li>"
                        for fid in trace.reflection_removed)
        body = f"<p>Reflection dropped {len(removed)} of the {len(voted)} voted factor(s):</p><ul>{items}</ul>"
    elif voted:
        body = f"<p>Reflection kept all {len(voted)} voted factor(s).</p>"
    else:
        body = '<p class="muted">Nothing to reflect on.</p>'
    if trace.reflection_invalid:
        body += f'<p class="muted small">{trace.reflection_invalid} kept name(s) matched no voted factor.</p>'
    out.append(f'<li data-stage="reflection" id="{anchor_id}-reflection"><h4>Reflection</h4>{body}</li>')

    # 5. mapped, with phi
    evidence = {f.factor_id: f for f in result.factors}
    rows = []
    for fid in trace.mapped:
        f = evidence.get(fid)
        if f is None:
            rows.append([esc(names.get(fid, fid)), "–", "–", "–", "–"])
            continue
        raw = f" <span class=muted>(elicited {f.phi_raw:.3f})</span>" if (
            f.phi_raw is not None and f.phi_raw != f.phi) else ""
        rows.append([f"{esc(f.text)} <span class=muted>({esc(fid)})</span>", esc(f.theme or "unclustered"),
                     label_chip(f.label), f"<b>{f.phi:.3f}</b>{raw}", prob_bar(f.phi)])
    body = (table(["mapped factor", "theme", "vote", "φ = P(O1 | f)", ""], rows, cls="mapped", numeric=(3,))
            if rows else '<p class="muted">No factor was mapped.</p>')
    out.append(f'<li data-stage="mapped" id="{anchor_id}-mapped"><h4>Mapped factors and φ</h4>{body}</li>')
    out.append("</ol>")
    return "".join(out)


def network(result: InferenceResult, scenario: Scenario | None) -> str:
    if not result.factors:
        return '<p class="muted">No mapped factors, so there is no network.</p>'
    outcomes = (scenario.outcome1, scenario.outcome2) if scenario else ("", "")
    svg = network_svg(result, outcomes)
    if result.latents:
        caption = ("The outcome drives each latent concept L (P(L=1|O1) and P(L=1|O2) on its node; L=1 leans "
                   "towards O1; edge colour shows which outcome makes L more likely, its width how much), and "
                   "each latent explains its factors (φ = P(O1|f) on each factor).")
        rows = [[esc(lat.name), f"{lat.p_given_o1:.3f}", f"{lat.p_given_o2:.3f}",
                 "; ".join(esc(next((f.text for f in result.factors if f.factor_id == fid), fid))
                           for fid in lat.factor_ids)] for lat in result.latents]
        tab = table(["latent", "P(L=1 | O1)", "P(L=1 | O2)", "factors"], rows, cls="latents", numeric=(1, 2))
    else:
        caption = "No latent network was built (Naive Bayes only): every factor is direct evidence on the outcome."
        tab = ""
    repairs = ""
    if result.latent_repairs:
        repairs = ('<p class="small">Repairs made to the grouping the LLM proposed:</p><ul class="small">'
                   + "".join(f"<li>{esc(r)}</li>" for r in result.latent_repairs) + "</ul>")
    return f'<figure class="net-figure">{svg}<figcaption>{caption}</figcaption></figure>{tab}{repairs}'


def condition_section(result: InferenceResult, space: FactorSpace | None, index: int,
                      heading: str | None = None) -> str:
    anchor_id = f"cond-{index}"
    title = heading or f"Condition {index}"
    if result.unknown:
        verdict = (f'<p class="verdict"><span class="unknown">Unknown</span> — '
                   f"{esc(result.unknown_reason or 'no reason recorded')}</p>")
    else:
        p = result.p_outcome1 or 0.0
        verdict = (f'<p class="verdict">P(O1) = <b class="t-o1">{p:.3f}</b> · P(O2) = '
                   f'<b class="t-o2">{1 - p:.3f}</b></p>')
    variant = (f'<p class="muted small">Ablations active: {esc(", ".join(result.variant))}</p>'
               if result.variant else "")
    scenario = space.scenario if space is not None else None
    parts = [
        f'<section class="cond" id="{anchor_id}"><h2>{esc(title)}: {esc(result.condition)}</h2>',
        verdict, variant,
        f'<h3 id="{anchor_id}-posteriors">Posteriors</h3>', posteriors(result),
        f'<h3 id="{anchor_id}-funnel">Retrieval funnel</h3>', funnel(result, space, anchor_id),
        f'<h3 id="{anchor_id}-network">Network</h3>', network(result, scenario),
        f'<h3 id="{anchor_id}-cost">LLM cost</h3>',
        cost_table(result.cost, caption="Stages 2 and 3: LLM calls per stage for this condition",
                   ident=anchor_id),
    ]
    if result.compute_seconds:
        secs = ", ".join(f"{esc(k)} {v:.3f} s" for k, v in result.compute_seconds.items())
        parts.append(f'<p class="muted small">Compute time: {secs}.</p>')
    parts.append("</section>")
    return "".join(parts)


def overview_table(results: Sequence[InferenceResult], headings: Sequence[str]) -> str:
    rows = []
    for i, (r, h) in enumerate(zip(results, headings, strict=True), 1):
        answer = ('<span class="status unknown">unknown</span>' if r.unknown
                  else f'{num(r.p_outcome1)} <span class="muted">/</span> {num(r.p_outcome2)}')
        rows.append([f'<a href="#cond-{i}">{esc(h)}</a>', esc(r.condition), answer, num(r.nb), num(r.cbn),
                     str(len(r.factors))])
    return table(["", "condition", "P(O1) / P(O2)", "NB", "CBN", "factors"], rows, cls="overview",
                 numeric=(3, 4, 5))


# --------------------------------------------------------------------------- documents


def space_html(space: FactorSpace, *, title: str | None = None) -> str:
    """One self-contained HTML page showing a factor space."""
    heading = title or "ANCHOR factor space"
    body = (f"<header><h1>{esc(heading)}</h1>{scenario_card(space.scenario)}</header>"
            f"{space_section(space)}{footer()}")
    return page(f"{heading}: {space.scenario.outcome1}", body)


def space_page(space: FactorSpace, path: Path | str | None = None) -> str:
    """``space_html(space)``; with ``path``, also written there (atomically; a failure is a
    ``PageWriteError`` naming the path)."""
    html_text = space_html(space)
    if path is not None:
        write_text_atomic(path, html_text)
    return html_text


def explanation_document(
    space: FactorSpace | None,
    results: Sequence[InferenceResult],
    *,
    title: str,
    scenario: Scenario | None = None,
    intro: str = "",
    headings: Sequence[str] | None = None,
    space_link: str | None = None,
) -> str:
    """The explanation page with its variations: ``intro`` is extra (already escaped) HTML after
    the scenario; ``headings`` name the condition sections; ``space_link``, when given, replaces
    the embedded factor-space section by a link to a separate page (the run index shares one space
    page between many instances)."""
    scenario = scenario or (space.scenario if space is not None else None)
    headings = list(headings) if headings is not None else [f"Condition {i}" for i in range(1, len(results) + 1)]
    if len(headings) != len(results):
        raise ValueError("headings must name every result")
    mapped = sorted({fid for r in results for fid in (r.mapping.mapped if r.mapping else [])})
    toc = [f'<a href="#cond-{i}">{esc(h)}</a>' for i, h in enumerate(headings, 1)]
    if space is not None and space_link is None:
        toc.append('<a href="#space">Factor space</a>')
    elif space_link is not None:
        toc.append(f'<a href="{esc(space_link)}">Factor space (separate page)</a>')
    parts = [f"<header><h1>{esc(title)}</h1>",
             scenario_card(scenario) if scenario is not None else "", intro,
             f'<nav class="toc">{" ".join(toc)}</nav></header>']
    if results:
        parts.append('<h2 id="overview">Conditions</h2>' + overview_table(results, headings))
    for i, (result, heading) in enumerate(zip(results, headings, strict=True), 1):
        parts.append(condition_section(result, space, i, heading))
    if space_link is not None:
        parts.append(f'<h2 id="space">Factor space</h2><p>The factor space these conditions were mapped into has '
                     f'its own page: <a href="{esc(space_link)}">themes, factors, map, clustering and build '
                     "cost</a>.</p>")
    elif space is not None:
        parts.append(space_section(space, highlight=mapped))
    else:
        parts.append('<h2 id="space">Factor space</h2><p class="muted">The factor space is not available.</p>')
    parts.append(footer())
    return page(title, "".join(parts))


def explain_html(space: FactorSpace, results: Sequence[InferenceResult], *, title: str | None = None) -> str:
    """One self-contained HTML page: the factor space, then for every result its retrieval funnel,
    φ per mapped factor, the latent network and the three posteriors with their weights."""
    heading = title or "ANCHOR explanation"
    return explanation_document(space, list(results), title=heading)
