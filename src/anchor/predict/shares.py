"""A cases file as a source of work that each worker reads for itself (:class:`CaseShares`).

With helper processes, a predict run's rows do not pass through the runner: every helper reads the
file, checks each row as the check pass did, and keeps the rows of its own scenario groups (the groups
are dealt out in the order they first come, so every helper deals them alike). What a row leaves in
the run directory besides its records is written by the helper that keeps it, into files of its share:

* ``instances.jsonl.share-K``: each kept row's instance, after a small JSON head (its row's place in
  the file, counting bad rows: the input order, which a row's line is not where a JSON array holds
  several rows on one line; its group's place in the order the groups come; its id; and the group's key
  on the group's first row);
* ``rejected.jsonl.share``: the bad rows, written by share 0 alone (every share sees them all).

When every share is answered, :meth:`CaseShares.collect` puts them in place: ``instances.jsonl`` in
the file's order (a merge of the shares, each already in that order) and ``rejected.jsonl``, and says
which group each row belongs to (the cost's attribution to scenarios needs it). Files a killed run left
are removed before the next start's shares are read (:meth:`CaseShares.clear`).
"""

from __future__ import annotations

import contextlib
import heapq
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from anchor.cases import CaseRow, RejectedRow
from anchor.predict.config import CasesInput, file_digest
from anchor.rundir import RunDirectory
from anchor.rundir.instances import DecisionInstance
from anchor.rundir.names import INSTANCES, REJECTED
from anchor.runs.errors import RunError
from anchor.runs.worker import Work
from anchor.types import Scenario

#: The suffix of a share's instances (``instances.jsonl.share-0``) and of the bad rows' file.
SHARE_SUFFIX = ".share"


@dataclass
class Collected:
    """What the run's shares held, once put in place."""

    groups: list[str] = field(default_factory=list)
    """Every group's key, by its place (the order the groups first come in the file)."""
    group_of: dict[str, int] = field(default_factory=dict)
    """The place of the group of every row the run scores, by the row's id, in the file's order."""
    rejected: int = 0


