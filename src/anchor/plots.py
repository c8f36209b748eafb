"""Matplotlib helpers shared by the PNG writers (``anchor report``, ``anchor cost``, ``anchor analyze``).

Figures are drawn on the Agg canvas directly, never through pyplot: no global figure state, no GUI
backend, safe in worker threads and on machines without a display.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["colours", "new_figure", "save_figure"]


def new_figure(width: float, height: float) -> Any:
    """A figure of ``width`` x ``height`` inches at 100 dpi, attached to an Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Any, path: Path) -> None:
    """Write ``fig`` as a PNG cropped to its content, then release its artists."""
    try:
        fig.savefig(path, format="png", bbox_inches="tight")
    finally:
        fig.clear()


def colours(n: int) -> list[Any]:
    """``n`` distinct colours: matplotlib's tab10 palette, or tab20 beyond ten."""
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]
