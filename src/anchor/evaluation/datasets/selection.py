"""Which instances an evaluation run scores: the data file as read, and the paper's sampling protocol.

* Fact-checking sets (:func:`anchor.evaluation.datasets.is_factcheck_dataset`) are read row by
  row: a bad row is skipped, and the run records how many were skipped and why
  (:func:`data_summary`, in ``metrics.json``). Other formats fail as a whole on a bad entry.
* The paper scores every fact-checking method on a seeded sample of 100 instances (seed 42).
  That is the default for the fact-checking sets; every other set is scored whole, in file
  order, unless a sample is asked for (:func:`resolve_sample`).
* The sample is drawn before ``--limit`` (which then takes the first N of the sample, itself a
  fair sample since samples are nested) and recorded in the run directory as ``sample.json``
  (:meth:`anchor.rundir.RunDirectory.record_sample`), so a resumed run, or another method
  given the same data and sample settings, scores exactly the same ids.

:func:`select_instances` is that whole selection for a run's configuration, used by the runner and
by whatever reads a run directory back (``anchor cost``), so both see the same instances. A run keeps
the instances it scores in its directory (``instances.jsonl``); :func:`scored_instances` reads them
from there, and goes back to the data file only for a run that has none (checking first that it is
still the file the run read).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anchor.cases import CaseLimits, CaseRow, CaseStream, read_cases
from anchor.evaluation.datasets.bundled import bundled_file, is_factcheck_dataset
from anchor.evaluation.datasets.factcheck import FactcheckData, load_factcheck_set
from anchor.evaluation.datasets.instances import DecisionInstance, PairwiseInstance, balance_outcome_order
from anchor.evaluation.datasets.loading import load_dataset
from anchor.evaluation.datasets.reading import DatasetError
from anchor.evaluation.datasets.sampling import (
    DEFAULT_SAMPLE_SEED,
    DEFAULT_SAMPLE_SIZE,
    SampleError,
    SampleRecord,
    SampleSize,
    check_sample_seed,
    draw_sample,
    parse_sample_size,
)
from anchor.rundir.names import INSTANCES
from anchor.rundir.records import RunConfig

if TYPE_CHECKING:
    from anchor.rundir import RunDirectory

__all__ = [
    "MAX_LISTED_SKIPPED",
    "cases_stream",
    "data_summary",
    "default_sample",
    "load_cases",
    "load_eval_data",
    "resolve_sample",
    "scored_instances",
    "select_instances",
    "skipped_note",
]

Instance = DecisionInstance | PairwiseInstance

#: Skipped rows listed (line and reason) in metrics.json; all of them are counted.
MAX_LISTED_SKIPPED = 50


def default_sample(dataset: str) -> tuple[SampleSize | None, int | None]:
    """(size, seed) used when no ``--sample`` is given: the paper's 100 with seed 42 for the
    fact-checking sets, no sample (the whole file) otherwise."""
    if is_factcheck_dataset(dataset):
        return DEFAULT_SAMPLE_SIZE, DEFAULT_SAMPLE_SEED
    return None, None


def resolve_sample(dataset: str, sample: str | int | None, seed: int | None
                   ) -> tuple[SampleSize | None, int | None]:
    """The run's (sample size, sample seed) from the options given (None: not given).

    A size given without a seed uses seed 42; a seed without a size applies to the dataset's
    default sample, and is an error for a dataset scored whole by default (there is nothing for it
    to seed). Sizes are checked with :func:`parse_sample_size`, seeds must be >= 0 (``SampleError``
    names the problem).
    """
    if seed is not None:
        check_sample_seed(seed, "--sample-seed")
    size, default_seed = default_sample(dataset)
    if sample is not None:
        size = parse_sample_size(sample)
        default_seed = DEFAULT_SAMPLE_SEED
    if size is None:
        if seed is not None:
            raise SampleError(f"--sample-seed only applies to a sample: {dataset} is scored whole unless "
                              "--sample N (or all) is given")
        return None, None
    return size, default_seed if seed is None else seed


def load_eval_data(dataset: str, path: Path | None) -> tuple[list[Instance], FactcheckData | None]:
    """The usable instances of ``dataset`` (bundled, or the file at ``path``), and for the
    fact-checking sets the file as read (with its skipped rows)."""
    if is_factcheck_dataset(dataset):
        data = load_factcheck_set(dataset, path)
        return list(data.instances), data
    return list(load_dataset(dataset, path)), None


def cases_stream(config: RunConfig) -> CaseStream:
    """The cases file of an ``anchor predict`` run (kind ``cases``), to be read as the run read it:
    same format, column mapping and limits (``RunConfig.cases``)."""
    if config.kind != "cases" or not config.data_path:
        raise ValueError(f"{config.dataset}: not a run of anchor predict (no cases file recorded)")
    settings = config.cases or {}
    return read_cases(config.data_path, format=settings.get("format"), columns=settings.get("columns") or {},
                      limits=CaseLimits.model_validate(settings.get("limits") or {}))


def load_cases(config: RunConfig) -> list[DecisionInstance]:
    """Every good row of a predict run's cases file, as an instance (bad rows are in its rejected.jsonl)."""
    with cases_stream(config) as stream:
        return [DecisionInstance(id=row.id, dataset=config.dataset, scenario=row.to_scenario(),
                                 condition=row.condition, label=row.label)
                for row in stream if isinstance(row, CaseRow)]


