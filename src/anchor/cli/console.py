"""What the command line prints besides results: one-line errors, progress bars, JSON.

Errors are one line on stderr, ``error: ...``, exit code 2, in the user's terms (flags and
environment variables, not internal field names). Set ``ANCHOR_DEBUG=1`` for tracebacks.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from anchor.llm.errors import AnchorError
from anchor.progress import ProgressEvent, Reporter

err = Console(stderr=True)
out = Console()


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


class RichReporter:
    """Maps progress events to one bar per stage on stderr.

    Events with ``info`` show it after the bar (``calls 12  cached 3``); a ``retry`` entry (the
    number of failed attempts so far and the last error) is shown in yellow so an outage is
    visible while nothing else moves.
    """

    def __init__(self, enabled: bool = True) -> None:
        self.progress = Progress(TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=err,
                                 disable=not enabled, transient=False)
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
        text += f"  [yellow]{escape(str(retry))}[/yellow]"
    return text


class Throttle:
    """Call ``fn`` at most every ``interval`` seconds (the last call always goes through on ``flush``)."""

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        self._last = 0.0

    def ready(self) -> bool:
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            return True
        return False


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()
