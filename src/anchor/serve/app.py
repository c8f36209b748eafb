"""The FastAPI application: its routes, and what every request goes through on the way in and out.

:class:`Gatekeeper` (plain ASGI, outside FastAPI) does, for every HTTP request: refuse new ones once the
service is stopping (503); check the API key when the service has keys (a bearer token, or HTTP Basic
with the key as the password, which a browser asks for on the pages); cap the body (413 before reading
more than the limit); answer HEAD as GET without the body; add security headers; count the request in
``/metrics``; and write one JSON log line (method, route, path, status, milliseconds) without headers,
query strings or bodies, so no key and no case text reaches the log. The exception handlers turn every refusal into the JSON error of
:mod:`anchor.serve.errors`, and anything unforeseen into a 500 without its inside.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from anchor.secrets import scrub
from anchor.serve.body import is_json
from anchor.serve.errors import MAX_LISTED, ApiError, error_body, field_path, shown
from anchor.version import __version__

if TYPE_CHECKING:
    from anchor.serve.service import Service

log = logging.getLogger("anchor.serve")
access = logging.getLogger("anchor.serve.access")

#: Open to anyone, keys or not (a load balancer's health check).
PUBLIC_PATHS = ("/healthz",)
SECURITY_HEADERS = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
                    (b"x-frame-options", b"DENY")]
#: The service's own pages load nothing from elsewhere; /docs is FastAPI's (Swagger UI from its CDN).
PAGE_CSP = (b"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
            b"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


class BodyTooLarge(StarletteHTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is over the limit of {limit:,} bytes")


def _is_page(path: str, accept: str) -> bool:
    return path == "/" or path.startswith("/jobs/") or path.endswith(("/explanation", "/page")) or "text/html" in accept


class Gatekeeper:
    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        path, method = scope["path"], scope["method"]
        page = _is_page(path, headers.get("accept", ""))
        # HEAD is answered as GET without the body (FastAPI's routes take only the methods they name). A copy:
        # the server's own scope keeps HEAD, by which it too knows to send no body.
        scope = {**scope, "method": "GET"} if method == "HEAD" else scope

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.body" and method == "HEAD":
                message = {**message, "body": b""}
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                extra = list(SECURITY_HEADERS)
                content_type = dict(message.get("headers", [])).get(b"content-type", b"")
                if content_type.startswith(b"text/html") and not path.startswith(("/docs", "/redoc")):
                    extra.append((b"content-security-policy", PAGE_CSP))
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        try:
            refusal = self._refusal(path, method, headers, page)
            if refusal is not None:
                await refusal(scope, receive, sending)
                return
            limit = self.service.body_limit(path, method)
            length = headers.get("content-length")
            if length is not None and length.isdigit() and int(length) > limit:
                await _drain(receive, limit * 16)
                response = _error(ApiError(413, f"the request body has {int(length):,} bytes, over the limit of "
                                                f"{limit:,}", field="body"))
                await response(scope, receive, sending)
                return
            await self.app(scope, _capped(receive, limit), sending)
        finally:
            seconds = time.perf_counter() - started
            route = _route_of(scope)
            self.service.metrics.observe_http(route, method, status[0], seconds)
            access.info(json.dumps({"method": method, "route": route, "path": path[:300], "status": status[0],
                                    "ms": round(seconds * 1000, 2),
                                    "client": (scope.get("client") or ("", 0))[0]}, ensure_ascii=False))

    def _refusal(self, path: str, method: str, headers: dict[str, str], page: bool) -> JSONResponse | None:
        if path in PUBLIC_PATHS:
            return None
        if not self.service.accepting:
            return _error(ApiError(503, "the service is stopping; try again when it is back",
                                   headers={"Retry-After": "5", "Connection": "close"}))
        if not self.service.settings.api_keys or method == "OPTIONS":
            return None
        given = _key_of(headers.get("authorization", ""))
        if given is not None and self.service.settings.key_matches(given):
            return None
        challenge = 'Basic realm="anchor serve", charset="UTF-8"' if page else 'Bearer realm="anchor serve"'
        why = "no API key given" if given is None else "the API key is not one of this service's"
        return _error(ApiError(401, f"{why}: send the header 'Authorization: Bearer KEY'", field="Authorization",
                               headers={"WWW-Authenticate": challenge}))


def _route_of(scope: Scope) -> str:
    """The route a request matched, as its template (``/v1/jobs/{job_id}``), or ``unmatched``: one of a
    closed set, whatever the path. FastAPI's own routes (``/openapi.json``, ``/docs``) note only their
    endpoint, and have no parameter: their path is their template."""
    route = getattr(scope.get("route"), "path", None)
    if route is not None:
        return str(route)
    if scope.get("endpoint") is not None and not scope.get("path_params"):
        return str(scope["path"])
    return "unmatched"


def _key_of(header: str) -> str | None:
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    if scheme.lower() == "basic" and value.strip():
        try:
            return base64.b64decode(value.strip(), validate=True).decode("utf-8").partition(":")[2] or None
        except (ValueError, UnicodeDecodeError):
            return None
    return None


def _capped(receive: Receive, limit: int) -> Receive:
    seen = 0

    async def capped() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise BodyTooLarge(limit)
        return message

    return capped


async def _drain(receive: Receive, most: int) -> None:
    """Read and drop a refused body (up to ``most`` bytes), so that the client gets to read the answer."""
    seen = 0
    while seen <= most:
        message = await receive()
        if message["type"] != "http.request":
            return
        seen += len(message.get("body", b""))
        if not message.get("more_body"):
            return


def _error(exc: ApiError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


def create_app(service: Service) -> FastAPI:
    from anchor.serve.job_routes import router as jobs_router
    from anchor.serve.page import router as page_router
    from anchor.serve.routes import router

    app = FastAPI(title="anchor serve", version=__version__,
                  description="Calibrated probabilities for two competing outcomes, with the reason: predictions, "
                              "factor spaces and batch jobs over the ANCHOR engine. docs/serve.md is the guide.")
    app.state.service = service
    app.include_router(router)
    app.include_router(jobs_router)
    app.include_router(page_router)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _error(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [{"field": "body" if e.get("type") == "json_invalid" else field_path(e.get("loc", ())),
                     "message": _message(e)} for e in exc.errors()]
        first = problems[0] if problems else {"field": None, "message": "invalid request"}
        more = f" ({len(problems):,} problems; the first {MAX_LISTED} are listed)" if len(problems) > MAX_LISTED else ""
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if first["field"] == "body" and not is_json(media):
            # FastAPI reads a body it is not told is JSON as bytes: the fault is the Content-Type, not the JSON.
            return JSONResponse(error_body(415, f"send the body as JSON (Content-Type: application/json), not "
                                                f"{media[:60] or '(none)'!r}", field="Content-Type"), status_code=415)
        return JSONResponse(error_body(422, f"{first['field'] or 'body'}: {first['message']}{more}",
                                       field=first["field"], errors=problems[:MAX_LISTED]), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        field = "body" if exc.status_code in (400, 413) else None
        message = (str(exc.detail) if exc.status_code != 404
                   else f"no such route: {shown(request.method)} {shown(request.url.path)}")
        return JSONResponse(error_body(exc.status_code, message, field=field), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def unforeseen(request: Request, exc: Exception) -> JSONResponse:
        log.error("unforeseen %s on %s %s: %s", type(exc).__name__, shown(request.method), shown(request.url.path),
                  scrub(str(exc))[:500])
        return JSONResponse(error_body(500, "the service failed to answer this request (see its log)"),
                            status_code=500)

    if service.settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(service.settings.cors_origins),
                           allow_methods=["GET", "POST", "DELETE"], allow_headers=["Authorization", "Content-Type"])
    app.add_middleware(Gatekeeper, service=service)
    return app


def _message(error: dict[str, Any]) -> str:
    kind = error.get("type", "")
    if kind == "missing":
        return "missing"
    if kind == "extra_forbidden":
        return "not a field of this request"
    if kind == "json_invalid":
        where = error.get("loc", ())[-1] if len(error.get("loc", ())) > 1 else None
        at = f" at character {where}" if isinstance(where, int) else ""
        return f"not valid JSON{at} ({(error.get('ctx') or {}).get('error', 'cannot be decoded')})"
    return str(error.get("msg", "invalid"))
