"""Compare the LLM cost of two evaluation runs of the same dataset slice (``anchor cost DIR_A DIR_B``).

Everything comes from each run directory's ``calls.jsonl``, where every request the run made was
logged once (and ``config.json``, ``sample.json`` and ``predictions.jsonl`` to know the slice, the
instances it scored and their scenarios; see ``evaluation.cost.attribution``):

* **requests** are logical requests (``anchor.llm.ledger``): each request the run asked for once,
  however many attempts the transport needed to get it answered; **attempts** are what was sent
  and came back (answered or failed), every retry after a transient failure included. The ratios
  B / A are of requests, so that a server's faults (HTTP 500, 429), which add attempts only, do not
  move them. A request cut off by a kill (a "sent" announcement with no outcome,
  ``ledger.collapse_sent``) is counted apart as *interrupted*: the server may or may not have
  received it. **Cache hits** made no request.
* **tokens** are the prompt and completion tokens the server reported for those requests;
* **time** is wall time per scenario: how long at least one request of the scenario (its artefact
  builds and its instances) was in flight, averaged over scenarios; it depends on how many requests
  were allowed at once, which the comparison states for both runs;
* the **critical path** of a scenario is its longest chain of requests that waited for one another
  (count and seconds): the time it takes at least, however many requests run at once.

Figures are given per scenario (totals divided by scenarios x runs) for each phase (factor
construction, mapping, inference, ...) and each stage, with the ratio B / A, and per scenario.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, Field

from anchor.errors import AnchorError
from anchor.evaluation.cost.phases import PHASES, phase_of
from anchor.evaluation.datasets.reading import DatasetError
from anchor.evaluation.datasets.sampling import SampleError
from anchor.evaluation.datasets.selection import scored_instances, skipped_note
from anchor.llm.ledger import CallRecord, busy_seconds
from anchor.rundir import RunDirectory, Skipped
from anchor.rundir.records import RunConfig
from anchor.scoring.attribution import RUN_LEVEL, by_scenario, critical_paths, scope_scenarios
from anchor.types import CriticalPath

#: The layout of the comparison (``anchor cost --json``; docs/schemas.md). 1: per-row ``calls`` (requests sent
#: with a known outcome, retries included) and each side's ``requests`` in that sense. 2: ``requests`` are
#: logical requests and ``attempts`` what 1 called calls; ``calls`` is kept beside them, deprecated, with its
#: version-1 meaning (the attempts), and goes in version 3.
COST_SCHEMA_VERSION = 2
#: Keys kept for one version under their old name, and what to read instead.
DEPRECATED = {"calls": "the version-1 name of 'attempts' (requests sent with a known outcome, retries included; "
                       "equal to 'requests' when no attempt failed); removed in schema_version 3: read 'attempts'"}

#: Run settings that define a dataset slice: two runs compare only when all of them agree.
SLICE_FIELDS = ("dataset", "data_sha256", "kind", "sample", "sample_seed", "limit", "balance_outcomes", "runs")


class CostCompareError(AnchorError):
    """Two run directories that cannot be compared (missing files, different slices)."""


class Figures(BaseModel):
    """Cost of one group of requests."""

    requests: int = Field(default=0, description="Logical requests (each once, whatever its attempts).")
    attempts: int = Field(default=0, description="Attempts with a known outcome, retries included.")
    failed: int = Field(default=0, description="Failed attempts.")
    interrupted: int = Field(default=0, description="Requests cut off by a kill (outcome unknown), not in calls.")
    interrupted_prompt_tokens: int = Field(default=0, description="Their prompts' tokens, by the client's estimate.")
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = Field(default=0.0, description="Wall time with at least one of these requests in flight.")

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def scaled(self, by: float) -> dict[str, float]:
        return {"requests": self.requests / by, "attempts": self.attempts / by,
                "calls": self.attempts / by,  # deprecated: see DEPRECATED
                "prompt_tokens": self.prompt_tokens / by,
                "completion_tokens": self.completion_tokens / by, "tokens": self.tokens / by,
                "seconds": self.seconds / by, "cache_hits": self.cache_hits / by, "interrupted": self.interrupted / by}


def figures(records: Sequence[CallRecord]) -> Figures:
    """Requests, attempts, tokens and busy time of ``records`` (already collapsed: each request once)."""
    out = Figures()
    for r in records:
        if r.outcome == "cache_hit":
            out.cache_hits += 1
            continue
        if r.outcome == "interrupted":
            out.interrupted += 1
            out.interrupted_prompt_tokens += r.estimated_prompt_tokens
            continue
        out.attempts += 1
        out.requests += int(r.ends_request)
        out.failed += int(r.outcome != "ok")
        out.prompt_tokens += r.prompt_tokens
        out.completion_tokens += r.completion_tokens
    out.seconds = round(busy_seconds(r for r in records if r.outcome_known), 6)
    return out


@dataclass
class RunCost:
    """One run directory, read for the comparison."""

    path: Path
    config: RunConfig
    records: list[CallRecord]
    scopes: dict[str, str]
    """Scope label -> scenario key (``attribution.scope_scenarios``) for the run's own instances."""
    scenarios: list[str]
    """The scenarios of the instances the run scored."""
    label: str = ""
    stage_names: list[str] = field(default_factory=list)
    data_note: str | None = None
    """Rows of the run's data file that were skipped (one line), when any were."""
    damaged_note: str | None = None
    """Lines of predictions.jsonl that could not be read (one line), when any were."""

    @property
    def concurrency(self) -> int | None:
        value = self.config.llm.get("max_concurrency")
        return int(value) if isinstance(value, int | float) else None

    @property
    def n_scenarios(self) -> int:
        return len(self.scenarios) or 1

    @property
    def name(self) -> str:
        return self.config.method + (f" --stage {self.config.stage}" if self.config.stage else "")


