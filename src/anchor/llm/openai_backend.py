"""Backend for any OpenAI-compatible chat server (vLLM, Ollama, llama.cpp server, OpenAI, DeepSeek).

It uses the official ``openai`` SDK with the SDK's own retries switched off: the client in
``anchor.llm.client`` retries, so every attempt is visible in the cost ledger.

What a server accepts is learnt once: the structured-output format (``FORMAT_MODES``, best first,
moving down when the server refuses one) and whether it honours ``n``. Until a format has been
accepted, only one request at a time tries it and the others wait for its verdict, so a server
that refuses ``json_schema`` refuses one request, not one per request in flight; the same holds
for the first request for several answers. The verdicts are remembered per server and model in
the cache directory (``anchor.llm.memory``), so the next process starts where this one ended.

Requests go through the SDK's aiohttp client by default (``http_client="aiohttp"``, the SDK's
``openai[aiohttp]`` extra), or through its default httpx one (``"httpx"``). The reason is CPU: the
httpx connection pool checks the socket of every idle connection each time a request starts or
ends, so with a few hundred requests in flight that check took a quarter to two fifths of the event
loop's time (docs/speed.md). The two clients send the same requests and get the same answers.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
from collections.abc import Callable
from typing import Any

import openai

from anchor.errors import (
    BackendError,
    ConfigurationError,
    FatalBackendError,
    RequestRejected,
    TransientBackendError,
)
from anchor.llm.base import Message, MultiCompletion, RawCompletion, TokenLogprob, note_refused, note_sending
from anchor.llm.context import DEFAULT_SERVER_CONTEXT_TOKENS
from anchor.llm.endpoint import HTTP_CLIENTS, retry_after_seconds, sdk_endpoint
from anchor.llm.memory import ServerMemory
from anchor.secrets import display_url, register, register_url, scrub

log = logging.getLogger("anchor.llm")

#: Said when the aiohttp client cannot be made.
AIOHTTP_HINT = "pip install 'openai[aiohttp]', or set ANCHOR_LLM_HTTP_CLIENT=httpx"

#: Ways of asking for structured output, best first. Servers differ: OpenAI, vLLM and Ollama take
#: "json_schema"; llama-cpp-python's server only takes "json_object" with a "schema" field; a
#: server with neither gets the schema in the prompt and its answer is validated all the same.
FORMAT_MODES = ("json_schema", "json_object", "prompt")


class OpenAICompatibleBackend:
    """Chat completions against ``base_url`` with structured output via ``response_format``."""

    #: It tells the transport as each request leaves (``base.note_sending``), and each refusal.
    notes_sending = True

    def __init__(
        self,
        base_url: str,
        model: str | None,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_parallel: int = 8,
        strict_schema: bool = False,
        context_tokens: int = DEFAULT_SERVER_CONTEXT_TOKENS,
        memory: ServerMemory | None = None,
        http_client: str = "aiohttp",
    ) -> None:
        if http_client not in HTTP_CLIENTS:
            raise ConfigurationError(f"http_client must be one of {', '.join(HTTP_CLIENTS)}, got {http_client!r}")
        self.http_client = http_client
        self._aiohttp = _aiohttp_client() if http_client == "aiohttp" else None
        if not base_url.startswith(("http://", "https://")):
            raise ConfigurationError(f"base URL must start with http:// or https://, got {base_url!r}")
        # The URL as given goes to the SDK only (its query as parameters: see ``anchor.llm.endpoint``);
        # everything shown or stored uses ``url``, which carries no credentials (user:password@, ?key=...).
        self._base_url = base_url.rstrip("/")
        register_url(self._base_url)
        register(api_key)
        self.url = display_url(self._base_url)
        self._endpoint = sdk_endpoint(self._base_url, api_key, url_flag="--base-url", key_flag="--api-key")
        self._model = model
        self.max_parallel = max_parallel
        self.strict_schema = strict_schema
        if context_tokens < 256:
            raise ConfigurationError(f"context size must be at least 256 tokens, got {context_tokens}")
        # The server's context window as configured here: prompts are fitted to it by estimate.
        self.context_tokens = context_tokens
        self._timeout = timeout
        self.format_mode = FORMAT_MODES[0]
        # Has a request in ``format_mode`` been accepted (here or by an earlier process)?
        self.format_settled = False
        # Does the server answer n > 1 with n choices? Learnt from the first such request.
        self.honours_n: bool | None = None
        self._memory = memory
        self._recalled: dict[str, object] | None = None  # what the memory holds for this server and model
        self._clients: dict[int, openai.AsyncOpenAI] = {}
        self._gates: dict[int, dict[str, asyncio.Lock]] = {}

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.url}"

    @property
    def kind(self) -> str:
        """What answers are cached under: not the address, which may change between runs."""
        return "openai-compatible"

    @property
    def cache_aliases(self) -> tuple[str, ...]:
        """Backend names earlier versions keyed cached answers by (the kind and the full base URL),
        looked up when the current key misses so that existing caches keep working."""
        return (f"{self.kind}:{self._base_url}",)

    @property
    def _client(self) -> openai.AsyncOpenAI:
        # The SDK's connection pool belongs to the event loop that created it; keep one per loop
        # so callers may use several ``asyncio.run`` calls in one process.
        loop_id = id(asyncio.get_running_loop())
        client = self._clients.get(loop_id)
        if client is None:
            # Local servers ignore the key, but the SDK insists on having one.
            end = self._endpoint
            client = openai.AsyncOpenAI(base_url=end.base_url, api_key=end.api_key or "not-needed",
                                        default_query=end.query or None, default_headers=end.headers or None,
                                        timeout=self._timeout, max_retries=0, http_client=self._http())
            self._clients[loop_id] = client
        return client

    def _http(self) -> Any:
        """A new HTTP client for the SDK (its aiohttp one), or None for the SDK's default (httpx)."""
        if self._aiohttp is None:
            return None
        try:
            return self._aiohttp()
        except RuntimeError as exc:  # the SDK's own words when aiohttp is not installed
            raise ConfigurationError(
                f"the openai SDK's aiohttp client is not available ({exc}): {AIOHTTP_HINT}") from None

    @property
    def model(self) -> str:
        if self._model is None:
            raise ConfigurationError(
                "no model configured: pass --model or set ANCHOR_LLM_MODEL (or call resolve_model())"
            )
        return self._model

    @property
    def supports_logprobs(self) -> bool:
        return True  # most servers do; a server that does not is detected per response

    async def resolve_model(self) -> str:
        """Pick the server's first listed model when none was configured."""
        if self._model is not None:
            return self._model
        try:
            page = await self._client.models.list()
        except openai.APIConnectionError as exc:  # time-outs included
            raise ConfigurationError(f"cannot reach {self.url}: {scrub(str(_wire_error(exc)))}") from exc
        except openai.APIStatusError as exc:
            raise ConfigurationError(
                f"{self.url} did not list its models (HTTP {exc.status_code}); pass --model"
            ) from exc
        ids = [m.id for m in page.data]
        if not ids:
            raise ConfigurationError(f"{self.url} lists no models; pass --model")
        self._model = ids[0]
        return self._model

    def _recall(self) -> None:
        """Start from what the server accepted before (once; the model is known by now)."""
        if self._recalled is not None:
            return
        facts = self._memory.recall(self.url, self.model) if self._memory is not None else None
        self._recalled = facts.model_dump() if facts is not None else {}
        if facts is not None and facts.format_mode in FORMAT_MODES:
            self.format_mode, self.format_settled = facts.format_mode, True
        if facts is not None and facts.honours_n is not None and self.honours_n is None:
            self.honours_n = facts.honours_n

    def _remember(self, **facts: object) -> None:
        assert self._recalled is not None
        news = {k: v for k, v in facts.items() if self._recalled.get(k) != v}
        if news and self._memory is not None:
            self._recalled.update(news)
            self._memory.remember(self.url, self.model, **news)

    @property
    def learning(self) -> bool:
        """Is a request finding out what the server accepts (others may be waiting for its verdict)?"""
        return any(lock.locked() for gates in self._gates.values() for lock in gates.values())

    def _gate(self, what: str) -> asyncio.Lock:
        """The lock held by the one request that finds out ``what`` (per event loop, as asyncio wants)."""
        gates = self._gates.setdefault(id(asyncio.get_running_loop()), {})
        return gates.setdefault(what, asyncio.Lock())

    async def complete(
        self,
        messages: list[Message],
        *,
        json_schema: dict[str, Any] | None,
        schema_name: str,
        temperature: float,
        max_tokens: int,
        seed: int | None,
        top_logprobs: int | None,
    ) -> RawCompletion:
        response, fallbacks = await self._create(messages, json_schema, schema_name, temperature, max_tokens, seed,
                                                 top_logprobs)
        one = self._choices(response, messages, top_logprobs).choices[0]
        return one.model_copy(update={"format_fallbacks": fallbacks}) if fallbacks else one

    async def complete_choices(
        self,
        messages: list[Message],
        *,
        n: int,
        json_schema: dict[str, Any] | None,
        schema_name: str,
        temperature: float,
        max_tokens: int,
        seed: int | None,
    ) -> MultiCompletion:
        """Ask for ``n`` answers in one request; fewer come back from a server that ignores ``n``."""
        if n < 1:
            raise ValueError("n must be >= 1")
        self._recall()
        if n > 1 and self.honours_n is None:
            async with self._gate("n"):  # one request finds out; the others wait for its verdict
                if self.honours_n is None:
                    return await self._choices_of_one_request(messages, n, json_schema, schema_name, temperature,
                                                              max_tokens, seed)
        if n == 1 or self.honours_n is False:
            one = await self.complete(messages, json_schema=json_schema, schema_name=schema_name,
                                      temperature=temperature, max_tokens=max_tokens, seed=seed, top_logprobs=None)
            return MultiCompletion(choices=[one], prompt_tokens=one.prompt_tokens,
                                   completion_tokens=one.completion_tokens, format_fallbacks=one.format_fallbacks)
        return await self._choices_of_one_request(messages, n, json_schema, schema_name, temperature, max_tokens,
                                                  seed)

    async def _choices_of_one_request(self, messages: list[Message], n: int, json_schema: dict[str, Any] | None,
                                      schema_name: str, temperature: float, max_tokens: int,
                                      seed: int | None) -> MultiCompletion:
        try:
            response, fallbacks = await self._create(messages, json_schema, schema_name, temperature, max_tokens,
                                                     seed, None, n=n)
        except RequestRejected as exc:
            if self.honours_n:
                raise
            # Some APIs refuse n > 1 outright (HTTP 400). If the same request without it goes
            # through, that was the reason: stop asking for several answers.
            note_refused("n")
            one = await self.complete(messages, json_schema=json_schema, schema_name=schema_name,
                                      temperature=temperature, max_tokens=max_tokens, seed=seed, top_logprobs=None)
            self._learn_n(False, "refused")
            return MultiCompletion(choices=[one], prompt_tokens=one.prompt_tokens,
                                   completion_tokens=one.completion_tokens, n_refused=1,
                                   format_fallbacks=getattr(exc, "format_fallbacks", 0) + one.format_fallbacks)
        result = self._choices(response, messages, None)
        self._learn_n(len(result.choices) >= n, f"answered {len(result.choices)} of {n}")
        return MultiCompletion(choices=result.choices[:n], prompt_tokens=result.prompt_tokens,
                               completion_tokens=result.completion_tokens, format_fallbacks=fallbacks)

    def _learn_n(self, honoured: bool, how: str) -> None:
        if self.honours_n is None and not honoured:
            log.warning("%s does not honour n (%s); asking for self-consistency samples one request at a time",
                        self.url, how)
        if self.honours_n is None or not honoured:
            self.honours_n = honoured
        self._remember(honours_n=self.honours_n)

    async def _create(self, messages: list[Message], json_schema: dict[str, Any] | None, schema_name: str,
                      temperature: float, max_tokens: int, seed: int | None, top_logprobs: int | None,
                      n: int = 1) -> tuple[Any, int]:
        """The SDK response, and how many requests were refused for their response format first."""
        self._recall()
        if json_schema is not None and not self.format_settled:
            async with self._gate("format"):  # one request finds the format; the others wait for its verdict
                if not self.format_settled:
                    return await self._send_structured(messages, json_schema, schema_name, temperature, max_tokens,
                                                       seed, top_logprobs, n)
        return await self._send_structured(messages, json_schema, schema_name, temperature, max_tokens, seed,
                                           top_logprobs, n)

    async def _send_structured(self, messages: list[Message], json_schema: dict[str, Any] | None, schema_name: str,
                               temperature: float, max_tokens: int, seed: int | None, top_logprobs: int | None,
                               n: int) -> tuple[Any, int]:
        """One request, sent again in a simpler format each time the server refuses the format."""
        fallbacks = 0
        while True:
            mode = self.format_mode
            kwargs = self._request(messages, json_schema, schema_name, temperature, max_tokens, seed, top_logprobs)
            if n > 1:
                kwargs["n"] = n
            try:
                note_sending()  # the request leaves now (not while it waited for the format's verdict)
                response = await self._post_completion(kwargs)
            except openai.APIStatusError as exc:
                if json_schema is not None and self._rejects_format(exc) and self._downgrade_format(mode):
                    fallbacks += 1
                    note_refused("format")  # recorded now: the next attempt may be cut off
                    continue
                try:
                    self._raise(exc)
                except BackendError as err:
                    err.format_fallbacks = fallbacks  # type: ignore[attr-defined]
                    raise
            except openai.APIConnectionError as exc:  # time-outs included
                raise _wire_error(exc) from exc
            except openai.APIResponseValidationError as exc:
                raise TransientBackendError(f"server sent a malformed response: {exc}", kind="bad_response") from exc
            except (ValueError, TypeError, KeyError) as exc:
                # The SDK could not decode the body (e.g. broken JSON in an HTTP 200).
                raise TransientBackendError(f"server sent an undecodable response: {exc}",
                                            kind="bad_response") from exc
            if json_schema is not None:
                self.format_settled = True
                self._remember(format_mode=mode)  # written once: when it differs from what was remembered
            return response, fallbacks

    async def _post_completion(self, body: dict[str, Any]) -> Any:
        """POST ``body`` to /chat/completions: the request ``chat.completions.create(model=..., messages=[],
        extra_body=body)`` sends, byte for byte, and its parsed ``ChatCompletion``.

        The body goes as is, in ``extra_body`` (the SDK's way to send JSON of one's own, merged over the
        typed parameters): the SDK would otherwise walk every message and the whole JSON schema on every
        request to "transform" them into what they already are. ``create`` still walks its 40-odd typed
        parameters' annotations each time (the ``{model, messages: []}`` it is given is all there is to
        transform): a tenth of the service's event loop with cached conditions, measured with py-spy.
        Posting the same two typed values with the same options skips that walk and nothing else.
        """
        from openai._base_client import make_request_options
        from openai.types.chat import ChatCompletion

        return await self._client.post(
            "/chat/completions", body={"model": body["model"], "messages": []},
            options=make_request_options(extra_body=body, security={"bearer_auth": True}),
            cast_to=ChatCompletion)

    @staticmethod
    def _choices(response: Any, messages: list[Message], top_logprobs: int | None) -> MultiCompletion:
        """Every answer in ``response`` (in index order), with the request's token counts."""
        choices = getattr(response, "choices", None)
        if not choices:
            raise TransientBackendError("server response has no choices", kind="bad_response")
        choices = sorted(choices, key=lambda c: c.index if isinstance(getattr(c, "index", None), int) else 0)
        texts: list[str] = []
        for choice in choices:
            message = getattr(choice, "message", None)
            text = getattr(message, "content", None) if message is not None else None
            if not isinstance(text, str):
                raise TransientBackendError("server response has no message content", kind="bad_response")
            texts.append(text)
        usage = getattr(response, "usage", None)
        prompt_tokens = getattr(usage, "prompt_tokens", None) if usage is not None else None
        completion_tokens = getattr(usage, "completion_tokens", None) if usage is not None else None
        if not isinstance(prompt_tokens, int):
            # No usage block: a rough estimate keeps the ledger meaningful (about 4 chars a token).
            prompt_tokens = sum(len(m.get("content", "")) for m in messages) // 4
        if not isinstance(completion_tokens, int):
            completion_tokens = sum(max(1, len(t) // 4) for t in texts)
        shares = _split(completion_tokens, [len(t) for t in texts])
        return MultiCompletion(
            choices=[RawCompletion(text=text, finish_reason=getattr(choice, "finish_reason", None),
                                   prompt_tokens=prompt_tokens, completion_tokens=share,
                                   logprobs=_logprobs(choice) if top_logprobs is not None else None)
                     for choice, text, share in zip(choices, texts, shares, strict=True)],
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)

    def _request(self, messages: list[Message], json_schema: dict[str, Any] | None, schema_name: str,
                 temperature: float, max_tokens: int, seed: int | None, top_logprobs: int | None) -> dict[str, Any]:
        mode = self.format_mode
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": temperature,
                                  "max_tokens": max_tokens}
        if seed is not None:
            kwargs["seed"] = seed
        if json_schema is not None:
            if mode == "json_schema":
                kwargs["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": schema_name, "schema": json_schema, "strict": self.strict_schema},
                }
            else:
                if mode == "json_object":
                    kwargs["response_format"] = {"type": "json_object", "schema": json_schema}
                kwargs["messages"] = _with_schema_hint(messages, json_schema)
        if top_logprobs is not None:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = top_logprobs
        return kwargs

    @staticmethod
    def _rejects_format(exc: openai.APIStatusError) -> bool:
        """Did the server refuse the response_format itself (some report that as 400, 422 or 500)?"""
        if exc.status_code not in (400, 415, 422, 500, 501):
            return False
        text = f"{exc.message} {exc.body}".lower()
        return "response_format" in text or "json_schema" in text

    def _downgrade_format(self, failed: str) -> bool:
        """Move past the mode that failed; False when there is nothing left to try."""
        if self.format_mode != failed:
            return True  # a concurrent request already moved on: retry with the current mode
        i = FORMAT_MODES.index(self.format_mode)
        if i + 1 >= len(FORMAT_MODES):
            return False
        self.format_mode = FORMAT_MODES[i + 1]
        log.warning("%s rejected the structured-output request; falling back to response_format mode %r",
                    self.url, self.format_mode)
        return True

    def _raise(self, exc: openai.APIStatusError) -> None:
        status = exc.status_code
        detail = _short(scrub(str(exc.message)))
        if status == 429 or status == 408 or status == 409 or status >= 500:
            raise TransientBackendError(
                f"HTTP {status}: {detail}", retry_after=retry_after_seconds(exc.response.headers), kind=f"http_{status}"
            ) from exc
        if status in (401, 403):
            raise FatalBackendError(f"HTTP {status} from {self.url}: check the API key ({detail})") from exc
        if status == 404:
            raise FatalBackendError(
                f"HTTP 404 from {self.url}: wrong base URL (it usually ends in /v1) or unknown "
                f"model {self.model!r} ({detail})"
            ) from exc
        raise RequestRejected(f"HTTP {status} from {self.url}: {detail}") from exc

    async def aclose(self) -> None:
        client = self._clients.pop(id(asyncio.get_running_loop()), None)
        if client is not None:
            await client.close()


