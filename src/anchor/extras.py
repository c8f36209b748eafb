"""Parts of anchor that need an optional package (an extra of pyproject.toml), and the check for each.

BIRD fits its conditional probability table with torch, which the core install leaves out (it is
large, and whichever build pip picks may clash with the user's own). Whatever runs BIRD calls
:func:`require_extra` before its first request, so a user without torch is told in one line which
extra to install instead of losing a run half-way. The check finds the package without importing
it: importing torch alone costs seconds.
"""

from __future__ import annotations

import importlib.util

from anchor.errors import ConfigurationError

#: extra -> (the module it brings, what in anchor needs it)
EXTRAS: dict[str, tuple[str, str]] = {
    "bird": ("torch", "BIRD"),  # its CPT fit (anchor.bird.cpt.fit_cpt)
}


class MissingExtra(ConfigurationError):
    """The work asked for needs an optional package that is not installed."""


def extra_installed(extra: str) -> bool:
    """Whether the module ``extra`` brings can be found (it is not imported)."""
    module, _ = EXTRAS[extra]
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that fails, or a module left half-imported
        return False


def extra_hint(extra: str, user: str | None = None) -> str:
    """The one line that says what needs ``extra`` and how to install it."""
    module, what = EXTRAS[extra]
    return f"{user or what} needs {module}, which is not installed: pip install 'anchor-infer[{extra}]'"


def require_extra(extra: str, user: str | None = None) -> None:
    """Raise :class:`MissingExtra` (naming ``user``, the thing that needs it) unless ``extra`` is installed."""
    if not extra_installed(extra):
        raise MissingExtra(extra_hint(extra, user))
