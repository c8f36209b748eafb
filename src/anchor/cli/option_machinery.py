"""How option groups become command-line options, and back.

``opt`` makes one ``typer.Option`` whose help names its default and environment variable and whose
value is checked against the pydantic field it configures; ``overrides`` and ``given_flags`` read a
filled-in group; ``expand_options`` spreads the groups a command asks for into its signature for
typer and gathers them back before the command runs. The groups themselves, every option defined
once, are in ``anchor.cli.options``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any

import annotated_types
import typer
from pydantic import BaseModel
from rich.markup import escape

# --------------------------------------------------------------------------- option construction


def _range_text(model: type[BaseModel], field: str) -> tuple[str, Callable[[Any], bool]]:
    """The field's numeric bounds as words ("at least 1", "between 0 and 1") and a checker."""
    lo: tuple[float, bool] | None = None  # (bound, inclusive)
    hi: tuple[float, bool] | None = None
    for item in model.model_fields[field].metadata:
        if isinstance(item, annotated_types.Ge):
            lo = (item.ge, True)
        elif isinstance(item, annotated_types.Gt):
            lo = (item.gt, False)
        elif isinstance(item, annotated_types.Le):
            hi = (item.le, True)
        elif isinstance(item, annotated_types.Lt):
            hi = (item.lt, False)

    def ok(value: Any) -> bool:
        if lo is not None and (value < lo[0] if lo[1] else value <= lo[0]):
            return False
        return not (hi is not None and (value > hi[0] if hi[1] else value >= hi[0]))

    if lo and hi:
        left = "[" if lo[1] else "("
        right = "]" if hi[1] else ")"
        return f"in {left}{lo[0]}, {hi[0]}{right}", ok
    if lo:
        return (f"at least {lo[0]}" if lo[1] else f"greater than {lo[0]}"), ok
    if hi:
        return (f"at most {hi[0]}" if hi[1] else f"less than {hi[0]}"), ok
    return "", ok


def opt(
    *flags: str,
    help: str,  # noqa: A002 - typer's own name for it
    panel: str | None = None,
    env: str | None = None,
    bound: tuple[type[BaseModel], str] | None = None,
    default: Any = dataclasses.MISSING,
    show_default: bool = True,
    choices: tuple[str, ...] | None = None,
    **extra: Any,
) -> Any:
    """A ``typer.Option`` whose help names its default and environment variable, and whose value
    is checked against the pydantic field ``bound = (Model, field)`` (range and default) or against
    ``choices``."""
    text = help
    callback = None
    if choices is not None:
        text += f" One of: {', '.join(choices)}."
        callback = _choice_check(choices)
    if bound is not None:
        model, field = bound
        if default is dataclasses.MISSING:
            default = model.model_fields[field].default
        words, ok = _range_text(model, field)
        if words:
            text += f" Must be {words}."
            callback = _range_check(words, ok)
    if show_default and default is not dataclasses.MISSING and default is not None:
        shown = default.value if hasattr(default, "value") else default
        text += f" (default: {shown})"
    if env:
        text += f" [env: {env}]"
    # Help is rich markup: square brackets would be taken for style tags and vanish.
    return typer.Option(*flags, help=escape(text), rich_help_panel=panel, show_default=False,
                        callback=callback, **extra)


def _choice_check(choices: tuple[str, ...]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        for v in value if isinstance(value, list) else [value]:
            if v is not None and v not in choices:
                raise typer.BadParameter(f"{v!r} is not one of: {', '.join(choices)}")
        return value

    return check


def _range_check(words: str, ok: Callable[[Any], bool]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is not None and not isinstance(value, bool) and not ok(value):
            raise typer.BadParameter(f"must be {words} (got {value})")
        return value

    return check


def _unset(value: Any) -> bool:
    return value is None


def overrides(group: Any, fields: dict[str, str]) -> dict[str, Any]:
    """``{model_field: value}`` for the group's options that were given (not None)."""
    return {model_field: getattr(group, name) for name, model_field in fields.items()
            if not _unset(getattr(group, name))}


def given_flags(*groups: Any) -> list[str]:
    """The flags of these option groups that were set on the command line (value not None/False)."""
    return [f"--{f.name.replace('_', '-')}" for group in groups for f in dataclasses.fields(group)
            if getattr(group, f.name) not in (None, False)]


# --------------------------------------------------------------------------- spreading groups into commands


def _is_group(annotation: Any) -> bool:
    return dataclasses.is_dataclass(annotation) and isinstance(annotation, type)


def expand_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Let a command take option groups as parameters (``llm: ConnectionOptions``).

    typer sees one parameter per field of each group; the command receives the group objects.
    """
    hints = typing.get_type_hints(fn, include_extras=True)
    sig = inspect.signature(fn)
    params: list[inspect.Parameter] = []
    groups: dict[str, type] = {}
    annotations: dict[str, Any] = {}
    for p in sig.parameters.values():
        annotation = hints.get(p.name, p.annotation)
        if _is_group(annotation):
            groups[p.name] = annotation
            field_hints = typing.get_type_hints(annotation, include_extras=True)
            for f in dataclasses.fields(annotation):
                params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                                annotation=field_hints[f.name]))
                annotations[f.name] = field_hints[f.name]
        else:
            params.append(p.replace(annotation=annotation, kind=inspect.Parameter.KEYWORD_ONLY))
            annotations[p.name] = annotation
    names = [p.name for p in params]
    if len(names) != len(set(names)):
        raise TypeError(f"{fn.__name__}: two options share a parameter name")

    @functools.wraps(fn)
    def command(**kwargs: Any) -> Any:
        for name, group in groups.items():
            fields = {f.name: kwargs.pop(f.name) for f in dataclasses.fields(group)}
            kwargs[name] = group(**fields)
        return fn(**kwargs)

    command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    command.__annotations__ = annotations
    return command
