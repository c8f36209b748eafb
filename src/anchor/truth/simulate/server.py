"""The simulated LLM over HTTP: an OpenAI-compatible chat server (``anchor truth serve``).

Anything that speaks the OpenAI API (``anchor eval/predict --base-url``, the ``openai`` SDK, other
tools) can put its questions to the simulated LLM. The answers are the in-process ones: each request
goes to the same :meth:`SimulatedLLM.answer`, so identical requests get identical answers either way.

* ``GET /v1/models`` lists the one model, named ``sim-<digest of worlds, errors and seed>``;
* ``POST /v1/chat/completions`` honours ``response_format`` (``json_schema``, ``json_object`` with a
  ``schema``, or a schema spelt out in the system message), ``seed``, ``n`` (choice ``j`` is answered
  as the lone request with seed ``seed + j``, as vLLM seeds the choices of one request) and
  ``logprobs``/``top_logprobs`` (in the OpenAI wire format);
* a request the simulator cannot place (an unknown prompt or scenario) gets HTTP 400 with a JSON
  error naming what was not recognised, never a made-up answer; a request for another model, 404.

It is the standard library's ``ThreadingHTTPServer`` with a real accept backlog and Nagle's algorithm
off (headers and body are separate writes; with Nagle on, the body would wait for the client's
delayed ACK).
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from anchor.llm.base import RawCompletion, TokenLogprob
from anchor.truth.simulate.llm import SimulatedLLM
from anchor.truth.simulate.recognise import Unrecognised

#: Most choices one request may ask for.
MAX_N = 128
#: Most alternatives per position one request may ask for (the OpenAI API's limit).
MAX_TOP_LOGPROBS = 20


class BadRequest(ValueError):
    """A request this server refuses (HTTP ``status``), with a message for the client."""

    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


def _schema(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("response_format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict):
        raise BadRequest("the output format must be an object with a 'type'")
    kind = fmt.get("type")
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise BadRequest("a json_schema output format needs json_schema.schema (an object)")
        return schema
    if kind == "json_object":
        schema = fmt.get("schema")
        return schema if isinstance(schema, dict) else None
    if kind == "text":
        return None
    raise BadRequest(f"response_format type {kind!r} is not supported (json_schema, json_object or text)")


def _int(body: dict[str, Any], name: str, default: int | None, lo: int, hi: int) -> int | None:
    value = body.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise BadRequest(f"'{name}' must be a whole number from {lo} to {hi}, got {value!r}")
    return value


def _wire_logprobs(items: list[TokenLogprob]) -> dict[str, Any]:
    def token(t: str, lp: float) -> dict[str, Any]:
        return {"token": t, "logprob": lp, "bytes": list(t.encode("utf-8"))}

    return {"content": [{**token(i.token, i.logprob), "top_logprobs": [token(t, lp) for t, lp in i.top.items()]}
                        for i in items]}


def chat_completion(llm: SimulatedLLM, body: Any) -> dict[str, Any]:
    """The response body to a chat-completions request body (``BadRequest`` / ``Unrecognised`` when refused)."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    model = body.get("model")
    if model != llm.model:
        raise BadRequest(f"model {model!r} is not served here; this server serves {llm.model!r}", status=404,
                         kind="not_found_error")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    n = _int(body, "n", 1, 1, MAX_N)
    seed = _int(body, "seed", None, -(2 ** 63), 2 ** 63 - 1)
    max_tokens = _int(body, "max_completion_tokens", None, 1, 10 ** 6) or _int(body, "max_tokens", 512, 1, 10 ** 6)
    top = _int(body, "top_logprobs", 0, 0, MAX_TOP_LOGPROBS) if body.get("logprobs") else None
    choices: list[RawCompletion] = llm.answers(messages, n=n or 1, json_schema=_schema(body), max_tokens=max_tokens or 512,
                                               seed=seed, top_logprobs=top)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": llm.model,
        "choices": [{"index": j, "message": {"role": "assistant", "content": c.text},
                     "finish_reason": c.finish_reason,
                     "logprobs": _wire_logprobs(c.logprobs) if c.logprobs is not None else None}
                    for j, c in enumerate(choices)],
        "usage": {"prompt_tokens": choices[0].prompt_tokens,
                  "completion_tokens": sum(c.completion_tokens for c in choices),
                  "total_tokens": choices[0].prompt_tokens + sum(c.completion_tokens for c in choices)},
    }


class _Server(ThreadingHTTPServer):
    # A client opening many connections at once must not overflow the accept queue.
    request_queue_size = 256
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # a client that hung up: its right
            return
        super().handle_error(request, client_address)


class SimServer:
    """The HTTP server for one :class:`SimulatedLLM`; ``port=0`` picks a free port. Use ``start()`` /
    ``stop()`` (or ``with``) to run it on a thread, ``serve_forever()`` to run it in the caller's."""

    def __init__(self, llm: SimulatedLLM, host: str = "127.0.0.1", port: int = 0) -> None:
        self.llm = llm
        self.requests = 0
        self._lock = threading.Lock()  # the simulator's caches are filled one request at a time
        self._http = _Server((host, port), self._handler())
        self.host, self.port = self._http.server_address[:2]
        self._thread: threading.Thread | None = None
        self._serving = False

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def answer(self, body: Any) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) for a chat-completions request body."""
        try:
            with self._lock:
                self.requests += 1
                return 200, chat_completion(self.llm, body)
        except BadRequest as exc:
            return exc.status, {"error": {"message": str(exc), "type": exc.kind, "code": None}}
        except Unrecognised as exc:
            return 400, {"error": {"message": f"not recognised by the simulated LLM: {exc}",
                                   "type": "invalid_request_error", "code": "unrecognised_request"}}
        except Exception as exc:  # a bug: the client is told, and the server goes on
            return 500, {"error": {"message": f"the simulated LLM failed: {type(exc).__name__}: {exc}",
                                   "type": "server_error", "code": None}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:
                return

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                route = self.path.partition("?")[0].rstrip("/")
                if route == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": server.llm.model, "object": "model",
                                                                 "created": 0, "owned_by": "anchor-truth"}]})
                elif route in ("/health", "/v1/health"):
                    self._send(200, {"status": "ok", "model": server.llm.model})
                else:
                    self._send(404, {"error": {"message": f"no route {route!r}", "type": "not_found_error"}})

            def do_POST(self) -> None:  # noqa: N802
                route = self.path.partition("?")[0].rstrip("/")
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if route != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {route!r}", "type": "not_found_error"}})
                    return
                try:
                    body = json.loads(raw or b"null")
                except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                    self._send(400, {"error": {"message": f"the request body is not JSON ({exc})",
                                               "type": "invalid_request_error"}})
                    return
                self._send(*server.answer(body))

        return Handler

    def start(self) -> SimServer:
        self._thread = threading.Thread(target=self.serve_forever, name="sim-llm-server", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._serving = True
        self._http.serve_forever()

    def stop(self) -> None:
        if self._serving:  # shutdown() would wait forever for a loop that never ran
            self._http.shutdown()
            self._serving = False
        self._http.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
