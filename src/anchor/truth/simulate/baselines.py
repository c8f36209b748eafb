"""The simulated LLM's answers to the direct baselines and to the fact-checking negation.

Every holistic number is the truth P(O1 | the factors the LLM reads in the condition) through
``direct_curve`` (its noise drawn per request). Its reading errs as ANCHOR's mapping can: each stated
factor is missed at ``direct_miss_rate``, each other factor of the world read as stated at
``direct_invent_rate`` (never a second state of a network node the condition already gives):

* ``VANILLA`` / ``COT``: that estimate (CoT adds a short reasoning naming the factors it saw);
* ``VANILLA_DIRECT`` / ``COT_DIRECT``: the outcome the estimate favours ("1" at exactly 0.5);
* logits (free text asking for "1" or "2", with ``top_logprobs``): the text "1" or "2" and, at that
  one position, log-probabilities ``{"1": log p, "2": log(1 - p)}`` of the estimate p;
* ``COMPARE``: the condition whose estimated P(the named outcome | condition) is higher, "same" when
  the two are within 0.025;
* ``ORACLE_FACTORS``: known factors whose P(O1 | f) favours the named true outcome (>= 0.55 for
  outcome 1, <= 0.45 for outcome 2), shuffled per request; if none, the one leaning most its way;
* ``ORACLE_FACTOR_PROB``: the estimate of P(O1 | the condition's factors and that factor);
* ``NEGATE_CLAIM`` (fact-checking data, not used by worlds): "It is not the case that <claim>".
"""

from __future__ import annotations

import math

from anchor.llm.base import TokenLogprob
from anchor.truth.simulate.core import Handler, Reply, Simulator, number
from anchor.truth.simulate.knowledge import WorldKnowledge, key
from anchor.truth.simulate.recognise import LOGITS, Request
from anchor.truth.simulate.stages import LABEL_AGAINST, LABEL_FOR

SAME_WITHIN = 0.025


def _world(sim: Simulator, req: Request) -> WorldKnowledge:
    f = req.fields
    return sim.world(req, scenario=f["scenario"], outcomes=(f["outcome1"], f["outcome2"]), ordered=True)


def _estimate(sim: Simulator, req: Request, world: WorldKnowledge, present: list[str], purpose: str = "estimate"
              ) -> float:
    return sim.errors.direct_curve.apply(world.p_outcome1(present), sim.rng(req, world, purpose))


def read(sim: Simulator, req: Request, world: WorldKnowledge, condition: str, purpose: str = "read") -> list[str]:
    """The factors the LLM reads in ``condition``: the ones it states, some missed, some others invented."""
    present = world.present(condition)
    e = sim.errors
    if e.direct_miss_rate == 0.0 and e.direct_invent_rate == 0.0:
        return list(present)  # a copy: the caller may add to it, and the world keeps its own
    rng = sim.rng(req, world, purpose)
    seen = [fid for fid in present if rng.random() >= e.direct_miss_rate]
    nodes = {world.world.factor(fid).node for fid in present} - {None}
    for f in world.world.factors:
        if f.id not in present and rng.random() < e.direct_invent_rate and (f.node is None or f.node not in nodes):
            seen.append(f.id)
            nodes.add(f.node)
    try:
        world.p_outcome1(seen)
    except ValueError:  # evidence a network gives no probability to: read as stated, less what was missed
        seen = [fid for fid in seen if fid in present]
    order = {f.id: i for i, f in enumerate(world.world.factors)}
    return sorted(seen, key=order.__getitem__)


def _reasoning(world: WorldKnowledge, present: list[str], p: float) -> str:
    if not present:
        return ("The condition states none of the considerations that decide this, so the answer rests on the "
                "scenario alone.")
    named = "; ".join(world.world.factor(fid).text for fid in present)
    side = "outcome 1" if p >= 0.5 else "outcome 2"
    return f"The condition brings in: {named}. Weighed together, they favour {side}."[:800]


def vanilla(sim: Simulator, req: Request) -> Reply:
    world = _world(sim, req)
    return Reply({"probability": _estimate(sim, req, world, read(sim, req, world, req.fields["condition"]))})


