"""``anchor cost DIR_A DIR_B``: calls, tokens and time of two runs of the same slice, stage by stage."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from anchor.cli.build import JsonOut
from anchor.cli.console import emit_json, err, fail, friendly_errors, out
from anchor.files import check_destination

# The machinery a command drives is imported inside the command, to keep start-up light: see anchor.cli.


def cost_command(
    dir_a: Annotated[Path, typer.Argument(help="Run directory A (written by `anchor eval`), e.g. an ANCHOR run.")],
    dir_b: Annotated[Path, typer.Argument(help="Run directory B on the same dataset slice, e.g. a BIRD run.")],
    png: Annotated[Path | None, typer.Option("--out", "-o", help=(
        "Also draw a bar chart (PNG) of time, tokens and calls per scenario, stacked by phase."))] = None,
    json_out: JsonOut = False,
) -> None:
    """Compare the LLM cost of two runs of the same dataset slice: calls, prompt and completion tokens and
    wall time per scenario, per phase and per stage, with the ratios B/A.

    Calls and tokens are read from each run's calls.jsonl, where every request was logged once (cache hits
    are listed apart); time is the wall time during which a scenario had a request in flight, which depends
    on the concurrency each run used (stated). Example: anchor cost runs/c2s-anchor runs/c2s-bird --out cost.png
    """
    from anchor.evaluation.cost.compare import compare, markdown
    from anchor.evaluation.cost.compare_plot import plot

    with friendly_errors():
        if png is not None:
            if png.suffix.lower() != ".png":
                raise fail(f"--out {png}: give a .png file name")
            check_destination(png, "--out")
        doc = compare(dir_a, dir_b)
        # Rows of a data file that the runs skipped: one note each (not Python's warning with its source line).
        for message in doc["data_notes"]:
            err.print(f"note: {message}", markup=False, highlight=False, soft_wrap=True)
        if png is not None:
            plot(doc, png)
            doc["plot"] = str(png)
        if json_out:
            emit_json(doc)
        else:
            out.print(markdown(doc), markup=False, highlight=False, soft_wrap=True)
        if png is not None:
            err.print(f"wrote {png}")
