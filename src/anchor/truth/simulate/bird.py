"""The simulated LLM's answers to BIRD's prompts (``anchor.prompts.bird``), from the same truth and with
the same error parameters as the rest, so that ``bird``, ``bird-relaxed`` and ``bird-on-anchor`` run
on a world.

BIRD's factors have mutually exclusive values; a world's factors are binary. So the simulated LLM
names each factor it knows with two values, ``"<factor> is present"`` and ``"<factor> is absent"``
(an ANCHOR factor shown as a one-value slot, in ``bird-on-anchor``, is its text alone: present).

* ``BIRD_SENTENCES``: sentences, each stating one known factor that favours the statement
  (P(O1 | f) above 0.5 for outcome 1, below for outcome 2; inventions go to either side);
* ``BIRD_FACTORS``: the known factors named in the sentences, each with its two values;
  ``_EXTEND`` adds the known factors missing; ``_RERANK`` orders them by how far P(O1 | f) is from
  0.5 (inventions last) and keeps ``max_factors``; ``BIRD_VALUES_*`` adds a missing present/absent value;
* ``BIRD_LABELS``: each value's side by the truth: P(O1 | the value) >= 0.55 'statement 1', <= 0.45
  'statement 2', else 'both' (so invented and neutral factors are pruned, as BIRD prunes); 'neither'
  for a value it does not know; each label flipped at ``vote_flip_rate``;
* ``BIRD_CPT_DATA``: the truth P(O1 | the assignment's values) through ``factor_curve``, said as
  the nearest of BIRD's seven levels (outcome 2 the mirror level);
* ``BIRD_MAPPING``: the value of a factor the condition makes present, chosen at ``map_recall``
  (else 'none'); for a factor it does not make present, 'none', or at ``map_false_rate`` a listed
  value at random; ``BIRD_REFLECT`` keeps true values and removes wrong ones at ``reflect_catch``;
* ``BIRD_MAPPING_RELAXED``: a value of a factor the condition makes present if any, else the value
  sharing the most words with the condition (BIRD's relaxed mapping must name one).

Where BIRD's own definitions keep it from the truth even under zero error (so no test can ask for
equality): the seven verbal levels round every judgement (to 0, 0.2, 0.4, 0.5, 0.6, 0.8, 1); the CPT
is fitted by a few hundred SGD steps with a margin term, from 0.75/0.25 starting points; the
reranking turn keeps at most ``max_factors`` factors; and inference averages over the factors a
condition leaves open uniformly (each value equally likely), where the truth weighs them by
P(value | outcome). The answers themselves (labels, mapping, the level of each assignment) are
the truth under zero error, and the tests check them.
"""

from __future__ import annotations

import json
import math
import re

from anchor.bird.verbal import SCALE, STRENGTH, TARGET, mirror
from anchor.truth.simulate.core import Handler, Reply, Simulator, number
from anchor.truth.simulate.knowledge import Entry, WorldKnowledge, find_phrases, key
from anchor.truth.simulate.recognise import Request, Unrecognised, bullet_lines, keyed_lines
from anchor.truth.simulate.stages import LABEL_AGAINST, LABEL_FOR

PRESENT = " is present"
ABSENT = " is absent"
SENTENCES = (
    "In this case there is {factor}.",
    "It turns out the situation involves {factor}.",
    "One more thing is known: {factor}.",
    "Those involved point to {factor}.",
    "A report on the situation mentions {factor}.",
)
_WORD = re.compile(r"[a-z0-9']+")


def values_of(entry: Entry) -> list[str]:
    return [entry.text + PRESENT, entry.text + ABSENT]


def value_index(world: WorldKnowledge) -> list[tuple[str, tuple[Entry, int]]]:
    """Every value text the simulated LLM can read for this world, with (factor, state)."""
    out: list[tuple[str, tuple[Entry, int]]] = []
    for e in world.entries:
        out += [(e.text + PRESENT, (e, 1)), (e.text + ABSENT, (e, 0)), (e.text, (e, 1))]
    return out


def read_value(world: WorldKnowledge, value: str) -> tuple[Entry, int] | None:
    """(factor, state) a value text names, or None."""
    k = key(value).rstrip(".")
    for text, found in value_index(world):
        if key(text) == k:
            return found
    return None


def factor_text(value: str) -> str:
    """The factor a value text is about (its text without the present/absent ending)."""
    for end in (PRESENT, ABSENT):
        if value.endswith(end):
            return value[: -len(end)]
    return value


