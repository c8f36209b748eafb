"""The ``anchor`` command line: ``app`` (typer) and ``main`` (the console-script entry point).

Layout: ``app`` registers the commands; ``options`` defines every option once; ``console`` prints
errors, progress and JSON; ``render`` draws results for people; ``build``, ``evaluate``,
``cost``, ``analyze``, ``reproduce``, ``audit`` and ``backend`` hold the commands.

A command imports the machinery it drives (the pipeline, the run engine, the report, the
analyses, the audit pages) inside its function: each pulls in 5 to 45 more modules (15-150 ms of
CPU), which ``anchor --help`` and every other command would otherwise pay on start-up. Everything
else is imported at the top.
"""

from anchor.cli.app import app, main

__all__ = ["app", "main"]
