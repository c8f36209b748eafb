"""The BIRD family as the runner lists it: ``bird`` (strict mapping), ``bird-relaxed`` and
``bird-on-anchor`` (BIRD's CPT on ANCHOR's factor space, the paper's Table 4), each with its ``MethodSpec``.

The methods themselves are :class:`~anchor.methods.bird_eval.BirdEvalMethod` and
:class:`~anchor.methods.bird_on_anchor.BirdOnAnchorMethod`. They, and with them the BIRD
package, are imported when a run builds one: the registry imports every family to list the methods
(``anchor --help``, the ``--method`` choices), and BIRD's models would add about a tenth of a
second to the start of every command.
"""

from __future__ import annotations

from typing import Any

from anchor.methods.anchor_method import SPACES, anchor_cost_shape
from anchor.methods.contract import ArtefactKind, CostShape, Method, MethodContext, MethodSpec


def bird_method_config(dataset: str) -> dict[str, Any]:
    """``MethodSpec.method_config`` of the BIRD methods: their ``BirdConfig`` for ``dataset``, as JSON."""
    from anchor.methods.bird_eval import bird_config_for  # start-up time, see the module docstring

    return bird_config_for(dataset).model_dump(mode="json")


def _strict(ctx: MethodContext) -> Method:
    from anchor.methods.bird_eval import BirdEvalMethod

    return BirdEvalMethod(ctx, relaxed=False)


def _relaxed(ctx: MethodContext) -> Method:
    from anchor.methods.bird_eval import BirdEvalMethod

    return BirdEvalMethod(ctx, relaxed=True)


def _on_anchor(ctx: MethodContext) -> Method:
    from anchor.methods.bird_on_anchor import BirdOnAnchorMethod

    return BirdOnAnchorMethod(ctx)


def _bird_artefacts() -> tuple[ArtefactKind, ...]:
    from anchor.methods.bird_eval import BIRD_MODELS  # start-up time, see the module docstring

    return (BIRD_MODELS,)


def _transplant_artefacts() -> tuple[ArtefactKind, ...]:
    from anchor.methods.bird_on_anchor import TRANSPLANTS

    return (SPACES, TRANSPLANTS)


def bird_cost_shape(config: Any) -> CostShape:
    """BIRD's usual requests, as the reference code makes them (docs/bird.md): about 136 + 3 x F0 to
    build a model (F0 the factors found, seven at most), 3 x F + 1 to map a condition over F factors."""
    return CostShape(136.0 + 3 * 7, 3 * 7 + 1.0, "a model of about 7 factors; 3 calls a factor to map a condition",
                     prompt_tokens=150, answer_tokens=30)


def bird_on_anchor_cost_shape(config: Any) -> CostShape:
    """ANCHOR's space, then BIRD's CPT data (128 judged assignments) per scenario; ANCHOR's mapping per condition."""
    space = anchor_cost_shape(config)
    return CostShape(space.group_requests + 128, space.row_requests, f"ANCHOR's space + 128 CPT calls; {space.basis}",
                     prompt_tokens=space.prompt_tokens, answer_tokens=space.answer_tokens)


SPECS = (
    MethodSpec("bird", _strict, "BIRD, strict mapping (the paper's BIRD-dagger): nothing mapped -> unknown; "
               "CoT answers instead on decision data", title="BIRD (strict)", paper_tables=("1", "2"), fallback="cot", fallback_kinds=("decision", "factcheck"),
               method_config=bird_method_config, per_scenario_artefact=True, cost_shape=bird_cost_shape,
               artefacts=_bird_artefacts, extra="bird"),
    MethodSpec("bird-relaxed", _relaxed, "BIRD with the relaxed mapping (BIRD-double-dagger): the closest "
               "value when nothing maps", title="BIRD (relaxed)", paper_tables=("1",), fallback="cot", fallback_kinds=("decision", "factcheck"),
               method_config=bird_method_config, per_scenario_artefact=True, cost_shape=bird_cost_shape,
               artefacts=_bird_artefacts, extra="bird"),
    MethodSpec("bird-on-anchor", _on_anchor, "BIRD-double-dagger's CPT on ANCHOR's factor space (the "
               "paper's Table 4; --stage factors|mapping|pool)", title="BIRD (relaxed) on ANCHOR", uses_anchor_config=True, trains_on_conditions=True,
               stages=("factors", "mapping", "pool"), method_config=bird_method_config, per_scenario_artefact=True,
               cost_shape=bird_on_anchor_cost_shape, artefacts=_transplant_artefacts, extra="bird"),
)
