"""Every error the service answers: one JSON shape, a 4xx status and the field at fault.

``{"schema_version": 1, "error": {"status": 422, "code": "invalid", "field": "cases[0].condition",
"message": "..."}}``. A bad request never gets a 500 or a traceback: what the service did not foresee is
a 500 with one line and no detail of its inside (and that line is logged, scrubbed of secrets).

An error never echoes a request at length: what it quotes of the input (a field's name, a path) is cut
to :data:`ECHO_CHARS` characters, a message to :data:`MESSAGE_CHARS`, and it lists at most
:data:`MAX_LISTED` problems (a body of 5,000 unknown keys is one short answer, not 5,000 entries).
"""

from __future__ import annotations

import re
from typing import Any

#: The version of every JSON body the service sends (errors included): docs/schemas.md.
API_SCHEMA_VERSION = 1
#: Characters of the input (a field's name, a path) an error quotes at most (docs/serve.md, Security).
ECHO_CHARS = 100
#: Characters of an error's message at most.
MESSAGE_CHARS = 1000
#: Problems an error lists at most (its ``errors``).
MAX_LISTED = 10


def shown(text: str, limit: int = ECHO_CHARS) -> str:
    """``text`` as an error quotes it: its first ``limit`` characters, and '…' when there were more."""
    return text if len(text) <= limit else text[:limit] + "…"


class ApiError(Exception):
    """A request the service refuses: its status, a short code, the field at fault (or None) and one line."""

    def __init__(self, status: int, message: str, *, field: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.code = code or CODES.get(status, "error")
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, field=self.field, code=self.code)


def refused(exc: Exception, *, status: int = 422) -> ApiError:
    """A setting the engine refused, as the service answers it: the field is the one the error names (its
    ``field``), and the message names settings as the request does (``stage``, not the flag ``--stage``)."""
    return ApiError(status, FLAG.sub("", str(exc)), field=getattr(exc, "field", None))


#: A command-line flag's dashes, where an engine message names a setting by its flag.
FLAG = re.compile(r"(?<![\w-])--(?=[a-z])")

CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
         409: "conflict", 413: "too_large", 415: "unsupported_media_type", 422: "invalid", 429: "busy",
         500: "internal", 503: "unavailable"}


def error_body(status: int, message: str, *, field: str | None = None, code: str | None = None,
               errors: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"status": status, "code": code or CODES.get(status, "error"),
                             "field": None if field is None else shown(field), "message": shown(message, MESSAGE_CHARS)}
    if errors:
        error["errors"] = errors
    return {"schema_version": API_SCHEMA_VERSION, "error": error}


def field_path(loc: tuple[Any, ...] | list[Any]) -> str | None:
    """A validation error's location as one field name: ``("body", "cases", 0, "condition")`` is
    ``cases[0].condition``; where it is in the request (body, query, path) is left out, unless the error is
    about the whole body (``("body",)`` is ``body``). Cut as an error quotes input (a key may be long)."""
    parts = list(loc)
    where = parts[0] if parts and parts[0] in ("body", "query", "path", "header") else None
    if where is not None:
        parts = parts[1:]
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part).startswith(("function-", "tagged-union")):
            continue
        else:
            out += ("." if out else "") + str(part)
    return shown(out) if out else ("body" if where == "body" else None)
