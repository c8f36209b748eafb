"""The simulated LLM's answers to ANCHOR's own prompts (and so to every ablation, which sends a subset
of them): abduction, validation, voting, themes, mapping, and elicitation.

Each answer is the truth about the world, bent by the errors of :class:`SimErrors`:

* ``GENERATE_SENTENCES``: ``n`` sentences, each naming one factor the LLM knows (its text verbatim in
  a varied sentence saying which outcome it favours), a fresh shuffle per request;
* ``EXTRACT_FACTORS``: the texts of the factors it recognises in the world (its inventions too) found in
  the sentences (longest first, case aside): none when the sentences name none;
* ``VALIDATE_FACTORS``: 'keep' for a factor it knows (it believes its inventions too), 'duplicate'
  only when the text equals its similar factor's, 'irrelevant' for a text it does not know;
* ``VOTE_LABELS``: outcome1 when P(O1 | f) >= 0.55, outcome2 when <= 0.45, else neutral (invented
  factors: neutral), each label flipped at ``vote_flip_rate``;
* ``NAME_THEME``: the theme most of the group's factors share in the world; never a redundant member;
* ``SELECT_FACTORS`` / ``REFLECT_FACTORS``: truly present candidates selected at ``map_recall``,
  others at ``map_false_rate``; reflection keeps true ones and drops wrong ones at ``reflect_catch``;
* ``ELICIT_PHI``: phi (by ``phi_reading``) through ``factor_curve``; 0.5 for an invented factor;
* ``ELICIT_PHI_GIVEN_BASE_RATE``: P(O1 | f) had the prior been the base rate the prompt states (the
  factor's likelihood ratio on it; an invented factor: the base rate) through ``factor_curve``: the
  LLM takes the base rate it is given at its word;
* ``DISCOVER_LATENTS``: factors grouped by their latent (latent worlds) or theme (an invented factor
  with the real ones of its theme), each put in a wrong group at ``grouping_error``;
* ``ELICIT_LATENT_PARAMS``: for a group of one latent, (P(L=s | O1), P(L=s | O2)) with s its
  O1-leaning state; a group mixing latents, or in a world without latents, (1, 0) (the concept is
  the outcome itself); both through ``factor_curve``;
* ``ELICIT_BASE_RATE``: the world's P(O1) through ``base_rate_curve``.
"""

from __future__ import annotations

import re
from collections import Counter

from anchor.truth.simulate.core import Handler, Reply, Simulator, number
from anchor.truth.simulate.errors import OPEN_EDGE
from anchor.truth.simulate.knowledge import WorldKnowledge, find_phrases, key
from anchor.truth.simulate.recognise import Request, Unrecognised, bullet_lines, keyed_lines, numbered_lines

LABEL_FOR = 0.55
LABEL_AGAINST = 0.45
LABELS = ("outcome1", "outcome2", "neutral")

#: Sentence shapes for abduction: ``{factor}`` is the factor's text, ``{k}`` the outcome it favours.
SENTENCES = (
    "Because of {factor}, outcome {k} becomes more likely.",
    "When {factor} comes into play, it points towards outcome {k}.",
    "Considering {factor}, outcome {k} looks the more plausible one.",
    "The matter of {factor} tips the balance towards outcome {k}.",
    "Anyone weighing {factor} would lean to outcome {k}.",
    "{factor} counts as a reason to expect outcome {k}.",
)
_SIMILAR = "  (similar existing factor: "
_ROUGH = re.compile(r"\s\(rough: [0-9.]+\)\Z")


def label_of(phi: float) -> str:
    if phi >= LABEL_FOR:
        return "outcome1"
    if phi <= LABEL_AGAINST:
        return "outcome2"
    return "neutral"


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


# --------------------------------------------------------------------------- abduction


def generate_sentences(sim: Simulator, req: Request) -> Reply:
    f = req.fields
    world = sim.world(req, scenario=f["scenario"], outcomes=(f["outcome1"], f["outcome2"]), ordered=True)
    n = max(1, number(req, "n"))
    rng = sim.rng(req, world, "sentences")
    known = list(world.known)
    if not known:
        return Reply({"sentences": ["Nothing in particular comes to mind about this scenario."]})
    rng.shuffle(known)
    sentences = []
    for i in range(n):
        entry = known[i % len(known)]
        side = 1 if world.posterior(entry) >= 0.5 else 2
        shape = rng.choice(SENTENCES)
        sentences.append(_capitalised(shape.format(factor=entry.text, k=side)))
    return Reply({"sentences": sentences})


