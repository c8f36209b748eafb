"""``anchor serve --ray ADDRESS|local``: the service's FastAPI app as a Ray Serve application.

Two deployments share the state folder (``--state``: a local path on one machine; across machines it
must be a file system every node mounts at the same path):

* ``AnchorOnline``, ``--replicas N`` replicas (or autoscaled between ``--ray-autoscale MIN,MAX``), behind
  Ray Serve's HTTP proxy on ``--host``/``--port``. Each replica runs a :class:`ReplicaService`: the
  service without the state folder's lock and without jobs, with its own engine, client and embedding
  helper. Online answers are written to ``STATE/answers/ID.json`` as always, so a prediction sent again
  with its ``id`` is answered from the file by whichever replica gets it.
* ``AnchorJobs``, one replica, holds the whole :class:`~anchor.serve.service.Service` (the folder's
  lock, the jobs). The online replicas hand it every request for a job, a job's page and the live page
  (:class:`JobRoutes`), so that exactly one process runs a given job; when it dies Ray starts it again,
  and the new one resumes the unfinished jobs from their run directories, as ``anchor serve`` does
  after a restart.

The LLM budget is split, not shared (:class:`~anchor.serve.ray_options.BudgetSplit`): fixed shares
add up to at most ``--concurrency``, so the server is never asked more at once, but a replica's idle
share is not lent to a busy one. ``/metrics`` is the counters of the replica that answered.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from ray import serve
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from anchor.config import AnchorConfig
from anchor.errors import ConfigurationError
from anchor.llm.settings import LLMSettings
from anchor.secrets import register
from anchor.serve.app import create_app
from anchor.serve.errors import error_body
from anchor.serve.models import PredictionRequest
from anchor.serve.online import OnlineAnswers
from anchor.serve.ray_options import BudgetSplit, RayServeOptions
from anchor.serve.server import configure_logs
from anchor.serve.service import Service
from anchor.serve.settings import ServeSettings

log = logging.getLogger("anchor.serve")
APP_NAME = "anchor-serve"
ONLINE = "AnchorOnline"
JOBS = "AnchorJobs"
#: The header saying which online replica answered (its Ray Serve id).
REPLICA_HEADER = b"x-anchor-replica"
#: Seconds between Ray Serve's health checks of a replica: a dead one is replaced this much sooner than
#: with Ray's default of 10 s.
HEALTH_CHECK_SECONDS = 2.0


def forwarded(path: str) -> bool:
    """Whether a request goes to the jobs replica: the jobs' routes and pages, and the live page."""
    return path == "/" or path == "/v1/jobs" or path.startswith(("/v1/jobs/", "/jobs/"))


class WrittenAnswers(OnlineAnswers):
    """Online answers that come back once their file is written: the client's next request (the explanation
    page, the answer again) may reach another replica, which knows the answer only from its file."""

    async def submit(self, request: PredictionRequest) -> tuple[list[dict[str, Any]], bool]:
        records, complete = await super().submit(request)
        for record in records:
            if record["state"] != "pending":
                await self.written(record["id"])
        return records, complete


class ReplicaService(Service):
    """The service of an online replica: no lock on the state folder (the replicas share it) and no jobs
    (the jobs replica runs them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.online = WrittenAnswers(self.engine, self.state, self.settings, self.calibrators, self.budget)

    async def start(self) -> None:
        for sub in ("jobs", "answers"):
            (self.state.root / sub).mkdir(parents=True, exist_ok=True)
        self.settings.store_dir.mkdir(parents=True, exist_ok=True)
        await self.engine.start()
        assert self.engine.client is not None
        self.engine.client.ledger.subscribe(self.metrics.call_observer("online"))
        self._gauges()

    async def stop(self) -> None:
        self.accepting = False
        await self.online.close()
        await self.spaces.close()
        await self.engine.close()


# --------------------------------------------------------------------------- one request over a handle


def request_of(scope: Scope) -> dict[str, Any]:
    """What of an HTTP request's scope travels to the jobs replica (plain values Ray can send)."""
    keys = ("method", "scheme", "http_version", "path", "raw_path", "query_string", "headers", "client", "server")
    return {k: scope.get(k) for k in keys}