def value_truth(world: WorldKnowledge, entry: Entry, state: int) -> float:
    """P(O1 | the factor in this state); 0.5 for an invented one."""
    if entry.factor_id is None:
        return 0.5
    return world.p_given({entry.factor_id: state})


def _level(p: float) -> str:
    """The verbal level nearest to ``p`` (a tie goes to the less confident one)."""
    best = min(SCALE, key=lambda lvl: (abs(TARGET[lvl] - p), abs(STRENGTH[lvl])))
    return best.value


def _structure(req: Request) -> list[tuple[str, list[str]]]:
    try:
        data = json.loads(req.fields["structure"])
        return [(str(item["factor"]), [str(v) for v in item["values"]]) for item in data["factors"]]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise Unrecognised(f"{req.name}: the current factor structure is not the JSON BIRD sends ({exc})") from None


def _as_answer(factors: list[tuple[str, list[str]]]) -> Reply:
    return Reply({"factors": [{"factor": name, "values": values} for name, values in factors[:12]]})


def _world(sim: Simulator, req: Request) -> WorldKnowledge:
    f = req.fields
    return sim.world(req, scenario=f["scenario"], outcomes=(f["outcome1"], f["outcome2"]), ordered=True)


# --------------------------------------------------------------------------- abduction


def sentences(sim: Simulator, req: Request) -> Reply:
    f = req.fields
    world = sim.world(req, scenario=f["scenario"], outcomes=(f["statement"],))
    side1 = key(f["statement"]) == key(world.world.outcome1)
    invented = [e for e in world.known if e.invented]
    favour = [e for e in world.known if not e.invented and (world.posterior(e) > 0.5) == side1
              and world.posterior(e) != 0.5]
    favour += [e for i, e in enumerate(invented) if (i % 2 == 0) == side1]
    n = max(1, number(req, "n"))
    if not favour:
        return Reply({"sentences": ["Nothing in particular points this way."]})
    rng = sim.rng(req, world, "bird.sentences")
    rng.shuffle(favour)
    out = []
    for i in range(n):
        text = rng.choice(SENTENCES).format(factor=favour[i % len(favour)].text)
        out.append(text[:1].upper() + text[1:])
    return Reply({"sentences": out})


def factors(sim: Simulator, req: Request) -> Reply:
    world = _world(sim, req)
    said = req.fields["sentences1"] + "\n" + req.fields["sentences2"]
    named = [e for _, e in find_phrases(said, [(e.text, e) for e in world.known])]
    found = list(dict.fromkeys(named)) or list(world.known)
    if not found:
        return _as_answer([("the general circumstances", ["favourable circumstances", "unfavourable circumstances"])])
    return _as_answer([(e.text, values_of(e)) for e in found])


def factors_extend(sim: Simulator, req: Request) -> Reply:
    world = _world(sim, req)
    current = _structure(req)
    have = {key(name) for name, _ in current}
    return _as_answer(current + [(e.text, values_of(e)) for e in world.known if key(e.text) not in have])


def factors_rerank(sim: Simulator, req: Request) -> Reply:
    world = _world(sim, req)
    current = _structure(req)
    keep = max(1, number(req, "max_factors"))

    def strength(item: tuple[str, list[str]]) -> float:
        return abs(world.posterior(world.lookup(item[0])) - 0.5)

    return _as_answer(sorted(current, key=strength, reverse=True)[:keep])


def values_complete(sim: Simulator, req: Request) -> Reply:
    world = _world(sim, req)
    out = []
    for name, values in _structure(req):
        entry = world.lookup(name)
        if entry is not None:
            values = values + [v for v in values_of(entry) if key(v) not in {key(x) for x in values}]
        out.append((name, values))
    return _as_answer(out)


def labels(sim: Simulator, req: Request) -> Reply:
    world = _world(sim, req)
    lines = keyed_lines(req.fields["values"], req.name)
    rng = sim.rng(req, world, "bird.labels")
    options = ("statement 1", "statement 2", "both")
    out = {}
    for k, value in lines:
        found = read_value(world, value)
        if found is None:
            out[k] = "neither"
            continue
        p = value_truth(world, *found)
        label = "statement 1" if p >= LABEL_FOR else "statement 2" if p <= LABEL_AGAINST else "both"
        if rng.random() < sim.errors.vote_flip_rate:
            label = rng.choice([o for o in options if o != label])
        out[k] = label
    return Reply({"explanation": f"Each value is judged by how it shifts the odds of statement 1 in "
                                 f"{req.fields['factor'][:200]}."[:500], "labels": out})


