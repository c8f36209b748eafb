"""anchor's one way of running work in a helper process: ``python -m MODULE``, talking in framed pickles.

A helper process reads messages on its stdin and writes messages on its stdout, each a length-prefixed
pickle; anything the libraries print goes to stderr, so it cannot corrupt a message. It ends when its
stdin closes, which also happens when the parent dies.

:class:`HelperProcess` is the parent's side of one such process: it starts it, writes messages from a
writer thread (``send`` never waits for the child: a pipe holds 64 KB, and a message bigger than that,
such as a space's vectors, written while the child was busy would hold the caller, the event loop,
until the child read it) and hands each message that comes back to a callback from a reader thread,
and says when the process has ended. Two kinds of helper are built on it:

* :class:`WorkerProcess` (``python -m anchor.compute.workerproc``): runs jobs, a function and its
  arguments, one at a time in arrival order, each answered through a ``concurrent.futures.Future``;
  the embedding and clustering processes of :mod:`anchor.compute.offload`. If the process dies, every
  pending job fails with an error that says so, and the next job starts a new process.
* the run engine's helper processes (``--workers N``, :mod:`anchor.runs.processes`), which answer
  instances and talk back in messages of their own.
"""

from __future__ import annotations

import os
import pickle
import queue
import signal
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

#: The variables that size the thread pools of the numeric libraries a helper loads: OpenMP (FAISS, and
#: OpenBLAS when built on it), the BLAS libraries, numba (UMAP) and numexpr; the same list joblib's process
#: pool sets in its workers.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "NUMBA_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system says, else every core)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def thread_budget(processes: int, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment that gives each of ``processes`` helpers started side by side its share of the cores
    for its libraries' thread pools (at least one thread). Left to themselves, each helper's OpenMP, BLAS
    and numba start a thread a core, so N helpers run N threads a core, which mostly wait for each other.
    A variable already set (``environ``, this process's environment by default) is the user's choice, and
    is left as it is."""
    environ = dict(os.environ) if environ is None else environ
    share = str(max(1, usable_cores() // max(1, processes)))
    return {name: share for name in THREAD_VARIABLES if not environ.get(name)}


class WorkerDied(AnchorError):
    """The helper process ended before answering."""


def read_frame(stream: IO[bytes]) -> bytes | None:
    """One message's bytes, or None at the end of the stream (or a message cut off by it)."""
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(head)
    body = stream.read(size)
    return body if len(body) == size else None


def write_frame(stream: IO[bytes], payload: bytes) -> None:
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


def child_streams(*, ignore_interrupt: bool = False) -> tuple[IO[bytes], IO[bytes]]:
    """In a helper process: its message streams (stdin, and the original stdout), with everything printed
    from now on going to stderr. ``ignore_interrupt``: a Ctrl-C reaches the whole process group, and
    it is the parent's to handle (it stops its helpers in order)."""
    if ignore_interrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return sys.stdin.buffer, out


class HelperProcess:
    """The parent's side of one helper process running ``python -m module``.

    ``on_message(message)`` gets each message the process sends, on the reader thread; ``on_exit(code)``
    is called there once the process has ended (its pipes are closed by then). Messages go out in the
    order :meth:`send` was called."""

    def __init__(self, name: str, module: str, *, on_message: Callable[[Any], None],
                 on_exit: Callable[[int], None] | None = None, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.module = module
        self.env = dict(env or {})
        """Variables set in the process's environment besides this process's own (which it inherits)."""
        self._on_message = on_message
        self._on_exit = on_exit
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.proc: subprocess.Popen[bytes] | None = None
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        # The child must import this very copy of anchor, whatever the environment says.
        package_root = str(Path(__file__).resolve().parents[2])  # the folder that holds anchor/
        env = {**os.environ, **self.env}
        env["PYTHONPATH"] = os.pathsep.join([package_root, *filter(None, [env.get("PYTHONPATH")])])
        self.proc = subprocess.Popen([sys.executable, "-m", self.module], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env)
        self._threads = [
            threading.Thread(target=self._read, args=(self.proc,), name=f"anchor-{self.name}-reader", daemon=True),
            threading.Thread(target=self._write, args=(self.proc, self._outbox), name=f"anchor-{self.name}-writer",
                             daemon=True)]
        for thread in self._threads:
            thread.start()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def send(self, message: Any) -> None:
        """Queue ``message`` for the process (pickled now, written by the writer thread)."""
        self._outbox.put(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    def end_input(self) -> None:
        """Close the process's stdin once what was sent before is written: it ends when it reads that."""
        self._outbox.put(None)

    def close(self, timeout: float | None = None) -> int | None:
        """End the input, wait up to ``timeout`` seconds for the process to end (None: do not wait), then kill
        it if it still runs; its exit code."""
        proc = self.proc
        if proc is None:
            return None
        self.end_input()
        if timeout:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        if proc.poll() is None:
            proc.kill()
        code = proc.wait()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=60)
        return code

    def _write(self, proc: subprocess.Popen[bytes], outbox: queue.SimpleQueue[bytes | None]) -> None:
        assert proc.stdin is not None
        while (payload := outbox.get()) is not None:
            try:
                write_frame(proc.stdin, payload)
            except (OSError, ValueError):  # the process is gone (broken or closed pipe): the reader says so
                break
        try:
            proc.stdin.close()
        except OSError:
            pass

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        while (frame := read_frame(proc.stdout)) is not None:
            try:
                message = pickle.loads(frame)
            except Exception:  # noqa: BLE001 - a garbled pipe: treat the process as gone
                proc.kill()
                break
            self._on_message(message)
        code = proc.wait()
        proc.stdout.close()
        self._outbox.put(None)  # the writer stops too
        if self._on_exit is not None:
            self._on_exit(code)


def serve(inp: IO[bytes], out: IO[bytes]) -> None:
    """A job process's loop: run ``(job_id, function, args)`` jobs until stdin closes, answering each with
    ``(job_id, ok, result or error)``."""
    while True:
        frame = read_frame(inp)
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
        write_frame(out, payload)


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
    """One job process (started on first use, again after it died) and the jobs waiting on it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._helper: HelperProcess | None = None
        # Jobs sent to the current process and not yet answered (a new dict per process, so a dead
        # process's reader fails only its own jobs).
        self._pending: dict[int, Future[Any]] = {}
        self._next_id = 0

    @property
    def started(self) -> bool:
        """Has a process been started (and not closed)?"""
        return self._helper is not None

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run ``fn(*args)`` in the helper process; ``fn`` must be a module-level function."""
        future: Future[Any] = Future()
        with self._lock:
            helper = self._ensure_started()
            job_id = self._next_id
            self._next_id += 1
            self._pending[job_id] = future
            helper.send((job_id, fn, args))
        return future

    def close(self) -> None:
        """Stop the process. Every job the caller waited for has been answered by now; one still
        running (a warm-up nobody needed) is abandoned rather than allowed to hold up the exit."""
        with self._lock:
            helper, self._helper = self._helper, None
        if helper is not None:
            helper.close()

    def _ensure_started(self) -> HelperProcess:
        if self._helper is not None and self._helper.alive():
            return self._helper
        pending: dict[int, Future[Any]] = {}
        self._pending = pending
        self._helper = HelperProcess(self.name, "anchor.compute.workerproc",
                                     on_message=lambda message: self._answered(pending, message),
                                     on_exit=lambda code: self._ended(pending, code))
        self._helper.start()
        return self._helper

    def _answered(self, pending: dict[int, Future[Any]], message: tuple[int, bool, Any]) -> None:
        job_id, ok, value = message
        with self._lock:
            future = pending.pop(job_id, None)
        if future is not None:
            _settle(future, ok, value)

    def _ended(self, pending: dict[int, Future[Any]], code: int) -> None:
        with self._lock:
            orphans = list(pending.values())
            pending.clear()
        for future in orphans:
            _settle(future, False, WorkerDied(f"anchor's {self.name} process exited (code {code}) before answering"))


def main() -> None:
    inp, out = child_streams()
    serve(inp, out)


if __name__ == "__main__":
    main()