async def read_body(receive: Receive, most: int) -> bytes:
    """The request's body, up to ``most`` bytes (beyond, the jobs replica's limit refuses it anyway)."""
    chunks, seen = [], 0
    while seen <= most:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        seen += len(chunks[-1])
        if not message.get("more_body"):
            break
    return b"".join(chunks)


async def call_app(app: ASGIApp, request: dict[str, Any], body: bytes) -> tuple[int, list[Any], bytes]:
    """Run one request through ``app`` in this process: (status, headers, body). The body is whole before
    it goes back (a job's results too: they travel as one message)."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "root_path": "", **request,
             "headers": [(bytes(k), bytes(v)) for k, v in request["headers"]]}
    answered = asyncio.Event()
    sent = [False]
    status, headers, parts = [500], [[]], []

    async def receive() -> Message:
        if not sent[0]:
            sent[0] = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()  # no disconnect before the answer is whole (a streamed answer would stop)
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            status[0], headers[0] = message["status"], list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                answered.set()

    try:
        await app(scope, receive, send)
    finally:
        answered.set()
    return status[0], headers[0], b"".join(parts)


class JobRoutes:
    """The online replica's app, with the requests of :func:`forwarded` handed to the jobs replica, and
    every answer marked with the replica's id."""

    def __init__(self, app: ASGIApp, forward: Callable[[dict[str, Any], bytes], Awaitable[Any]],
                 replica: str, most: int) -> None:
        self.app = app
        self.forward = forward
        self.replica = replica.encode("ascii", "replace")
        self.most = most

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (REPLICA_HEADER, self.replica)]}
            await send(message)

        if not forwarded(scope["path"]):
            await self.app(scope, receive, marked)
            return
        body = await read_body(receive, self.most)
        try:
            status, headers, content = await self.forward(request_of(scope), body)
        except Exception as exc:  # noqa: BLE001 - the jobs replica lost (Ray starts it again) or not reached
            log.warning("the jobs replica did not answer %s: %s", scope["path"][:200], type(exc).__name__)
            status, headers = 503, [(b"content-type", b"application/json"), (b"retry-after", b"5")]
            content = json.dumps(error_body(503, "the jobs replica is not answering (Ray Serve restarts it when it "
                                                 "dies); try again")).encode("utf-8")
        await marked({"type": "http.response.start", "status": status, "headers": headers})
        await marked({"type": "http.response.body", "body": content, "more_body": False})


# --------------------------------------------------------------------------- the deployments


def _prepare(settings: ServeSettings, access_log: bool) -> None:
    """In a replica's process: the API keys known as secrets (no log shows them), the service's logs."""
    for key in settings.api_keys:
        register(key.get_secret_value())
    configure_logs(access_log)


@serve.deployment(name=JOBS, num_replicas=1, ray_actor_options={"num_cpus": 0},
                  health_check_period_s=HEALTH_CHECK_SECONDS, max_ongoing_requests=1024)
class JobsReplica:
    """The one replica that holds the state folder's lock and runs the jobs."""

    async def __init__(self, settings: ServeSettings, llm: LLMSettings, anchor_config: AnchorConfig | None,
                       ablations: list[str], command: str, access_log: bool) -> None:
        _prepare(settings, access_log)
        self.service = Service(settings, llm, anchor_config, ablations, command=command)
        await self.service.start()
        self.app = create_app(self.service)

    async def forward(self, request: dict[str, Any], body: bytes) -> tuple[int, list[Any], bytes]:
        return await call_app(self.app, request, body)

    async def __del__(self) -> None:
        await self.service.stop()


