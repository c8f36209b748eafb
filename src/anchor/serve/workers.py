"""``anchor serve --workers N``: N service processes behind one address, under uvicorn's own supervisor.

The command binds the socket once and hands it to uvicorn's :class:`~uvicorn.supervisors.Multiprocess`,
which starts N processes (spawned: each a fresh interpreter), passes each the socket (the kernel spreads
the connections between the processes accepting on it), replaces a process that dies, and on SIGTERM or
Ctrl-C asks every process to stop and waits for them. Each process builds its own :class:`Service` (its
own event loop, LLM clients and embedding helper) from the :class:`WorkerSpec` the command made, starts it
before it serves (uvicorn's lifespan) and stops it as the single process does.

What the processes share lives in the state folder (:mod:`anchor.serve.state`): the jobs (each run by
whichever process holds its lock), the LLM budget (:class:`anchor.serve.budget.SlotFiles`), the counters of
``/metrics`` (:class:`anchor.serve.metrics.SharedMetrics`), online answers, the space store and the response
cache. The supervisor holds the folder's lock, so a second service on the folder is refused as before.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import socket
from collections.abc import Callable
from typing import Any

import uvicorn
from pydantic import BaseModel, ConfigDict
from starlette.types import Receive, Scope, Send
from uvicorn.supervisors.multiprocess import Multiprocess

from anchor.config import AnchorConfig
from anchor.errors import ConfigurationError
from anchor.llm.settings import LLMSettings
from anchor.serve.jobs import tidy
from anchor.serve.settings import ServeSettings
from anchor.serve.state import StateFolder

#: How long the supervisor waits for a process to start serving (it loads the embedding model first).
START_SECONDS = 300
#: How often a process checks that its supervisor still lives.
ORPHAN_CHECK_SECONDS = 0.5


class WorkerSpec(BaseModel):
    """What each process builds its service from (sent to the spawned processes, so plain data)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    settings: ServeSettings
    llm: LLMSettings
    anchor_config: AnchorConfig | None
    ablations: list[str]
    command: str
    access_log: bool


class WithService:
    """The app, with the service started and stopped by uvicorn's lifespan (in the process that serves)."""

    def __init__(self, spec: WorkerSpec) -> None:
        from anchor.secrets import register
        from anchor.serve.app import create_app
        from anchor.serve.server import configure_logs
        from anchor.serve.service import Service

        configure_logs(spec.access_log)
        for key in spec.settings.api_keys:
            register(key.get_secret_value())  # scrubbed from this process's messages too
        self.service = Service(spec.settings, spec.llm, spec.anchor_config, spec.ablations, command=spec.command)
        self.app = create_app(self.service)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        watch: asyncio.Task[None] | None = None
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.service.start()
                except Exception as exc:  # noqa: BLE001 - one line to the supervisor's log, never a traceback
                    from anchor.secrets import scrub

                    await send({"type": "lifespan.startup.failed", "message": scrub(str(exc))})
                    return
                watch = asyncio.get_running_loop().create_task(self._stop_when_orphaned(os.getppid()))
                self._refuse_when_told_to_stop()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if watch is not None:
                    watch.cancel()
                self.service.accepting = False
                await self.service.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _refuse_when_told_to_stop(self) -> None:
        """As one process does: from SIGTERM (or Ctrl-C) on, new requests get 503 while those in flight
        finish; then uvicorn's own handler (installed before the app starts) stops the server."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            uvicorns = signal.getsignal(sig)
            if callable(uvicorns):
                def handler(number: int, frame: Any, then: Callable[..., Any] = uvicorns) -> None:
                    self.service.accepting = False
                    then(number, frame)

                signal.signal(sig, handler)

    @staticmethod
    async def _stop_when_orphaned(parent: int) -> None:
        """A supervisor killed outright (``kill -9``) cannot stop its processes: each stops itself, as on
        SIGTERM, when it finds it has another parent, rather than serve on with no one to replace it."""
        while os.getppid() == parent:
            await asyncio.sleep(ORPHAN_CHECK_SECONDS)
        os.kill(os.getpid(), signal.SIGTERM)


class WorkerConfig(uvicorn.Config):
    """uvicorn's settings, whose app is the service built from ``spec`` in the process that serves it."""

    def __init__(self, spec: WorkerSpec) -> None:
        s = spec.settings
        # The app is named for uvicorn's checks; load_app builds it (in each process, from the spec).
        super().__init__("anchor.serve.workers:WithService", workers=s.workers, log_level="warning",
                         access_log=False, lifespan="on", server_header=False,
                         timeout_graceful_shutdown=max(1, round(s.shutdown_seconds)))
        self.spec = spec

    def load_app(self) -> Any:
        return WithService(self.spec)


class Supervisor(Multiprocess):
    """uvicorn's supervisor, which says where it listens once every process serves (or why one failed)."""

    def __init__(self, config: WorkerConfig, sock: socket.socket, ready: Callable[[str], None]) -> None:
        super().__init__(config, sockets=[sock])
        self.ready = ready
        self.failed = False

    def init_processes(self) -> None:
        super().init_processes()
        for process in self.processes:
            if not process.wait_until_ready(START_SECONDS, self.should_exit):
                if not self.should_exit.is_set():
                    self.failed = True
                    self.should_exit.set()
                return
        host, port = self.sockets[0].getsockname()[:2]
        self.ready(f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}")


def check_installed() -> None:
    """One line naming --workers when what it runs on is missing or too old."""
    import importlib.util
    import inspect

    if importlib.util.find_spec("prometheus_client") is None:
        raise ConfigurationError("--workers: needs prometheus_client (pip install 'anchor[serve]')")
    if "target" in inspect.signature(Multiprocess.__init__).parameters:
        raise ConfigurationError(f"--workers: needs a newer uvicorn (installed {uvicorn.__version__}; "
                                 "pip install -U uvicorn)")


def serve_workers(spec: WorkerSpec, sock: socket.socket, ready: Callable[[str], None],
                  resumed: list[int] | None = None) -> None:
    """Run the N processes until SIGTERM or Ctrl-C (``ready`` is told the address once all serve, after
    ``resumed[0]`` is set to the jobs left unfinished before, which they resume). Raises ConfigurationError
    when the state folder is another service's, or a process could not start."""
    check_installed()
    state = StateFolder(spec.settings.state)
    try:
        state.acquire()
        unfinished = tidy(state)
        if resumed is not None:
            resumed[0] = unfinished
        shutil.rmtree(spec.settings.state / "metrics", ignore_errors=True)  # this service's counts start at 0
        # The processes write and read the counters here from their first request on.
        (spec.settings.state / "metrics").mkdir()
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
        supervisor = Supervisor(WorkerConfig(spec), sock, ready)
        supervisor.run()
        if supervisor.failed:
            raise ConfigurationError("--workers: a service process could not start (its reason is above)")
    finally:
        state.release()
        sock.close()