def extract_factors(sim: Simulator, req: Request) -> Reply:
    f = req.fields
    world = sim.world(req, scenario=f["scenario"], outcomes=(f["outcome1"], f["outcome2"]), ordered=True)
    sentences = numbered_lines(f["sentences"], req.name)
    phrases = [(e.text, e.text) for e in world.entries]
    texts: list[str] = []
    for sentence in sentences:
        texts.extend(text for _, text in find_phrases(sentence, phrases))
    return Reply({"factors": list(dict.fromkeys(texts))})


def validate_factors(sim: Simulator, req: Request) -> Reply:
    f = req.fields
    lines = keyed_lines(f["candidates"], req.name)
    candidates: list[tuple[str, str | None]] = []
    for _, line in lines:
        text, sep, similar = line.partition(_SIMILAR)
        candidates.append((text, similar[:-1] if sep and similar.endswith(")") else None))
    world = sim.world(req, scenario=f["scenario"], outcomes=(f["outcome1"], f["outcome2"]), ordered=True,
                      texts=[t for t, _ in candidates])
    out = {}
    for (k, _), (text, similar) in zip(lines, candidates, strict=True):
        if world.lookup(text) is None:
            out[k] = "irrelevant"
        elif similar is not None and key(similar) == key(text):
            out[k] = "duplicate"
        else:
            out[k] = "keep"
    return Reply(out)


# --------------------------------------------------------------------------- voting, themes


def vote_labels(sim: Simulator, req: Request) -> Reply:
    f = req.fields
    lines = keyed_lines(f["factors"], req.name)
    world = sim.world(req, scenario=f["scenario"], outcomes=(f["outcome1"], f["outcome2"]), ordered=True,
                      texts=[t for _, t in lines])
    rng = sim.rng(req, world, "votes")
    out = {}
    for k, text in lines:
        label = label_of(world.posterior(world.lookup(text)))
        if rng.random() < sim.errors.vote_flip_rate:
            label = rng.choice([other for other in LABELS if other != label])
        out[k] = label
    return Reply(out)


def name_theme(sim: Simulator, req: Request) -> Reply:
    texts = numbered_lines(req.fields["factors"], req.name)
    world = sim.world(req, scenario=req.fields["scenario"], texts=texts)
    themes = [e.theme for e in (world.lookup(t) for t in texts) if e is not None]
    if not themes:
        return Reply({"theme": "Other factors", "redundant": []})
    counts = Counter(themes)
    top = max(counts.values())
    theme = next(t for t in themes if counts[t] == top)  # a tie goes to the theme named first
    return Reply({"theme": theme[:40], "redundant": []})


# --------------------------------------------------------------------------- mapping


def select_factors(sim: Simulator, req: Request) -> Reply:
    f = req.fields
    candidates = bullet_lines(f["candidates"], req.name)
    world = sim.world(req, scenario=f["scenario"], texts=candidates, condition=f["condition"])
    present = set(world.present(f["condition"]))
    rng = sim.rng(req, world, "select")
    e = sim.errors
    selected = []
    for text in candidates:
        entry = world.lookup(text)
        true = entry is not None and entry.factor_id in present
        if rng.random() < (e.map_recall if true else e.map_false_rate):
            selected.append(text)
    return Reply({"selected": selected})


def reflect_factors(sim: Simulator, req: Request) -> Reply:
    f = req.fields
    shown = bullet_lines(f["factors"], req.name)
    world = sim.world(req, texts=shown, condition=f["condition"])
    present = set(world.present(f["condition"]))
    rng = sim.rng(req, world, "reflect")
    keep = []
    for text in shown:
        entry = world.lookup(text)
        true = entry is not None and entry.factor_id in present
        if true or rng.random() >= sim.errors.reflect_catch:
            keep.append(text)
    return Reply({"keep": keep})


# --------------------------------------------------------------------------- elicitation


def elicit_phi(sim: Simulator, req: Request) -> Reply:
    f = req.fields
    lines = [(k, _ROUGH.sub("", t)) for k, t in keyed_lines(f["factors"], req.name)]
    world = sim.world(req, scenario=f["scenario"], outcomes=(f["outcome1"], f["outcome2"]), ordered=True,
                      texts=[t for _, t in lines])
    rng = sim.rng(req, world, "phi")
    curve = sim.errors.factor_curve
    return Reply({k: curve.apply(world.phi(world.lookup(text)), rng) for k, text in lines})


