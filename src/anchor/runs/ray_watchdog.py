"""Ending every process of a ``--ray local`` instance, and the watchdog that does it once the runner
that started the instance has ended, however it ended.

The runner starts the watchdog just before ``ray.init`` (:func:`start`), so that a runner killed
before its actors watch it (they do from their first seconds on, see ``ray_local``) leaves no Ray
process behind either. The watchdog waits on a pipe from the runner, whose end comes with the
runner's. This file needs the standard library only: the watchdog runs it as a script, and costs an
interpreter, not anchor's imports.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys

#: The environment variable that marks every process of a local Ray instance started by anchor.
TAG_VARIABLE = "ANCHOR_RAY_LOCAL"


def _holds_file_in(pid: str, folder: re.Pattern[str]) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if folder.match(os.readlink(f"/proc/{pid}/fd/{fd}")):
                return True
    return False


def end_instance(tag: str, session: str | None) -> None:
    """SIGKILL every other process of the instance tagged ``tag`` (Linux; elsewhere nothing): those
    whose environment carries the tag, and Ray's own titled processes (``ray::...``, whose title can
    overwrite the environment /proc shows) that hold a file in the instance's session folder. Without
    ``session`` (a runner killed while Ray started), the folder is known by the runner's process id,
    which Ray puts at the end of its name."""
    if not os.path.isdir("/proc"):
        return
    mark, me = f"{TAG_VARIABLE}={tag}".encode(), str(os.getpid())
    if session:
        folder = re.compile(re.escape(session.rstrip("/") + "/"))
    else:
        folder = re.compile(rf".*/session_[^/]*_{re.escape(tag.split('-')[0])}/")
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                ours = mark in fh.read().split(b"\0")
            if not ours:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    ours = fh.read().startswith(b"ray::") and _holds_file_in(pid, folder)
            if ours:
                os.kill(int(pid), signal.SIGKILL)
        except OSError:
            continue  # gone already, or another user's


def start(tag: str) -> subprocess.Popen[bytes]:
    """The watchdog of the instance about to be started with ``tag``; :func:`tell` it the instance's
    session folder once known, and keep the returned process (its pipe) for as long as this one lives."""
    return subprocess.Popen([sys.executable, "-I", __file__, tag], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def tell(watchdog: subprocess.Popen[bytes], session: str | None) -> None:
    assert watchdog.stdin is not None
    with contextlib.suppress(OSError):
        watchdog.stdin.write(f"{session or ''}\n".encode())
        watchdog.stdin.flush()


def main(tag: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the runner's to handle: it shuts Ray down
    session = sys.stdin.buffer.readline().decode().strip() or None
    sys.stdin.buffer.read()  # until the runner ends
    end_instance(tag, session)


if __name__ == "__main__":
    main(sys.argv[1])
