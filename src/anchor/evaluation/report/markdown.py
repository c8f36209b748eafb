"""Markdown cells and tables: numbers as mean ± std or with a delta, and pipe tables."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from anchor.evaluation.report.names import DASH, MINUS


def number(value: Any) -> float | None:
    """A finite float, or None for null / NaN / anything non-numeric."""
    if value is None or isinstance(value, bool):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def format_mean_std(mean: Any, std: Any = None, *, percent: bool = False, show_std: bool = True) -> str:
    """``"0.606 ± 0.012"`` (3 decimals), ``"99.95 ± 0.04%"`` with ``percent``; ``"–"`` for a null mean.

    The ``± std`` part is left out when ``show_std`` is false or the std is null.
    """
    m = number(mean)
    if m is None:
        return DASH
    s = number(std) if show_std else None
    if percent:
        return f"{m * 100:.2f}%" if s is None else f"{m * 100:.2f} ± {s * 100:.2f}%"
    return f"{m:.3f}" if s is None else f"{m:.3f} ± {s:.3f}"


def format_delta(value: Any, reference: Any) -> str:
    """``"0.558 (−0.014)"``: a value with its difference from a reference (rounded to 3 decimals)."""
    v = number(value)
    if v is None:
        return DASH
    r = number(reference)
    if r is None:
        return f"{v:.3f} (Δ {DASH})"
    d = round(v - r, 3)
    sign = MINUS if d < 0 else "+" if d > 0 else "±"
    return f"{v:.3f} ({sign}{abs(d):.3f})"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def md_table(
    header: Sequence[str], rows: Iterable[Sequence[str]], align: Sequence[str] | None = None
) -> list[str]:
    align = align or ["l"] + ["r"] * (len(header) - 1)
    marks = {"l": ":--", "r": "--:", "c": ":-:"}
    out = ["| " + " | ".join(_md_escape(h) for h in header) + " |",
           "|" + "|".join(marks[a] for a in align) + "|"]
    out += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows]
    return out


def int_cell(n: int | float) -> str:
    return f"{int(n):,}"


def seconds_cell(s: float) -> str:
    return f"{s:.1f}" if s >= 10 else f"{s:.2f}"
