"""The ``anchor`` command line: ``app`` (typer) and ``main`` (the console-script entry point).

Layout: ``app`` registers the commands; ``options`` defines every option once; ``console`` prints
errors, progress and JSON; ``render`` draws results for people; ``build``, ``evaluate`` and
``backend`` hold the commands.
"""

from anchor.cli.app import app, main

__all__ = ["app", "main"]