@dataclass(frozen=True)
class CaseShares:
    """The good rows of ``cases`` (the first ``limit`` of them) that ``run_dir`` has no answer for yet (or only a
    failed one, under ``retry_failed``), dealt into shares by scenario group. Picklable: it holds where to
    read, never the rows."""

    cases: CasesInput
    run_dir: Path
    dataset: str
    strict: bool = False
    limit: int | None = None
    retry_failed: bool = True
    sha256: str | None = None
    """The file's digest when the run started: a share refuses to read a file that has changed since."""
    duplicates: dict[int, int] | None = None
    """The rows the check pass rejected for a repeated id (row -> the id's first line): a share then need
    not remember every id of the file to find them again (None: it does)."""
    statuses: dict[str, str] | None = field(default=None, compare=False, repr=False)
    """Each row's answer status that the runner read already at this start, for a share read in the
    runner's own process. Never sent to a helper (a large run's would be most of the message): a helper
    reads the run directory's itself."""

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "statuses": None}

    def _path(self, share: int) -> Path:
        return self.run_dir / f"{INSTANCES}{SHARE_SUFFIX}-{share}"

    @property
    def _rejected_path(self) -> Path:
        return self.run_dir / f"{REJECTED}{SHARE_SUFFIX}"

    def _share_files(self) -> list[Path]:
        return sorted(self.run_dir.glob(f"{INSTANCES}{SHARE_SUFFIX}-*"))

    def clear(self) -> None:
        """Remove the share files an earlier, unfinished start left."""
        for path in [*self._share_files(), self._rejected_path]:
            path.unlink(missing_ok=True)

    @contextlib.contextmanager
    def share(self, index: int, shares: int) -> Iterator[Iterable[Work]]:
        """The work of share ``index`` of ``shares`` (read as it is taken), its files written as it goes."""
        if not 0 <= index < shares:
            raise ValueError(f"share {index} of {shares}")
        if self.sha256 is not None and file_digest(self.cases.path) != self.sha256:
            raise RunError(self._changed("since the run started"))
        status = self.statuses if self.statuses is not None else RunDirectory(self.run_dir).prediction_statuses()
        with contextlib.ExitStack() as files:
            kept = files.enter_context(open(self._path(index), "w", encoding="utf-8"))
            rejected = files.enter_context(open(self._rejected_path, "w", encoding="utf-8")) if index == 0 else None
            stream = files.enter_context(self.cases.open(strict=self.strict, duplicates=self.duplicates))
            yield self._work(stream, index, shares, status, kept, rejected)

    def _work(self, stream: Iterable[CaseRow | RejectedRow], index: int, shares: int, status: dict[str, str],
              kept: IO[str], rejected: IO[str] | None) -> Iterator[Work]:
        places: dict[str, int] = {}
        scenarios: dict[str, Scenario] = {}  # of this share's groups only
        taken = 0
        for item in stream:
            if isinstance(item, RejectedRow):
                if rejected is not None:
                    rejected.write(item.model_dump_json() + "\n")
                continue
            if self.limit is not None and taken >= self.limit:
                break
            taken += 1
            place = places.get(item.group)
            first = place is None
            if place is None:
                place = places[item.group] = len(places)
            if place % shares != index:
                continue
            if first:
                scenarios[item.group] = item.to_scenario()
            # Made without checking again what the row's check passed (its id and condition, cleaned).
            instance = DecisionInstance.model_construct(id=item.id, dataset=self.dataset,
                                                        scenario=scenarios[item.group], condition=item.condition,
                                                        label=item.label)
            text = instance.model_dump_json()
            head = [item.row, place, item.id, item.group if first else None]
            kept.write(json.dumps(head, ensure_ascii=False) + "\t" + text + "\n")
            was = status.get(item.id)
            if was is not None and (was != "failed" or not self.retry_failed):
                continue
            stamp: dict[str, Any] = {"line": item.line}
            if item.p_true is not None:
                stamp["p_true"] = item.p_true
            yield Work(0, instance, item.group, stamp=stamp, text=text)

    def collect(self, directory: RunDirectory, *, expected: int) -> Collected:
        """Put the shares' files in place (``instances.jsonl`` in the file's order, ``rejected.jsonl``) and say
        which group each row is in. Called once every share is read to its end; ``expected``: the rows the
        check pass found (within the limit). Shares that disagree (the file changed while they read it) are
        refused, and ``instances.jsonl`` is then left as it was."""
        out = Collected()
        keys: dict[int, str] = {}
        rows = places = 0
        parts = self._share_files()
        with contextlib.ExitStack() as files:
            streams = [self._entries(files.enter_context(open(path, encoding="utf-8"))) for path in parts]
            with directory.instances_log() as log:
                for (_row, place, row_id, key), text in heapq.merge(*streams, key=lambda entry: entry[0][0]):
                    out.group_of[row_id] = place
                    places = max(places, place + 1)
                    if key is not None:
                        keys[place] = key
                    log.write(text)
                    rows += 1
                if rows != expected or len(out.group_of) != rows or len(keys) != places:
                    raise RunError(self._changed(f"while the run read it ({rows:,} rows read where the check "
                                                  f"found {expected:,})"))
        out.groups = [keys[place] for place in range(places)]
        if self._rejected_path.exists():
            with open(self._rejected_path, "rb") as fh:
                out.rejected = sum(1 for _ in fh)
            self._rejected_path.replace(directory.rejected_path)
        for path in parts:
            path.unlink()
        return out

    def _changed(self, when: str) -> str:
        return (f"{self.cases.path}: the file changed {when}; the answers so far are kept: put the file back as "
                "it was and run the same command again")

    @staticmethod
    def _entries(fh: IO[str]) -> Iterator[tuple[list[Any], str]]:
        for line in fh:
            head, _, text = line.partition("\t")
            yield json.loads(head), text
