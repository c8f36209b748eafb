"""The workers' shards of a run directory and the runner's copies of them (anchor.rundir.shards): every
line reaches the main log once, a copy a kill cut off is undone and made again at the next start, and a
reader sees each line once meanwhile (main file, then the shards' uncopied tails)."""

from __future__ import annotations

import json
from pathlib import Path

from anchor.rundir import RunDirectory, ShardMerger, ShardWriter
from anchor.rundir.names import CALLS


def call(n: int) -> str:
    return json.dumps({"stage": "vanilla", "outcome": "ok", "request_id": f"r{n}", "started": 1.0, "seconds": 0.5})


def request_ids(run: Path) -> list[str]:
    """The request ids a reader of the run directory sees, in order, shards' tails included."""
    return [r.request_id for r in RunDirectory(run).call_records()]


def test_a_copy_cut_off_by_a_kill_is_undone_at_the_next_start_and_every_line_is_copied_once(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    shard = ShardWriter(run, "w0")
    for n in range(3):
        shard.write(CALLS, call(n))
    first = RunDirectory(run)
    first.merge_shards()  # r0..r2 copied
    for n in range(3, 6):
        shard.write(CALLS, call(n))
    shard.close()
    assert request_ids(run) == [f"r{n}" for n in range(6)]  # three in the main file, three in the shard

    # A runner killed in the middle of its next copy: journalled, then half of the bytes appended.
    tail = b"".join((call(n) + "\n").encode() for n in range(3, 6))
    main = run / CALLS
    state = first.shards._states[next(iter(first.shards._states))]
    state.note(CALLS, main.stat().st_size, state.copied[CALLS] + len(tail))
    with open(main, "ab") as fh:
        fh.write(tail[: len(tail) // 2])
    state.close()
    # A reader meanwhile: the half copy is not counted twice, nor cut in half.
    assert request_ids(run) == [f"r{n}" for n in range(6)]

    again = RunDirectory(run)
    again.shards.recover()
    again.merge_shards(final=True)
    again.shards.close()
    assert [json.loads(line)["request_id"] for line in main.read_text().splitlines()] == [f"r{n}" for n in range(6)]
    assert not (run / ".workers").exists()  # the worker ended and every line is in: the shard is gone


def test_a_complete_copy_the_runner_was_killed_after_is_kept(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    shard = ShardWriter(run, "w0")
    for n in range(4):
        shard.write(CALLS, call(n))  # the worker lives on: its shard stays, with the journal's last entry
    merger = ShardMerger(run)
    directory = RunDirectory(run)
    merger.sweep({log.path.name: log for log in directory.logs()})  # journalled and appended; then killed
    for log in directory.logs():
        log.close()
    merger.close()
    again = RunDirectory(run)
    again.shards.recover()
    assert request_ids(run) == [f"r{n}" for n in range(4)]  # nothing cut back, nothing read twice
    shard.close()
    again.merge_shards(final=True)
    assert [json.loads(line)["request_id"] for line in (run / CALLS).read_text().splitlines()] == \
        [f"r{n}" for n in range(4)]


def test_a_shard_being_made_is_left_alone_until_the_workers_have_ended(tmp_path: Path) -> None:
    """A worker makes its shard's folder and lock file a moment before it holds the lock: a copy made in that
    moment used to take the lock file for a dead worker's and remove the folder, and the worker then failed
    to name its shard ('No such file or directory'), stopping the run."""
    run = tmp_path / "run"
    making = run / ".workers" / ".123-abc.part"
    making.mkdir(parents=True)
    (making / "alive").touch()  # created, not locked yet
    RunDirectory(run).merge_shards()
    assert making.is_dir()
    RunDirectory(run).merge_shards(final=True)  # the workers have ended: a leftover, tidied
    assert not (run / ".workers").exists()


def test_a_worker_makes_its_shard_even_when_the_runner_removes_the_empty_folder_of_the_shards_meanwhile(
        tmp_path: Path, monkeypatch) -> None:
    """The runner removes ``.workers`` when it is empty; a worker that made it a moment before (and not yet its
    own folder inside) makes it again rather than failing."""
    run = tmp_path / "run"
    run.mkdir()
    real = Path.mkdir
    removed = []

    def mkdir(self: Path, *args, **kwargs) -> None:
        if self.name.endswith(".part") and not removed:
            real(self.parent, exist_ok=True)
            self.parent.rmdir()  # the runner's tidying, between the folder of the shards and the worker's own
            removed.append(self)
            raise FileNotFoundError(2, "No such file or directory", str(self))
        real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    shard = ShardWriter(run, "w0")
    shard.write(CALLS, call(0))
    shard.close()
    assert removed and request_ids(run) == ["r0"]
