"""The BIRD family as the runner lists it: ``bird`` (strict mapping), ``bird-relaxed`` and
``bird-on-anchor`` (BIRD's CPT on ANCHOR's factor space, the paper's Table 4), each with its ``MethodSpec``.

The methods themselves are :class:`~anchor.evaluation.methods.bird_eval.BirdEvalMethod` and
:class:`~anchor.evaluation.methods.bird_on_anchor.BirdOnAnchorMethod`. They, and with them the BIRD
package, are imported when a run builds one: the registry imports every family to list the methods
(``anchor --help``, the ``--method`` choices), and BIRD's models would add about a tenth of a
second to the start of every command.
"""

from __future__ import annotations

from typing import Any

from anchor.evaluation.methods.contract import Method, MethodContext, MethodSpec


def bird_method_config(dataset: str) -> dict[str, Any]:
    """``MethodSpec.method_config`` of the BIRD methods: their ``BirdConfig`` for ``dataset``, as JSON."""
    from anchor.evaluation.methods.bird_eval import bird_config_for  # start-up time, see the module docstring

    return bird_config_for(dataset).model_dump(mode="json")


def _strict(ctx: MethodContext) -> Method:
    from anchor.evaluation.methods.bird_eval import BirdEvalMethod

    return BirdEvalMethod(ctx, relaxed=False)


def _relaxed(ctx: MethodContext) -> Method:
    from anchor.evaluation.methods.bird_eval import BirdEvalMethod

    return BirdEvalMethod(ctx, relaxed=True)


def _on_anchor(ctx: MethodContext) -> Method:
    from anchor.evaluation.methods.bird_on_anchor import BirdOnAnchorMethod

    return BirdOnAnchorMethod(ctx)


SPECS = (
    MethodSpec("bird", _strict, "BIRD, strict mapping (the paper's BIRD-dagger): nothing mapped -> unknown; "
               "CoT answers instead on decision data", fallback="cot", fallback_kinds=("decision", "factcheck"),
               method_config=bird_method_config, per_scenario_artefact=True, extra="bird"),
    MethodSpec("bird-relaxed", _relaxed, "BIRD with the relaxed mapping (BIRD-double-dagger): the closest "
               "value when nothing maps", fallback="cot", fallback_kinds=("decision", "factcheck"),
               method_config=bird_method_config, per_scenario_artefact=True, extra="bird"),
    MethodSpec("bird-on-anchor", _on_anchor, "BIRD-double-dagger's CPT on ANCHOR's factor space (the "
               "paper's Table 4; --stage factors|mapping|pool)", uses_anchor_config=True,
               stages=("factors", "mapping", "pool"), method_config=bird_method_config, per_scenario_artefact=True,
               extra="bird"),
)
