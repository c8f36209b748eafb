"""Small hand-made worlds for the simulated LLM's tests: one where Naive Bayes holds, one with the
latent layer ANCHOR's network assumes. Every number here is chosen by hand, so a test can work out
the truth with pen and paper (the conditions' p_true are then computed by exact enumeration)."""

from __future__ import annotations

from anchor.llm.client import LLMClient
from anchor.truth import exact
from anchor.truth.simulate import SimErrors, SimulatedBackend, SimulatedLLM
from anchor.truth.world import Variable, World, WorldCondition, WorldFactor, WorldFile, WorldLatent
from anchor.types import Scenario

# --------------------------------------------------------------------------- a naive-Bayes world

NB_SCENARIO = "A town council considers turning two lanes of its high street into a protected cycle lane."
NB_OUTCOMES = ("The cycle lane raises footfall for the high street's shops.",
               "The cycle lane does not raise footfall for the high street's shops.")

#: id -> (text, theme, mentions, P(f=1 | O1), P(f=1 | O2))
NB_FACTORS: dict[str, tuple[str, str, list[str], float, float]] = {
    "f1": ("students cycling to the college", "Commuting",
           ["many students cycle to the college on the high street", "the college's students mostly arrive by bike"],
           0.6, 0.3),
    "f2": ("parking spaces lost to the lane", "Commuting",
           ["the lane removes most parking spaces outside the shops", "drivers can no longer park in front of the shops"],
           0.3, 0.6),
    "f3": ("bus routes along the street", "Commuting",
           ["several bus routes run along the street", "buses stop on the high street every few minutes"], 0.5, 0.45),
    "f4": ("cafes with outdoor seating", "Retail Mix",
           ["the street has many cafes with outdoor seating", "people sit outside at the cafes along the street"],
           0.7, 0.3),
    "f5": ("bulky goods stores", "Retail Mix",
           ["several shops on the street sell bulky goods such as furniture",
            "furniture and appliance stores dominate the street"], 0.2, 0.5),
    "f6": ("weekly farmers market", "Retail Mix",
           ["a farmers market takes over the street every saturday",
            "every week growers sell their produce on the high street"], 0.55, 0.25),
    "f7": ("frequent heavy rain", "Weather",
           ["the town gets heavy rain on most days", "it rains hard here for much of the year"], 0.3, 0.55),
    "f8": ("hilly streets around the centre", "Weather",
           ["the streets leading to the centre are steep hills", "the town centre sits at the top of steep slopes"],
           0.25, 0.5),
}

#: id -> (present factors, kind, extra sentence); the text is the factors' mentions (plain or paraphrased).
NB_CONDITIONS: dict[str, tuple[list[str], str, str]] = {
    "c1": (["f1"], "factors", ""),
    "c2": (["f2", "f4"], "factors", ""),
    "c3": (["f5", "f6", "f7"], "factors", ""),
    "c4": (["f8"], "paraphrase", ""),
    "c5": (["f4"], "distractor", "The mayor was re-elected last spring."),
    "c6": ([], "nothing", "The council meets on tuesday evenings."),
    "c7": (["f6", "f1"], "paraphrase", ""),
}


def _sentence(clause: str) -> str:
    return clause[:1].upper() + clause[1:] + "."


def _conditions(world: World, specs: dict[str, tuple[list[str], str, str]]) -> list[WorldCondition]:
    out = []
    for cid, (present, kind, extra) in specs.items():
        which = 1 if kind == "paraphrase" else 0
        parts = [_sentence(world.factor(f).mentions[which]) for f in present]
        if extra:
            parts.append(extra)
        p = exact.p_outcome1(world, present)
        out.append(WorldCondition(id=cid, text=" ".join(parts), present=present, kind=kind,  # type: ignore[arg-type]
                                  p_true=p, label=1 if p >= 0.5 else 2))
    return out


def nb_world(world_id: str = "nb-cycle-lane") -> World:
    variables = [Variable(name="O", cpt=[0.5])]
    factors = []
    for fid, (text, theme, mentions, a, b) in NB_FACTORS.items():
        variables.append(Variable(name=fid, parents=["O"], cpt=[b, a]))
        factors.append(WorldFactor(id=fid, text=text, theme=theme, mentions=mentions))
    bare = World(id=world_id, structure="naive-bayes", seed=1, scenario=NB_SCENARIO, outcome1=NB_OUTCOMES[0],
                 outcome2=NB_OUTCOMES[1], variables=variables, factors=factors)
    return bare.model_copy(update={"conditions": _conditions(bare, NB_CONDITIONS)})


# --------------------------------------------------------------------------- a latent world

