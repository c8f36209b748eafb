"""The run directory's durable log: lines flushed as written, fsyncs grouped on a thread of their own."""

from __future__ import annotations

import threading
from pathlib import Path

from pydantic import BaseModel

from anchor.rundir import JsonLines
from anchor.rundir.sync import GroupSync


class Row(BaseModel):
    n: int


class CountingSync:
    """An fsync stand-in that counts its calls and lets a test wait for the first."""

    def __init__(self) -> None:
        self.calls = 0
        self.first = threading.Event()

    def __call__(self, fd: int) -> None:
        self.calls += 1
        self.first.set()


def test_writes_within_the_interval_share_one_sync_and_close_syncs_the_rest(tmp_path: Path) -> None:
    sync = CountingSync()
    with open(tmp_path / "f", "w") as fh:
        # An hour between syncs: whatever is written after the first sync waits for close().
        group = GroupSync(fh.fileno(), 3600.0, fsync=sync)
        group.written()
        assert sync.first.wait(30), "the first write was never synced"
        for _ in range(100):
            group.written()
        assert sync.calls == 1
        group.close()
    assert sync.calls == 2  # the one after the first write, and the last at close


def test_close_without_writes_still_syncs_once(tmp_path: Path) -> None:
    sync = CountingSync()
    with open(tmp_path / "f", "w") as fh:
        GroupSync(fh.fileno(), 3600.0, fsync=sync).close()
    assert sync.calls == 1


def test_durable_lines_are_in_the_file_as_they_are_written_and_after_close(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    log = JsonLines(path, Row, durable=True)
    for i in range(5):
        log.append(Row(n=i))
        # Flushed at once: a process killed now loses nothing (the sync only guards against an OS crash).
        assert [r.n for r in JsonLines(path, Row).read()] == list(range(i + 1))
    log.close()
    assert [r.n for r in JsonLines(path, Row).read()] == list(range(5))
    log.append(Row(n=5))  # a closed log opens again on the next line
    log.close()
    assert [r.n for r in JsonLines(path, Row).read()] == list(range(6))
