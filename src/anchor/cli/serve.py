"""``anchor serve``: the HTTP service (predictions, spaces, batch jobs, a live page) over predict's engine."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from anchor.cli.console import err, fail, friendly_errors, invocation, out
from anchor.cli.evaluate import SIZES
from anchor.cli.options import (
    FLAG_NAMES,
    BuildOptions,
    CacheOptions,
    ConnectionOptions,
    InferenceOptions,
    MappingOptions,
    SeedOption,
    expand_options,
    llm_settings,
    opt,
)
from anchor.config import ABLATIONS, AnchorConfig
from anchor.secrets import redact_argv
from anchor.settings.inference import USER_RULE

if TYPE_CHECKING:
    from anchor.llm.settings import LLMSettings
    from anchor.serve.ray_options import RayServeOptions
    from anchor.serve.settings import ServeSettings

SERVE_PANEL = "Service"
LIMITS_PANEL = "Limits"
SECURITY_PANEL = "Security"
RAY_PANEL = "Ray Serve"
SERVE_FLAGS = {**FLAG_NAMES, "host": "--host", "port": "--port", "state": "--state", "store": "--spaces",
               "max_body_bytes": "--max-body", "max_upload_bytes": "--max-upload", "max_cases": "--max-cases",
               "max_queue": "--queue", "batch_share": "--batch-share", "max_running_jobs": "--max-running-jobs", "max_queued_jobs": "--max-queued-jobs",
               "default_wait": "--wait", "max_wait": "--max-wait", "shutdown_seconds": "--shutdown-seconds",
               "page_refresh": "--page-refresh", "replicas": "--replicas", "workers": "--workers"}


def parse_workers(value: str) -> int:
    """``--workers``: a number of processes, or ``auto`` (one a core this process may use)."""
    import os

    if value.strip().lower() == "auto":
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise fail(f"--workers {value}: give a number of processes (1 or more) or 'auto'")
    return n


@expand_options
def serve_command(
    host: Annotated[str, opt("--host", panel=SERVE_PANEL, default="127.0.0.1", help=(
        "Address to listen on. Anything but a loopback address needs API keys (or --insecure)."))] = "127.0.0.1",
    port: Annotated[int, opt("--port", panel=SERVE_PANEL, default=8080, help="Port (0: a free one).")] = 8080,
    workers: Annotated[str, opt("--workers", panel=SERVE_PANEL, default="1", help=(
        "Service processes behind the one address, each with its own event loop and embedding helper, sharing "
        "the state folder: its jobs, one LLM budget (--concurrency over them all), /metrics and the live page. "
        "'auto': one a core."))] = "1",
    state: Annotated[Path, opt("--state", panel=SERVE_PANEL, default=Path("anchor-serve"), help=(
        "The service's folder: its jobs (each a predict run directory), its online answers and, unless --spaces "
        "says otherwise, its space store. Restarted on the same folder, it resumes its jobs."))] = Path("anchor-serve"),
    spaces: Annotated[Path | None, opt("--spaces", panel=SERVE_PANEL, help=(
        "The space store, shared with `anchor predict --spaces STORE` (default: STATE/store)."))] = None,
    calibrators: Annotated[Path | None, opt("--calibrators", panel=SERVE_PANEL, help=(
        "A folder of calibrator files (from `anchor calibrate fit`), which requests name without .json."))] = None,
    api_key_file: Annotated[Path | None, opt("--api-key-file", panel=SECURITY_PANEL, help=(
        "A file of API keys, one a line (default: ANCHOR_SERVE_API_KEYS, comma-separated). With keys, every "
        "request but /healthz needs 'Authorization: Bearer KEY'."))] = None,
    insecure: Annotated[bool, opt("--insecure", panel=SECURITY_PANEL, show_default=False, help=(
        "Listen beyond loopback without API keys (behind a proxy that authenticates, say)."))] = False,
    cors_origin: Annotated[list[str] | None, opt("--cors-origin", panel=SECURITY_PANEL, help=(
        "A web origin allowed to call the API from a browser (repeatable; default: none, CORS off)."))] = None,
    max_body: Annotated[int, opt("--max-body", panel=LIMITS_PANEL, default=1 << 20, help=(
        "Largest JSON request body, in bytes."))] = 1 << 20,
    max_upload: Annotated[int, opt("--max-upload", panel=LIMITS_PANEL, default=256 << 20, help=(
        "Largest cases file sent to POST /v1/jobs, in bytes."))] = 256 << 20,
    max_cases: Annotated[int, opt("--max-cases", panel=LIMITS_PANEL, default=100, help=(
        "Most cases in one POST /v1/predictions."))] = 100,
    queue: Annotated[int, opt("--queue", panel=LIMITS_PANEL, default=1024, help=(
        "Most online cases waiting for an answer; beyond it, 429 with Retry-After."))] = 1024,
    batch_share: Annotated[float, opt("--batch-share", panel=LIMITS_PANEL, default=0.25, help=(
        "The share of the LLM budget (--concurrency) jobs may hold while online answers are in progress."))] = 0.25,
    max_running_jobs: Annotated[int, opt("--max-running-jobs", panel=LIMITS_PANEL, default=1, help=(
        "Jobs answered at once, in each process with --workers (they share the LLM budget, behind online "
        "predictions)."))] = 1,
    max_queued_jobs: Annotated[int, opt("--max-queued-jobs", panel=LIMITS_PANEL, default=100, help=(
        "Jobs waiting to start; beyond it, 429."))] = 100,
    wait: Annotated[float, opt("--wait", panel=LIMITS_PANEL, default=30.0, help=(
        "Seconds a prediction request is held open for its answer when it does not say (its 'wait')."))] = 30.0,
    max_wait: Annotated[float, opt("--max-wait", panel=LIMITS_PANEL, default=600.0, help=(
        "The longest 'wait' a request may ask for."))] = 600.0,
    shutdown_seconds: Annotated[float, opt("--shutdown-seconds", panel=LIMITS_PANEL, default=30.0, help=(
        "After SIGTERM, how long requests in flight may take before the service stops."))] = 30.0,
    access_log: Annotated[bool, typer.Option("--access-log/--no-access-log", rich_help_panel=SERVE_PANEL, help=(
        "One JSON line a request on stderr (never a header, a query or a body)."))] = True,
    ray: Annotated[str | None, opt("--ray", panel=RAY_PANEL, help=(
        "Serve as a Ray Serve application: 'local' (a Ray instance started here), 'auto' (the one `ray start` "
        "began on this machine) or a cluster's HOST:PORT. Replicas answer online predictions, one more runs the "
        "jobs; --state must be a folder every node reaches (a shared file system across machines)."))] = None,
    replicas: Annotated[int | None, opt("--replicas", panel=RAY_PANEL, help=(
        "With --ray: online replicas, each with its own engine and embedder (default 1). --concurrency is "
        "split among them and the jobs replica."))] = None,
    ray_autoscale: Annotated[str | None, opt("--ray-autoscale", panel=RAY_PANEL, help=(
        "With --ray, instead of --replicas: MIN,MAX[,TARGET] online replicas, Ray Serve adding one above "
        "TARGET requests in progress a replica (default 32). --concurrency is split as for MAX."))] = None,
    sizes: Annotated[str, opt("--sizes", panel=SERVE_PANEL, choices=SIZES, default="auto", help=(
        "ANCHOR build sizes, as anchor predict's --sizes."))] = "auto",
    ablation: Annotated[list[str] | None, opt("--ablation", "-a", panel=SERVE_PANEL, choices=tuple(ABLATIONS),
                                              help="An ANCHOR ablation by name, repeatable.")] = None,
    build: BuildOptions = None,  # type: ignore[assignment]
    mapping: MappingOptions = None,  # type: ignore[assignment]
    inference: InferenceOptions = None,  # type: ignore[assignment]
    conn: ConnectionOptions = None,  # type: ignore[assignment]
    cache: CacheOptions = None,  # type: ignore[assignment]
    seed: SeedOption = None,  # type: ignore[assignment]
) -> None:
    """Serve predictions over HTTP: online cases, factor spaces, batch jobs that survive restarts, a live page.

    The same engine, space store and response cache as `anchor predict`, with one LLM concurrency budget
    (--concurrency) shared by everything, online requests first. OpenAPI docs at /docs; see docs/serve.md.
    Example: anchor serve --base-url http://127.0.0.1:8000/v1 --state /var/lib/anchor-serve --port 8080
    """
    from anchor.extras import require_extra

    with friendly_errors(SERVE_FLAGS):
        require_extra("serve")
        from anchor.serve.ray_options import ray_options
        from anchor.serve.server import ServiceRunner, bind, configure_logs
        from anchor.serve.service import Service
        from anchor.serve.settings import ServeSettings, is_loopback, read_api_keys
        from anchor.settings.space import default_build_params

        n_workers = parse_workers(workers)
        keys = read_api_keys(api_key_file)
        settings = ServeSettings(workers=n_workers,
            host=host, port=port, state=state, store=spaces, calibrators=calibrators, api_keys=keys,
            insecure=insecure, cors_origins=tuple(cors_origin or ()), max_body_bytes=max_body,
            max_upload_bytes=max_upload, max_cases=max_cases, max_queue=queue, batch_share=batch_share,
            max_running_jobs=max_running_jobs,
            max_queued_jobs=max_queued_jobs, default_wait=wait, max_wait=max_wait, shutdown_seconds=shutdown_seconds)
        settings.check_exposure()
        if calibrators is not None and not calibrators.is_dir():
            raise fail(f"--calibrators {calibrators}: no such folder")
        llm = llm_settings(conn, cache, seed)
        chosen = ("paper" if llm.uses_server else "quick") if sizes == "auto" else sizes
        params = build.params(default_build_params("cases", llm.seed, chosen), seed=llm.seed)
        ablations = list(dict.fromkeys([*(ablation or []), *inference.ablations(build, mapping)]))
        anchor_config = AnchorConfig(build=params, mapping=mapping.config(),
                                     inference=inference.config(USER_RULE)).with_ablations(ablations)
        command = shlex.join(redact_argv(invocation()))
        on_ray = ray_options(ray, replicas, ray_autoscale)
        if on_ray is not None:
            if n_workers > 1:
                raise fail(f"--workers {workers} --ray: choose one (under --ray, --replicas sets the processes)")
            _serve_on_ray(on_ray, settings, llm, anchor_config, ablations, access_log)
            return
        if n_workers > 1:
            _serve_workers(settings, llm, anchor_config, ablations, command, access_log)
            return
        service = Service(settings, llm, anchor_config, ablations, command=command)
        sock = bind(host, port)

        def ready(url: str) -> None:
            resumed = f"; {service.resumed} job(s) resumed" if service.resumed else ""
            out.print(f"anchor serve: listening at {url} (model {service.engine.model}, LLM budget "
                      f"{service.budget.limit}, state {settings.state}, store {settings.store_dir}{resumed})",
                      markup=False, highlight=False, soft_wrap=True)
            if not keys and not is_loopback(host):
                err.print("warning: --insecure: no API keys, and anyone who can reach this address can use the "
                          "service", markup=False, highlight=False, soft_wrap=True)

        configure_logs(access_log)
        asyncio.run(ServiceRunner(service, ready, sock).run())


def _serve_on_ray(on_ray: RayServeOptions, settings: ServeSettings, llm: LLMSettings, anchor_config: AnchorConfig,
                  ablations: list[str], access_log: bool) -> None:
    """``--ray``: the same service as a Ray Serve application (anchor.serve.ray_serve), until SIGINT/SIGTERM."""
    from anchor.extras import require_extra

    require_extra("serve-ray")
    from anchor.serve.ray_options import ready_line
    from anchor.serve.ray_serve import serve_until_stopped
    from anchor.serve.server import configure_logs

    configure_logs(access_log)
    serve_until_stopped(on_ray, lambda split: out.print(ready_line(on_ray, split, settings), markup=False,
                                                        highlight=False, soft_wrap=True),
                        settings=settings, llm=llm, anchor_config=anchor_config, ablations=ablations,
                        command=shlex.join(redact_argv(invocation())), access_log=access_log)


def _serve_workers(settings: ServeSettings, llm: LLMSettings, anchor_config: AnchorConfig, ablations: list[str],
                   command: str, access_log: bool) -> None:
    """``--workers N``: the N processes under uvicorn's supervisor (anchor.serve.workers)."""
    from anchor.serve.server import bind, configure_logs
    from anchor.serve.settings import is_loopback
    from anchor.serve.workers import WorkerSpec, serve_workers

    spec = WorkerSpec(settings=settings, llm=llm, anchor_config=anchor_config, ablations=ablations,
                      command=command, access_log=access_log)
    sock = bind(settings.host, settings.port)
    resumed = [0]

    def ready(url: str) -> None:
        more = f"; {resumed[0]} job(s) resumed" if resumed[0] else ""
        model = llm.model or "the server's"
        out.print(f"anchor serve: listening at {url} ({settings.workers} workers, model {model}, "
                  f"LLM budget {llm.max_concurrency} over them all, state {settings.state}, store "
                  f"{settings.store_dir}{more})", markup=False, highlight=False, soft_wrap=True)
        if not settings.api_keys and not is_loopback(settings.host):
            err.print("warning: --insecure: no API keys, and anyone who can reach this address can use the "
                      "service", markup=False, highlight=False, soft_wrap=True)

    configure_logs(access_log)
    serve_workers(spec, sock, ready, resumed)