LATENT_SCENARIO = "A hospital considers replacing the paper charts on its wards with tablets."
LATENT_OUTCOMES = ("Tablets on the wards reduce medication errors.",
                   "Tablets on the wards do not reduce medication errors.")

#: id -> (name, P(L=1 | O1), P(L=1 | O2)); L3 leans to outcome 2.
LATENTS: dict[str, tuple[str, float, float]] = {
    "L1": ("Staff Readiness", 0.8, 0.3),
    "L2": ("Technical Reliability", 0.7, 0.4),
    "L3": ("Workload Pressure", 0.25, 0.7),
}

#: id -> (text, latent, mentions, c) with P(f=1 | L=1) = c and P(f=1 | L=0) = 1 - c.
LATENT_FACTORS: dict[str, tuple[str, str, list[str], float]] = {
    "f1": ("nurses trained on the new software", "L1",
           ["the nurses were trained on the new software", "every nurse took the course on the new software"], 0.85),
    "f2": ("younger staff on the wards", "L1",
           ["most staff on the wards are young", "the wards are run by a young team"], 0.7),
    "f3": ("a doctor championing the change", "L1",
           ["a senior doctor champions the change", "one of the consultants argues hard for the change"], 0.75),
    "f4": ("reliable wireless coverage on the wards", "L2",
           ["the wireless coverage on the wards is reliable", "the wards never lose their wifi signal"], 0.9),
    "f5": ("long tablet battery life", "L2",
           ["the tablets' batteries last a whole shift", "the tablets run all day on one charge"], 0.65),
    "f6": ("an IT helpdesk open at night", "L2",
           ["the IT helpdesk is open at night", "technicians answer calls through the night"], 0.8),
    "f7": ("understaffed night shifts", "L3",
           ["the night shifts are understaffed", "too few nurses work at night"], 0.85),
    "f8": ("a backlog of paper records to scan", "L3",
           ["there is a backlog of paper records to scan", "years of paper records still wait to be scanned"], 0.7),
    "f9": ("frequent agency nurses", "L3",
           ["agency nurses cover many shifts", "many shifts are filled by nurses from an agency"], 0.75),
}

LATENT_CONDITIONS: dict[str, tuple[list[str], str, str]] = {
    "c1": (["f1"], "factors", ""),
    "c2": (["f1", "f2"], "factors", ""),
    "c3": (["f4", "f7"], "factors", ""),
    "c4": (["f7", "f8", "f9"], "factors", ""),
    "c5": (["f3", "f5"], "paraphrase", ""),
    "c6": (["f6"], "distractor", "The hospital car park was repainted in march."),
    "c7": ([], "nothing", "The hospital has a new logo."),
}


def latent_world(world_id: str = "latent-tablets") -> World:
    variables = [Variable(name="O", cpt=[0.5])]
    for lid, (_, alpha, beta) in LATENTS.items():
        variables.append(Variable(name=lid, parents=["O"], cpt=[beta, alpha]))
    factors = []
    for fid, (text, lid, mentions, c) in LATENT_FACTORS.items():
        variables.append(Variable(name=fid, parents=[lid], cpt=[1 - c, c]))
        factors.append(WorldFactor(id=fid, text=text, theme=LATENTS[lid][0], mentions=mentions))
    bare = World(id=world_id, structure="latent", seed=2, scenario=LATENT_SCENARIO, outcome1=LATENT_OUTCOMES[0],
                 outcome2=LATENT_OUTCOMES[1], variables=variables, factors=factors,
                 latents=[WorldLatent(id=lid, name=name) for lid, (name, _, _) in LATENTS.items()])
    return bare.model_copy(update={"conditions": _conditions(bare, LATENT_CONDITIONS)})


def world_file(*worlds: World) -> WorldFile:
    return WorldFile(generator={"by": "hand (tests/truth/sim_worlds.py)"}, worlds=list(worlds) or [nb_world(),
                                                                                                     latent_world()])


def sim_client(*worlds: World, errors: object = None, seed: int = 0, client_seed: int = 0) -> LLMClient:
    """An ``LLMClient`` on the in-process simulated LLM of ``worlds`` (default: both hand-made ones);
    ``errors`` None is no error at all."""
    chosen = SimErrors.zero() if errors is None else errors
    assert isinstance(chosen, SimErrors)
    return LLMClient(SimulatedBackend(SimulatedLLM(world_file(*worlds), chosen, seed=seed)), seed=client_seed)


def scenario_of(world: World) -> Scenario:
    return Scenario(text=world.scenario, outcome1=world.outcome1, outcome2=world.outcome2)
