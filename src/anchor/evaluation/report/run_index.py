"""The HTML index of an evaluation run, and the explanation page of each of its instances.

Reads a run directory (through :class:`~anchor.rundir.RunDirectory`, strictly: a line
that is not a record is an error naming it):

``DIR/config.json``       ``RunConfig`` (required: it says what kind of task the run was)
``DIR/predictions.jsonl`` one ``Prediction`` per line (the last line of a (run, id) counts)
``DIR/traces.jsonl``      optional; one ``TraceRecord`` per evaluated condition::

    {"run": 0, "id": "c2s-17", "side": 0, "condition": "...", "space": "<key>" | null,
     "result": <InferenceResult>}

  ``side`` is 0 for decision and fact-check instances, 0 and 1 for the two conditions of a
  pairwise instance; ``space`` names ``DIR/spaces/<key>.json``. When the same (run, id, side)
  appears twice (a resumed run), the later line wins. A line whose ``result`` is some other
  method's trail (not an ANCHOR ``InferenceResult``) gives no page.
``DIR/spaces/<key>.json`` factor spaces; a run made with ``--spaces-from OTHER`` finds the spaces
  it reused in ``OTHER/spaces/``.

and writes ``index.html`` (one row per instance and run, filterable by correct / wrong / unknown)
plus ``explain/<run>-<id>.html`` for every instance with traces and ``explain/space-<key>.html``
for every factor space they use. Links are relative, so the folder can be moved or zipped.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from anchor.artefacts import ArtefactStore
from anchor.audit.pages import explanation_document, space_html
from anchor.errors import AnchorError
from anchor.evaluation import datasets
from anchor.evaluation.datasets.selection import load_cases, load_eval_data
from anchor.evaluation.report.index_page import IndexRow, Status, instance_intro, run_index_html
from anchor.files import write_text_atomic
from anchor.rundir import RunDirectory
from anchor.rundir.records import AnchorTrace, Prediction, RunCalibration, RunConfig
from anchor.space.io import SpaceFileError, load_space
from anchor.types import FactorSpace, Scenario


class RunIndexError(AnchorError):
    """A run directory (or one of its files) that the index cannot be built from, with the reason."""


@dataclass
class RunIndexResult:
    """What :func:`write_run_index` wrote."""

    index: Path
    pages: list[Path] = field(default_factory=list)
    space_pages: list[Path] = field(default_factory=list)
    rows: list[IndexRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- reading


def read_traces(run_dir: Path | str) -> dict[tuple[int, str], dict[int, AnchorTrace]]:
    """``{(run, id): {side: record}}`` of a run directory's ANCHOR traces; ``{}`` when it has no
    ``traces.jsonl``. Lines whose ``result`` is another method's trail are left out. Raises
    :class:`RunIndexError` naming the line and field of a line that is not a trace record (the
    unfinished last line a kill leaves is passed over)."""
    return RunDirectory(run_dir, error=RunIndexError).anchor_traces()[0]


def _dataset_texts(run: RunDirectory, config: RunConfig) -> tuple[dict[str, tuple[Scenario, list[str]]], str | None]:
    """Scenario and condition texts per instance id, for instances without traces (e.g. baseline runs):
    from the instances the run kept (instances.jsonl), else from the run's dataset file, used only when
    it still has the hash the run recorded; otherwise a note says why the texts are missing."""
    try:
        kept = run.read_instances(pairwise=config.kind == "pairwise")
    except RunIndexError as exc:
        return {}, f"Condition texts not shown: {str(exc).splitlines()[0]}"
    if kept is not None:
        return _texts(kept), None
    try:
        if config.data_path:
            data = Path(config.data_path).read_bytes()
        else:
            data = datasets.bundled_file(config.dataset).read_bytes()
    except (OSError, ValueError) as exc:
        return {}, f"Condition texts not shown: the dataset file cannot be read ({exc})"
    if hashlib.sha256(data).hexdigest() != config.data_sha256:
        return {}, "Condition texts not shown: the dataset file has changed since the run"
    try:
        # Read as the runner read it: rows it skipped are already counted in metrics.json, so they
        # are not warned about again here.
        if config.kind == "cases":
            instances: list[Any] = list(load_cases(config))
        else:
            instances, _ = load_eval_data(config.dataset, Path(config.data_path) if config.data_path else None)
    except (OSError, ValueError) as exc:  # DatasetError is a ValueError
        return {}, f"Condition texts not shown: the dataset cannot be loaded ({exc})"
    if config.balance_outcomes:
        instances = datasets.balance_outcome_order(instances)
    return _texts(instances), None


def _texts(instances: Sequence[Any]) -> dict[str, tuple[Scenario, list[str]]]:
    out: dict[str, tuple[Scenario, list[str]]] = {}
    for inst in instances:
        if isinstance(inst, datasets.PairwiseInstance):
            out[inst.id] = (inst.scenario, [inst.condition1, inst.condition2])
        else:
            out[inst.id] = (inst.scenario, [inst.condition])
    return out


def _calibration(run: RunDirectory, notes: list[str]) -> RunCalibration | None:
    """``DIR/calibration.json`` (written by ``anchor calibrate report``), or None; unreadable: a note."""
    try:
        return run.read_calibration()
    except RunIndexError as exc:
        notes.append(f"calibration.json is not shown: it cannot be read ({str(exc).splitlines()[0]}).")
        return None


# --------------------------------------------------------------------------- rows


PAIRWISE_NAMES = {1: "context 1", 2: "context 2", 3: "same"}


def _status_and_labels(pred: Prediction, config: RunConfig) -> tuple[Status, str, str]:
    """(status, gold as text, prediction as text), scored the way the run's metrics score it."""
    if config.kind == "pairwise":
        gold = PAIRWISE_NAMES.get(pred.human or 0, "?")
        if pred.gold in (1, 2):
            gold += f" (gold outcome O{pred.gold})"
        predicted = PAIRWISE_NAMES.get(pred.prediction or 0, "–")
        if pred.unknown:
            return "unknown", gold, "unknown"
        return ("correct" if pred.prediction == pred.human else "wrong"), gold, predicted
    if config.kind == "factcheck":
        gold = "supported" if pred.label == 1 else "not supported"
        if pred.unknown or pred.p_outcome1 is None:
            return "unknown", gold, "unknown"
        support = pred.p_outcome1 > config.decision_threshold
        predicted = f"supported (P > {config.decision_threshold:g})" if support else "not supported"
        return ("correct" if support == (pred.label == 1) else "wrong"), gold, predicted
    gold = f"O{pred.label}" if pred.label in (1, 2) else "no label" if config.kind == "cases" else "?"
    # As decision_accuracy scores it: only a missing probability is unknown; an exact 0.5 is a tie,
    # covered but not correct (the runner marks it unknown because it makes no decision).
    if pred.p_outcome1 is None:
        return "unknown", gold, "unknown"
    predicted = f"O{pred.prediction}" if pred.prediction in (1, 2) else "tie (0.5)"
    if config.kind == "cases" and pred.label is None:
        return "answered", gold, predicted
    return ("correct" if pred.prediction == pred.label else "wrong"), gold, predicted