def cpt_data(sim: Simulator, req: Request) -> Reply:
    world = _world(sim, req)
    condition = req.fields["condition"]
    evidence: dict[str, int] = {}
    for _, (entry, state) in find_phrases(condition, value_index(world)):
        if entry.factor_id is not None:
            evidence[entry.factor_id] = state
    if not evidence:
        evidence = {fid: 1 for fid in world.present(condition)}
    p = sim.errors.factor_curve.apply(world.p_given(evidence), sim.rng(req, world, "bird.cpt"))
    level = _level(p)
    other = mirror(next(lvl for lvl in SCALE if lvl.value == level)).value
    return Reply({"reasoning": f"Taken together, the stated circumstances make outcome 1 {level}.",
                  "outcome1": level, "outcome2": other})


# --------------------------------------------------------------------------- mapping


def _implied(world: WorldKnowledge, condition: str, value: str) -> bool:
    found = read_value(world, value)
    if found is None or found[0].factor_id is None:
        return False
    entry, state = found
    return state == 1 and entry.factor_id in world.present(condition)


def mapping(sim: Simulator, req: Request) -> Reply:
    f = req.fields
    shown = bullet_lines(f["values"], req.name)
    world = sim.world(req, scenario=f["scenario"], texts=[factor_text(v) for v in shown], condition=f["condition"])
    rng = sim.rng(req, world, "bird.mapping")
    implied = [v for v in shown if _implied(world, f["condition"], v)]
    if implied:
        return Reply({"value": implied[0] if rng.random() < sim.errors.map_recall else "none"})
    if shown and rng.random() < sim.errors.map_false_rate:
        return Reply({"value": rng.choice(shown)})
    return Reply({"value": "none"})


def reflect(sim: Simulator, req: Request) -> Reply:
    f = req.fields
    shown = bullet_lines(f["values"], req.name)
    world = sim.world(req, texts=[factor_text(v) for v in shown], condition=f["condition"])
    rng = sim.rng(req, world, "bird.reflect")
    keep = [v for v in shown if _implied(world, f["condition"], v) or rng.random() >= sim.errors.reflect_catch]
    return Reply({"keep": keep})


def _options(req: Request) -> list[tuple[str, str]]:
    """(factor name, value) pairs of the relaxed prompt's ``- name:`` / ``  - value`` list."""
    out: list[tuple[str, str]] = []
    name: str | None = None
    for line in req.fields["options"].split("\n"):
        if line.startswith("  - ") and name is not None:
            out.append((name, line[4:]))
        elif line.startswith("- ") and line.endswith(":"):
            name = line[2:-1]
        elif line.strip():
            raise Unrecognised(f"{req.name}: an option line is neither '- factor:' nor '  - value' ({line[:60]!r})")
    return out


def mapping_relaxed(sim: Simulator, req: Request) -> Reply:
    f = req.fields
    options = _options(req)
    if not options:
        raise Unrecognised(f"{req.name}: no factor value is listed")
    world = sim.world(req, scenario=f["scenario"], texts=[factor_text(v) for _, v in options],
                      condition=f["condition"])
    implied = [(n, v) for n, v in options if _implied(world, f["condition"], v)]
    if implied:
        name, value = implied[0]
    else:
        words = set(_WORD.findall(f["condition"].casefold()))

        def overlap(option: tuple[str, str]) -> float:
            mine = set(_WORD.findall(option[1].casefold()))
            return len(words & mine) / math.sqrt(len(mine) or 1)

        name, value = max(options, key=overlap)  # the first of the best on a tie
    return Reply({"factor": name, "value": value})


HANDLERS: dict[str, Handler] = {
    "BIRD_SENTENCES": sentences,
    "BIRD_FACTORS": factors,
    "BIRD_FACTORS_EXTEND": factors_extend,
    "BIRD_FACTORS_RERANK": factors_rerank,
    "BIRD_VALUES_AS_NEEDED": values_complete,
    "BIRD_VALUES_OPPOSITES": values_complete,
    "BIRD_LABELS": labels,
    "BIRD_CPT_DATA": cpt_data,
    "BIRD_MAPPING": mapping,
    "BIRD_REFLECT": reflect,
    "BIRD_MAPPING_RELAXED": mapping_relaxed,
}
