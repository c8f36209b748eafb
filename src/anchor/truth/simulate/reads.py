"""Which error parameters each answer of the simulated LLM depends on.

Every answer is a function of the worlds, the simulator's seed, the request, and some of the
:class:`~anchor.truth.simulate.errors.SimErrors` parameters: those listed here for its prompt. So two
error settings that agree on every parameter a prompt reads give that prompt the same answer, and a
whole run whose prompts (its ``calls.jsonl`` stages) read none of the parameters in which two settings
differ gets the same answers under both, request after request: its first request is the same, so
its answer is, so the next request is, and so on. ``anchor truth bench`` uses this to answer such a
cell from the run it already has instead of running it again (see :func:`same_answers`).

The table is kept with the handlers and checked by a test that answers real requests of every prompt
under settings that differ in every parameter a prompt is not listed as reading. A stage not in the
table counts as reading every parameter, so it never lets a run be reused.
"""

from __future__ import annotations

from collections.abc import Iterable

from anchor.truth.simulate.errors import SimErrors
from anchor.truth.simulate.recognise import TEMPLATES

#: What the LLM knows of a world (which factors it can name, which it invented, and so which texts it
#: recognises): read by every prompt that names, finds or looks up a factor.
KNOWS = frozenset({"factor_recall", "hallucination_rate"})
_DIRECT = frozenset({"direct_curve", "direct_miss_rate", "direct_invent_rate"})

#: Prompt name (as in :data:`anchor.truth.simulate.llm.HANDLERS`) -> the error parameters its answer reads.
READS: dict[str, frozenset[str]] = {
    "GENERATE_SENTENCES": KNOWS,
    "EXTRACT_FACTORS": KNOWS,
    "VALIDATE_FACTORS": KNOWS,
    "VOTE_LABELS": KNOWS | {"vote_flip_rate"},
    "NAME_THEME": KNOWS,
    "SELECT_FACTORS": KNOWS | {"map_recall", "map_false_rate"},
    "REFLECT_FACTORS": KNOWS | {"reflect_catch"},
    "ELICIT_PHI": KNOWS | {"factor_curve", "phi_reading"},
    "ELICIT_PHI_GIVEN_BASE_RATE": KNOWS | {"factor_curve"},
    "DISCOVER_LATENTS": KNOWS | {"grouping_error"},
    "ELICIT_LATENT_PARAMS": KNOWS | {"factor_curve"},
    "ELICIT_BASE_RATE": frozenset({"base_rate_curve"}),
    "VANILLA": _DIRECT,
    "VANILLA_DIRECT": _DIRECT,
    "COT": _DIRECT,
    "COT_DIRECT": _DIRECT,
    "LOGITS": _DIRECT,
    "COMPARE": _DIRECT,
    "ORACLE_FACTORS": KNOWS,
    "ORACLE_FACTOR_PROB": KNOWS | _DIRECT,
    "NEGATE_CLAIM": frozenset(),
    "BIRD_SENTENCES": KNOWS,
    "BIRD_FACTORS": KNOWS,
    "BIRD_FACTORS_EXTEND": KNOWS,
    "BIRD_FACTORS_RERANK": KNOWS,
    "BIRD_VALUES_AS_NEEDED": KNOWS,
    "BIRD_VALUES_OPPOSITES": KNOWS,
    "BIRD_LABELS": KNOWS | {"vote_flip_rate"},
    "BIRD_CPT_DATA": KNOWS | {"factor_curve"},
    "BIRD_MAPPING": KNOWS | {"map_recall", "map_false_rate"},
    "BIRD_REFLECT": KNOWS | {"reflect_catch"},
    "BIRD_MAPPING_RELAXED": KNOWS,
}

#: Every parameter: what a stage not in the table is taken to read.
EVERY_PARAMETER = frozenset(SimErrors.model_fields)


def _stage_reads() -> dict[str, frozenset[str]]:
    out: dict[str, frozenset[str]] = {}
    for templates in TEMPLATES.values():
        for t in templates:
            out[t.stage] = out.get(t.stage, frozenset()) | READS.get(t.name, EVERY_PARAMETER)
    return out


#: A request's stage (as the client records it in ``calls.jsonl``) -> the parameters its prompts read.
STAGE_READS: dict[str, frozenset[str]] = _stage_reads()


def parameters_read(stages: Iterable[str]) -> frozenset[str]:
    """The parameters the answers to requests of these stages read (every one for an unknown stage)."""
    out: frozenset[str] = frozenset()
    for stage in stages:
        out |= STAGE_READS.get(stage, EVERY_PARAMETER)
    return out


def differing(a: SimErrors, b: SimErrors) -> frozenset[str]:
    """The parameters whose values differ between ``a`` and ``b`` (a curve counts as one parameter)."""
    return frozenset(name for name in SimErrors.model_fields if getattr(a, name) != getattr(b, name))


def same_answers(a: SimErrors, b: SimErrors, stages: Iterable[str]) -> bool:
    """Whether a run that sent requests of only these stages under ``a`` gets the very same answers
    under ``b`` (the same worlds and seed): the two differ in no parameter those stages read."""
    return not (differing(a, b) & parameters_read(stages))