def load_run_cost(path: Path) -> RunCost:
    """Read a run directory's configuration, call log and the scenario of each instance it scored. The
    call log is read strictly (a damaged line is an error naming it: the figures are its sums)."""
    run = RunDirectory(path, error=CostCompareError)
    config = run.read_config()
    if not run.calls.exists():
        raise CostCompareError(f"{run.path}: no calls.jsonl (not a run directory written by `anchor eval` or "
                               "`anchor predict`)")
    records = run.call_log()
    # The instances the run scored: as it kept them, or selected again as the runner did (its sample.json
    # when it sampled) from its data file, when it kept none.
    try:
        instances, data = scored_instances(run, config)
    except (DatasetError, SampleError, OSError) as exc:
        raise CostCompareError(f"{path}: cannot tell which instances the run scored, which the figures per "
                               f"scenario need: {str(exc).splitlines()[0]}") from exc
    # An artefact a prediction used names the scenario as evaluated (e.g. after --negation llm). Read
    # leniently: a damaged line only leaves its instance under the scenario its data file names.
    artefact_of: dict[str, str] = {}
    damaged = Skipped()
    for p in run.latest_predictions(skipped=damaged).values():
        keys = [s.artefact for s in p.sides if s.artefact]
        if keys:
            artefact_of[p.id] = keys[0][:16]
    scopes = scope_scenarios(instances, config.runs, artefact_of)
    scenarios = list(dict.fromkeys(scopes[f"negation:{inst.id}"] for inst in instances))
    return RunCost(path=path, config=config, records=records, scopes=scopes, scenarios=scenarios,
                   data_note=data.summary() if data is not None else _recorded_note(run),
                   damaged_note=f"{damaged.note()}; their instances are placed by their data file's scenario"
                   if damaged else None)


def _recorded_note(run: RunDirectory) -> str | None:
    """The rows of the data file the run skipped, as its metrics.json recorded them (none when it has no
    readable one: the note is not a figure)."""
    try:
        return skipped_note(run.read_metrics().data) if run.has_metrics() else None
    except CostCompareError:
        return None


def check_same_slice(a: RunCost, b: RunCost) -> None:
    for name in SLICE_FIELDS:
        va, vb = getattr(a.config, name), getattr(b.config, name)
        if va != vb:
            raise CostCompareError(f"{a.path} and {b.path} are not runs of the same dataset slice: {name} is {va!r} "
                                   f"in the first and {vb!r} in the second")


def _ratio(b: float, a: float) -> float | None:
    return round(b / a, 4) if a else None


class MeanPath(NamedTuple):
    """A critical path, or the mean of several (so its request count need not be whole)."""

    requests: float
    seconds: float


