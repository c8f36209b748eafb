"""Names a package exports without importing the modules that define them until first use (PEP 562).

``import anchor`` and the stage packages stay cheap this way: their heavy modules (numpy's friends,
the LLM stack) load only when one of their names is read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package``: ``modules`` maps each name it exports lazily to
    the module that defines it, imported when the name is first read."""

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
