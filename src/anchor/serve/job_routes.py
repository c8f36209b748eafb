"""The routes of batch jobs: a cases file in, its progress, its results out (the OpenAI Batch API's shape)."""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from starlette.requests import ClientDisconnect

from anchor.cases import CASE_FORMATS, CasesError, parse_column_options
from anchor.cases.formats import detect_format
from anchor.serve.body import JsonBodyRoute
from anchor.serve.engine import RunError, check_method, method_extra
from anchor.serve.errors import API_SCHEMA_VERSION, ApiError, refused
from anchor.serve.online import new_id
from anchor.serve.routes import check_id, service_of
from anchor.serve.service import Service
from anchor.serve.state import JobRecord

router = APIRouter(route_class=JsonBodyRoute)
log = logging.getLogger("anchor.serve")

#: Content types that name a cases format (``format`` in the query wins).
CONTENT_TYPES = {"text/csv": "csv", "text/tab-separated-values": "tsv", "application/x-ndjson": "jsonl",
                 "application/jsonl": "jsonl", "application/json": "json", "application/vnd.apache.parquet": "parquet",
                 "application/x-parquet": "parquet"}
SUFFIXES = {"csv": ".csv", "tsv": ".tsv", "jsonl": ".jsonl", "json": ".json", "parquet": ".parquet"}
UPLOAD_DOC = {"requestBody": {"required": True, "description": "The cases file itself, as predict reads it.",
                              "content": {t: {"schema": {"type": "string", "format": "binary"}} for t in CONTENT_TYPES}}}


def _format(given: str | None, content_type: str) -> str:
    if given is not None:
        try:
            return detect_format("cases", given)
        except CasesError:
            raise ApiError(422, f"unknown format {given[:40]!r}; the formats are {', '.join(CASE_FORMATS)}",
                           field="format") from None
    media = content_type.split(";")[0].strip().lower()
    if media in CONTENT_TYPES:
        return CONTENT_TYPES[media]
    raise ApiError(415, f"cannot tell the cases file's format from Content-Type {media or '(none)'!r}: give "
                        f"?format= ({', '.join(CASE_FORMATS)}) or a Content-Type such as text/csv", field="format")


@router.post("/v1/jobs", tags=["jobs"], status_code=202, openapi_extra=UPLOAD_DOC, responses={
    413: {"description": "The file is over --max-upload."}, 422: {"description": "A setting or the file is unusable."},
    429: {"description": "Too many jobs queued."}})
async def submit_job(request: Request, method: str = "anchor", stage: str | None = None,
                     calibrator: str | None = None, format: str | None = None,
                     column: Annotated[list[str] | None, Query(description="NAME=COLUMN, repeatable")] = None,
                     id: str | None = None) -> JSONResponse:
    """Answer a cases file (CSV, TSV, JSON lines, JSON, Parquet; the body is the file) as a batch job: a
    predict run directory that survives restarts. The file is checked first: its bad rows are listed,
    and a file with no usable row is refused."""
    service = service_of(request)
    if method not in service.online.methods():
        raise ApiError(422, f"unknown method {method[:60]!r}; choose from {', '.join(service.online.methods())}",
                       field="method")
    try:
        check_method(method, stage, online=False)
    except RunError as exc:
        raise refused(exc) from None
    if method_extra(method) is not None:
        service.online.check_method_extra(method)
    service.calibrators.get(calibrator)
    try:
        columns = parse_column_options(column or [])
    except CasesError as exc:
        raise ApiError(422, str(exc).replace("--column", "column"), field="column") from None
    fmt = _format(format, request.headers.get("content-type", ""))
    job_id = check_id(id) if id is not None else new_id("j")
    folder = service.state.job_dir(job_id)
    name = "cases" + SUFFIXES[fmt]
    with service.jobs.place():
        try:
            # The folder made here is the id taken, whichever process is sent the same id at the same time.
            folder.mkdir(parents=True)
        except FileExistsError:
            why = ("exists already" if service.jobs.known(job_id) or (folder / "job.json").exists()
                   else "is being sent (its file is not whole yet)")
            raise ApiError(409, f"job {job_id!r} {why}; choose another id", field="id") from None
        try:
            size = await _save(request, folder / name)
            if size == 0:
                raise ApiError(422, "the body is empty: send the cases file as the request body", field="body")
            summary = await asyncio.to_thread(service.check_cases, folder / name, fmt, columns)
        except ClientDisconnect:
            shutil.rmtree(folder, ignore_errors=True)
            # Expected (a client stopped or lost its connection): one line, not a traceback.
            log.info("job %s: the client closed the connection before its file was whole; nothing kept", job_id)
            raise ApiError(400, "the connection closed before the whole file arrived", field="body") from None
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        record = JobRecord(id=job_id, method=method, stage=stage, calibrator=calibrator, format=fmt,
                           columns=columns, file=name, bytes=size, check=summary)
        service.jobs.add(record)
    return JSONResponse(service.jobs.view(job_id), status_code=202,
                        headers={"Location": f"/v1/jobs/{job_id}", "Retry-After": "2"})


