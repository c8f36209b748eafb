"""``GET /metrics``: the service's counters in the Prometheus text format (version 0.0.4), written here.

Requests by route, method and status, and their latency (a histogram by route); LLM requests, cache
hits and tokens by stage and class (online or batch); the budget's requests in flight and waiting (the
queue depth), the online cases waiting for an answer, and jobs by state. Counters are updated from the
server's thread and from the jobs' threads, under one lock.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable, Iterable

from anchor.llm.ledger import CallRecord

#: The HTTP methods counted by name; a client chooses the method token, so any other counts as ``other``
#: (a label value is a time series of its own, and no request may add one).
METHOD_LABELS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
#: Upper bounds of the latency histogram, in seconds.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


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

    def gauge(self, name: str, help_text: str, read: Callable[[], Iterable[tuple[dict[str, str], float]]]) -> None:
        self.gauges[name] = read
        self.help[name] = help_text

    def text(self) -> str:
        lines: list[str] = []

        def family(name: str, kind: str, help_text: str) -> None:
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")

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
            for labels, value in read():
                lines.append(f"{name}{_labels(sorted(labels.items()))} {_number(value)}")
        return "\n".join(lines) + "\n"