def _side(run: RunCost) -> dict[str, Any]:
    recs = run.records
    per = run.n_scenarios * run.config.runs
    by_phase = {ph: figures([r for r in recs if phase_of(r.stage) == ph]) for ph in PHASES}
    stages = list(dict.fromkeys(r.stage for r in recs))
    by_stage = {s: figures([r for r in recs if r.stage == s]) for s in stages}
    groups = by_scenario(recs, run.scopes)
    scen = {g: figures(rs) for g, rs in groups.items()}
    paths = critical_paths(groups, [*run.scenarios, *(g for g in groups if g not in run.scenarios and g != RUN_LEVEL)])
    # Time per scenario and phase: busy time of that scenario's requests of the phase, averaged.
    phase_seconds = {
        ph: sum(figures([r for r in rs if phase_of(r.stage) == ph]).seconds for rs in groups.values()) / per
        for ph in PHASES}
    total = figures(recs)
    wall_per_scenario = sum(f.seconds for f in scen.values()) / per
    own = [p for g in run.scenarios if (p := paths[g]) is not None]
    mean = None
    if own and len(own) == len(run.scenarios):  # a mean only when every scenario's path was recorded
        mean = MeanPath(requests=sum(p.requests for p in own) / len(own), seconds=sum(p.seconds for p in own) / len(own))
    return {"total": total, "phases": by_phase, "stages": by_stage, "scenarios": scen, "per": per,
            "phase_seconds": phase_seconds, "wall_per_scenario": wall_per_scenario, "paths": paths,
            "mean_path": mean}


def _path_row(pa: CriticalPath | MeanPath | None, pb: CriticalPath | MeanPath | None) -> dict[str, Any]:
    """Two critical paths (None: not recorded) and their ratio B/A."""
    def side(p: CriticalPath | MeanPath | None) -> dict[str, float] | None:
        return None if p is None else {"requests": round(p.requests, 4), "seconds": round(p.seconds, 4)}

    ratio = {k: _ratio(getattr(pb, k), getattr(pa, k)) if pa is not None and pb is not None else None
             for k in ("requests", "seconds")}
    return {"a": side(pa), "b": side(pb), "ratio": ratio}


