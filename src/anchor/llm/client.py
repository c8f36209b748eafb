"""The one LLM client every stage goes through.

It adds what a raw backend lacks: bounded concurrency, retries with exponential back-off and
jitter on transient failures (honouring ``Retry-After``), schema validation with re-asking on
malformed, truncated or schema-violating answers, a persistent response cache and a cost
ledger that records every attempt. Sending (concurrency, retries, ledger records per attempt) is
its base class, ``anchor.llm.transport.Transport``.

Self-consistency samples of one prompt (``ask_samples``) go out as one request for ``n`` answers
when the backend honours ``n``, and as separate requests otherwise. Either way each sample is
cached under its own sample index, and the seed sent for sample ``i`` is ``base + i`` (``base``
derived from the client's seed), which is also how vLLM seeds the ``n`` answers of a request
seeded ``base + first``: a server that is deterministic per seed gives the same answers both ways.
An answer that is unusable (off-schema, truncated) or missing (a server that ignored ``n``) is
asked for again on its own, exactly as it would have been without ``n``.

Every request sent lengthens the caller's chain of dependent requests (``llm.chain``) by its time,
and its record carries the chain it ended; a call answered by an identical request in flight
continues from that request's chain, and a cache hit adds nothing.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from anchor.errors import LLMOutputError, LogprobsUnavailable
from anchor.llm import chain
from anchor.llm.base import Backend, Message, SamplingBackend, TokenLogprob
from anchor.llm.cache import CachedResponse, ResponseCache, cache_key, legacy_keys
from anchor.llm.ledger import SHARED_DETAIL, CallRecord, CostLedger
from anchor.llm.prompt import PromptSpec
from anchor.llm.structured import OutputInvalid, inline_schema, parse_structured
from anchor.llm.transport import Transport, chain_fields
from anchor.secrets import scrub
from anchor.types import LLMIdentity

T = TypeVar("T", bound=BaseModel)

#: Extra semantic check on a parsed answer; raise ``ValueError`` to have the model asked again.
Check = Callable[[Any], None]


@dataclass
class Answer(Generic[T]):
    parsed: T | None
    text: str
    cached: bool
    prompt_tokens: int
    completion_tokens: int
    logprobs: list[TokenLogprob] | None = None


class LLMClient(Transport):
    """Configured once, shared by every stage of a run."""

    def __init__(
        self,
        backend: Backend,
        *,
        cache: ResponseCache | None = None,
        ledger: CostLedger | None = None,
        seed: int = 0,
        parse_retries: int = 20,
        transport_retries: int = 6,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        retry_after_max: float = 120.0,
        max_concurrency: int | None = None,
        samples_per_request: int = 16,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if parse_retries < 0 or transport_retries < 0:
            raise ValueError("retry counts must be >= 0")
        if samples_per_request < 1:
            raise ValueError("samples_per_request must be >= 1")
        super().__init__(backend, ledger=ledger, transport_retries=transport_retries, backoff_base=backoff_base,
                         backoff_max=backoff_max, retry_after_max=retry_after_max,
                         max_concurrency=max_concurrency, sleep=sleep)
        self.cache = cache
        self.seed = seed
        self.parse_retries = parse_retries
        self.samples_per_request = samples_per_request
        self._inflight_by_loop: dict[int, dict[str, asyncio.Future[Any]]] = {}
        self._ready = False

    # ------------------------------------------------------------------ identity

    @property
    def identity(self) -> LLMIdentity:
        return LLMIdentity(backend=self.backend.name, model=self.backend.model)

    async def ensure_ready(self) -> None:
        """Resolve lazily-configured parts of the backend (e.g. the server's default model)."""
        if self._ready:
            return
        resolve = getattr(self.backend, "resolve_model", None)
        if resolve is not None:
            await resolve()
        self._ready = True

    def with_seed(self, seed: int) -> LLMClient:
        """A client that shares backend, cache and ledger but samples with another seed."""
        clone = LLMClient(
            self.backend,
            cache=self.cache,
            ledger=self.ledger,
            seed=seed,
            parse_retries=self.parse_retries,
            transport_retries=self.transport_retries,
            backoff_base=self.backoff_base,
            backoff_max=self.backoff_max,
            retry_after_max=self.retry_after_max,
            samples_per_request=self.samples_per_request,
            sleep=self._sleep,
        )
        clone._limit = self._limit
        clone.parallel, clone._slots = self.parallel, self._slots
        clone._ready = self._ready
        return clone

    async def aclose(self) -> None:
        """Release network connections held for the running event loop."""
        await self.backend.aclose()

    # ------------------------------------------------------------------ public calls

    async def ask(
        self,
        prompt: PromptSpec[T],
        *,
        sample_index: int = 0,
        temperature: float | None = None,
        max_tokens: int | None = None,
        check: Check | None = None,
        schema: type[T] | None = None,
        **values: Any,
    ) -> T:
        """Render ``prompt`` with ``values`` and return its validated, parsed answer.

        ``schema`` overrides (or, for request-dependent prompts, supplies) the answer schema.
        """
        schema = schema or prompt.schema
        if schema is None:
            raise TypeError(f"prompt '{prompt.stage}' has a request-dependent schema; pass schema=")
        answer = await self.complete(
            prompt.stage,
            prompt.render(**values),
            schema=schema,
            temperature=prompt.temperature if temperature is None else temperature,
            max_tokens=max_tokens or prompt.max_tokens,
            sample_index=sample_index,
            check=check,
        )
        assert answer.parsed is not None
        return answer.parsed

    async def ask_samples(
        self,
        prompt: PromptSpec[T],
        *,
        samples: int,
        first_sample: int = 0,
        temperature: float | None = None,
        max_tokens: int | None = None,
        check: Check | None = None,
        schema: type[T] | None = None,
        **values: Any,
    ) -> list[T]:
        """``samples`` independent answers to one prompt (sample indices ``first_sample`` onwards),
        in sample order; as many requests as the backend needs (one when it honours ``n``)."""
        schema = schema or prompt.schema
        if schema is None:
            raise TypeError(f"prompt '{prompt.stage}' has a request-dependent schema; pass schema=")
        if samples < 1:
            raise ValueError("samples must be >= 1")
        answers = await self.complete_samples(
            prompt.stage,
            prompt.render(**values),
            schema=schema,
            temperature=prompt.temperature if temperature is None else temperature,
            max_tokens=max_tokens or prompt.max_tokens,
            sample_indices=range(first_sample, first_sample + samples),
            check=check,
        )
        out: list[T] = []
        for answer in answers:
            assert answer.parsed is not None
            out.append(answer.parsed)
        return out

    async def complete(
        self,
        stage: str,
        messages: list[Message],
        *,
        schema: type[T] | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
        sample_index: int = 0,
        check: Check | None = None,
        top_logprobs: int | None = None,
    ) -> Answer[T]:
        """One logical call: cached, retried and validated. ``schema=None`` asks for free text."""
        await self.ensure_ready()
        json_schema = inline_schema(schema) if schema is not None else None
        request = {"model": self.backend.model, "messages": messages, "schema": json_schema,
                   "params": {"temperature": temperature, "max_tokens": max_tokens, "seed": self.seed,
                              "top_logprobs": top_logprobs},
                   "sample_index": sample_index}
        key = cache_key(backend=self.backend.kind, **request)
        if self.cache is not None:
            hit = self.cache.get(key, legacy=functools.partial(legacy_keys, self.backend, request))
            if hit is not None:
                parsed, problem = self._validate(hit.text, schema, check) if schema is not None else (None, None)
                if problem is None:
                    self.ledger.record(CallRecord(stage=stage, outcome="cache_hit", recorded=hit.recorded_cost(key)))
                    return Answer(parsed=parsed, text=hit.text, cached=True, prompt_tokens=hit.prompt_tokens,
                                  completion_tokens=hit.completion_tokens, logprobs=hit.logprobs)
                # A cached answer that no longer validates (schema or check changed): ask again.

        # Identical requests already in flight share one answer: the same question with the same
        # seed must get the same reply, and the model is only run once.
        inflight = self._inflight()
        pending = inflight.get(key)
        if pending is not None:
            answer, ended = await asyncio.shield(pending)
            chain.merge(ended)
            self.ledger.record(CallRecord(stage=stage, outcome="cache_hit", detail=SHARED_DETAIL))
            return Answer(parsed=answer.parsed, text=answer.text, cached=True, prompt_tokens=answer.prompt_tokens,
                          completion_tokens=answer.completion_tokens, logprobs=answer.logprobs)
        future: asyncio.Future[Answer[Any]] = asyncio.get_running_loop().create_future()
        inflight[key] = future
        try:
            answer = await self._ask_backend(stage, messages, key, json_schema, schema, temperature, max_tokens,
                                             sample_index, check, top_logprobs)
        except BaseException as exc:
            if not future.done():
                future.set_exception(exc)
                future.exception()  # mark retrieved: waiters re-raise it, nobody else needs to
            raise
        else:
            future.set_result((answer, chain.current()))
            return answer
        finally:
            inflight.pop(key, None)

    async def complete_samples(
        self,
        stage: str,
        messages: list[Message],
        *,
        schema: type[T],
        temperature: float = 0.0,
        max_tokens: int = 512,
        sample_indices: Sequence[int],
        check: Check | None = None,
    ) -> list[Answer[T]]:
        """One answer per sample index, each cached, retried and validated on its own; the
        uncached ones fetched together when the backend can return several answers per request."""
        await self.ensure_ready()
        indices = list(dict.fromkeys(sample_indices))
        json_schema = inline_schema(schema)
        params = {"temperature": temperature, "max_tokens": max_tokens, "seed": self.seed, "top_logprobs": None}
        requests = {i: {"model": self.backend.model, "messages": messages, "schema": json_schema, "params": params,
                        "sample_index": i} for i in indices}
        keys = {i: cache_key(backend=self.backend.kind, **requests[i]) for i in indices}
        done: dict[int, Answer[T]] = {}
        if self.cache is not None:
            for i in indices:
                hit = self.cache.get(keys[i], legacy=functools.partial(legacy_keys, self.backend, requests[i]))
                if hit is None:
                    continue
                parsed, problem = self._validate(hit.text, schema, check)
                if problem is None:
                    self.ledger.record(CallRecord(stage=stage, outcome="cache_hit", recorded=hit.recorded_cost(keys[i])))
                    done[i] = Answer(parsed=parsed, text=hit.text, cached=True, prompt_tokens=hit.prompt_tokens,
                                     completion_tokens=hit.completion_tokens)
        inflight = self._inflight()
        shared = {i: inflight[keys[i]] for i in indices if i not in done and keys[i] in inflight}
        own = [i for i in indices if i not in done and i not in shared]
        futures: dict[int, asyncio.Future[Answer[Any]]] = {}
        for i in own:
            futures[i] = inflight[keys[i]] = asyncio.get_running_loop().create_future()
        try:
            if own:
                fetched = await self._fetch_samples(stage, messages, own, keys, json_schema, schema, temperature,
                                                    max_tokens, check)
                first_error: BaseException | None = None
                for i in own:
                    result = fetched[i]
                    if isinstance(result, BaseException):
                        futures[i].set_exception(result)
                        futures[i].exception()  # retrieved here; waiters re-raise it
                        first_error = first_error or result
                    else:
                        futures[i].set_result((result, chain.current()))
                        done[i] = result
                if first_error is not None:
                    raise first_error
        except BaseException as exc:
            for future in futures.values():
                if not future.done():
                    future.set_exception(exc)
                    future.exception()
            raise
        finally:
            for i in own:
                inflight.pop(keys[i], None)
        for i, pending in shared.items():
            answer, ended = await asyncio.shield(pending)
            chain.merge(ended)
            self.ledger.record(CallRecord(stage=stage, outcome="cache_hit", detail=SHARED_DETAIL))
            done[i] = Answer(parsed=answer.parsed, text=answer.text, cached=True, prompt_tokens=answer.prompt_tokens,
                             completion_tokens=answer.completion_tokens)
        return [done[i] for i in indices]

    def _batches_samples(self) -> bool:
        return (self.samples_per_request > 1 and isinstance(self.backend, SamplingBackend)
                and self.backend.honours_n is not False)

    async def _fetch_samples(
        self, stage: str, messages: list[Message], indices: list[int], keys: dict[int, str],
        json_schema: dict[str, Any], schema: type[T], temperature: float, max_tokens: int, check: Check | None,
    ) -> dict[int, Answer[T] | BaseException]:
        """Answers for uncached sample indices: contiguous runs of them share a request."""
        if len(indices) == 1 or not self._batches_samples():
            results = await chain.gather(*(
                self._ask_backend(stage, messages, keys[i], json_schema, schema, temperature, max_tokens, i, check,
                                  None) for i in indices), return_exceptions=True)
            return dict(zip(indices, results, strict=True))
        runs: list[list[int]] = []
        for i in sorted(indices):
            if runs and runs[-1][-1] == i - 1 and len(runs[-1]) < self.samples_per_request:
                runs[-1].append(i)
            else:
                runs.append([i])
        out: dict[int, Answer[T] | BaseException] = {}
        for part in await chain.gather(*(
                self._fetch_run(stage, messages, run, keys, json_schema, schema, temperature, max_tokens, check)
                for run in runs), return_exceptions=True):
            if isinstance(part, BaseException):
                raise part
            out.update(part)
        return out

    async def _fetch_run(
        self, stage: str, messages: list[Message], run: list[int], keys: dict[int, str],
        json_schema: dict[str, Any], schema: type[T], temperature: float, max_tokens: int, check: Check | None,
    ) -> dict[int, Answer[T] | BaseException]:
        """Samples ``run`` (consecutive indices) from one request for ``len(run)`` answers, then
        each unusable or missing answer asked for again on its own."""
        if len(run) == 1 or not self._batches_samples():
            results = await chain.gather(*(
                self._ask_backend(stage, messages, keys[i], json_schema, schema, temperature, max_tokens, i, check,
                                  None) for i in run), return_exceptions=True)
            return dict(zip(run, results, strict=True))
        timed = await self._send_choices(stage, messages, n=len(run), json_schema=json_schema,
                                         schema_name=schema.__name__, temperature=temperature,
                                         max_tokens=max_tokens, seed=self._derive_seed(run[0], 0))
        multi = timed.completion
        out: dict[int, Answer[T] | BaseException] = {}
        # Sample index -> (attempt to go on from, token budget, last answer, why it was unusable).
        again: dict[int, tuple[int, int, str, str]] = {}
        problems: list[str] = []
        truncated = 0
        for j, i in enumerate(run):
            if j >= len(multi.choices):
                again[i] = (0, max_tokens, "", "")  # never answered: ask as if n had not been used
                continue
            choice = multi.choices[j]
            if choice.finish_reason == "length":
                truncated += 1
                reason = f"answer truncated at max_tokens={max_tokens}"
                problems.append(f"answer {j + 1}: {reason}")
                again[i] = (1, min(max_tokens * 4, int(max_tokens * 1.5) + 16), choice.text, reason)
                continue
            parsed, problem = self._validate(choice.text, schema, check)
            if problem is not None:
                problems.append(f"answer {j + 1}: {problem}")
                again[i] = (1, max_tokens, choice.text, problem)
                continue
            if self.cache is not None:
                self.cache.put(keys[i], stage, CachedResponse(
                    text=choice.text, prompt_tokens=choice.prompt_tokens, completion_tokens=choice.completion_tokens,
                    seconds=timed.seconds, started=timed.started, request_id=timed.request_id))
            out[i] = Answer(parsed=parsed, text=choice.text, cached=False, prompt_tokens=choice.prompt_tokens,
                            completion_tokens=choice.completion_tokens)
        usable = len(out)
        outcome = "ok" if usable else "truncated" if truncated == len(multi.choices) else "invalid_output"
        detail = "; ".join(problems)
        if len(multi.choices) < len(run):
            detail = f"{len(multi.choices)} of {len(run)} answers returned" + (f"; {detail}" if detail else "")
        self.ledger.record(CallRecord(
            stage=stage, outcome=outcome, samples=len(multi.choices),  # type: ignore[arg-type]
            prompt_tokens=multi.prompt_tokens, completion_tokens=multi.completion_tokens, seconds=timed.seconds,
            started=timed.started, detail=scrub(detail)[:300], request_id=timed.request_id, **chain_fields(timed.ended)))
        if again:
            results = await chain.gather(*(
                self._ask_backend(stage, messages, keys[i], json_schema, schema, temperature, max_tokens, i, check,
                                  None, first_attempt=attempt, budget=budget, last=(text, reason))
                for i, (attempt, budget, text, reason) in again.items()), return_exceptions=True)
            out.update(zip(again, results, strict=True))
        return out

    async def _ask_backend(
        self, stage: str, messages: list[Message], key: str, json_schema: dict[str, Any] | None,
        schema: type[T] | None, temperature: float, max_tokens: int, sample_index: int, check: Check | None,
        top_logprobs: int | None, *, first_attempt: int = 0, budget: int | None = None,
        last: tuple[str, str] = ("", ""),
    ) -> Answer[T]:
        """Attempts ``first_attempt`` onwards at one sample (earlier ones were made elsewhere: a
        shared request whose answer for this sample was ``last``)."""
        budget = max_tokens if budget is None else budget
        last_text, last_reason = last
        attempts = self.parse_retries + 1
        for attempt in range(first_attempt, attempts):
            # Re-asking at temperature 0 tends to reproduce the same broken answer; warm up a little.
            temp = temperature if attempt == 0 else max(temperature, min(1.0, 0.3 + 0.1 * attempt))
            raw = await self._send(
                stage, messages, json_schema=json_schema, schema_name=schema.__name__ if schema else "text",
                temperature=temp, max_tokens=budget, seed=self._derive_seed(sample_index, attempt),
                top_logprobs=top_logprobs,
            )
            last_text = raw.completion.text
            if raw.completion.finish_reason == "length" and schema is not None:
                last_reason = f"answer truncated at max_tokens={budget}"
                self._record(stage, "truncated", raw, last_reason)
                budget = min(max_tokens * 4, int(budget * 1.5) + 16)
                continue
            if top_logprobs is not None and not raw.completion.logprobs:
                self._record(stage, "fatal_error", raw, "no logprobs in response")
                raise LogprobsUnavailable(
                    f"{self.backend.name} ({self.backend.model}) returned no token log-probabilities; "
                    "the Logits baseline needs a backend that supports them"
                )
            parsed: Any = None
            if schema is not None:
                parsed, problem = self._validate(raw.completion.text, schema, check)
                if problem is not None:
                    last_reason = problem
                    self._record(stage, "invalid_output", raw, problem)
                    continue
            # Cached before it is recorded as answered: a kill between the two leaves a request recorded as
            # sent (counted once, as the server saw it) whose answer a resumed run finds in the cache, never
            # one counted as answered that must be asked for again.
            if self.cache is not None:
                self.cache.put(key, stage, CachedResponse(
                    text=raw.completion.text, prompt_tokens=raw.completion.prompt_tokens,
                    completion_tokens=raw.completion.completion_tokens, logprobs=raw.completion.logprobs,
                    seconds=raw.seconds, started=raw.started, request_id=raw.request_id))
            self._record(stage, "ok", raw, "")
            return Answer(parsed=parsed, text=raw.completion.text, cached=False,
                          prompt_tokens=raw.completion.prompt_tokens,
                          completion_tokens=raw.completion.completion_tokens, logprobs=raw.completion.logprobs)
        raise LLMOutputError(stage, attempts, scrub(last_text), scrub(last_reason))

    # ------------------------------------------------------------------ internals

    @staticmethod
    def _validate(text: str, schema: type[T] | None, check: Check | None) -> tuple[T | None, str | None]:
        """``(parsed, None)``, or ``(None, why the answer is not acceptable)``."""
        assert schema is not None
        try:
            parsed = parse_structured(text, schema)
        except OutputInvalid as exc:
            return None, str(exc)
        if check is not None:
            try:
                check(parsed)
            except ValueError as exc:
                return None, f"answer failed the stage's check: {exc}"
        return parsed, None

    def _inflight(self) -> dict[str, asyncio.Future[Any]]:
        loop_id = id(asyncio.get_running_loop())
        table = self._inflight_by_loop.get(loop_id)
        if table is None:
            table = self._inflight_by_loop[loop_id] = {}
        return table

    def _derive_seed(self, sample_index: int, attempt: int) -> int:
        """The seed sent for one attempt at one sample. First attempts are consecutive (``base +
        sample_index``), as vLLM seeds the answers of one ``n`` request; re-asks are scattered."""
        if attempt == 0:
            digest = hashlib.sha256(f"{self.seed}".encode()).digest()
            base = int.from_bytes(digest[:4], "big") & 0x3FFFFFFF  # leaves room for base + index < 2**31
            return (base + sample_index) & 0x7FFFFFFF
        digest = hashlib.sha256(f"{self.seed}:{sample_index}:{attempt}".encode()).digest()
        return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