def vanilla_direct(sim: Simulator, req: Request) -> Reply:
    world = _world(sim, req)
    p = _estimate(sim, req, world, read(sim, req, world, req.fields["condition"]))
    return Reply({"choice": "1" if p >= 0.5 else "2"})


def cot(sim: Simulator, req: Request) -> Reply:
    world = _world(sim, req)
    present = read(sim, req, world, req.fields["condition"])
    p = _estimate(sim, req, world, present)
    return Reply({"reasoning": _reasoning(world, present, p), "probability": p})


def cot_direct(sim: Simulator, req: Request) -> Reply:
    world = _world(sim, req)
    present = read(sim, req, world, req.fields["condition"])
    p = _estimate(sim, req, world, present)
    return Reply({"reasoning": _reasoning(world, present, p), "choice": "1" if p >= 0.5 else "2"})


def logits(sim: Simulator, req: Request) -> Reply:
    world = _world(sim, req)
    p = _estimate(sim, req, world, read(sim, req, world, req.fields["condition"]))
    top = {"1": math.log(p), "2": math.log1p(-p)}
    token = "1" if p >= 0.5 else "2"
    return Reply(text=token, logprobs=[TokenLogprob(token=token, logprob=top[token], top=top)])


def compare(sim: Simulator, req: Request) -> Reply:
    f = req.fields
    world = sim.world(req, scenario=f["scenario"], outcomes=(f["outcome"],))
    first = key(f["outcome"]) == key(world.world.outcome1)
    estimates = []
    for field in ("condition1", "condition2"):
        p = _estimate(sim, req, world, read(sim, req, world, f[field], purpose=f"read:{field}"), purpose=field)
        estimates.append(p if first else 1.0 - p)
    if abs(estimates[0] - estimates[1]) <= SAME_WITHIN:
        return Reply({"choice": "same"})
    return Reply({"choice": "1" if estimates[0] > estimates[1] else "2"})


def oracle_factors(sim: Simulator, req: Request) -> Reply:
    f = req.fields
    world = sim.world(req, scenario=f["scenario"], outcomes=(f["gold"], f["other"]))
    gold_first = key(f["gold"]) == key(world.world.outcome1)
    n = max(1, number(req, "n"))

    def lean(p: float) -> float:  # how much a factor favours the true outcome
        return p if gold_first else 1.0 - p

    real = [e for e in world.known if not e.invented]
    favour = [e for e in real if (world.posterior(e) >= LABEL_FOR if gold_first else world.posterior(e) <= LABEL_AGAINST)]
    if favour:
        sim.rng(req, world, "oracle").shuffle(favour)
        return Reply({"factors": [e.text for e in favour[:n]]})
    if real:
        return Reply({"factors": [max(real, key=lambda e: lean(world.posterior(e))).text]})
    return Reply({"factors": ["the circumstances of the scenario"]})


def oracle_factor_prob(sim: Simulator, req: Request) -> Reply:
    world = _world(sim, req)
    present = read(sim, req, world, req.fields["condition"])
    entry = world.lookup(req.fields["factor"])
    if entry is not None and entry.factor_id is not None and entry.factor_id not in present:
        present.append(entry.factor_id)
    return Reply({"probability": _estimate(sim, req, world, present)})


def negate_claim(sim: Simulator, req: Request) -> Reply:
    claim = " ".join(req.fields["claim"].split()).rstrip(".")
    if not claim:
        return Reply({"negation": "Nothing is claimed."})
    # "The river ..." -> "the river ...", but "NASA ..." stays as it is.
    start = claim[:1].lower() if claim[1:2].islower() else claim[:1]
    return Reply({"negation": f"It is not the case that {start}{claim[1:]}."[:600]})


HANDLERS: dict[str, Handler] = {
    "VANILLA": vanilla,
    "VANILLA_DIRECT": vanilla_direct,
    "COT": cot,
    "COT_DIRECT": cot_direct,
    LOGITS: logits,
    "COMPARE": compare,
    "ORACLE_FACTORS": oracle_factors,
    "ORACLE_FACTOR_PROB": oracle_factor_prob,
    "NEGATE_CLAIM": negate_claim,
}
