"""``GET /metrics``: the service's counters in the Prometheus text format (version 0.0.4), written here.

Requests by route, method and status, and their latency (a histogram by route); LLM requests, cache
hits and tokens by stage and class (online or batch); the budget's requests in flight and waiting (the
queue depth), the online cases waiting for an answer, and jobs by state. Counters are updated from the
server's thread and from the jobs' threads, under one lock.

With ``--workers N`` (:class:`SharedMetrics`) each process counts into files of its own under
``STATE/metrics/`` (``prometheus_client``'s multiprocess mode: memory-mapped, so a count is on disk the
moment it is made), and whichever process answers a scrape adds up every process's files, those of a
process that died included: every request is counted once, whichever process answered it and whichever
answers the scrape. The gauges that are a process's own (requests in flight, waiting, online cases
pending) are written there too, by each process every :data:`PUBLISH_SECONDS` and by the scraping one at
once, and summed over the processes alive. The text is written here as with one process: the same names,
labels and numbers.
"""

from __future__ import annotations

import math
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from anchor.llm.ledger import CallRecord

#: The HTTP methods counted by name; a client chooses the method token, so any other counts as ``other``
#: (a label value is a time series of its own, and no request may add one).
METHOD_LABELS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
#: Upper bounds of the latency histogram, in seconds.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: How often each process of a multi-process service writes its own gauges for the others' scrapes.
PUBLISH_SECONDS = 0.5


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    inner = ",".join(f'{name}="{_label(value)}"' for name, value in pairs)
    return "{" + inner + "}" if inner else ""


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.http = Counter[tuple[str, str, str]]()
        self._latency: dict[str, list[int]] = {}
        self._latency_sum: Counter[str] = Counter()
        self._latency_count: Counter[str] = Counter()
        self.llm_requests = Counter[tuple[str, str, str]]()
        self.llm_cache_hits = Counter[tuple[str, str]]()
        self.llm_tokens = Counter[tuple[str, str, str]]()
        self.gauges: dict[str, Callable[[], Iterable[tuple[dict[str, str], float]]]] = {}
        """Name -> a function giving (labels, value) now (queue depths, jobs by state)."""
        self.help: dict[str, str] = {}
        self.summed: set[str] = set()
        """Gauges that are each process's own (added up over the processes of a multi-process service)."""

    def observe_http(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one request; ``route`` is a route's template or ``unmatched`` (a closed set, as the method
        label is made one here)."""
        method = method if method in METHOD_LABELS else "other"
        with self._lock:
            self.http[(route, method, str(status))] += 1
            buckets = self._latency.setdefault(route, [0] * len(BUCKETS))
            for i, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    buckets[i] += 1
            self._latency_sum[route] += seconds
            self._latency_count[route] += 1

    def call_observer(self, cls: str) -> Callable[[CallRecord], None]:
        """A ledger subscriber counting the LLM requests of class ``cls`` (online or batch)."""

        def observe(record: CallRecord) -> None:
            with self._lock:
                if record.outcome == "cache_hit":
                    self.llm_cache_hits[(record.stage, cls)] += 1
                elif record.ends_request:
                    self.llm_requests[(record.stage, cls, record.outcome)] += 1
                if record.outcome != "sent" and record.outcome != "cache_hit":
                    self.llm_tokens[(record.stage, cls, "prompt")] += record.prompt_tokens
                    self.llm_tokens[(record.stage, cls, "completion")] += record.completion_tokens

        return observe

    def gauge(self, name: str, help_text: str, read: Callable[[], Iterable[tuple[dict[str, str], float]]],
              *, per_process: bool = False) -> None:
        """``per_process``: the value is this process's own (summed over a multi-process service's)."""
        self.gauges[name] = read
        self.help[name] = help_text
        if per_process:
            self.summed.add(name)

    def publish(self) -> None:
        """Write this process's own gauges where the other processes read them (nothing with one process)."""

    def _gauge_values(self, name: str, read: Callable[[], Iterable[tuple[dict[str, str], float]]]
                      ) -> Iterable[tuple[dict[str, str], float]]:
        return read()

    def text(self) -> str:
        lines: list[str] = []

        def family(name: str, kind: str, help_text: str) -> None:
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")

        self._refresh()
        with self._lock:
            family("anchor_serve_http_requests_total", "counter", "HTTP requests answered, by route, method and status.")
            for (route, method, status), n in sorted(self.http.items()):
                lines.append(f"anchor_serve_http_requests_total{_labels([('route', route), ('method', method), ('status', status)])} {n}")
            family("anchor_serve_http_request_duration_seconds", "histogram", "Time to answer an HTTP request, by route.")
            for route in sorted(self._latency):
                for bound, n in zip(BUCKETS, self._latency[route], strict=True):
                    lines.append(f"anchor_serve_http_request_duration_seconds_bucket"
                                 f"{_labels([('route', route), ('le', _number(bound))])} {n}")
                lines.append(f"anchor_serve_http_request_duration_seconds_bucket{_labels([('route', route), ('le', '+Inf')])} "
                             f"{self._latency_count[route]}")
                lines.append(f"anchor_serve_http_request_duration_seconds_sum{_labels([('route', route)])} "
                             f"{_number(round(self._latency_sum[route], 6))}")
                lines.append(f"anchor_serve_http_request_duration_seconds_count{_labels([('route', route)])} "
                             f"{self._latency_count[route]}")
            family("anchor_serve_llm_requests_total", "counter",
                   "LLM requests (each once, however many attempts), by stage, class and outcome.")
            for (stage, cls, outcome), n in sorted(self.llm_requests.items()):
                lines.append(f"anchor_serve_llm_requests_total{_labels([('stage', stage), ('class', cls), ('outcome', outcome)])} {n}")
            family("anchor_serve_llm_cache_hits_total", "counter", "LLM requests answered from the cache, by stage and class.")
            for (stage, cls), n in sorted(self.llm_cache_hits.items()):
                lines.append(f"anchor_serve_llm_cache_hits_total{_labels([('stage', stage), ('class', cls)])} {n}")
            family("anchor_serve_llm_tokens_total", "counter", "LLM tokens, by stage, class and kind (prompt, completion).")
            for (stage, cls, kind), n in sorted(self.llm_tokens.items()):
                lines.append(f"anchor_serve_llm_tokens_total{_labels([('stage', stage), ('class', cls), ('kind', kind)])} {n}")
            gauges = list(self.gauges.items())
        for name, read in gauges:
            family(name, "gauge", self.help[name])
            for labels, value in self._gauge_values(name, read):
                lines.append(f"{name}{_labels(sorted(labels.items()))} {_number(value)}")
        return "\n".join(lines) + "\n"

    def _refresh(self) -> None:
        """Bring the counters up to date before they are written out (nothing with one process)."""


