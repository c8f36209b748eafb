"""A JSON request body, decoded once by the rules a cases file's JSON follows, before any route reads it.

Two things JSON can say that the service will not guess at: a key given twice in one object (the last
value would win without a word; a cases file refuses the row, "which value is meant cannot be told"),
and a text that is not UTF-8 (JSON can spell a lone surrogate such as ``"\\ud800"``, which no UTF-8
text holds: it cannot be hashed, stored or sent back). Either is a 422 naming the field, for every
field of every route that takes a JSON body, the same words as a cases file's row gets. The routers
take :class:`JsonBodyRoute`; a route without a JSON body (a job's upload streams its file) is left
as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from anchor.jsonl import keyed_object, repeated_key
from anchor.serve.errors import ApiError, field_path, shown

NOT_UTF8 = "is not valid UTF-8 text (bytes that are not characters)"


def is_json(media: str) -> bool:
    """Whether a Content-Type (its media type, lower case) says JSON, as FastAPI reads it."""
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _utf8(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def body_refusal(value: Any) -> ApiError | None:
    """The first problem of a decoded body, in document order (a repeated key, a text that is not UTF-8),
    as the 422 that names its field; None when there is none. Walked without recursion: a body may be
    nested as deep as the decoder allows."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, dict):
            if not all(_utf8(key) for key in item):
                here = field_path(("body", *where)) or "body"
                return ApiError(422, f"a key of {here} {NOT_UTF8}", field=here)
            twice = repeated_key(item)
            if twice is not None:
                return ApiError(422, f"the key {shown(twice)!r} appears twice in the object (which value is meant "
                                     "cannot be told)", field=field_path(("body", *where, twice)))
            stack.extend(reversed([((*where, key), inner) for key, inner in item.items()]))
        elif isinstance(item, list):
            stack.extend(reversed([((*where, i), inner) for i, inner in enumerate(item)]))
        elif isinstance(item, str) and not _utf8(item):
            here = field_path(("body", *where)) or "body"
            return ApiError(422, f"{here} {NOT_UTF8}", field=here)
    return None


class _CheckedJsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            value = json.loads(await self.body(), object_pairs_hook=keyed_object)
            refusal = body_refusal(value)
            if refusal is not None:
                raise refusal
            self._json = value
        return self._json


class JsonBodyRoute(APIRoute):
    """A route whose JSON body is decoded and checked (the module docstring) before FastAPI reads it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler

        async def checked(request: Request) -> Response:
            request = _CheckedJsonRequest(request.scope, request.receive)
            if is_json(request.headers.get("content-type", "").split(";")[0].strip().lower()):
                try:
                    await request.json()
                except (ApiError, StarletteHTTPException):
                    raise  # a refusal (or a body over the limit): answered as the route's own error
                except Exception:  # noqa: BLE001 - not JSON, or a client gone: FastAPI meets it again and answers
                    pass
            return await handler(request)

        return checked