def _aiohttp_client() -> Callable[[], Any]:
    """The SDK's aiohttp client class, checked when the backend is made: an SDK without it, or no aiohttp
    installed, is refused in one line saying what to install."""
    factory = getattr(openai, "DefaultAioHttpClient", None)
    if factory is None:
        raise ConfigurationError(f"openai {openai.__version__} has no aiohttp client: {AIOHTTP_HINT}")
    if importlib.util.find_spec("aiohttp") is None:
        raise ConfigurationError(
            f"the openai SDK's aiohttp client needs aiohttp, which is not installed: {AIOHTTP_HINT}")
    return factory


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from, outermost first."""
    out: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in out):
        out.append(current)
        current = current.__cause__ or current.__context__
    return out


def _wire_error(exc: openai.APIConnectionError) -> TransientBackendError:
    """No answer came back: a time-out, or a connection error with its innermost cause. The aiohttp client
    calls a refused or dropped connection a time-out too (``_timed_out`` tells them apart)."""
    if isinstance(exc, openai.APITimeoutError) and _timed_out(exc):
        return TransientBackendError(f"request timed out: {exc}", kind="timeout")
    return TransientBackendError(f"connection error: {_root(exc)}", kind="connection")


def _timed_out(exc: BaseException) -> bool:
    """Whether a time-out the SDK reports is one: something in its chain is a ``TimeoutError`` (httpx's and
    aiohttp's time-outs are raised from one or are one). The SDK's aiohttp client maps a refused or dropped
    connection to a time-out as well; such a chain holds no ``TimeoutError``."""
    return any(isinstance(e, TimeoutError) for e in _chain(exc))


def _root(exc: BaseException) -> str:
    """The innermost cause of ``exc``, as its type and message (what actually went wrong on the wire)."""
    inner = _chain(exc)[-1]
    return f"{type(inner).__name__}: {inner}" if str(inner) else type(inner).__name__


def _with_schema_hint(messages: list[Message], schema: dict[str, Any]) -> list[Message]:
    """Spell the schema out in the system message for servers that cannot enforce it."""
    hint = ("Reply with a single JSON value and nothing else. It must match this JSON schema: "
            + json.dumps(schema, separators=(",", ":")))
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system":
        out[0]["content"] = f"{out[0]['content']}\n\n{hint}"
    else:
        out.insert(0, {"role": "system", "content": hint})
    return out


def _logprobs(choice: Any) -> list[TokenLogprob] | None:
    block = getattr(choice, "logprobs", None)
    content = getattr(block, "content", None) if block is not None else None
    if not content:
        return None
    out: list[TokenLogprob] = []
    for item in content:
        top = {alt.token: float(alt.logprob) for alt in (getattr(item, "top_logprobs", None) or [])}
        out.append(TokenLogprob(token=item.token, logprob=float(item.logprob), top=top))
    return out


def _split(total: int, weights: list[int]) -> list[int]:
    """``total`` shared out in proportion to ``weights`` (whole numbers that add up to ``total``):
    the server counts completion tokens per request, not per answer."""
    if len(weights) == 1:
        return [total]
    weight = sum(weights) or len(weights)
    raw = [total * (w or (0 if sum(weights) else 1)) / weight for w in weights]
    out = [int(r) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: raw[i] - out[i], reverse=True)[: total - sum(out)]:
        out[i] += 1
    return out


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."