def select_instances(config: RunConfig, recorded: SampleRecord | None = None
                     ) -> tuple[list[Instance], FactcheckData | None, SampleRecord | None]:
    """The instances a run with ``config`` scores, in order: the data as read, the seeded sample
    (``recorded``, the run directory's ``sample.json``, when given; else drawn again), the
    outcome-order balancing, then ``--limit``. Also the file as read and the sample record."""
    if config.kind == "cases":
        instances: list[Instance] = list(load_cases(config))
        data = None
    else:
        instances, data = load_eval_data(config.dataset, Path(config.data_path) if config.data_path else None)
    record = None
    if config.sample is not None:
        if recorded is not None:
            instances, record = recorded.select(instances), recorded
        else:
            seed = DEFAULT_SAMPLE_SEED if config.sample_seed is None else config.sample_seed
            instances, record = draw_sample(instances, config.sample, seed)
    if config.balance_outcomes:
        instances = balance_outcome_order(instances)
    if config.limit is not None:
        instances = instances[: config.limit]
    return instances, data, record


def scored_instances(run: RunDirectory, config: RunConfig) -> tuple[list[Instance], FactcheckData | None]:
    """The instances the run in ``run`` (with ``config``) scores, in order, and the data file as read when
    it was read: from the run's own ``instances.jsonl``, or, for a run without one (written by an older
    anchor, or killed before its end), selected again from its data file, which must be there and
    unchanged (:func:`check_data_file`)."""
    stored = run.read_instances(pairwise=config.kind == "pairwise")
    if stored is not None:
        return stored, None
    check_data_file(config)
    instances, data, _ = select_instances(config, run.read_sample())
    return instances, data


def check_data_file(config: RunConfig) -> None:
    """Refuse, naming it, a run's data file that is not the one the run read: gone (moved or deleted),
    unreadable, or changed since (its sha256 is not ``config.data_sha256``)."""
    where = config.data_path or f"the bundled {config.dataset} file"
    if config.data_path and not Path(config.data_path).is_absolute():
        where += " (a path relative to the folder the command runs in)"
    why = (f"the run has no {INSTANCES} (the instances it scored, which a run of this anchor keeps once its pass "
           "over the data ends), so this file is needed")
    try:
        data = Path(config.data_path).read_bytes() if config.data_path else bundled_file(config.dataset).read_bytes()
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise DatasetError(where, [f"cannot read the run's data file ({reason}); {why}: put it back"]) from None
    if hashlib.sha256(data).hexdigest() != config.data_sha256:
        raise DatasetError(where, [f"the file has changed since the run (its sha256 differs from the run's "
                                   f"config.json); {why}, as the run read it"])


def data_summary(data: FactcheckData | None) -> dict[str, Any] | None:
    """What ``metrics.json`` says about the file: rows read, usable, skipped (and the first reasons)."""
    if data is None:
        return None
    return {
        "source": data.source,
        "rows": data.rows,
        "usable": len(data.instances),
        "skipped": len(data.skipped),
        "skipped_rows": [{"line": s.line, "problem": s.problem} for s in data.skipped[:MAX_LISTED_SKIPPED]],
    }


def skipped_note(summary: dict[str, Any] | None) -> str | None:
    """The line :meth:`FactcheckData.summary` says of skipped rows, from what ``metrics.json`` recorded of
    the file (:func:`data_summary`, or a predict run's ``data``); None when no row was skipped."""
    if not summary or not summary.get("skipped"):
        return None
    listed = summary.get("skipped_rows") or []
    first = f" (first: line {listed[0].get('line')}: {listed[0].get('problem')})" if listed else ""
    return f"{summary.get('source')}: {summary['skipped']} of {summary.get('rows')} rows skipped{first}"
