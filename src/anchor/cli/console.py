"""What the command line prints besides results: one-line errors, progress bars, JSON.

Errors are one line on stderr, ``error: ...``, exit code 2, in the user's terms (flags and
environment variables, not internal field names). Set ``ANCHOR_DEBUG=1`` for tracebacks.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Column

from anchor.cli.schemas import json_schema_version
from anchor.errors import AnchorError
from anchor.llm.ledger import CallRecord, CostLedger
from anchor.progress import ProgressEvent, Reporter

err = Console(stderr=True)
out = Console()


_invocation: list[str] | None = None


def set_invocation(args: list[str] | None) -> None:
    """Remember the arguments this process's command was given (``sys.argv`` is someone else's when
    anchor runs inside another program, e.g. a test runner)."""
    global _invocation
    _invocation = None if args is None else list(args)


def invocation() -> list[str]:
    """The command line as typed: ``anchor`` and its arguments (secrets still in; redact before keeping)."""
    return ["anchor", *(sys.argv[1:] if _invocation is None else _invocation)]


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` on one line and return the Exit to raise."""
    # soft_wrap: never hard-wrap at the console width (80 columns when stderr is not a terminal),
    # so an error stays one line in logs and for callers that parse it.
    # escape: messages quote paths and answers, whose square brackets are not rich markup.
    message = " ".join(str(message).split())
    err.print(f"[bold red]error:[/bold red] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def validation_message(exc: ValidationError, names: dict[str, str] | None = None) -> str:
    """A pydantic error in the user's words: field names replaced by flags, no pydantic jargon."""
    names = names or {}
    parts = []
    for item in exc.errors()[:3]:
        loc = [str(p) for p in item.get("loc", ())]
        field = loc[-1] if loc else ""
        msg = str(item.get("msg", "invalid"))
        for prefix in ("Value error, ", "Assertion failed, "):
            msg = msg.removeprefix(prefix)
        label = names.get(field, field.replace("_", "-") if field else "")
        parts.append(f"{label}: {msg}" if label else msg)
    return "; ".join(parts)


@contextmanager
def friendly_errors(names: dict[str, str] | None = None) -> Iterator[None]:
    """Known failures become one clear line on stderr and exit code 2.

    ``names`` maps model field names to the flags that set them, for validation messages.
    """
    if os.environ.get("ANCHOR_DEBUG"):
        yield
        return
    try:
        yield
    except typer.Exit:
        raise
    except ValidationError as exc:
        raise fail(validation_message(exc, names)) from None
    except (AnchorError, ValueError, OSError) as exc:
        message = str(exc)
        if isinstance(exc, OSError) and exc.filename and exc.strerror:
            message = f"{exc.filename}: {exc.strerror}"
        raise fail(message) from None
    except KeyboardInterrupt:
        raise fail("interrupted", code=130) from None


@contextmanager
def one_line_warnings(*categories: type[Warning]) -> Iterator[None]:
    """Warnings of ``categories`` raised inside the block print at once as one ``warning: ...`` line on
    stderr (not Python's two-line format with a source line), every time they are raised."""
    shown = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, *args: Any) -> None:
        if issubclass(category, categories):
            text = " ".join(str(message).split())
            err.print(f"[bold yellow]warning:[/bold yellow] {escape(text)}", highlight=False, soft_wrap=True)
        else:
            shown(message, category, filename, lineno, *args)

    with warnings.catch_warnings():
        for category in categories:
            warnings.simplefilter("always", category)
        warnings.showwarning = show
        yield


class RichReporter:
    """Maps progress events to one bar per stage on stderr (or ``console``).

    Events with ``info`` show it after the bar (``calls 12  cached 3``); a ``retry`` entry (the
    number of failed attempts so far and the last error) comes first, in yellow, so an outage is
    visible while nothing else moves. The stage, bar, count and elapsed time keep their room on an
    80-column terminal; the note takes what is left and is cut with an ellipsis.
    """

    def __init__(self, enabled: bool = True, console: Console | None = None, *, remaining: bool = False) -> None:
        # ``remaining``: the estimated time left after the time elapsed (a long run over many rows).
        times = [TimeElapsedColumn(), TimeRemainingColumn()] if remaining else [TimeElapsedColumn()]
        self.progress = Progress(
            TextColumn("{task.description}", table_column=Column(no_wrap=True, max_width=22, overflow="ellipsis")),
            BarColumn(bar_width=12 if remaining else 20), MofNCompleteColumn(), *times,
            TextColumn("{task.fields[note]}", table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis")),
            console=console or err, disable=not enabled, transient=False, expand=True,
            # Redrawn ten times a second on a terminal. Elsewhere (a log file, a pipe) nothing is drawn
            # until the end, and rendering the bars for nobody cost a long run's runner a tenth of its CPU.
            auto_refresh=(console or err).is_terminal)
        self.tasks: dict[str, Any] = {}

    def __call__(self, event: ProgressEvent) -> None:
        task = self.tasks.get(event.stage)
        note = _note(event)
        if task is None:
            task = self.tasks[event.stage] = self.progress.add_task(event.stage, total=event.total, note=note)
        self.progress.update(task, completed=event.done, total=event.total, note=note)

    def __enter__(self) -> Reporter:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


def _note(event: ProgressEvent) -> str:
    info = dict(event.info)
    retry = info.pop("retry", None)
    if "factors" in info:
        text = f"{info.pop('factors')} factors"
    else:
        text = "  ".join(f"{k} {v}" for k, v in info.items())
    if event.message:
        text = f"{text}  {escape(event.message)}" if text else escape(event.message)
    if retry:
        text = f"[yellow]{escape(str(retry))}[/yellow]" + (f"  {text}" if text else "")
    return text


@contextmanager
def llm_activity(ledger: CostLedger, report: Reporter) -> Iterator[None]:
    """Show requests, cache hits and retries as they happen (a bar of their own), so that an outage
    that makes every request fail and back off is visible while no stage moves."""
    counts = {"calls": 0, "cached": 0, "retries": 0}
    retry = ""

    def on_record(record: CallRecord) -> None:
        nonlocal retry
        if record.outcome == "sent":
            return
        if record.outcome == "cache_hit":
            counts["cached"] += 1
        else:
            counts["calls"] += 1
        if record.outcome == "transient_error":
            counts["retries"] += 1
            retry = f"retrying: {counts['retries']} failed attempt(s), last: {record.detail[:80]}"
        elif record.outcome == "ok":
            retry = ""
        info: dict[str, object] = {"cached": counts["cached"]}
        if retry:
            info["retry"] = retry
        report(ProgressEvent("LLM requests", counts["calls"], None, "", info))

    unsubscribe = ledger.subscribe(on_record)
    try:
        yield
    finally:
        unsubscribe()


def emit_json(obj: dict[str, Any], output: str | None = None) -> None:
    """Print one JSON object for machines. ``output`` names a command's own object (a key of
    ``schemas.JSON_OUTPUTS``), whose ``schema_version`` is put first; without it ``obj`` is a document
    that carries its own (a factor space, metrics.json, the cost comparison)."""
    if output is not None:
        obj = {"schema_version": json_schema_version(output), **obj}
    elif "schema_version" not in obj:
        raise AssertionError("JSON printed for machines carries a schema_version (see anchor.cli.schemas)")
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()
