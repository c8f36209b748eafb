"""Cost ledger: one record per attempt at an LLM call, summable per stage and per run.

A *logical request* is one request as the caller asked for it, whatever the transport had to do to
get it answered: the attempts the transport retried after a transient failure (HTTP 429 or 5xx, a
time-out, a dropped connection: outcome "transient_error") and the attempts spent finding a request
shape the server accepts ("format_rejected") are attempts, not logical requests. An answer the
client could not use ("invalid_output", "truncated") ends a logical request, and the client's
re-ask with another seed is a new one: a server without faults gives the same unusable answer and
the same re-ask. So a run against a server that fails some attempts makes the same logical
requests as against one that fails none, and more attempts (``CallRecord.ends_request``).

Scopes (``with ledger.scope("label") as records``) collect the records made inside a block,
including from tasks it starts, so a caller can attribute cost to one condition while others run
concurrently; the innermost scope's label is stamped on each record. Subscribers
(``ledger.subscribe(fn)``) see every record as it is made: the run engine writes them to a
durable log and shows retries in its progress line. A ledger whose records reach such a log need not
keep them too (``CostLedger(keep=False)``: a run of a million requests would hold them all).

:class:`CostTally` adds up a log read one record at a time, in the order written (a request's "sent"
record before its outcome), in memory that grows with the stages, not with the records: the costs of
:func:`summarize` and :func:`total`, which use it too.
"""

from __future__ import annotations

import contextvars
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Literal

from pydantic import BaseModel

from anchor.llm import chain
from anchor.types import StageCost

Outcome = Literal["sent", "ok", "cache_hit", "transient_error", "invalid_output", "truncated", "fatal_error",
                  "format_rejected", "interrupted"]
#: The detail of a cache hit answered by an identical request of the same process, still in flight.
SHARED_DETAIL = "shared with an identical request"


class RecordedCost(BaseModel):
    """What the request that produced a cached answer cost, as the response cache recorded it."""

    request_id: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    started: float = 0.0
    entry: str = ""
    """Which cached answer (a prefix of its cache key): one request for several answers left several."""


