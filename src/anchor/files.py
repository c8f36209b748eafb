"""Writing result files safely: atomically, with the user's permissions, to a place checked up front.

Every artefact anchor writes (factor spaces, BIRD models, run configurations, metrics) goes through
``write_atomic``: a temporary file in the same folder, flushed, then renamed over the target, so a
crash never leaves half a file behind; ``write_text_atomic`` does the same for the pages written
for people (audit pages) and reports a failure as a ``PageWriteError`` naming the path.
``check_destination`` is for commands: it says before any LLM call is made whether a path can be
written at all.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from anchor.errors import AnchorError


class DestinationError(AnchorError):
    """An output path that cannot be written."""


def _umask() -> int:
    # The only portable way to read the umask is to set it; put it straight back.
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: Path | str, text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary file and a rename; the mode follows the umask.

    ``tempfile.mkstemp`` creates its file readable by the owner only; the final file gets the
    mode an ordinary ``open(path, "w")`` would have given it (0666 minus the umask).
    """
    return write_atomic_stream(path, [text.encode("utf-8")])


def write_atomic_stream(path: Path | str, chunks: Iterable[bytes]) -> Path:
    """:func:`write_atomic` for content made piece by piece (a large file is never held whole)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


class PageWriteError(AnchorError):
    """A page that could not be written, with the path and the reason."""


def write_text_atomic(path: Path | str, text: str) -> Path:
    """Write a page atomically (readers never see half of it), as ``PageWriteError`` on failure."""
    try:
        return write_atomic(path, text)
    except OSError as exc:
        raise PageWriteError(f"{path}: cannot write the page ({exc.strerror or exc})") from exc


def check_destination(path: Path | str, what: str) -> Path:
    """Raise ``DestinationError`` unless a file can be created or replaced at ``path``.

    ``what`` names the option or file for the message (e.g. ``"--out"``). Missing parent folders
    are fine as long as they can be created; nothing is created here.
    """
    path = Path(path)
    if path.is_dir():
        raise DestinationError(f"{what} {path}: is a directory; give a file name such as {path / 'space.json'}")
    if path.exists() and not os.access(path, os.W_OK):
        raise DestinationError(f"{what} {path}: the file exists and is not writable")
    parent = path.parent
    while not parent.exists():
        if parent.parent == parent:
            break
        parent = parent.parent
    if not parent.is_dir():
        raise DestinationError(f"{what} {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DestinationError(f"{what} {path}: cannot create files in {parent} (permission denied)")
    return path


def check_directory(path: Path | str, what: str) -> Path:
    """Raise ``DestinationError`` unless ``path`` is, or can be created as, a writable directory."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise DestinationError(f"{what} {path}: exists and is not a directory")
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise DestinationError(f"{what} {path}: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise DestinationError(f"{what} {path}: cannot write in {probe} (permission denied)")
    return path
