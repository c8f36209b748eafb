"""A run's progress line: work done of the total, the unknown and failed answers, the requests and
tokens so far, and the last failure while requests keep failing (the only sign of life in an outage).

What the line shows besides the counts is the driver's (``info``): ``anchor eval`` names instances and
spells its figures out, ``anchor predict`` names rows and keeps them short.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from anchor.progress import ProgressEvent, Reporter, silent
from anchor.runs.pool import Tally
from anchor.runs.worker import Answered

#: The least time between two progress events, but for those that must be seen (a retry, the end).
MIN_SECONDS = 0.1

Info = Callable[[Counter[str], Tally], dict[str, object]]


def counted_info(counts: Counter[str], tally: Tally) -> dict[str, object]:
    """The figures ``anchor eval`` shows (the failed predictions are among the unknown ones, as in
    metrics.json's runs[].unknown)."""
    return {"unknown": f"{counts['unknown']} ({counts['failed']} failed)", "requests": tally.requests,
            "cached": tally.cache_hits, "tokens": tally.tokens}


class RunProgress:
    """Counts the answers of a run and reports them to ``report`` as ``ProgressEvent(unit, done, total)``."""

    def __init__(self, report: Reporter = silent, unit: str = "instances", info: Info = counted_info) -> None:
        self.report = report
        self.unit = unit
        self.info = info
        self.counts: Counter[str] = Counter()
        self._last = 0.0
        self._retry = ""

    def expect(self, total: int, *, done: int = 0, unknown: int = 0, failed: int = 0) -> None:
        """The run's total, and what an earlier start of it answered already."""
        self.counts.update(total=total, done=done, unknown=unknown, failed=failed)

    def answered(self, answer: Answered, tally: Callable[[], Tally]) -> None:
        """Count an answer; ``tally()`` (the requests so far) is asked for only when the line is shown (at
        most every ``MIN_SECONDS``: a change of the retry state comes through :meth:`tick` in time)."""
        counts = self.counts
        counts["done"] += 1
        if answer.unknown:
            counts["unknown"] += 1
        if answer.status == "failed":
            counts["failed"] += 1
        if time.monotonic() - self._last >= MIN_SECONDS:
            self.tick(tally())

    def tick(self, tally: Tally, force: bool = False) -> None:
        if tally.retry != self._retry:
            # A new failure while requests fail, or the first answer after them: always shown.
            self._retry, force = tally.retry, True
        now = time.monotonic()
        if not force and now - self._last < MIN_SECONDS:
            return
        self._last = now
        info = self.info(self.counts, tally)
        if self._retry:
            info["retry"] = self._retry
        self.report(ProgressEvent(self.unit, self.counts["done"], self.counts["total"], "", info))