class SharedMetrics(Metrics):
    """The counters of one of a service's N processes, added up over all of them (see the module docstring).
    ``folder`` is the service's (emptied by the supervisor before the processes start)."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        folder.mkdir(parents=True, exist_ok=True)
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)
        from prometheus_client import CollectorRegistry, values
        from prometheus_client import Counter as PCounter
        from prometheus_client import Gauge as PGauge
        from prometheus_client import Histogram as PHistogram
        from prometheus_client.multiprocess import MultiProcessCollector

        # Chosen here rather than when prometheus_client was first imported (which read the variable then).
        values.ValueClass = values.MultiProcessValue()
        self.folder = folder
        self._gauge_class = PGauge
        self._registry = CollectorRegistry()  # counts are kept in the files; nothing is registered globally
        self._collector = MultiProcessCollector(self._registry, path=str(folder))
        self._p_http = PCounter("anchor_serve_http_requests", "", ["route", "method", "status"], registry=None)
        self._p_latency = PHistogram("anchor_serve_http_request_duration_seconds", "", ["route"], buckets=BUCKETS,
                                     registry=None)
        self._p_llm = PCounter("anchor_serve_llm_requests", "", ["stage", "class", "outcome"], registry=None)
        self._p_hits = PCounter("anchor_serve_llm_cache_hits", "", ["stage", "class"], registry=None)
        self._p_tokens = PCounter("anchor_serve_llm_tokens", "", ["stage", "class", "kind"], registry=None)
        self._p_gauges: dict[str, Any] = {}

    def observe_http(self, route: str, method: str, status: int, seconds: float) -> None:
        method = method if method in METHOD_LABELS else "other"
        self._p_http.labels(route, method, str(status)).inc()
        self._p_latency.labels(route).observe(seconds)

    def call_observer(self, cls: str) -> Callable[[CallRecord], None]:
        def observe(record: CallRecord) -> None:
            if record.outcome == "cache_hit":
                self._p_hits.labels(record.stage, cls).inc()
            elif record.ends_request:
                self._p_llm.labels(record.stage, cls, record.outcome).inc()
            if record.outcome != "sent" and record.outcome != "cache_hit":
                self._p_tokens.labels(record.stage, cls, "prompt").inc(record.prompt_tokens)
                self._p_tokens.labels(record.stage, cls, "completion").inc(record.completion_tokens)

        return observe

    def publish(self) -> None:
        for name in self.summed:
            for labels, value in self.gauges[name]():
                gauge = self._p_gauges.get(name)
                if gauge is None:
                    gauge = self._p_gauges[name] = self._gauge_class(
                        name, "", sorted(labels), multiprocess_mode="livesum", registry=None)
                (gauge.labels(**labels) if labels else gauge).set(value)

    def _refresh(self) -> None:
        from prometheus_client.multiprocess import mark_process_dead

        self.publish()
        for path in self.folder.glob("gauge_livesum_*.db"):
            pid = int(path.stem.rsplit("_", 1)[1])
            if not _alive(pid):
                mark_process_dead(pid, str(self.folder))  # a process killed without saying so
        http: Counter[tuple[str, str, str]] = Counter()
        latency: dict[str, list[int]] = {}
        latency_sum: Counter[str] = Counter()
        latency_count: Counter[str] = Counter()
        llm: Counter[tuple[str, str, str]] = Counter()
        hits: Counter[tuple[str, str]] = Counter()
        tokens: Counter[tuple[str, str, str]] = Counter()
        self._summed_now: dict[str, list[tuple[dict[str, str], float]]] = {}
        for family in self._collector.collect():
            for sample in family.samples:
                name, lab, value = sample.name, sample.labels, sample.value
                if name == "anchor_serve_http_requests_total":
                    http[(lab["route"], lab["method"], lab["status"])] += int(value)
                elif name == "anchor_serve_http_request_duration_seconds_bucket":
                    buckets = latency.setdefault(lab["route"], [0] * len(BUCKETS))
                    if lab["le"] != "+Inf":
                        buckets[BUCKETS.index(float(lab["le"]))] += int(value)
                elif name == "anchor_serve_http_request_duration_seconds_sum":
                    latency_sum[lab["route"]] += value
                elif name == "anchor_serve_http_request_duration_seconds_count":
                    latency_count[lab["route"]] += int(value)
                elif name == "anchor_serve_llm_requests_total":
                    llm[(lab["stage"], lab["class"], lab["outcome"])] += int(value)
                elif name == "anchor_serve_llm_cache_hits_total":
                    hits[(lab["stage"], lab["class"])] += int(value)
                elif name == "anchor_serve_llm_tokens_total":
                    tokens[(lab["stage"], lab["class"], lab["kind"])] += int(value)
                elif name in self.summed:
                    self._summed_now.setdefault(name, []).append(({k: v for k, v in lab.items() if k != "pid"}, value))
        with self._lock:
            self.http, self._latency, self._latency_sum, self._latency_count = http, latency, latency_sum, latency_count
            self.llm_requests, self.llm_cache_hits, self.llm_tokens = llm, hits, tokens

    def _gauge_values(self, name: str, read: Callable[[], Iterable[tuple[dict[str, str], float]]]
                      ) -> Iterable[tuple[dict[str, str], float]]:
        if name not in self.summed:
            return read()
        return self._summed_now.get(name, [])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
