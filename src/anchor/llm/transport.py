"""Sending requests: the base of ``LLMClient`` that talks to the backend.

One request at a time goes out under the client's concurrency limit (``anchor.llm.parallel``: at
most ``--concurrency``, fewer against a server that shows it queues them), is retried with
exponential back-off and jitter on transient failures (honouring ``Retry-After``), and leaves one
ledger record per attempt, announced before it is sent; the record of an attempt it gives up on says
so (``gave_up``), so that the ledger can count logical requests apart from attempts. Every attempt
lengthens the caller's chain of dependent requests (``llm.chain``) by its time.
Caching, validation and re-asking live in ``anchor.llm.client``.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from anchor.errors import FatalBackendError, RetryBudgetExhausted, TransientBackendError
from anchor.llm import chain
from anchor.llm.base import (
    Backend,
    Message,
    MultiCompletion,
    RawCompletion,
    Refusal,
    SamplingBackend,
    unwatch_attempt,
    watching_attempt,
)
from anchor.llm.context import estimate_prompt_tokens
from anchor.llm.ledger import CallRecord, CostLedger
from anchor.llm.parallel import ParallelLimit, RequestSlots
from anchor.secrets import scrub

#: Why a request was asked again in another shape (``format_rejected`` records).
FORMAT_REFUSED = "the server refused the response_format; asked again in a simpler format"
N_REFUSED = "the server refused a request for several answers (n); asked for one"


class Transport:
    """The backend, the ledger and the retry and concurrency settings of a client."""

    def __init__(
        self,
        backend: Backend,
        *,
        ledger: CostLedger | None,
        transport_retries: int,
        backoff_base: float,
        backoff_max: float,
        retry_after_max: float,
        max_concurrency: int | None,
        sleep: Callable[[float], Awaitable[None]],
    ) -> None:
        self.backend = backend
        self.ledger = ledger if ledger is not None else CostLedger()
        self.transport_retries = transport_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.retry_after_max = retry_after_max
        limit = backend.max_parallel if max_concurrency is None else min(max_concurrency, backend.max_parallel)
        self._limit = max(1, limit)
        self.parallel = ParallelLimit(self._limit, name=scrub(getattr(backend, "name", "the server")))
        self._slots: dict[int, RequestSlots] = {}
        self._sleep = sleep
        self._checked_sampling: Backend | None = None

    @property
    def concurrency(self) -> int:
        """Most requests this client has in flight at once (``--concurrency``; ``parallel.limit`` is
        what it allows now)."""
        return self._limit

    def _request_slots(self) -> RequestSlots:
        # One per event loop: what waits in it belongs to the loop that runs it.
        loop_id = id(asyncio.get_running_loop())
        slots = self._slots.get(loop_id)
        if slots is None:
            slots = self._slots[loop_id] = RequestSlots(self.parallel)
        return slots

    def _record(self, stage: str, outcome: str, raw: Timed, detail: str) -> None:
        self.ledger.record(CallRecord(
            stage=stage, outcome=outcome, samples=1,  # type: ignore[arg-type]
            prompt_tokens=raw.completion.prompt_tokens, completion_tokens=raw.completion.completion_tokens,
            seconds=raw.seconds, started=raw.started, detail=scrub(detail)[:300], request_id=raw.request_id,
            **chain_fields(raw.ended)))

    def _backoff(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.retry_after_max)
        cap = min(self.backoff_max, self.backoff_base * (2 ** retry))
        return random.uniform(cap / 2, cap)  # "equal jitter": never zero, never synchronised

    async def _send(self, stage: str, messages: list[Message], **kwargs: Any) -> Timed:
        return await self._transmit(stage, lambda: self.backend.complete(messages, **kwargs),
                                    estimate_prompt_tokens(messages))

    async def _send_choices(self, stage: str, messages: list[Message], **kwargs: Any) -> TimedMulti:
        backend = self.backend
        if backend is not self._checked_sampling:
            # Checked once per backend: isinstance against a runtime Protocol walks its members every time.
            assert isinstance(backend, SamplingBackend)
            self._checked_sampling = backend
        timed = await self._transmit(stage, lambda: backend.complete_choices(messages, **kwargs),
                                     estimate_prompt_tokens(messages))
        return TimedMulti(timed.completion, timed.seconds, timed.started,  # type: ignore[arg-type]
                          timed.request_id, timed.ended)

    async def _transmit(self, stage: str, call: Callable[[], Awaitable[Any]], prompt_tokens: int) -> Timed:
        """One request (``call``, whose prompt is about ``prompt_tokens`` long) under the concurrency
        limit, retried on transient failures; each attempt lengthens the chain of dependent requests."""
        last_error = ""
        for retry in range(self.transport_retries + 1):
            started = time.perf_counter()
            wall = 0.0
            request_id = uuid.uuid4().hex[:16]
            noted = _Attempt(self, stage, request_id, prompt_tokens)
            try:
                async with self._request_slots() as slots:
                    started, wall = time.perf_counter(), time.time()
                    noted.began(started, wall)
                    # Announced before it is sent: a process killed while waiting leaves this record
                    # alone, an interrupted request (see ledger.collapse_sent). A backend that says when
                    # its request leaves (it may first wait for the verdict on the output format) is
                    # announced then.
                    if not getattr(self.backend, "notes_sending", False):
                        noted.sending()
                    watching = watching_attempt(noted)
                    try:
                        completion = await self._timed(slots, stage, call)
                    finally:
                        unwatch_attempt(watching)
                fallbacks = getattr(completion, "format_fallbacks", 0)
                refused = getattr(completion, "n_refused", 0)
                elapsed = time.perf_counter() - started
                ended = chain.advance(elapsed, 1 + fallbacks + refused)
                self._record_fallbacks(stage, fallbacks - noted.counts["format"], wall, ended)
                self._record_fallbacks(stage, refused - noted.counts["n"], wall, ended, N_REFUSED)
                return Timed(completion, elapsed, wall, request_id, ended)
            except TransientBackendError as exc:
                elapsed = time.perf_counter() - started
                fallbacks = getattr(exc, "format_fallbacks", 0)
                ended = chain.advance(elapsed, 1 + fallbacks)
                self._record_fallbacks(stage, fallbacks - noted.counts["format"], wall, ended)
                last_error = scrub(str(exc))
                self.ledger.record(CallRecord(stage=stage, outcome="transient_error", seconds=elapsed, started=wall,
                                              detail=last_error[:300], request_id=request_id,
                                              gave_up=retry == self.transport_retries, **chain_fields(ended)))
                if retry < self.transport_retries:
                    await self._sleep(self._backoff(retry, exc.retry_after))
            except FatalBackendError as exc:
                elapsed = time.perf_counter() - started
                fallbacks = getattr(exc, "format_fallbacks", 0)
                ended = chain.advance(elapsed, 1 + fallbacks)
                self._record_fallbacks(stage, fallbacks - noted.counts["format"], wall, ended)
                message = scrub(str(exc))
                self.ledger.record(CallRecord(stage=stage, outcome="fatal_error", started=wall, request_id=request_id,
                                              seconds=elapsed, detail=message[:300], **chain_fields(ended)))
                raise type(exc)(f"stage '{stage}': {message}") from exc
        raise RetryBudgetExhausted(
            f"stage '{stage}': {self.transport_retries + 1} attempts to reach {scrub(self.backend.name)} failed; "
            f"last error: {last_error}"
        )

    async def _timed(self, slots: RequestSlots, stage: str, call: Callable[[], Awaitable[Any]]) -> Any:
        """``call()``, its latency shown to the concurrency limit (a time-out's too). Not while the backend
        was finding out what the server accepts: requests then wait for that, not for the server."""
        learning = getattr(self.backend, "learning", False)
        started = time.perf_counter()
        try:
            completion = await call()
        except TransientBackendError as exc:
            if exc.kind == "timeout" and not learning:
                slots.observe(stage, time.perf_counter() - started)
            raise
        if not learning:
            slots.observe(stage, time.perf_counter() - started)
        return completion

    def _record_fallbacks(self, stage: str, n: int, wall: float, ended: chain.Chain, detail: str = FORMAT_REFUSED,
                          ) -> None:
        """Requests the backend spent finding a request shape the server accepts (a structured-output
        format, or one answer instead of several): the server received them, so they are counted. Those
        the backend noted as they happened were recorded then (:class:`_Attempt`); these are the others."""
        for _ in range(n):
            self.ledger.record(CallRecord(stage=stage, outcome="format_rejected", started=wall, detail=detail,
                                          **chain_fields(ended)))



class _Attempt:
    """One attempt at a request, as its backend tells of it (``base.note_sending``, ``note_refused``): its
    "sent" record goes out once, as the request leaves; each refusal of its shape is recorded as it happens
    (the next try may be cut off by a kill, and the server received this one), with the chain it ended:
    the attempt's requests so far."""

    def __init__(self, transport: Transport, stage: str, request_id: str, prompt_tokens: int) -> None:
        self.transport = transport
        self.stage = stage
        self.request_id = request_id
        self.prompt_tokens = prompt_tokens
        self.counts = {"format": 0, "n": 0}
        self.started = 0.0
        self.wall = 0.0
        self.announced = False

    def began(self, started: float, wall: float) -> None:
        self.started, self.wall = started, wall

    def sending(self) -> None:
        if not self.announced:
            self.announced = True
            self.transport.ledger.announce(CallRecord(stage=self.stage, outcome="sent", started=self.wall,
                                                      request_id=self.request_id,
                                                      estimated_prompt_tokens=self.prompt_tokens))

    def refused(self, kind: Refusal) -> None:
        self.counts[kind] += 1
        now = chain.current()
        ended = chain.Chain(now.requests + sum(self.counts.values()),
                            round(now.seconds + max(0.0, time.perf_counter() - self.started), 6))
        self.transport.ledger.record(CallRecord(stage=self.stage, outcome="format_rejected", started=self.wall,
                                                detail=FORMAT_REFUSED if kind == "format" else N_REFUSED,
                                                **chain_fields(ended)))


@dataclass
class Timed:
    """A completion with when its request started, how long it took, and the chain it ended."""

    completion: RawCompletion
    seconds: float
    started: float = 0.0
    request_id: str = ""
    ended: chain.Chain = chain.Chain()


@dataclass
class TimedMulti:
    """The same for a request answered with several choices."""

    completion: MultiCompletion
    seconds: float
    started: float = 0.0
    request_id: str = ""
    ended: chain.Chain = chain.Chain()


def chain_fields(ended: chain.Chain) -> dict[str, Any]:
    """The CallRecord fields of the chain a request ended."""
    return {"chain_requests": ended.requests, "chain_seconds": ended.seconds}