def elicit_phi_given_base_rate(sim: Simulator, req: Request) -> Reply:
    f = req.fields
    lines = keyed_lines(f["factors"], req.name)
    world = sim.world(req, scenario=f["scenario"], outcomes=(f["outcome1"], f["outcome2"]), ordered=True,
                      texts=[t for _, t in lines])
    try:
        base = min(max(float(f["base_rate"].strip()), OPEN_EDGE), 1.0 - OPEN_EDGE)
    except ValueError:
        raise Unrecognised(f"{req.name}: the base rate {f['base_rate'][:40]!r} is not a number") from None
    rng = sim.rng(req, world, "phi")
    curve = sim.errors.factor_curve
    return Reply({k: curve.apply(world.given_base_rate(world.lookup(text), base), rng) for k, text in lines})


def _group_key(world: WorldKnowledge, text: str) -> tuple[str, str]:
    """(group id, group name) a factor belongs to: its latent, else its theme."""
    entry = world.lookup(text)
    if entry is None:
        return "?", "Other factors"
    # An invented factor goes with the real ones of its theme (it is of the world's domain), in their latent's group.
    latent = entry.latent if entry.latent is not None else world.theme_latent.get(entry.theme)
    if latent is not None:
        return latent, world.latent_name(latent)
    return "theme:" + entry.theme, entry.theme


def discover_latents(sim: Simulator, req: Request) -> Reply:
    f = req.fields
    texts = bullet_lines(f["factors"], req.name)
    world = sim.world(req, scenario=f["scenario"], texts=texts)
    limit = max(1, number(req, "max_latents"))
    keys = [_group_key(world, t) for t in texts]
    names = dict(keys)
    order = list(dict.fromkeys(k for k, _ in keys))
    rng = sim.rng(req, world, "grouping")
    placed = []
    for k, _ in keys:
        if rng.random() < sim.errors.grouping_error:
            others = [o for o in order if o != k]
            if not others:
                others = ["wrong"]
                names["wrong"] = "Miscellaneous"
                order.append("wrong")
            k = rng.choice(others)
        placed.append(k)
    used = [k for k in order if k in placed]
    # More groups than asked for: the last ones are merged into the last group allowed.
    fold = {k: (k if i < limit else used[limit - 1]) for i, k in enumerate(used)}
    groups: dict[str, list[str]] = {}
    for text, k in zip(texts, placed, strict=True):
        groups.setdefault(fold[k], []).append(text)
    return Reply({"latents": [{"name": names[k][:40], "factors": members} for k, members in groups.items()]})


def _group_texts(world: WorldKnowledge, line: str) -> list[str]:
    """The factor texts of a latent line ``name (text; text)`` (the name may hold brackets too)."""
    if not line.endswith(")"):
        return []
    starts = [i for i, ch in enumerate(line) if ch == "("]
    for at in reversed(starts):
        parts = line[at + 1:-1].split("; ")
        if all(world.lookup(p) is not None for p in parts):
            return parts
    return line[starts[-1] + 1:-1].split("; ") if starts else []


def elicit_latent_params(sim: Simulator, req: Request) -> Reply:
    f = req.fields
    lines = keyed_lines(f["latents"], req.name)
    world = sim.world(req, scenario=f["scenario"], outcomes=(f["outcome1"], f["outcome2"]), ordered=True)
    rng = sim.rng(req, world, "latent_params")
    curve = sim.errors.factor_curve
    out = {}
    for k, line in lines:
        entries = [world.lookup(t) for t in _group_texts(world, line)]
        latents = {e.latent for e in entries if e is not None and not e.invented}
        if len(latents) == 1 and None not in latents:
            p1, p2 = world.latent_params(next(iter(latents)))  # type: ignore[arg-type]
        else:
            p1, p2 = 1.0, 0.0
        out[k] = {"p_outcome1": curve.apply(p1, rng), "p_outcome2": curve.apply(p2, rng)}
    return Reply(out)


def elicit_base_rate(sim: Simulator, req: Request) -> Reply:
    f = req.fields
    world = sim.world(req, scenario=f["scenario"], outcomes=(f["outcome1"], f["outcome2"]), ordered=True)
    return Reply({"p_outcome1": sim.errors.base_rate_curve.apply(world.base_rate(), sim.rng(req, world, "base_rate"))})


HANDLERS: dict[str, Handler] = {
    "GENERATE_SENTENCES": generate_sentences,
    "EXTRACT_FACTORS": extract_factors,
    "VALIDATE_FACTORS": validate_factors,
    "VOTE_LABELS": vote_labels,
    "NAME_THEME": name_theme,
    "SELECT_FACTORS": select_factors,
    "REFLECT_FACTORS": reflect_factors,
    "ELICIT_PHI": elicit_phi,
    "ELICIT_PHI_GIVEN_BASE_RATE": elicit_phi_given_base_rate,
    "DISCOVER_LATENTS": discover_latents,
    "ELICIT_LATENT_PARAMS": elicit_latent_params,
    "ELICIT_BASE_RATE": elicit_base_rate,
}