class CallRecord(BaseModel):
    stage: str
    outcome: Outcome
    samples: int | None = None
    """Answers the backend returned to this request (``n`` > 1 asks for several); None in records
    written before this field existed, read as 1 for a request that got an answer, else 0."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    started: float = 0.0
    """Wall-clock time (``time.time()``) the request was sent; 0 for cache hits."""
    detail: str = ""
    scope: str = ""
    """Label of the innermost ledger scope active when the call was made ("" outside any)."""
    request_id: str = ""
    """Ties the "sent" record of a request to the record of how it ended."""
    estimated_prompt_tokens: int = 0
    """On a "sent" record: the client's estimate of the prompt's tokens (``llm.context``), the only
    size known of a request whose answer never came (the server reports tokens in its answer)."""
    chain_requests: int | None = None
    chain_seconds: float | None = None
    """The chain of dependent requests this request ended (``llm.chain``): how many requests, this
    one included, were sent one after another to get here, and their seconds added up. None on
    cache hits and in records written before these fields existed."""
    gave_up: bool = False
    """On a "transient_error": the transport's last attempt at the request, after which it gave up
    (its retries were spent), so that the logical request ended here unanswered. False on attempts it
    retried, and in records written before this field existed (which cannot tell the two apart)."""
    recorded: RecordedCost | None = None
    """On a cache hit: what the request that produced the answer cost when it was made (by this run or
    another), as the cache recorded it; None when it was not recorded (an answer cached by an earlier
    version) and on a hit shared with a request in flight."""

    @property
    def reached_backend(self) -> bool:
        return self.outcome != "cache_hit"

    @property
    def outcome_known(self) -> bool:
        """A request the run saw answered or failed: not a cache hit, not cut off by a kill."""
        return self.outcome not in ("cache_hit", "interrupted")

    @property
    def ends_request(self) -> bool:
        """Does this record end a logical request (see the module docstring)? An answer (usable or
        not), a fatal error, or a transient failure the transport gave up on; not a retried attempt, a
        refused request shape, a cache hit or a request cut off by a kill."""
        if self.outcome == "transient_error":
            return self.gave_up
        return self.outcome in ("ok", "invalid_output", "truncated", "fatal_error")

    @property
    def sample_count(self) -> int:
        """Answers this request brought back (0 for cache hits, failed transmissions and interrupted requests)."""
        if self.outcome in ("cache_hit", "transient_error", "fatal_error", "interrupted"):
            return 0
        return 1 if self.samples is None else self.samples


_active_scopes: contextvars.ContextVar[tuple[tuple[list[CallRecord], str], ...]] = contextvars.ContextVar(
    "anchor_ledger_scopes", default=()
)

Subscriber = Callable[[CallRecord], None]


class CostLedger:
    """The records of a client's requests. ``keep=False``: the records go to the subscribers and the
    running tally only (a run writes them to calls.jsonl), so that memory does not grow with them."""

    def __init__(self, *, keep: bool = True) -> None:
        self.keep = keep
        self._records: list[CallRecord] = []
        self._lock = threading.Lock()
        self._subscribers: list[Subscriber] = []
        self._tally = _Sums()

    def record(self, record: CallRecord) -> None:
        scopes = _active_scopes.get()
        labels = [label for _, label in scopes if label]
        if labels and not record.scope:
            record.scope = labels[-1]
        with self._lock:
            if self.keep:
                self._records.append(record)
            _add(self._tally, record)
            for bucket, _ in scopes:
                bucket.append(record)
            subscribers = list(self._subscribers)
        for fn in subscribers:
            fn(record)

    def announce(self, record: CallRecord) -> None:
        """Tell subscribers about a request being sent; it is not kept (its outcome record will be)."""
        labels = [label for _, label in _active_scopes.get() if label]
        if labels and not record.scope:
            record.scope = labels[-1]
        with self._lock:
            subscribers = list(self._subscribers)
        for fn in subscribers:
            fn(record)

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        """Call ``fn(record)`` for every record from now on; returns a function that unsubscribes."""
        with self._lock:
            self._subscribers.append(fn)

        def unsubscribe() -> None:
            with self._lock:
                if fn in self._subscribers:
                    self._subscribers.remove(fn)

        return unsubscribe

    @property
    def records(self) -> list[CallRecord]:
        if not self.keep:
            raise RuntimeError("this ledger does not keep its records (keep=False): read them where its "
                               "subscribers wrote them")
        with self._lock:
            return list(self._records)

    @contextmanager
    def scope(self, label: str = "") -> Iterator[list[CallRecord]]:
        """Collect every record made inside this block (and tasks started from it)."""
        bucket: list[CallRecord] = []
        token = _active_scopes.set(_active_scopes.get() + ((bucket, label),))
        try:
            yield bucket
        finally:
            _active_scopes.reset(token)

    def summary(self) -> list[StageCost]:
        return summarize(self.records)

    def total(self) -> StageCost:
        return total(self.records)

    def running(self) -> tuple[int, int, int]:
        """(logical requests, cache hits, tokens) so far: what a progress line shows, at the cost of a lock."""
        with self._lock:
            t = self._tally
            return t.logical_requests, t.cache_hits, t.prompt_tokens + t.completion_tokens

    def tally(self) -> StageCost:
        """Running totals of every record so far, without ``wall_seconds``: O(1), for progress
        displays that would otherwise re-add the whole ledger on every update."""
        with self._lock:
            return self._tally.cost("total")


def detached_context() -> contextvars.Context:
    """A context with no ledger scope active: work run in it is charged to no caller's scope
    (the run engine builds shared artefacts this way, so their cost is counted once)."""
    ctx = contextvars.copy_context()
    ctx.run(_active_scopes.set, ())
    return ctx


def busy_seconds(records: Iterable[CallRecord]) -> float:
    """Length of the union of the records' request intervals: the time at least one was in flight."""
    spans = sorted((r.started, r.started + r.seconds) for r in records if r.started > 0 and r.seconds > 0)
    busy = 0.0
    end = float("-inf")
    for lo, hi in spans:
        if lo > end:
            busy += hi - lo
            end = hi
        elif hi > end:
            busy += hi - end
            end = hi
    return busy


def collapse_sent(records: Iterable[CallRecord]) -> list[CallRecord]:
    """Each request once: a "sent" record is dropped when the request's outcome was recorded too,
    and kept as an *interrupted* request when it was not (the process was killed while waiting).
    Such a request is neither failed nor free: it may never have reached the server, or the server
    may have answered it; only its prompt size is known, by the client's estimate."""
    records = list(records)
    finished = {r.request_id for r in records if r.request_id and r.outcome != "sent"}
    out = []
    for r in records:
        if r.outcome == "sent":
            if r.request_id in finished:
                continue
            r = r.model_copy(update={"outcome": "interrupted", "detail": "the process stopped before an answer came"})
        out.append(r)
    return out