@serve.deployment(name=ONLINE, health_check_period_s=HEALTH_CHECK_SECONDS)
@serve.ingress()
class OnlineReplica:
    """An online replica: the app over a :class:`ReplicaService`, job requests handed to ``jobs``."""

    async def __init__(self, settings: ServeSettings, llm: LLMSettings, anchor_config: AnchorConfig | None,
                       ablations: list[str], command: str, access_log: bool, jobs: Any) -> None:
        _prepare(settings, access_log)
        self.service = ReplicaService(settings, llm, anchor_config, ablations, command=command)
        await self.service.start()
        self.jobs = jobs
        self.replica = serve.get_replica_context().replica_id.unique_id

    def __serve_build_asgi_app__(self) -> ASGIApp:
        return JobRoutes(create_app(self.service), self._forward, self.replica,
                         max(self.service.settings.max_upload_bytes, self.service.settings.max_body_bytes))

    async def _forward(self, request: dict[str, Any], body: bytes) -> Any:
        return await self.jobs.forward.remote(request, body)

    async def __del__(self) -> None:
        await self.service.stop()


def application(options: RayServeOptions, settings: ServeSettings, llm: LLMSettings,
                anchor_config: AnchorConfig | None, ablations: list[str], command: str,
                access_log: bool = True) -> tuple[Any, BudgetSplit]:
    """The Ray Serve application (not yet run), and how it splits the LLM budget."""
    split = BudgetSplit.of(llm.max_concurrency, settings.batch_share, options.max_replicas)
    grace = settings.shutdown_seconds
    jobs = JobsReplica.options(graceful_shutdown_timeout_s=grace).bind(
        settings, llm.model_copy(update={"max_concurrency": split.jobs}), anchor_config, ablations, command,
        access_log)
    scaling: dict[str, Any] = ({"autoscaling_config": options.autoscale.ray_config()} if options.autoscale
                               else {"num_replicas": options.replicas})
    online = OnlineReplica.options(
        **scaling, graceful_shutdown_timeout_s=grace, max_ongoing_requests=settings.max_queue,
        ray_actor_options={"num_cpus": 1}).bind(
        settings, llm.model_copy(update={"max_concurrency": split.online_each}), anchor_config, ablations, command,
        access_log, jobs)
    return online, split


def start(options: RayServeOptions, settings: ServeSettings, llm: LLMSettings, anchor_config: AnchorConfig | None,
          ablations: list[str], command: str, access_log: bool = True) -> BudgetSplit:
    """Connect to Ray (``--ray``), start its HTTP proxy on ``--host``/``--port`` and run the application
    there; returns once every replica has started."""
    from anchor.runs.ray_pool import connect

    if settings.port == 0:
        raise ConfigurationError("--port 0: with --ray, Ray Serve's proxy needs a fixed port")
    app, split = application(options, settings, llm, anchor_config, ablations, command, access_log)
    connect(options.address)
    try:
        serve.start(http_options={"host": settings.host, "port": settings.port})
        serve.run(app, name=APP_NAME, route_prefix="/", blocking=False)
    except RuntimeError as exc:
        raise ConfigurationError(f"--ray {options.address}: Ray Serve could not start the service "
                                 f"({str(exc).splitlines()[0][:300]})") from None
    return split


def stop(options: RayServeOptions) -> None:
    """Delete the application (its replicas stop as on SIGTERM); a Ray instance this process started goes
    with it."""
    serve.delete(APP_NAME)
    if options.address == "local":
        serve.shutdown()
        import ray

        ray.shutdown()


def serve_until_stopped(options: RayServeOptions, ready: Callable[[BudgetSplit], None], **kwargs: Any) -> None:
    """:func:`start`, then wait for SIGINT or SIGTERM, then :func:`stop`."""
    split = start(options, **kwargs)
    stopping = threading.Event()
    # After ray.init, which installs its own SIGTERM handler (one that aborts the process).
    original = {sig: signal.signal(sig, lambda *_: stopping.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        ready(split)
        stopping.wait()
    finally:
        stop(options)
        for sig, handler in original.items():
            signal.signal(sig, handler)
