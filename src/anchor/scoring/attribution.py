"""Which scenario each LLM request of an evaluation run served, and each scenario's critical path.

Every record in ``calls.jsonl`` carries the label of the ledger scope it was made in:

* ``instance:RUN:ID``: the requests of one instance (its conditions, a fallback method's);
* ``negation:ID``: the LLM negation of a fact-checking claim (``--negation llm``);
* ``KIND:KEY``: the build of a per-scenario artefact (``space:KEY``, ``bird:KEY``,
  ``bird-on-anchor:KEY``), whose key starts with the 16-digit scenario key.

Anything else (records of older run directories, such as ``data:negations``) is run-level.

A scenario's *critical path* is the longest chain of dependent requests among its records
(``ledger.critical_path``): the build of its artefact, then the longest instance that waited for
it. However many requests the server takes at once, the scenario takes at least that long.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from anchor.llm import chain
from anchor.llm.ledger import CallRecord, critical_path
from anchor.rundir.instances import DecisionInstance, PairwiseInstance
from anchor.rundir.records import CriticalPathReport
from anchor.types import CriticalPath, scenario_key

RUN_LEVEL = "(run)"
#: Scope kinds that are not artefact builds (their key is an instance id, not a scenario key).
_NOT_ARTEFACTS = ("instance", "negation", "data")


def scope_scenarios(instances: Iterable[DecisionInstance | PairwiseInstance], runs: int,
                    artefact_of: Mapping[str, str] | None = None) -> dict[str, str]:
    """Scope label -> scenario key for every scope an instance's requests were made in.

    ``artefact_of`` (instance id -> scenario key) overrides the instance's own key; ``anchor cost``
    passes the key of the artefact each prediction used, which is the key of the scenario as
    evaluated (after ``--negation llm`` rewrote its outcome 2)."""
    artefact_of = artefact_of or {}
    by_id = {inst.id: artefact_of.get(inst.id, scenario_key(inst.scenario)) for inst in instances}
    for iid, key in artefact_of.items():
        by_id.setdefault(iid, key)
    out = {f"negation:{iid}": key for iid, key in by_id.items()}
    for r in range(runs):
        out.update({f"instance:{r}:{iid}": key for iid, key in by_id.items()})
    return out


def scenario_of(scope: str, scopes: Mapping[str, str]) -> str:
    """The scenario a request made in ``scope`` served (:data:`RUN_LEVEL` when none)."""
    if scope in scopes:
        return scopes[scope]
    kind, _, key = scope.partition(":")
    if key and kind not in _NOT_ARTEFACTS:
        return key[:16]
    return RUN_LEVEL


def by_scenario(records: Iterable[CallRecord], scopes: Mapping[str, str]) -> dict[str, list[CallRecord]]:
    """Records grouped by the scenario they served, in first-seen order."""
    groups: dict[str, list[CallRecord]] = {}
    for r in records:
        groups.setdefault(scenario_of(r.scope, scopes), []).append(r)
    return groups


def critical_paths(groups: Mapping[str, list[CallRecord]], scenarios: Iterable[str]) -> dict[str, CriticalPath | None]:
    """Each scenario's critical path (zero for one without requests; None when its records were
    written before chains were recorded)."""
    out: dict[str, CriticalPath | None] = {}
    for key in scenarios:
        longest = critical_path(groups.get(key, []))
        out[key] = None if longest is None else CriticalPath(requests=longest.requests, seconds=longest.seconds)
    return out


#: The scenario a request made in a scope served (see :func:`scenario_of`).
ScopeScenarios = Callable[[str], str]


def run_scenarios(instances: Iterable[DecisionInstance | PairwiseInstance], runs: int
                  ) -> tuple[list[str], ScopeScenarios]:
    """The scenario keys of a run that scored ``instances`` (as evaluated) ``runs`` times, in first-seen
    order, and the scenario each request's scope served."""
    instances = list(instances)
    scopes = scope_scenarios(instances, runs)
    keys = list(dict.fromkeys(scenario_key(inst.scenario) for inst in instances))
    return keys, functools.partial(scenario_of, scopes=scopes)


def critical_path_report(records: Iterable[CallRecord], scopes: Mapping[str, str],
                         scenarios: Iterable[str]) -> CriticalPathReport:
    """``metrics.json``'s ``critical_path`` of ``records`` (see :class:`ScenarioPaths`)."""
    paths = ScenarioPaths(functools.partial(scenario_of, scopes=scopes))
    for record in records:
        paths.add(record)
    return paths.report(scenarios)


class ScenarioPaths:
    """Each scenario's critical path, found as the records are read one at a time (memory: one path a
    scenario): the longest chain among its records, None once one of them carries no chain."""

    def __init__(self, scenario: ScopeScenarios) -> None:
        self.scenario = scenario
        self.longest: dict[str, chain.Chain | None] = {}

    def add(self, record: CallRecord) -> None:
        if record.outcome in ("cache_hit", "sent", "interrupted"):
            return
        key = self.scenario(record.scope)
        if key in self.longest and self.longest[key] is None:
            return
        if record.chain_requests is None or record.chain_seconds is None:
            self.longest[key] = None
            return
        so_far = self.longest.get(key)
        self.longest[key] = (chain.Chain() if so_far is None else so_far).longer(
            chain.Chain(record.chain_requests, record.chain_seconds))

    def report(self, scenarios: Iterable[str]) -> CriticalPathReport:
        """Per scenario (zero for one without requests), and the mean and longest over scenarios."""
        paths: dict[str, CriticalPath | None] = {}
        for key in dict.fromkeys(scenarios):
            longest = self.longest.get(key, chain.Chain())
            paths[key] = None if longest is None else CriticalPath(requests=longest.requests, seconds=longest.seconds)
        known = [p for p in paths.values() if p is not None]
        report: dict[str, Any] = {"scenarios": len(paths), "per_scenario": paths}
        if known and len(known) == len(paths):
            report.update(
                mean_requests=round(sum(p.requests for p in known) / len(known), 4),
                mean_seconds=round(sum(p.seconds for p in known) / len(known), 4),
                max_requests=max(p.requests for p in known),
                max_seconds=round(max(p.seconds for p in known), 4),
            )
        return CriticalPathReport(**report)