def critical_path(records: Iterable[CallRecord]) -> chain.Chain | None:
    """The longest chain of dependent requests among ``records`` (the longest stamp on a request's
    record); ``Chain(0, 0.0)`` when they hold no request, None when a request's record carries no
    chain (written before chains were recorded)."""
    longest = chain.Chain()
    for r in records:
        if r.outcome in ("cache_hit", "sent", "interrupted"):
            continue
        if r.chain_requests is None or r.chain_seconds is None:
            return None
        longest = longest.longer(chain.Chain(r.chain_requests, r.chain_seconds))
    return longest


def recorded_requests(records: Iterable[CallRecord]) -> tuple[list[CallRecord], int]:
    """The requests behind the cache hits among ``records`` that these records do not hold themselves
    (made by another run, or before a kill left no record of them), each once, as "ok" records with the
    cost the cache recorded for them; and how many such hits have no recorded cost.

    A request for several answers counts its prompt once and the completion of each answer used.
    Only the request that produced an answer is known: failed attempts before it are not.
    """
    records = list(records)
    own = {r.request_id for r in records if r.request_id and r.outcome != "cache_hit"}
    requests: dict[str, CallRecord] = {}
    entries: set[str] = set()
    unrecorded = 0
    for r in records:
        if r.outcome != "cache_hit" or r.detail == SHARED_DETAIL:
            continue
        cost = r.recorded
        if cost is None:
            unrecorded += 1
            continue
        if cost.request_id in own or (cost.entry and cost.entry in entries):
            continue
        entries.add(cost.entry)
        found = requests.get(cost.request_id)
        if found is None:
            requests[cost.request_id] = CallRecord(
                stage=r.stage, outcome="ok", samples=1, prompt_tokens=cost.prompt_tokens,
                completion_tokens=cost.completion_tokens, seconds=cost.seconds, started=cost.started,
                request_id=cost.request_id, scope=r.scope, detail="recorded cost of a cached answer")
        else:
            found.completion_tokens += cost.completion_tokens
            found.samples = (found.samples or 1) + 1
    return list(requests.values()), unrecorded


def summarize(records: Iterable[CallRecord]) -> list[StageCost]:
    """Per-stage totals in first-seen stage order (each request counted once, see ``collapse_sent``)."""
    return CostTally.of(collapse_sent(records)).stages()


def total(records: Iterable[CallRecord], label: str = "total") -> StageCost:
    return CostTally.of(collapse_sent(records)).total(label)


class CostTally:
    """Costs added up one record at a time, as a log is read in the order it was written: a "sent" record
    is held until its request's outcome comes (then dropped), and those still held at the end are
    interrupted requests (:func:`collapse_sent`). Memory: the requests in flight at a time, and two
    numbers a request for the busy time."""

    def __init__(self) -> None:
        self._stages: dict[str, _Sums] = {}
        self._all = _Sums()
        self._first: dict[str, int] = {}
        self._spans: dict[str, tuple[array[float], array[float]]] = {}
        self._waiting: dict[str, tuple[int, CallRecord]] = {}
        self._unnamed: list[tuple[int, CallRecord]] = []
        self._n = 0

    @classmethod
    def of(cls, records: Iterable[CallRecord]) -> CostTally:
        tally = cls()
        for rec in records:
            tally.add(rec)
        return tally

    def add(self, rec: CallRecord) -> None:
        at, self._n = self._n, self._n + 1
        if rec.outcome == "sent":
            if rec.request_id:
                self._waiting[rec.request_id] = (at, rec)
            else:
                self._unnamed.append((at, rec))  # no id to end it: interrupted, whatever follows
            return
        if rec.request_id:
            self._waiting.pop(rec.request_id, None)
        self._count(at, rec)

    def _count(self, at: int, rec: CallRecord) -> None:
        cost = self._stages.get(rec.stage)
        if cost is None:
            cost = self._stages[rec.stage] = _Sums()
            self._spans[rec.stage] = (array("d"), array("d"))
        self._first[rec.stage] = min(at, self._first.get(rec.stage, at))
        _add(cost, rec)
        _add(self._all, rec)  # record by record, as the stages: the same rounding of the seconds
        if rec.started > 0 and rec.seconds > 0:
            lo, hi = self._spans[rec.stage]
            lo.append(rec.started)
            hi.append(rec.started + rec.seconds)

    def _settle(self) -> None:
        """Count the requests still held as interrupted (their outcome never came)."""
        held = sorted([*self._waiting.values(), *self._unnamed], key=lambda item: item[0])
        self._waiting, self._unnamed = {}, []
        for at, rec in held:
            self._count(at, rec.model_copy(update={"outcome": "interrupted",
                                                   "detail": "the process stopped before an answer came"}))

    def stages(self) -> list[StageCost]:
        """Per-stage totals in first-seen stage order, with each stage's busy time."""
        self._settle()
        out = []
        for stage in sorted(self._stages, key=self._first.__getitem__):
            cost = self._stages[stage].cost(stage)
            cost.wall_seconds = round(_busy(*self._spans[stage]), 6)
            out.append(cost)
        return out

    def total(self, label: str = "total") -> StageCost:
        """Every stage added up, with the time at least one request was in flight."""
        self._settle()
        cost = self._all.cost(label)
        lo, hi = array("d"), array("d")
        for a, b in self._spans.values():
            lo.extend(a)
            hi.extend(b)
        cost.wall_seconds = round(_busy(lo, hi), 6)
        return cost


