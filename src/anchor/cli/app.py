"""The ``anchor`` application: the typer app, its commands by name, and one-line usage errors.

Imports run one way: this module names the command modules and loads the one a command line asks
for; the command modules never import this one. A command module is imported only when its command
runs, is asked for its help, or is listed (``anchor --help``): each pulls in the machinery it
drives, and ``anchor infer`` should not pay for the analyses, the evaluation or the service.
"""

from __future__ import annotations

import gc
import importlib
import inspect
import re
import sys
import traceback
from collections.abc import Iterator, MutableMapping
from typing import Any

import typer
from rich.markup import escape
from typer.core import TyperGroup

try:  # recent typer ships its own copy of click
    from typer._click import exceptions as click_errors
    from typer._click.core import Command, Context
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import Command, Context  # type: ignore[assignment]
    from click import exceptions as click_errors  # type: ignore[no-redef]
try:  # typer's copy keeps Abort beside its other exceptions, not in _click.exceptions
    from typer.exceptions import Abort
except ImportError:  # pragma: no cover - older typer uses click's
    from click.exceptions import Abort  # type: ignore[no-redef,assignment]

from anchor.cli.console import fail, set_invocation
from anchor.secrets import scrub


def _tidy_help(command: Command) -> None:
    """Mend two things typer's help gets wrong, in ``command`` and every command under it.

    A flag showed a value type (``<bool>``) as if it took a value, so ``--no-cache true`` looked
    right and was refused: flags (``--help`` included) now show none. And the paragraphs after a
    command's first kept the docstring's line breaks, breaking lines mid-sentence: they are joined
    (a paragraph starting with ``\b`` keeps its breaks, as in click).
    """
    help_option = command.get_help_option(Context(command))
    for param in [*command.params, *([help_option] if help_option is not None else [])]:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    if command.help:
        paragraphs = inspect.cleandoc(command.help).split("\n\n")
        command.help = "\n\n".join(p if p.startswith("\b") else _with_example_block(" ".join(p.split("\n")))
                                     for p in paragraphs)
    subcommands = getattr(command, "commands", {})  # a group (typer's is no click Group)
    # A lazy group's commands are tidied as they load (load_command), not all loaded here.
    for sub in (subcommands.loaded if isinstance(subcommands, LazyCommands) else subcommands).values():
        _tidy_help(sub)


#: Widest line of an example command in --help: the help panel leaves 78 of 80 columns.
EXAMPLE_WIDTH = 74
#: A shell word: a double-quoted string (kept whole) or a run of non-blanks.
_SHELL_WORD = re.compile(r'"[^"]*"|\S+')


def example_lines(command_line: str, width: int = EXAMPLE_WIDTH) -> list[str]:
    """``command_line`` broken into shell lines of at most ``width`` characters, only between
    arguments: a flag stays beside its value, a quoted string stays whole, and every line but the
    last ends with `` \\`` so that the lines still paste into a shell."""
    words = _SHELL_WORD.findall(command_line)
    pieces: list[str] = []
    for word in words:
        if pieces and pieces[-1].startswith("-") and " " not in pieces[-1] and not word.startswith("-"):
            pieces[-1] += " " + word  # a flag and its value
        else:
            pieces.append(word)
    lines = ["  "]
    for piece in pieces:
        if lines[-1].strip() and len(lines[-1]) + 1 + len(piece) + 2 > width:
            lines[-1] += " \\"
            lines.append("      ")
        lines[-1] += ("" if not lines[-1].strip() else " ") + piece
    return lines


def _with_example_block(paragraph: str) -> str:
    """A paragraph whose text ends with ``Example: <command>``: the command on lines of its own,
    broken between arguments (rich would otherwise wrap it anywhere, even inside a quoted value)."""
    prose, found, command_line = paragraph.partition("Example:")
    if not found or not command_line.strip():
        return paragraph
    # Each line in markup (the help is rendered as rich markup): typer dedents the help text it prints,
    # which would strip the example's indentation; a line that starts with a tag is not indented.
    block = "\n".join(["Example:", *(f"[bold]{escape(line)}[/bold]" for line in example_lines(command_line.strip()))])
    return f"{prose.strip()}\n\n{block}" if prose.strip() else block


class _OneLineErrors(TyperGroup):
    """Usage errors (unknown option, value out of range, ...) as one ``error:`` line and exit code 2,
    like every other error anchor reports, instead of a framed panel with the usage text."""

    _tidied = False

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not self._tidied:
            _tidy_help(self)
            self._tidied = True
        given = kwargs.get("args", args[0] if args else None)
        set_invocation(None if given is None else [str(a) for a in given])
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click_errors.NoArgsIsHelpError as exc:
            # Help for a group called without a command: show it as click would.
            exc.show()
            sys.exit(exc.exit_code)
        except click_errors.UsageError as exc:
            hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
            fail(exc.format_message() + hint)
            sys.exit(2)
        except click_errors.ClickException as exc:
            fail(exc.format_message())
            sys.exit(exc.exit_code)
        except Abort:
            fail("aborted", code=1)
            sys.exit(1)
        except Exception as exc:
            # A bug, or any error under ANCHOR_DEBUG: the traceback as Python prints it, but scrubbed,
            # since chained exceptions quote what a server sent back (an API key, a URL's password).
            sys.stderr.write(scrub("".join(traceback.format_exception(exc))))
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