def compare(dir_a: Path, dir_b: Path) -> dict[str, Any]:
    """The comparison as one JSON-ready document (see the module docstring for what each figure means)."""
    a, b = load_run_cost(dir_a), load_run_cost(dir_b)
    check_same_slice(a, b)
    sa, sb = _side(a), _side(b)

    def row(fa: Figures, fb: Figures, per_a: float, per_b: float, secs: tuple[float, float] | None = None
            ) -> dict[str, Any]:
        xa, xb = fa.scaled(per_a), fb.scaled(per_b)
        if secs is not None:
            xa["seconds"], xb["seconds"] = secs
        out: dict[str, Any] = {"a": {k: round(v, 4) for k, v in xa.items()},
                               "b": {k: round(v, 4) for k, v in xb.items()}}
        # Of requests, not attempts: a server's faults add attempts, not requests.
        out["ratio"] = {k: _ratio(xb[k], xa[k]) for k in ("requests", "calls", "prompt_tokens", "completion_tokens",
                                                          "tokens", "seconds")}
        return out

    phases = {}
    for ph in PHASES:
        fa, fb = sa["phases"][ph], sb["phases"][ph]
        if fa.attempts or fb.attempts or fa.cache_hits or fb.cache_hits:
            phases[ph] = row(fa, fb, sa["per"], sb["per"], (sa["phase_seconds"][ph], sb["phase_seconds"][ph]))
    stages = {}
    for st in dict.fromkeys([*sa["stages"], *sb["stages"]]):
        fa, fb = sa["stages"].get(st, Figures()), sb["stages"].get(st, Figures())
        stages[st] = {"phase": phase_of(st), **row(fa, fb, sa["per"], sb["per"])}
        stages[st]["a"]["seconds"] = round(fa.seconds / sa["per"], 4)
        stages[st]["b"]["seconds"] = round(fb.seconds / sb["per"], 4)
    scenarios = {}
    for g in dict.fromkeys([*sa["scenarios"], *sb["scenarios"]]):
        fa, fb = sa["scenarios"].get(g, Figures()), sb["scenarios"].get(g, Figures())
        scenarios[g] = row(fa, fb, a.config.runs, b.config.runs)
        scenarios[g]["critical_path"] = _path_row(sa["paths"].get(g), sb["paths"].get(g))
    total = row(sa["total"], sb["total"], sa["per"], sb["per"], (sa["wall_per_scenario"], sb["wall_per_scenario"]))

    def describe(run: RunCost, side: dict[str, Any]) -> dict[str, Any]:
        t: Figures = side["total"]
        return {"dir": str(run.path), "method": run.config.method, "stage": run.config.stage,
                "model": run.config.llm.get("model"), "concurrency": run.concurrency,
                "requests": t.requests, "attempts": t.attempts, "failed_attempts": t.failed,
                "interrupted": t.interrupted,
                "interrupted_prompt_tokens": t.interrupted_prompt_tokens, "cache_hits": t.cache_hits,
                "prompt_tokens": t.prompt_tokens, "completion_tokens": t.completion_tokens,
                "busy_seconds": t.seconds}

    return {
        "schema_version": COST_SCHEMA_VERSION,
        "deprecated": dict(DEPRECATED),
        "slice": {"dataset": a.config.dataset, "kind": a.config.kind, "sample": a.config.sample,
                  "sample_seed": a.config.sample_seed, "limit": a.config.limit, "runs": a.config.runs,
                  "scenarios": a.n_scenarios},
        "a": describe(a, sa), "b": describe(b, sb),
        "per_scenario": {"phases": phases, "total": total,
                         "critical_path": _path_row(sa["mean_path"], sb["mean_path"])},
        "stages": stages,
        "scenarios": scenarios,
        "data_notes": list(dict.fromkeys(n for n in (a.data_note, b.data_note, a.damaged_note, b.damaged_note)
                                         if n)),
        "notes": [
            "requests: logical requests, each request the run asked for counted once however many attempts the "
            "transport needed (a retry after HTTP 429/5xx, a time-out or a dropped connection, and a request "
            "format the server refused, are attempts, not requests; a re-ask after an unusable answer is a "
            "request); attempts: every request sent whose outcome is known, retries and failures included; the "
            "ratios B/A are of requests, which a server's faults do not change; both from calls.jsonl; requests "
            "cut off by a kill are counted apart as interrupted (the server may or may not have received them; "
            "their tokens are unknown); cache hits made no request and are listed apart",
            "per scenario: totals divided by scenarios x runs",
            "time: wall time with at least one request of the scenario in flight, averaged over scenarios; it "
            f"depends on the requests allowed at once (A: {a.concurrency}, B: {b.concurrency})",
            "critical path: the scenario's longest chain of requests that waited for one another (its artefact's "
            "build, then its longest instance), as a count and their seconds added up: the scenario takes at least "
            "that long however many requests run at once; it counts attempts, since a retried request waited for "
            "the attempts that failed; the mean is over scenarios"
            + (", and each scenario's is the longest over its runs" if a.config.runs > 1 else ""),
        ],
    }


# --------------------------------------------------------------------------- rendering


def _num(x: float | None, digits: int = 1) -> str:
    if x is None:
        return "–"
    return f"{x:,.{digits}f}"


def _ratio_cell(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}x"


def _calls(side: dict[str, float]) -> str:
    """Logical requests, and the attempts they took in brackets."""
    return f"{_num(side['requests'])} ({_num(side['attempts'])})"


def _path(p: dict[str, float] | None) -> str:
    return "–" if p is None else f"{p['requests']:,.1f} req., {p['seconds']:,.2f} s"


