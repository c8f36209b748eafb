"""Progress events: stages report what they did; the CLI turns them into progress bars.

The library never draws anything itself, so it stays usable from notebooks and services.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProgressEvent:
    stage: str
    done: int
    total: int | None
    message: str = ""
    info: dict[str, object] = field(default_factory=dict)


Reporter = Callable[[ProgressEvent], None]


def silent(_: ProgressEvent) -> None:
    """The default reporter: ignore progress."""
