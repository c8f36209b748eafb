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

#: extra -> (the modules it brings, space-separated; what in anchor needs it)
EXTRAS: dict[str, tuple[str, str]] = {
    "bird": ("torch", "BIRD"),  # its CPT fit (anchor.bird.cpt.fit_cpt)
    "serve": ("fastapi uvicorn", "anchor serve"),  # the HTTP service (anchor.serve)
    "serve-ray": ("fastapi uvicorn ray.serve", "anchor serve --ray"),  # anchor.serve.ray_serve (Ray Serve)
    "networks": ("pgmpy", "published networks as worlds"),  # anchor.truth.networks (they ship inside pgmpy)
}


class MissingExtra(ConfigurationError):
    """The work asked for needs an optional package that is not installed."""


def extra_installed(extra: str) -> bool:
    """Whether the modules ``extra`` brings can be found (they are not imported)."""
    modules, _ = EXTRAS[extra]
    for module in modules.split():
        try:
            if importlib.util.find_spec(module) is None:
                return False
        except (ImportError, ValueError):  # a parent package that fails, or a module left half-imported
            return False
    return True


def extra_hint(extra: str, user: str | None = None) -> str:
    """The one line that says what needs ``extra`` and how to install it."""
    modules, what = EXTRAS[extra]
    names = " and ".join(modules.split())
    verb = "are" if " " in modules else "is"
    return f"{user or what} needs {names}, which {verb} not installed: pip install 'anchor-infer[{extra}]'"


def require_extra(extra: str, user: str | None = None) -> None:
    """Raise :class:`MissingExtra` (naming ``user``, the thing that needs it) unless ``extra`` is installed."""
    if not extra_installed(extra):
        raise MissingExtra(extra_hint(extra, user))