def markdown(doc: dict[str, Any]) -> str:
    a, b, sl = doc["a"], doc["b"], doc["slice"]

    def who(side: dict[str, Any]) -> str:
        return side["method"] + (f" --stage {side['stage']}" if side["stage"] else "")

    lines = [f"# Cost: A = {who(a)}, B = {who(b)}", "",
             f"Slice: {sl['dataset']} ({sl['kind']}), {sl['scenarios']} scenario(s)"
             + (f", a sample of {sl['sample']} (seed {sl['sample_seed']})" if sl.get("sample") is not None else "")
             + (f", --limit {sl['limit']}" if sl["limit"] else "") + f", {sl['runs']} run(s).", ""]
    for tag, side in (("A", a), ("B", b)):
        cut = side.get("interrupted", 0)
        lines.append(f"- {tag}: `{side['dir']}` ({who(side)}, model {side['model']}, up to {side['concurrency']} "
                     f"requests at once): {side['requests']:,} requests in {side['attempts']:,} attempts "
                     f"({side['failed_attempts']} failed), "
                     f"{side['prompt_tokens']:,} prompt + {side['completion_tokens']:,} completion tokens, "
                     f"{side['cache_hits']:,} cache hits (not requests)"
                     + (f"; and {cut} request(s) interrupted by a kill, not counted above (outcome unknown; prompts "
                        f"of about {side['interrupted_prompt_tokens']:,} tokens by the client's estimate)" if cut else ""))
    lines += ["", "## Per scenario", "",
              "| Phase | Requests A (attempts) | Requests B (attempts) | B/A | Tokens A (prompt + completion) | "
              "Tokens B | B/A | Time A s | "
              "Time B s | B/A |", "|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    rows = [*doc["per_scenario"]["phases"].items(), ("**total**", doc["per_scenario"]["total"])]
    for name, r in rows:
        ra, rb, q = r["a"], r["b"], r["ratio"]
        lines.append(f"| {name} | {_calls(ra)} | {_calls(rb)} | {_ratio_cell(q['requests'])} | "
                     f"{_num(ra['tokens'], 0)} ({_num(ra['prompt_tokens'], 0)} + {_num(ra['completion_tokens'], 0)}) | "
                     f"{_num(rb['tokens'], 0)} ({_num(rb['prompt_tokens'], 0)} + {_num(rb['completion_tokens'], 0)}) | "
                     f"{_ratio_cell(q['tokens'])} | {_num(ra['seconds'], 2)} | {_num(rb['seconds'], 2)} | "
                     f"{_ratio_cell(q['seconds'])} |")
    path = doc["per_scenario"].get("critical_path")
    if path is not None:
        pa, pb, q = path["a"], path["b"], path["ratio"]
        lines += ["", f"Critical path per scenario (mean): A {_path(pa)}, B {_path(pb)}; B/A "
                      f"{_ratio_cell(q['requests'])} requests, {_ratio_cell(q['seconds'])} seconds."]
    lines += ["", "## Per stage (per scenario)", "",
              "| Stage | Phase | Requests A (attempts) | Requests B (attempts) | Tokens A | Tokens B | Time A s | "
              "Time B s |",
              "|:--|:--|--:|--:|--:|--:|--:|--:|"]
    for st, r in doc["stages"].items():
        ra, rb = r["a"], r["b"]
        lines.append(f"| {st} | {r['phase']} | {_calls(ra)} | {_calls(rb)} | {_num(ra['tokens'], 0)} | "
                     f"{_num(rb['tokens'], 0)} | {_num(ra['seconds'], 2)} | {_num(rb['seconds'], 2)} |")
    lines += ["", "## Per scenario, one by one (per run)", "",
              "| Scenario | Requests A (attempts) | Requests B (attempts) | B/A | Tokens A | Tokens B | B/A | "
              "Time A s | Time B s | B/A | "
              "Critical path A | Critical path B | B/A s |",
              "|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for g, r in doc["scenarios"].items():
        ra, rb, q = r["a"], r["b"], r["ratio"]
        cp = r.get("critical_path") or {"a": None, "b": None, "ratio": {"seconds": None}}
        lines.append(f"| {g} | {_calls(ra)} | {_calls(rb)} | {_ratio_cell(q['requests'])} | "
                     f"{_num(ra['tokens'], 0)} | {_num(rb['tokens'], 0)} | {_ratio_cell(q['tokens'])} | "
                     f"{_num(ra['seconds'], 2)} | {_num(rb['seconds'], 2)} | {_ratio_cell(q['seconds'])} | "
                     f"{_path(cp['a'])} | {_path(cp['b'])} | {_ratio_cell(cp['ratio']['seconds'])} |")
    lines += ["", *[f"- {n}" for n in doc["notes"]]]
    return "\n".join(lines) + "\n"


def to_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2)
