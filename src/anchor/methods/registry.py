"""The one registry of the methods ``anchor eval`` can run: ``METHODS``, by name.

Each family of methods describes itself: its module ends with ``SPECS``, the ``MethodSpec`` of each
method it provides (:mod:`.anchor_method`, :mod:`.baselines`, :mod:`.bird`). This module imports
every family and registers their specs in the order of ``FAMILIES`` (the order the command line
lists them in), so whichever module a program imports first, ``--method X`` finds X; and no family
imports the registry (contract <- families <- registry <- runner). The CLI imports the registry to
list the methods, so a family module stays light: what its methods need at run time (the pipeline,
BIRD) is imported when a run builds one. A new family adds its module to ``FAMILIES``;
:func:`register` also takes a spec made elsewhere (a name may be registered once).
"""

from __future__ import annotations

from typing import Any

from anchor.methods import anchor_method, baselines, bird
from anchor.methods.contract import Estimate, Method, MethodContext, MethodSpec, PairJudge
from anchor.types import Scenario

#: The method families, in the order their methods are listed (baselines before the BIRD methods,
#: whose fallback is one of them).
FAMILIES = (anchor_method, baselines, bird)

METHODS: dict[str, MethodSpec] = {}


def register(spec: MethodSpec) -> MethodSpec:
    """Add ``spec`` to :data:`METHODS`. Its name must be new, and the method it falls back on, if
    any, registered already."""
    if spec.name in METHODS:
        raise ValueError(f"a method named {spec.name!r} is registered already")
    if spec.fallback is not None and spec.fallback not in METHODS:
        raise ValueError(f"method {spec.name!r} falls back on {spec.fallback!r}, which is not registered")
    METHODS[spec.name] = spec
    return spec


for _family in FAMILIES:
    for _spec in _family.SPECS:
        register(_spec)

DIRECT_METHODS = tuple(name for name, spec in METHODS.items() if spec.direct)
ORACLE_METHODS = tuple(name for name, spec in METHODS.items() if spec.oracle)
PAIRWISE_ONLY_METHODS = tuple(name for name, spec in METHODS.items() if spec.pairwise_only)
STAGED_METHODS = tuple(name for name, spec in METHODS.items() if spec.stages)


def table_order() -> tuple[str, ...]:
    """The methods in the order of the report's rows: by ``MethodSpec.table_rank``, then as registered."""
    return tuple(sorted(METHODS, key=lambda name: METHODS[name].table_rank))


def paper_table(table: str) -> tuple[str, ...]:
    """The methods with a row in the paper's Table ``table`` (``MethodSpec.paper_tables``), in table order."""
    return tuple(name for name in table_order() if table in METHODS[name].paper_tables)


def build_method(spec: MethodSpec, ctx: MethodContext) -> Method | PairJudge:
    """The method of ``spec`` for one run, wrapped in its fallback where the spec asks for one."""
    method = spec.factory(ctx)
    if spec.fallback and ctx.config.kind in spec.fallback_kinds and isinstance(method, Method):
        backup = METHODS[spec.fallback].factory(ctx)
        if isinstance(backup, Method):
            return FallbackMethod(method, backup, spec.fallback)
    return method


class FallbackMethod:
    """``primary``, except that where it abstains ``backup`` answers; the estimate keeps the primary's
    trace and reason and names the method that answered (``Estimate.fallback``). The backup's LLM calls
    are made inside the instance like any other, so its cost is counted once, under its own stages."""

    def __init__(self, primary: Method, backup: Method, name: str) -> None:
        self.primary = primary
        self.backup = backup
        self.name = name

    async def prepare(self, scenario: Scenario) -> Any:
        return await self.primary.prepare(scenario)

    async def estimate(self, scenario: Scenario, condition: str, gold: int | None) -> Estimate:
        first = await self.primary.estimate(scenario, condition, gold)
        if first.status != "abstained":
            return first
        second = await self.backup.estimate(scenario, condition, gold)
        why = first.reason or "unknown"
        if second.status != "ok":
            reason = f"{why}; the fallback {self.name} gave no answer either: {second.reason or second.status}"
            return first.model_copy(update={"reason": reason, "fallback": self.name,
                                            "status": "failed" if second.status == "failed" else "abstained"})
        return first.model_copy(update={"p_outcome1": second.p_outcome1, "status": "ok", "fallback": self.name,
                                        "reason": f"{why}; answered by the fallback {self.name}"})