def _probabilities(pred: Prediction, config: RunConfig) -> list[tuple[str, float | None]]:
    if config.kind == "pairwise":
        if pred.choice is not None and pred.p_gold_1 is None and pred.p_gold_2 is None:
            return []  # the compare baseline answers with a choice only
        return [("P(gold | u1)", pred.p_gold_1), ("P(gold | u2)", pred.p_gold_2)]
    if pred.p_outcome1_raw is not None:  # the run applied a calibrator
        return [("P(O1), calibrated", pred.p_outcome1), ("P(O1), raw", pred.p_outcome1_raw)]
    return [("P(O1)", pred.p_outcome1)]


def _state(pred: Prediction) -> Literal["ok", "abstained", "failed"]:
    if pred.status != "ok":
        return pred.status
    if pred.kind in ("decision", "cases") and pred.p_outcome1 is not None:
        return "ok"  # a tie at 0.5 is an answer, scored as not correct
    # Older predictions carry no status: an unknown with an error line is taken as abstained.
    return "abstained" if pred.unknown else "ok"


def natural_key(run: int, instance_id: str) -> tuple[int, list[tuple[int, int | str]]]:
    """Sort key: by run, then by id with its digit runs compared as numbers (``x:2`` before ``x:10``)."""
    parts = re.split(r"(\d+)", instance_id)
    return run, [(0, int(p)) if p.isdigit() else (1, p) for p in parts if p]


def page_name(run: int, instance_id: str) -> str:
    """A safe, unique file name for an instance's page (ids may hold any character)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", instance_id).strip("._")[:60] or "instance"
    if slug != instance_id:
        slug += "-" + hashlib.sha256(instance_id.encode("utf-8")).hexdigest()[:8]
    return f"r{run}-{slug}.html"


def index_rows(
    predictions: Sequence[Prediction],
    config: RunConfig,
    traces: dict[tuple[int, str], dict[int, AnchorTrace]] | None = None,
    texts: dict[str, tuple[Scenario, list[str]]] | None = None,
    pages: dict[tuple[int, str], str] | None = None,
    claims: dict[str, str] | None = None,
) -> list[IndexRow]:
    """One row per prediction, in the order given. Condition texts come from the traces, else
    from ``texts`` (id -> (scenario, conditions)); ``pages`` maps (run, id) to a page link. A
    fact-checking row's claim comes from ``claims`` (id -> claim), else from ``texts``."""
    traces = traces or {}
    texts = texts or {}
    pages = pages or {}
    claims = {**{iid: scen.outcome1 for iid, (scen, _) in texts.items()}, **(claims or {})}
    rows = []
    for pred in predictions:
        status, gold, predicted = _status_and_labels(pred, config)
        sides = traces.get((pred.run, pred.id), {})
        if sides:
            conditions = [sides[s].condition for s in sorted(sides)]
        else:
            conditions = list(texts.get(pred.id, (None, []))[1])
        rows.append(IndexRow(
            run=pred.run, id=pred.id, kind=pred.kind, conditions=conditions,
            claim=claims.get(pred.id) if pred.kind == "factcheck" else None, gold=gold, prediction=predicted,
            probabilities=_probabilities(pred, config), unknown=pred.unknown, state=_state(pred), error=pred.error,
            fallback=next((side.fallback for side in pred.sides if side.fallback and side.status == "ok"), None),
            status=status,
            page=pages.get((pred.run, pred.id)),
        ))
    return rows