#: Every top-level command, in the order ``anchor --help`` lists them: name -> (module, attribute). An
#: attribute that is a typer app is a command group (``anchor analyze ...``), a function a command.
COMMANDS: dict[str, tuple[str, str]] = {
    "build": ("anchor.cli.build", "build"),
    "infer": ("anchor.cli.build", "infer"),
    "demo": ("anchor.cli.build", "demo"),
    "explain": ("anchor.cli.audit", "explain"),
    "predict": ("anchor.cli.predict", "predict_command"),
    "eval": ("anchor.cli.evaluate", "eval_command"),
    "report": ("anchor.cli.evaluate", "report_command"),
    "cost": ("anchor.cli.cost", "cost_command"),
    "reproduce": ("anchor.cli.reproduce", "reproduce_command"),
    "serve": ("anchor.cli.serve", "serve_command"),
    "warm-up": ("anchor.cli.backend", "warm_up"),
    "llm": ("anchor.cli.backend", "llm_app"),
    "cache": ("anchor.cli.backend", "cache_app"),
    "analyze": ("anchor.cli.analyze", "app"),
    "calibrate": ("anchor.cli.calibrate", "app"),
    "truth": ("anchor.cli.truth", "app"),
}

#: The settings of ``app`` that typer hands down to the commands it builds.
_APP_SETTINGS: dict[str, Any] = {"rich_markup_mode": "rich", "pretty_exceptions_enable": False}


def load_command(name: str) -> Command:
    """The click command (or group) ``name`` of ``COMMANDS``, built by typer as if registered on ``app``."""
    module, attribute = COMMANDS[name]
    target = getattr(importlib.import_module(module), attribute)
    holder = typer.Typer(add_completion=False, **_APP_SETTINGS)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name)
    else:
        holder.command(name)(target)
    command: Command = typer.main.get_group(holder).commands[name]
    _tidy_help(command)
    return command


class LazyCommands(MutableMapping[str, Command]):
    """A group's commands by name: every name of ``table`` is listed at once, its command built on the
    first read (``load_command``); a command added by ``add_command`` is kept as given."""

    def __init__(self, table: dict[str, tuple[str, str]]) -> None:
        self.table = table
        self.loaded: dict[str, Command] = {}

    def __getitem__(self, name: str) -> Command:
        if name not in self.loaded:
            if name not in self.table:
                raise KeyError(name)
            self.loaded[name] = load_command(name)
        return self.loaded[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        raise TypeError("anchor's commands cannot be removed")

    def __contains__(self, name: object) -> bool:  # without loading it
        return name in self.table or name in self.loaded

    def __iter__(self) -> Iterator[str]:
        yield from self.table
        yield from (name for name in self.loaded if name not in self.table)

    def __len__(self) -> int:
        return len(self.table.keys() | self.loaded.keys())


class _AnchorGroup(_OneLineErrors):
    """``anchor`` itself: its commands are ``COMMANDS``, each module imported when first needed."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.commands = LazyCommands(COMMANDS)

    def list_commands(self, ctx: Context) -> list[str]:
        return list(self.commands)  # the names only: typer's reads every command


app = typer.Typer(
    name="anchor",
    cls=_AnchorGroup,
    help=(
        "Calibrated, auditable probabilities for two competing outcomes from an LLM's judgments "
        "(the ANCHOR method: factor spaces, hierarchical mapping, Naive Bayes + latent causal BN).\n\n"
        "By default the embedded SmolLM2-135M model runs in-process (no network). Point anchor at any "
        "OpenAI-compatible server with --base-url/--model/--api-key or the environment variables "
        "ANCHOR_LLM_BASE_URL, ANCHOR_LLM_MODEL, ANCHOR_LLM_API_KEY (see each command's --help)."
    ),
    no_args_is_help=True,
    add_completion=False,
    **_APP_SETTINGS,
)


@app.callback()
def _anchor() -> None:
    # typer builds a group only for an app with a callback or commands; the commands come from COMMANDS.
    pass


def main() -> None:
    # The modules imported so far (and, at the end, everything still alive) move out of the cyclic
    # collector's sight: they live as long as the process, yet each full collection walked them
    # all, and the last one, at exit, took about 0.2 s of CPU with the SDK loaded. Nothing that
    # needs finalising is left to that collection: commands close their files and connections.
    from anchor.llm.sdk import install_lazy_types

    install_lazy_types()  # the SDK's type modules read on first use: this process is anchor's own
    gc.freeze()
    try:
        app()
    finally:
        gc.freeze()