async def _save(request: Request, path: Any) -> int:
    size = 0
    with open(path, "wb") as fh:
        async for chunk in request.stream():
            fh.write(chunk)
            size += len(chunk)
    return size


def _job(service: Service, job_id: str) -> str:
    check_id(job_id)
    if not service.jobs.known(job_id):
        raise ApiError(404, f"no job {job_id!r}", field="id")
    return job_id


@router.get("/v1/jobs", tags=["jobs"])
async def jobs(request: Request) -> JSONResponse:
    """Every job, oldest first, with its state and progress."""
    service = service_of(request)
    await service.jobs.refresh()  # the jobs sent to the other processes too
    views = await asyncio.to_thread(lambda: [service.jobs.view(j) for j in service.jobs.ids()])
    return JSONResponse({"schema_version": API_SCHEMA_VERSION, "jobs": views})


@router.get("/v1/jobs/{job_id}", tags=["jobs"])
async def job(job_id: str, request: Request) -> JSONResponse:
    """A job's state and progress: rows done of all, requests, tokens, time left."""
    service = service_of(request)
    return JSONResponse(await asyncio.to_thread(service.jobs.view, _job(service, job_id)))


@router.delete("/v1/jobs/{job_id}", tags=["jobs"], responses={409: {"description": "The job has ended already."}})
async def cancel_job(job_id: str, request: Request) -> JSONResponse:
    """Cancel a queued or running job; the rows answered so far are kept (its results)."""
    service = service_of(request)
    was_running = service.jobs.cancel(_job(service, job_id))
    view = service.jobs.view(job_id)
    if was_running:
        view["note"] = "cancelling: the rows in flight are dropped, those answered are kept"
    return JSONResponse(view, status_code=202 if was_running else 200)


@router.get("/v1/jobs/{job_id}/results", tags=["jobs"],
            responses={200: {"content": {"application/x-ndjson": {}, "text/csv": {}}}})
async def results(job_id: str, request: Request,
                  format: Annotated[str, Query(pattern="^(jsonl|csv)$")] = "jsonl") -> StreamingResponse:
    """The job's predictions, streamed: predict's predictions.jsonl records (jsonl), or its CSV table (csv).
    While the job runs, the rows answered so far, in the order they finished; once it is done, in input order."""
    service = service_of(request)
    run_dir = service.state.run_dir(_job(service, job_id))
    if not service.is_run(run_dir):
        raise ApiError(409, f"job {job_id} has not started yet: no results", field="id")
    lines = service.result_lines(service.jobs.records[job_id], format)
    media = "text/csv; charset=utf-8" if format == "csv" else "application/x-ndjson"
    return StreamingResponse(_in_thread(lines), media_type=media,
                             headers={"Content-Disposition": f'attachment; filename="{job_id}.{format}"'})


async def _in_thread(lines: Iterator[bytes], batch: int = 256) -> AsyncIterator[bytes]:
    """The lines of a file read in a thread, sent a batch at a time (the event loop never waits on the disk)."""
    def take() -> bytes:
        return b"".join(line for _, line in zip(range(batch), lines, strict=False))

    while True:
        chunk = await asyncio.to_thread(take)
        if not chunk:
            return
        yield chunk


# A path parameter: a row id is the user's text and may hold '/', which the page's link sends as %2F and the
# server decodes back before routing.
@router.get("/v1/jobs/{job_id}/rows/{row_id:path}/explanation", tags=["jobs"], response_class=HTMLResponse)
async def row_explanation(job_id: str, row_id: str, request: Request) -> HTMLResponse:
    """The explanation page of one row of a job answered by ANCHOR (the row's id percent-encoded)."""
    service = service_of(request)
    _job(service, job_id)
    if not row_id or len(row_id) > 200:
        raise ApiError(422, "a row id has 1 to 200 characters", field="row_id")
    page = await asyncio.to_thread(service.row_explanation, job_id, row_id)
    return HTMLResponse(page)
