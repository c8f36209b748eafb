"""A start of a run that is refused before it records anything leaves the folder as it found it.

A start checks a great deal only once it holds the directory's lock (the settings of the run already
there, the helper processes or the Ray cluster, the cases file), and by then it has made the folder,
the lock file and ``config.json``. Left behind, they would make the folder "a run with other
settings" for the next start, or a run the user never had. :class:`RunStart` notes what the folder
held before the start; when the start fails before a line was added to any of the run's logs, it
takes back what the start made: the files and folders that were not there before, the lock file
included, and the folders it created. What was there before is never touched. A line a worker wrote
to its own shard (a request it sent) counts as recorded too: such a start is a run that began.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from anchor.rundir.directory import RunDirectory
from anchor.rundir.names import LOCK


class RunStart:
    """What ``directory`` held before a start, and the means to take back what the start made."""

    def __init__(self, directory: RunDirectory) -> None:
        self.path = directory.path
        self._logs = [log.path for log in directory.logs()]
        self._shards = directory.shards
        self._sizes = {path: _size(path) for path in self._logs}
        self._before = set(os.listdir(self.path)) if self.path.is_dir() else set()
        missing: list[Path] = []
        probe = self.path
        while not probe.exists() and probe.parent != probe:
            missing.append(probe)
            probe = probe.parent
        self._created = missing  # the folder first, then the parents it needs, outermost last

    def make_folder(self) -> None:
        """Create the run directory (and the parents it needs)."""
        self.path.mkdir(parents=True, exist_ok=True)

    def recorded(self) -> bool:
        """Did the start add to (or cut) any of the run's logs, or did a worker write a line of its own (a
        request it sent)? Then it did work, kept for a resume."""
        return any(_size(path) != size for path, size in self._sizes.items()) or self._shards.has_records()

    def take_back(self) -> bool:
        """While the lock is held: remove what the start added, unless it recorded something (then
        nothing is removed, and False is returned). The lock file goes last, still held."""
        if self.recorded() or not self.path.is_dir():
            return False
        for name in sorted(set(os.listdir(self.path)) - self._before - {LOCK}):
            path = self.path / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        if LOCK not in self._before:
            (self.path / LOCK).unlink(missing_ok=True)
        return True

    def remove_folders(self) -> None:
        """After the lock is let go: remove the folders the start created, if they are empty (another
        process may have begun to use one since)."""
        for folder in self._created:
            try:
                folder.rmdir()
            except OSError:
                return


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