# --------------------------------------------------------------------------- writing


def write_run_index(run_dir: Path | str, out_dir: Path | str | None = None, *,
                    title: str | None = None) -> RunIndexResult:
    """Write ``index.html`` and the explanation pages of a run directory into ``out_dir`` (the run
    directory itself by default). Raises :class:`RunIndexError` for a directory that is not a run
    or a file that cannot be read; a missing ``traces.jsonl`` or space file only costs the links."""
    run_dir = Path(run_dir)
    run = RunDirectory(run_dir, error=RunIndexError)
    out = Path(out_dir) if out_dir is not None else run_dir
    config = run.read_config()
    predictions = sorted(run.latest_predictions().values(), key=lambda p: natural_key(p.run, p.id))
    traces, other_traces = run.anchor_traces()
    notes: list[str] = []
    if not run.traces.exists():
        notes.append("This run has no traces.jsonl, so its rows have no explanation pages.")
    if other_traces:
        notes.append(f"{other_traces} trace line(s) hold another method's audit trail, not an ANCHOR result; "
                     "their rows have no explanation page.")

    texts: dict[str, tuple[Scenario, list[str]]] = {}
    # Fact checking needs the file for every row: the claim is in no trace (it is the scenario's outcome 1).
    if config.kind == "factcheck" or any((p.run, p.id) not in traces for p in predictions):
        texts, note = _dataset_texts(run, config)
        if note:
            notes.append(note)

    spaces: dict[str, FactorSpace | None] = {}
    result = RunIndexResult(index=out / "index.html")
    space_pages: dict[str, str] = {}
    for key in sorted({rec.space for sides in traces.values() for rec in sides.values() if rec.space}):
        path = ArtefactStore.file(run.artefacts(), key)
        source = config.spaces_source(run_dir)
        if not path.exists() and source is not None:
            path = ArtefactStore.file(RunDirectory(source).artefacts(), key)  # reused from an earlier run
        try:
            space = load_space(path)
        except SpaceFileError as exc:
            spaces[key] = None
            notes.append(f"Factor space {key} is not available ({exc}).")
            continue
        spaces[key] = space
        name = f"space-{re.sub(r'[^A-Za-z0-9_-]+', '_', key)}.html"
        space_pages[key] = name
        target = out / "explain" / name
        write_text_atomic(target, space_html(space, title=f"Factor space {key}"))
        result.space_pages.append(target)

    links = {(p.run, p.id): f"explain/{page_name(p.run, p.id)}" for p in predictions if (p.run, p.id) in traces}
    claims = {}  # when the data file has changed, a traced row's claim is still in its factor space
    for (_, iid), sides in traces.items():
        space = spaces.get(next((r.space for r in sides.values() if r.space), None) or "")
        if space is not None and iid not in texts:
            claims[iid] = space.scenario.outcome1
    rows = index_rows(predictions, config, traces, texts, links, claims)
    for row in rows:
        if row.page is None:
            continue
        sides = traces[(row.run, row.id)]
        records = [sides[s] for s in sorted(sides)]
        key = next((r.space for r in records if r.space), None)
        space = spaces.get(key) if key else None
        headings = ([f"Condition u{s + 1}" for s in sorted(sides)] if config.kind == "pairwise"
                    else ["Condition"] * len(records))
        if len(set(headings)) != len(headings):
            headings = [f"Condition {i}" for i in range(1, len(records) + 1)]
        scenario = space.scenario if space else (texts[row.id][0] if row.id in texts else None)
        html_text = explanation_document(
            space, [r.result for r in records], title=f"Instance {row.id} (run {row.run})", scenario=scenario,
            intro=instance_intro(row, "../index.html"), headings=headings,
            space_link=space_pages.get(key) if key else None)
        target = out / row.page
        write_text_atomic(target, html_text)
        result.pages.append(target)

    data = Path(config.data_path).name if config.kind == "cases" and config.data_path else config.dataset
    heading = title or f"Run: {data} · {config.method}" + (
        f" ({', '.join(config.ablations)})" if config.ablations else "")
    calibration = _calibration(run, notes)
    write_text_atomic(result.index, run_index_html(rows, title=heading, config=config, notes=notes,
                                                   calibration=calibration))
    result.rows = rows
    result.notes = notes
    return result
