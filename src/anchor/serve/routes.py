"""The routes of online predictions, factor spaces, methods and the service's own state (health, metrics)."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from anchor.serve.body import JsonBodyRoute
from anchor.serve.errors import API_SCHEMA_VERSION, ApiError
from anchor.serve.metrics import CONTENT_TYPE
from anchor.serve.models import PredictionRequest, SpaceRequest
from anchor.serve.service import Service
from anchor.serve.settings import valid_id

router = APIRouter(route_class=JsonBodyRoute)
POLL_SECONDS = "2"


def service_of(request: Request) -> Service:
    return request.app.state.service  # type: ignore[no-any-return]


def check_id(value: str, field: str = "id") -> str:
    if not valid_id(value):
        raise ApiError(422, f"{value[:60]!r} is not a valid id: letters, digits, '.', '_' and '-', at most 128, "
                            "starting with a letter or digit", field=field)
    return value


# --------------------------------------------------------------------------- predictions


@router.post("/v1/predictions", tags=["predictions"], status_code=200, responses={
    202: {"description": "Not answered within `wait` (a space is being built): poll the Location."},
    409: {"description": "The id names another prediction."}, 413: {"description": "Body or list too large."},
    422: {"description": "A field is missing or wrong; the error names it."},
    429: {"description": "The queue is full: try again after Retry-After seconds."}})
async def predict(body: PredictionRequest, request: Request) -> JSONResponse:
    """Answer one case, or a list of them: P(O1), P(O2), unknown and why, the factors with φ, the cost,
    and a link to the explanation page. A case not answered within `wait` seconds (its scenario's space is
    being built) comes back pending, with 202 and where to poll; it is answered all the same."""
    service = service_of(request)
    records, complete = await service.online.submit(body)
    status = 200 if complete else 202
    if not complete and service.shared:  # a poll may reach another process: say there who answers it
        await asyncio.to_thread(_note_pending, service, [r for r in records if r.get("state") == "pending"])
    headers = {} if complete else {"Retry-After": POLL_SECONDS}
    if body.cases is None:
        record = records[0]
        if not complete:
            headers["Location"] = record["links"]["self"]
        return JSONResponse(_public(record), status_code=status, headers=headers)
    return JSONResponse({"schema_version": API_SCHEMA_VERSION, "predictions": [_public(r) for r in records]},
                        status_code=status, headers=headers)


def _public(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != "digest"}


@router.get("/v1/predictions/{prediction_id}", tags=["predictions"])
async def prediction(prediction_id: str, request: Request) -> JSONResponse:
    """One prediction: its answer (200), or pending (202, poll again)."""
    service = service_of(request)
    check_id(prediction_id)
    if prediction_id in service.online.pending:
        return JSONResponse(_public(service.online.view(prediction_id)), status_code=202,
                            headers={"Retry-After": POLL_SECONDS})
    record = await asyncio.to_thread(service.online.get, prediction_id)
    if record is None and service.shared:
        pending = await asyncio.to_thread(service.state.read_pending, prediction_id)
        if pending is not None:
            return JSONResponse(_public(pending), status_code=202, headers={"Retry-After": POLL_SECONDS})
    if record is None:
        raise ApiError(404, f"no prediction {prediction_id!r}", field="id")
    return JSONResponse(_public(record))


def _note_pending(service: Service, records: list[dict[str, Any]]) -> None:
    for record in records:
        service.state.write_pending(record["id"], record)


@router.get("/v1/predictions/{prediction_id}/explanation", tags=["predictions"], response_class=HTMLResponse)
async def explanation(prediction_id: str, request: Request) -> HTMLResponse:
    """The explanation page of an ANCHOR answer (the page `anchor explain` writes)."""
    service = service_of(request)
    check_id(prediction_id)
    await service.online.written(prediction_id)
    page = await asyncio.to_thread(service.explanation, prediction_id)
    return HTMLResponse(page)


# --------------------------------------------------------------------------- spaces


@router.get("/v1/spaces", tags=["spaces"])
async def spaces(request: Request, limit: Annotated[int, Query(ge=1, le=1000)] = 100,
                 offset: Annotated[int, Query(ge=0)] = 0) -> JSONResponse:
    """The factor spaces of the store (shared with `anchor predict --spaces`), and those being built."""
    service = service_of(request)
    return JSONResponse(await asyncio.to_thread(service.spaces.listing, limit, offset))


@router.post("/v1/spaces", tags=["spaces"], responses={202: {"description": "Being built: poll the Location."}})
async def build_space(body: SpaceRequest, request: Request) -> JSONResponse:
    """Build a scenario's factor space with the service's settings (nothing when it is stored already)."""
    service = service_of(request)
    wait = service.online.wait_of(body.wait)
    key, stored = await service.spaces.build(body, wait)
    if stored:
        return JSONResponse(await asyncio.to_thread(service.spaces.read, key))
    view = service.spaces.pending(key)
    if view is not None and view["state"] == "failed":
        return JSONResponse(view, status_code=200)
    return JSONResponse(view or {"schema_version": API_SCHEMA_VERSION, "id": key, "state": "building"},
                        status_code=202, headers={"Location": f"/v1/spaces/{key}", "Retry-After": POLL_SECONDS})


@router.get("/v1/spaces/{space_id}", tags=["spaces"])
async def space(space_id: str, request: Request) -> JSONResponse:
    """A stored space (its file without the vectors and rounds; its schema_version is the space file's), or
    202 while it is being built."""
    service = service_of(request)
    check_id(space_id)
    pending = service.spaces.pending(space_id)
    if pending is not None and pending["state"] == "building":
        return JSONResponse(pending, status_code=202, headers={"Retry-After": POLL_SECONDS})
    found = await asyncio.to_thread(service.spaces.read, space_id)
    if found is None:
        if pending is not None:
            return JSONResponse(pending)
        raise ApiError(404, f"no space {space_id!r} in the store", field="id")
    return JSONResponse(found)


@router.get("/v1/spaces/{space_id}/page", tags=["spaces"], response_class=HTMLResponse)
async def space_page(space_id: str, request: Request) -> HTMLResponse:
    """A stored space as its HTML page (themes, factors, map)."""
    service = service_of(request)
    check_id(space_id)
    page = await asyncio.to_thread(service.spaces.page, space_id)
    if page is None:
        raise ApiError(404, f"no space {space_id!r} in the store", field="id")
    return HTMLResponse(page)


# --------------------------------------------------------------------------- the service


@router.get("/v1/methods", tags=["service"])
async def methods(request: Request) -> JSONResponse:
    """The methods, the calibrators, the service's limits and settings."""
    return JSONResponse(service_of(request).describe())


@router.get("/healthz", tags=["service"])
async def health(request: Request) -> JSONResponse:
    """Alive and accepting (200), or stopping (503)."""
    service = service_of(request)
    body = {"schema_version": API_SCHEMA_VERSION, "status": "ok" if service.accepting else "stopping",
            "uptime_s": round(time.time() - service.started, 1), "model": service.engine.model,
            "pending": len(service.online.pending), "jobs": service.jobs.by_state(),
            "process": os.getpid()}
    return JSONResponse(body, status_code=200 if service.accepting else 503)


@router.get("/metrics", tags=["service"], response_class=Response)
async def metrics(request: Request) -> Response:
    """The service's counters in the Prometheus text format."""
    return Response(service_of(request).metrics.text(), media_type=CONTENT_TYPE)
