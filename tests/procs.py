"""A process's descendants, read from ``/proc`` (Linux): for the tests that check nothing outlives a killed run,
and for the benchmarks that add up a service's memory with its helpers'. Standard library only."""

from __future__ import annotations

import os


def _children() -> dict[int, list[int]]:
    """Every live process's children, by parent pid (from each ``/proc/PID/stat``'s parent field)."""
    out: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", encoding="utf-8") as fh:
                    out.setdefault(int(fh.read().rsplit(")", 1)[1].split()[1]), []).append(int(name))
            except OSError:
                pass
    return out


def descendants(pid: int) -> list[int]:
    """The processes ``pid`` started, and theirs, all the way down."""
    kids, out, todo = _children(), [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out