def _busy(lo: array[float], hi: array[float]) -> float:
    """Length of the union of the intervals [lo[i], hi[i]] (:func:`busy_seconds` on arrays)."""
    import numpy as np  # only where costs are added up

    order = np.lexsort((np.frombuffer(hi, dtype=float), np.frombuffer(lo, dtype=float))) if len(lo) else []
    busy = 0.0
    end = float("-inf")
    for i in order:
        a, b = lo[i], hi[i]
        if a > end:
            busy += b - a
            end = b
        elif b > end:
            busy += b - end
            end = b
    return busy


def merge_costs(costs: Iterable[StageCost], label: str | None = None) -> list[StageCost]:
    """Add up StageCost rows stage by stage (or into one row called ``label``).

    ``wall_seconds`` is summed too, which is exact for rows that never overlapped in time and an
    upper bound otherwise; compute it from the records (``summarize``) when they are at hand. The
    logical requests of a sum are unknown (None) when those of one row are (a cost recorded before
    they were counted).
    """
    out: dict[str, StageCost] = {}
    for c in costs:
        key = label or c.stage
        acc = out.setdefault(key, empty_cost(key))
        acc.llm_calls += c.llm_calls
        acc.logical_requests = (None if acc.logical_requests is None or c.logical_requests is None
                                else acc.logical_requests + c.logical_requests)
        acc.failed_attempts += c.failed_attempts
        acc.interrupted += c.interrupted
        acc.interrupted_prompt_tokens += c.interrupted_prompt_tokens
        acc.samples += c.samples
        acc.cache_hits += c.cache_hits
        acc.prompt_tokens += c.prompt_tokens
        acc.completion_tokens += c.completion_tokens
        acc.llm_seconds = round(acc.llm_seconds + c.llm_seconds, 6)
        acc.wall_seconds = round(acc.wall_seconds + c.wall_seconds, 6)
    return list(out.values())


def empty_cost(stage: str) -> StageCost:
    """A stage's cost before any record: zero of everything, logical requests included (a cost made
    from records always knows them; ``StageCost`` alone leaves them unknown, as in costs read from
    files written before they were counted)."""
    return StageCost(stage=stage, logical_requests=0)


class _Sums:
    """A cost being added up, record by record: plain numbers (a ``StageCost`` checks every assignment, which
    on every request of a run costs more than the rest of the sum), made a ``StageCost`` at the end."""

    __slots__ = ("cache_hits", "completion_tokens", "failed_attempts", "interrupted", "interrupted_prompt_tokens",
                 "llm_calls", "llm_seconds", "logical_requests", "prompt_tokens", "samples")

    def __init__(self) -> None:
        self.llm_calls = self.logical_requests = self.failed_attempts = self.interrupted = 0
        self.interrupted_prompt_tokens = self.samples = self.cache_hits = self.prompt_tokens = 0
        self.completion_tokens = 0
        self.llm_seconds = 0.0

    def cost(self, stage: str) -> StageCost:
        return StageCost(stage=stage, **{name: getattr(self, name) for name in self.__slots__})


def _add(cost: _Sums, rec: CallRecord) -> None:
    if rec.outcome == "cache_hit":
        cost.cache_hits += 1
        return
    if rec.outcome in ("interrupted", "sent"):
        cost.interrupted += 1
        cost.interrupted_prompt_tokens += rec.estimated_prompt_tokens
        return
    cost.llm_calls += 1
    if rec.ends_request:
        cost.logical_requests += 1
    cost.samples += rec.sample_count
    if rec.outcome != "ok":
        cost.failed_attempts += 1
    cost.prompt_tokens += rec.prompt_tokens
    cost.completion_tokens += rec.completion_tokens
    cost.llm_seconds = round(cost.llm_seconds + rec.seconds, 6)
