"""``RunDirectory``: every file of one run directory, written and read through one object.

Readers are strict by default: a file or line that is not what it should be is an error naming
the file (and line), raised as the caller's own exception class (``error``) so that each command
reports it as it reports its other errors. A caller that must survive a damaged log line passes a
:class:`~anchor.rundir.lines.Skipped` and says in its output what was left out.

Every reader first checks the directory's schema version (``config.json``'s ``schema_version``;
1 when absent) and refuses, in one line naming ``config.json``, a directory written by a newer
anchor in a layout this one does not know.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

from pydantic import BaseModel, ValidationError

from anchor.artefacts import ArtefactStore
from anchor.files import write_atomic, write_atomic_stream
from anchor.llm.ledger import CallRecord, collapse_sent
from anchor.rundir import names
from anchor.rundir.instances import DecisionInstance, PairwiseInstance
from anchor.rundir.lines import (
    JsonLines,
    LineProblem,
    RunDirError,
    Skipped,
    json_object,
    validation_problem,
)
from anchor.rundir.lock import DirectoryLock
from anchor.rundir.records import (
    AnchorTrace,
    MetricsReport,
    Prediction,
    RunCalibration,
    RunConfig,
    SampleRecord,
    TraceRecord,
)
from anchor.rundir.shards import ShardMerger

J = TypeVar("J", bound=BaseModel)
ErrorType = Callable[[str], Exception]


class RunDirectory:
    """One run directory (``anchor eval``, ``anchor predict``): where each file lies, and its typed
    readers and writers. ``error`` is the exception raised for a directory or file that cannot be read
    (the caller's), ``hint`` a clause added to a damaged line's message (what to do about it)."""

    def __init__(self, path: Path | str, *, error: ErrorType = RunDirError, hint: str = "") -> None:
        self.path = Path(path)
        self.error = error
        self.hint = hint
        self._version: int | None = None

    def __repr__(self) -> str:
        return f"RunDirectory({str(self.path)!r})"

    # ------------------------------------------------------------------ where things are

    @property
    def config_path(self) -> Path:
        return self.path / names.CONFIG

    @property
    def metrics_path(self) -> Path:
        return self.path / names.METRICS

    @property
    def sample_path(self) -> Path:
        return self.path / names.SAMPLE

    @property
    def calibration_path(self) -> Path:
        return self.path / names.CALIBRATION

    @property
    def rejected_path(self) -> Path:
        return self.path / names.REJECTED

    @property
    def instances_path(self) -> Path:
        return self.path / names.INSTANCES

    def artefacts(self, kind: str = names.SPACES) -> Path:
        """The folder of one kind of per-scenario artefact (``spaces``: ANCHOR's factor spaces)."""
        return ArtefactStore.kind_folder(self.path, kind)

    def table_path(self, fmt: str) -> Path:
        """The predictions as a table (``anchor predict --format csv|parquet``)."""
        return self.path / f"{Path(names.PREDICTIONS).stem}.{fmt}"

    def is_run(self) -> bool:
        """Does the folder hold a run (its ``config.json``)?"""
        return self.config_path.is_file()

    def check_target(self, what: str = "the run directory") -> None:
        """Refuse, before anything is written, to start a run in a folder that holds other files and no
        run (the run's files would be written over the user's own), whose config.json is not a run's (the
        user's own), or in a symbolic link to nothing. An empty or missing folder, and a run directory (a
        resume), are fine. ``what`` names the option that gave the folder (``--out``)."""
        if self.path.is_symlink() and not self.path.exists():
            raise self.error(f"{what} {self.path}: a symbolic link to {self.path.readlink()}, which does not exist; "
                             "give a folder, or create the link's target first")
        if not self.path.is_dir() or (self.is_run() and self._holds_run_config()):
            return
        if self.is_run():
            raise self.error(f"{what} {self.path}: the folder holds a {names.CONFIG} that is not an anchor run's; "
                             "give a new or empty folder, or the run directory of a run to resume")
        others = sorted(entry.name for entry in self.path.iterdir() if entry.name != names.LOCK)
        if others:
            shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
            raise self.error(f"{what} {self.path}: the folder holds other files ({shown}) and no anchor run (no "
                             f"{names.CONFIG}); give a new or empty folder, or the run directory of a run to resume")

    def _holds_run_config(self) -> bool:
        """Whether config.json is a run's: a JSON object naming its anchor_version (a damaged one counts: its
        readers say what is wrong with it)."""
        try:
            data = json.loads(self.config_path.read_bytes())
        except (OSError, ValueError):
            return True
        return isinstance(data, dict) and "anchor_version" in data

    def lock(self) -> DirectoryLock:
        """The lock that keeps a second process out (``with rd.lock(): ...``)."""
        return DirectoryLock(self.path)

    # ------------------------------------------------------------------ the logs

    @functools.cached_property
    def shards(self) -> ShardMerger:
        """The workers' shards of the logs below, read after them until the runner has copied them in."""
        return ShardMerger(self.path)

    @functools.cached_property
    def predictions(self) -> JsonLines[Prediction]:
        """``predictions.jsonl``: one line per finished instance (fsynced: it is what a resume trusts)."""
        return JsonLines(self.path / names.PREDICTIONS, Prediction, "prediction", durable=True, error=self.error,
                         hint=self.hint, shards=self.shards)

    @functools.cached_property
    def traces(self) -> JsonLines[TraceRecord]:
        """``traces.jsonl``: the audit trail of every answered condition."""
        return JsonLines(self.path / names.TRACES, TraceRecord, "trace", error=self.error, hint=self.hint,
                         shards=self.shards)

    @functools.cached_property
    def calls(self) -> JsonLines[CallRecord]:
        """``calls.jsonl``: every LLM request (announced, then its outcome) and cache hit."""
        return JsonLines(self.path / names.CALLS, CallRecord, "call", error=self.error, hint=self.hint,
                         shards=self.shards)

    def logs(self) -> tuple[JsonLines[Prediction], JsonLines[TraceRecord], JsonLines[CallRecord]]:
        return self.predictions, self.traces, self.calls

    def merge_shards(self, *, final: bool = False) -> int:
        """Copy the workers' shards into the logs (see :mod:`~anchor.rundir.shards`); only the process
        that holds the directory's lock calls it. Returns the bytes copied."""
        return self.shards.sweep({log.path.name: log for log in self.logs()}, final=final)

    # ------------------------------------------------------------------ schema version

    def schema_version(self) -> int:
        """The directory's layout version: ``config.json``'s ``schema_version``, 1 when it records none
        (or the directory has no config.json yet). A newer one than this anchor knows is refused."""
        if self._version is None:
            data = self._config_json() if self.config_path.exists() else {}
            self._version = self._checked_version(data)
        return self._version

    def _checked_version(self, data: dict[str, Any]) -> int:
        version = data.get("schema_version", 1)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise self.error(f"{self.config_path}: schema_version {version!r} is not a run-directory schema version "
                             "(a whole number from 1)")
        if version > names.SCHEMA_VERSION:
            raise self.error(f"{self.config_path}: written in run-directory schema version {version}, newer than this "
                             f"anchor reads (up to {names.SCHEMA_VERSION}); upgrade anchor to read this run")
        return version

    # ------------------------------------------------------------------ config.json

    def _config_json(self) -> dict[str, Any]:
        data = self._json(self.config_path)
        if not isinstance(data, dict):
            raise self.error(f"{self.config_path}: not a run configuration (not a JSON object)")
        return data

    def require(self) -> None:
        """Refuse a path that is not a run directory (missing, a file, or without config.json)."""
        if not self.path.exists():
            raise self.error(f"{self.path}: no such run directory")
        if not self.path.is_dir():
            raise self.error(f"{self.path}: not a directory (pass the run directory, not a file inside it)")
        if not self.is_run():
            raise self.error(f"{self.path}: not an evaluation run directory (no config.json); pass a directory "
                             "written by `anchor eval` or `anchor predict`")

    def read_config_data(self) -> dict[str, Any] | None:
        """``config.json`` as written (a JSON object, version checked), to compare with another run's;
        None when the directory has none."""
        if not self.config_path.exists():
            return None
        data = self._config_json()
        self._version = self._checked_version(data)
        return data

    def read_config(self) -> RunConfig:
        """The run's configuration (the directory must be a run directory)."""
        self.require()
        data = self.read_config_data()
        assert data is not None
        return self._model(self.config_path, data, RunConfig, "run configuration")

    def write_config(self, config: RunConfig) -> Path:
        """Write ``config.json`` in this version's layout (the schema version stamped on ``config``)."""
        config.schema_version = names.SCHEMA_VERSION
        self.path.mkdir(parents=True, exist_ok=True)
        self._version = names.SCHEMA_VERSION
        return write_atomic(self.config_path, config.model_dump_json(indent=2))

    # ------------------------------------------------------------------ metrics, sample, calibration

    def has_metrics(self) -> bool:
        return self.metrics_path.exists()

    def read_metrics(self) -> MetricsReport:
        """``metrics.json``: the finished run's report (in any schema version this anchor reads)."""
        self.schema_version()
        return self._model(self.metrics_path, self._json(self.metrics_path), MetricsReport, "metrics report")

    def write_metrics(self, report: MetricsReport) -> Path:
        """Write ``metrics.json`` in this version's layout (the schema version stamped on ``report``)."""
        report.schema_version = names.SCHEMA_VERSION
        return write_atomic_stream(self.metrics_path, [report.model_dump_json(indent=2).encode("utf-8")])

    def read_sample(self) -> SampleRecord | None:
        """The sample the run scores (``sample.json``); None when it scores the whole file."""
        if not self.sample_path.exists():
            return None
        self.schema_version()
        data = self._json(self.sample_path, hint="; move it away to draw the sample again")
        if isinstance(data, dict):  # the file's layout (schema 3 on), not part of the sample it records
            data = {k: v for k, v in data.items() if k != "schema_version"}
        return self._model(self.sample_path, data, SampleRecord, "sample record",
                           hint="; move it away to draw the sample again")

    def record_sample(self, record: SampleRecord) -> Path:
        """Write ``sample.json``, or check that the one already there lists the same ids: a run directory
        keeps one sample for its whole life, and a resume that drew other ids is an error rather than a
        silent mix of two samples."""
        old = self.read_sample()
        if old is not None:
            if (old.seed, old.requested, old.ids) != (record.seed, record.requested, record.ids):
                raise self.error(f"{self.sample_path} lists another sample than the one drawn now (seed {old.seed}, "
                                 f"{len(old.ids)} ids); use another --out, or move the file away")
            return self.sample_path
        stamped = {"schema_version": names.SCHEMA_VERSION, **record.model_dump(mode="json")}
        return write_atomic(self.sample_path, json.dumps(stamped, indent=2))

    def read_calibration(self) -> RunCalibration | None:
        """``calibration.json`` (written by ``anchor calibrate report``); None when there is none."""
        if not self.calibration_path.exists():
            return None
        self.schema_version()
        return self._model(self.calibration_path, self._json(self.calibration_path), RunCalibration,
                           "calibration summary")

    def write_calibration(self, summary: RunCalibration) -> Path:
        summary.schema_version = names.SCHEMA_VERSION
        return write_atomic(self.calibration_path, summary.model_dump_json(indent=2) + "\n")

    # ------------------------------------------------------------------ predictions.jsonl

    def latest_predictions(self, *, skipped: Skipped | None = None) -> dict[tuple[int, str], Prediction]:
        """The last prediction of every (run, id): a retried instance appends a new line, which counts."""
        return {key: pred for key, (_, pred) in self.numbered_predictions(skipped=skipped).items()}

    def numbered_predictions(self, *, skipped: Skipped | None = None
                             ) -> dict[tuple[int, str], tuple[int, Prediction]]:
        """:meth:`latest_predictions` with the line each was read from (to name it in an error), in the
        order the (run, id) first appear."""
        self.schema_version()
        out: dict[tuple[int, str], tuple[int, Prediction]] = {}
        for n, pred in self.predictions.numbered(skipped=skipped):
            out[(pred.run, pred.id)] = (n, pred)
        return out

    def prediction_statuses(self) -> dict[str, str]:
        """Each instance id and the status of its latest prediction, read one line at a time (the records
        themselves are not kept: a large predict run's would not fit). For a single-run directory."""
        self.schema_version()

        def status(text: str) -> tuple[str, str]:
            record = json_object(text)
            if "id" not in record or "status" not in record:
                raise LineProblem("not a prediction record (no id or no status)")
            return str(record["id"]), str(record["status"])

        return dict(value for _, value in self.predictions.parsed(status))

    def prediction_lines(self) -> Iterator[bytes]:
        """``predictions.jsonl`` as it stands, whole lines only, as written: for a reader that passes them on
        while the run may still be writing (the service's results of a job)."""
        return self.predictions.written()

    def count_predictions(self) -> int:
        """Non-blank lines written so far (to say how far an unfinished run got), workers' shards included."""
        try:
            return sum(1 for _ in self.predictions.lines())
        except (OSError, RunDirError):
            return 0

    def order_predictions(self, rank_of: Mapping[str, int]) -> int:
        """Rewrite ``predictions.jsonl`` with one line per (run, id), its last, sorted by ``rank_of[id]``
        (``anchor predict``: the row's place in the cases file); an id that ``rank_of`` lacks comes after
        every one it has. Lines of the same place keep the order they were written in. Returns the number of
        lines. Only four numbers a line are held (its place in the order, a digest of its (run, id), its
        offset and length), never the records. The file is read strictly. A line that starts as anchor
        writes a prediction (``{"run":N,"id":"..."``) is placed from that start alone, which is most of this
        pass's time saved on a long run; the rest of such a line is checked where it is read next, when the
        run is scored."""
        import numpy as np  # for the sort of a large run's index

        ranks, digests, starts, lengths = array("q"), array("q"), array("q"), array("q")
        last = len(rank_of)

        def entry(text: str) -> tuple[int, int]:
            match = _PREDICTION_HEAD.match(text)
            if match is not None:
                run, iid = int(match[1]), match[2]
            else:
                record = json_object(text)
                run, iid = record.get("run", 0), record.get("id")
                if not isinstance(iid, str) or isinstance(run, bool) or not isinstance(run, int):
                    raise LineProblem("not a prediction record (no id, or a run that is not a number)")
            rank = rank_of.get(iid, last)
            digest = hashlib.blake2b(f"{run}\0{iid}".encode(), digest_size=8).digest()
            return rank, int.from_bytes(digest, "little", signed=True)

        if any(True for _ in self.shards.tails(names.PREDICTIONS)):
            raise self.error(f"{self.path}: workers' predictions are not copied into {names.PREDICTIONS} yet")
        for _, start, length, (rank, digest) in self.predictions.located(entry):
            ranks.append(rank)
            digests.append(digest)
            starts.append(start)
            lengths.append(length)
        rank_a, digest_a, start_a = (np.frombuffer(a, dtype=np.int64) for a in (ranks, digests, starts))
        by_line = np.lexsort((start_a, digest_a, rank_a))
        # One line per (run, id): the last written (the greatest offset) of those sharing a place and a digest.
        same = (rank_a[by_line][1:] == rank_a[by_line][:-1]) & (digest_a[by_line][1:] == digest_a[by_line][:-1])
        kept = by_line[np.append(~same, True)] if len(by_line) else by_line
        order = kept[np.lexsort((start_a[kept], rank_a[kept]))]  # by place, then where the line was written
        del ranks, digests

        def lines() -> Iterator[bytes]:
            with open(self.predictions.path, "rb") as src:
                for i in order:
                    src.seek(starts[i])
                    line = src.read(lengths[i])
                    yield line if line.endswith(b"\n") else line + b"\n"

        write_atomic_stream(self.predictions.path, lines())
        return len(order)

    def iter_predictions(self, *, without_cost: bool = False) -> Iterator[Prediction]:
        """The predictions in file order, one at a time (for a file with one line per (run, id), as
        :meth:`order_predictions` leaves it); ``without_cost``: their per-stage ``cost`` left empty."""
        self.schema_version()
        for _, p in self.predictions.numbered():  # pydantic parses the line itself: the quickest way
            if without_cost:
                p.cost = []
            yield p

    # ------------------------------------------------------------------ traces.jsonl

    def latest_traces(self, *, skipped: Skipped | None = None) -> dict[tuple[int, str, int], TraceRecord]:
        """The last trace of every (run, id, side): a retried instance appends new traces, and the last one
        is the one its prediction used."""
        self.schema_version()
        return {(t.run, t.id, t.side): t for t in self.traces.read(skipped=skipped)}

    def row_trace(self, iid: str) -> AnchorTrace | None:
        """The last trace written for instance ``iid`` (any run or side), typed, when it is ANCHOR's; None when
        there is none yet, it is another method's trail, or it cannot be read. Read while the run may be
        writing (whole lines only), without parsing the other instances' lines."""
        record = self.traces.last_of(iid)
        if record is None:
            return None
        try:
            return AnchorTrace.model_validate(record)
        except ValidationError:
            return None

    def anchor_traces(self, *, skipped: Skipped | None = None
                      ) -> tuple[dict[tuple[int, str], dict[int, AnchorTrace]], int]:
        """The ANCHOR traces (typed) by (run, id) and side, the last line of each winning, and the number
        of lines holding another method's trail (a result that is not ANCHOR's; they are left out). A line
        that is not a trace record at all is an error naming it (or, with ``skipped``, left out)."""
        self.schema_version()
        other = 0

        def typed(text: str) -> AnchorTrace | None:
            nonlocal other
            try:
                return AnchorTrace.model_validate_json(text)
            except ValidationError as exc:
                if exc.errors()[0].get("type") == "json_invalid":
                    raise LineProblem(validation_problem(exc, "trace record")) from None
                self.traces.parse(text)  # not in the trace shape at all: the reason is its own
                if all(err["loc"] and err["loc"][0] == "result" for err in exc.errors()):
                    other += 1
                    return None
                raise LineProblem(validation_problem(exc, "trace record")) from None

        out: dict[tuple[int, str], dict[int, AnchorTrace]] = {}
        for _, rec in self.traces.parsed(typed, skipped=skipped):
            if rec is not None:
                out.setdefault((rec.run, rec.id), {})[rec.side] = rec
        return out, other

    # ------------------------------------------------------------------ calls.jsonl

    def call_log(self, *, skipped: Skipped | None = None) -> list[CallRecord]:
        """``calls.jsonl`` read back, each request once (``ledger.collapse_sent``: a request announced and
        never answered is an interrupted one); a missing file is an empty log. Read one line at a time: a
        request's announcement is held only until its outcome comes."""
        self.schema_version()
        out: list[CallRecord | None] = []
        waiting: dict[str, int] = {}
        for _, record in self.calls.numbered(skipped=skipped):
            if record.outcome == "sent" and record.request_id:
                waiting[record.request_id] = len(out)
            elif record.request_id in waiting:
                out[waiting.pop(record.request_id)] = None
            out.append(record)
        return collapse_sent(r for r in out if r is not None)

    def call_records(self, *, skipped: Skipped | None = None) -> Iterator[CallRecord]:
        """``calls.jsonl``'s records as written, one at a time (a request's "sent" record, then its outcome):
        for a reader that adds them up as they come (``ledger.CostTally``), in memory that does not grow
        with the log."""
        self.schema_version()
        for _, record in self.calls.numbered(skipped=skipped):
            yield record

    # ------------------------------------------------------------------ instances.jsonl

    def write_instances(self, instances: Iterable[DecisionInstance | PairwiseInstance]) -> Path:
        """``instances.jsonl``: the instances the run scores, in order, as read from its data file (after the
        sample, the outcome balancing and ``--limit``). Readers of the run (cost, calibration, the index)
        take them from here, so the run does not depend on where its data file is, or whether it still is."""
        return write_atomic_stream(self.instances_path, (i.model_dump_json().encode("utf-8") + b"\n"
                                                         for i in instances))

    @contextmanager
    def instances_log(self) -> Iterator[IO[str]]:
        """Write ``instances.jsonl`` one line at a time (``anchor predict``, which streams its rows), in full or
        not at all: into a part file, which replaces the old file only when the block ends without an error."""
        part = self.instances_path.with_name(self.instances_path.name + ".part")
        try:
            with open(part, "w", encoding="utf-8") as fh:
                yield fh
        except BaseException:
            part.unlink(missing_ok=True)
            raise
        part.replace(self.instances_path)

    def read_instances(self, pairwise: bool = False) -> list[DecisionInstance | PairwiseInstance] | None:
        """The instances recorded in ``instances.jsonl`` (pair instances when ``pairwise``); None when the run
        has none (written before it was kept, or killed before its end). Read strictly."""
        if not self.instances_path.exists():
            return None
        self.schema_version()
        model: type[DecisionInstance] | type[PairwiseInstance] = PairwiseInstance if pairwise else DecisionInstance
        return list(JsonLines(self.instances_path, model, "instance", error=self.error).read())

    # ------------------------------------------------------------------ JSON files

    def _json(self, path: Path, hint: str = "") -> Any:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise self.error(f"{path}: missing") from None
        except UnicodeDecodeError:
            raise self.error(f"{path}: not UTF-8 text{hint}") from None
        except OSError as exc:
            raise self.error(f"{path}: cannot be read ({exc.strerror or exc})") from None
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise self.error(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); the file "
                             f"may be truncated or hand-edited{hint}") from None

    def _model(self, path: Path, data: Any, model: type[J], what: str, hint: str = "") -> J:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            more = "; ".join(validation_problem_list(exc))
            raise self.error(f"{path}: not a {what} ({more}){hint}") from None


def validation_problem_list(exc: ValidationError, limit: int = 3) -> list[str]:
    """The first ``limit`` problems of a pydantic error, each as ``field: message``."""
    items = [f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}" for err in exc.errors()[:limit]]
    if exc.error_count() > limit:
        items.append(f"+{exc.error_count() - limit} more")
    return items


#: The start of a prediction's line as anchor writes it, ``{"run":N,"id":"..."``, with an id without escapes
#: (one with them does not match, and its line is parsed in full).
_PREDICTION_HEAD = re.compile(r'\{"run":(\d+),"id":"([^"\\]*)"[,}]')
