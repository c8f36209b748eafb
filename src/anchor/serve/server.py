"""Running the service under uvicorn.

The service starts before the server listens (a failed start is one line, never a server that answers
500s) and stops after it: SIGTERM (or Ctrl-C) first makes new requests get 503, lets those in flight
finish for up to ``--shutdown-seconds``, then stops the service (answers still pending are recorded as
interrupted, running jobs are cancelled and left queued for the next start) and returns.
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

import uvicorn

from anchor.errors import ConfigurationError
from anchor.serve.app import create_app
from anchor.serve.service import Service


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, service: Service, ready: Callable[[str], None]) -> None:
        super().__init__(config)
        self.service = service
        self.ready = ready

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.service.accepting = False
        super().handle_exit(sig, frame)

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        # As uvicorn's, without raising the signal again afterwards: the service still has to stop.
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and sockets:
            host, port = sockets[0].getsockname()[:2]
            self.ready(f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}")


def configure_logs(access: bool) -> None:
    """One JSON line a request on stderr (``anchor.serve.access``), and the service's own warnings."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    for name, level in (("anchor.serve.access", logging.INFO if access else logging.WARNING),
                        ("anchor.serve", logging.INFO)):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, or one line naming --host/--port."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on connections of a socket that says it is TCP, and
        # without it a kept-alive connection waited ~40 ms (Nagle against delayed ACKs) for each answer.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError as exc:
        raise ConfigurationError(f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc})") from None
    sock.setblocking(False)
    return sock


class ServiceRunner:
    """Starts the service, serves until told to stop (a signal, or :meth:`stop` from any thread), stops it."""

    def __init__(self, service: Service, ready: Callable[[str], None], sock: socket.socket | None = None) -> None:
        self.service = service
        self.ready = ready
        self.sock = sock
        self.server: _Server | None = None

    async def run(self) -> None:
        s = self.service.settings
        sock = self.sock or bind(s.host, s.port)
        try:
            await self.service.start()
            try:
                config = uvicorn.Config(create_app(self.service), log_level="warning", access_log=False,
                                        lifespan="off", server_header=False,
                                        timeout_graceful_shutdown=max(1, round(s.shutdown_seconds)))
                self.server = _Server(config, self.service, self.ready)
                await self.server.serve(sockets=[sock])
            finally:
                await self.service.stop()
        finally:
            sock.close()

    def stop(self) -> None:
        """As SIGTERM does: refuse new requests, let those in flight finish, then stop."""
        self.service.accepting = False
        if self.server is not None:
            self.server.should_exit = True
