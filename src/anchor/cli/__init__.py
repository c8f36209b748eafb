"""The ``anchor`` command line: ``app`` (typer) and ``main`` (the console-script entry point).

Layout: ``app`` registers the commands; ``options`` defines every option once; ``console`` prints
errors, progress and JSON; ``render`` draws results for people; ``build``, ``evaluate``,
``cost``, ``analyze``, ``reproduce``, ``audit`` and ``backend`` hold the commands.

``app`` names every command and imports a command's module only when that command runs or shows
its help (``COMMANDS``; ``anchor --help`` lists them all, so it imports them all): ``anchor infer``
does not pay for the analyses, the evaluation or the service. Within a command module, a command
imports the machinery it drives (the pipeline, the run engine, the report, the analyses, the audit
pages) inside its function, for the same reason: each pulls in 5 to 45 more modules (15-150 ms of
CPU). Everything else is imported at the top.
"""

from anchor.cli.app import app, main

__all__ = ["app", "main"]
