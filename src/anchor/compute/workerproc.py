"""A helper process that runs CPU-heavy jobs for ``anchor.compute.offload``: ``python -m anchor.compute.workerproc``.

Jobs arrive on stdin and answers leave on stdout as length-prefixed pickles: ``(job_id, function,
args)`` in, ``(job_id, ok, result or error)`` out, one job at a time in arrival order. Anything else
the libraries print goes to stderr, so it cannot corrupt the answers. The process exits when its
stdin closes, which also happens when the parent dies.

``WorkerProcess`` is the parent's side: it starts the process on first use, sends jobs from a
writer thread, and resolves a ``concurrent.futures.Future`` per job from a reader thread. If the
process dies, every pending job fails with an error that says so. ``submit`` never waits for the
child: a pipe holds 64 KB, and a job bigger than that (a space's vectors) written while the child
was busy with an earlier one (compiling, loading a model) used to hold the caller, the event
loop, until the child was free to read it.
"""

from __future__ import annotations

import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from pathlib import Path
from typing import IO, Any

from anchor.errors import AnchorError

_HEADER = struct.Struct("!Q")


class WorkerDied(AnchorError):
    """The helper process ended before answering."""


def _read_frame(stream: IO[bytes]) -> bytes | None:
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(head)
    body = stream.read(size)
    return body if len(body) == size else None


def _write_frame(stream: IO[bytes], payload: bytes) -> None:
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


def serve(inp: IO[bytes], out: IO[bytes]) -> None:
    """The child's loop: run jobs until stdin closes."""
    while True:
        frame = _read_frame(inp)
        if frame is None:
            return
        job_id, fn, args = pickle.loads(frame)
        try:
            answer = (job_id, True, fn(*args))
        except BaseException as exc:  # noqa: BLE001 - sent back to the caller
            answer = (job_id, False, exc)
        try:
            payload = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
            pickle.loads(payload)  # some exceptions pickle but cannot be rebuilt; find out here
        except Exception:  # noqa: BLE001 - send the error's text instead
            text = ("".join(traceback.format_exception(answer[2])).strip() if not answer[1]
                    else f"{fn!r} returned a value that cannot be sent back")
            payload = pickle.dumps((job_id, False, RuntimeError(text)), protocol=pickle.HIGHEST_PROTOCOL)
        _write_frame(out, payload)


def _settle(future: Future[Any], ok: bool, value: Any) -> None:
    """Give a job its answer, unless its caller gave up on it (cancelled): the reader thread must live on to
    answer the next jobs."""
    try:
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
    except InvalidStateError:
        pass


class WorkerProcess:
    """One helper process (started on first use) and the jobs waiting on it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        # Jobs sent to the current process and not yet answered (a new dict per process, so a
        # dead process's reader fails only its own jobs).
        self._pending: dict[int, Future[Any]] = {}
        self._outbox: queue.SimpleQueue[tuple[int, bytes] | None] = queue.SimpleQueue()
        self._next_id = 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run ``fn(*args)`` in the helper process; ``fn`` must be a module-level function."""
        future: Future[Any] = Future()
        with self._lock:
            self._ensure_started()
            job_id = self._next_id
            self._next_id += 1
            payload = pickle.dumps((job_id, fn, args), protocol=pickle.HIGHEST_PROTOCOL)
            self._pending[job_id] = future
            self._outbox.put((job_id, payload))  # written by the writer thread, in order
        return future

    def close(self) -> None:
        """Stop the process. Every job the caller waited for has been answered by now; one still
        running (a warm-up nobody needed) is abandoned rather than allowed to hold up the exit."""
        with self._lock:
            proc, self._proc = self._proc, None
            self._outbox.put(None)  # the writer thread stops after what was queued before
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        if proc.poll() is None:
            proc.kill()
        proc.wait()

    def _ensure_started(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        # The child must import this very copy of anchor, whatever the environment says.
        package_root = str(Path(__file__).resolve().parents[2])  # the folder that holds anchor/
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([package_root, *filter(None, [env.get("PYTHONPATH")])])
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "anchor.compute.workerproc"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env=env,
        )
        self._pending = {}
        self._outbox = queue.SimpleQueue()
        threading.Thread(target=self._read, args=(self._proc, self._pending, self._outbox),
                         name=f"anchor-{self.name}-reader", daemon=True).start()
        threading.Thread(target=self._write, args=(self._proc, self._pending, self._outbox),
                         name=f"anchor-{self.name}-writer", daemon=True).start()
        return self._proc

    def _write(self, proc: subprocess.Popen[bytes], pending: dict[int, Future[Any]],
               outbox: queue.SimpleQueue[tuple[int, bytes] | None]) -> None:
        assert proc.stdin is not None
        while (item := outbox.get()) is not None:
            job_id, payload = item
            try:
                _write_frame(proc.stdin, payload)
            except (OSError, ValueError) as exc:  # the process is gone (broken or closed pipe)
                with self._lock:
                    future = pending.pop(job_id, None)
                if future is not None:
                    _settle(future, False, WorkerDied(f"anchor's {self.name} process is not running ({exc})"))
        try:
            proc.stdin.close()
        except OSError:
            pass

    def _read(self, proc: subprocess.Popen[bytes], pending: dict[int, Future[Any]],
              outbox: queue.SimpleQueue[tuple[int, bytes] | None]) -> None:
        assert proc.stdout is not None
        while True:
            frame = _read_frame(proc.stdout)
            if frame is None:
                break
            try:
                job_id, ok, value = pickle.loads(frame)
            except Exception:  # noqa: BLE001 - a garbled pipe: treat the process as gone
                proc.kill()
                break
            with self._lock:
                future = pending.pop(job_id, None)
            if future is None:
                continue
            _settle(future, ok, value)
        code = proc.wait()
        # This process is gone: its pipes are closed and its writer stops (a restart gets new ones).
        proc.stdout.close()
        outbox.put(None)
        with self._lock:
            orphans = list(pending.values())
            pending.clear()
        for future in orphans:
            _settle(future, False, WorkerDied(f"anchor's {self.name} process exited (code {code}) before answering"))


def main() -> None:
    # Answers go out on the original stdout; everything printed from now on goes to stderr.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, out)


if __name__ == "__main__":
    main()
