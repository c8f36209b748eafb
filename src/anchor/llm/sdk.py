"""The ``openai`` SDK, imported without the thousand type modules anchor never reads.

``import openai`` runs ``openai/types/__init__.py``, which imports every request and response type
of every API the SDK covers (responses, evals, graders, realtime, ...): about 470 modules and half a
second of CPU, before a chat completion is sent. anchor uses the chat-completions client and its
errors only. The SDK's ``types`` packages are nothing but re-exports (``from .batch import Batch as
Batch``), so this module gives each such package an ``__init__`` that reads a re-exported name on
first use instead: ``openai.types.Batch`` still works, and imports ``openai.types.batch`` then. A
package whose ``__init__`` holds anything else (a newer SDK may) is imported as it stands.

Only anchor's own command line turns this on (:func:`install_lazy_types`, first thing in
``anchor.cli.main``): a finder that changes how another package loads is the business of the program
that owns the process, so a program that imports anchor as a library gets the SDK exactly as it ships.
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import sys
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Any

#: The packages made lazy: this one and every package under it.
TYPES_PACKAGE = "openai.types"


def reexports(init_source: bytes) -> dict[str, tuple[str, str]] | None:
    """What a package ``__init__`` re-exports (name -> (submodule, name in it)), or None when it does
    anything else than re-export names from its own submodules (its docstring and ``from __future__``
    aside): such a package has to run as it is."""
    names: dict[str, tuple[str, str]] = {}
    for node in ast.parse(init_source).body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if not (isinstance(node, ast.ImportFrom) and node.level == 1 and node.module):
            return None
        for alias in node.names:
            if alias.name == "*":
                return None
            names[alias.asname or alias.name] = (node.module, alias.name)
    return names


class _LazyReexports(importlib.abc.Loader):
    """Runs a re-exporting package ``__init__`` as a module ``__getattr__`` (PEP 562)."""

    def __init__(self, names: dict[str, tuple[str, str]]) -> None:
        self.names = names

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return None  # the default module object

    def exec_module(self, module: ModuleType) -> None:
        names, package = self.names, module.__name__

        def __getattr__(name: str) -> Any:
            if name not in names:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            submodule, attribute = names[name]
            value = getattr(importlib.import_module(f"{package}.{submodule}"), attribute)
            setattr(module, name, value)  # read once
            return value

        module.__getattr__ = __getattr__  # type: ignore[method-assign]
        module.__all__ = list(names)  # what a star import of the original __init__ gave


class _LazyTypesFinder(importlib.abc.MetaPathFinder):
    """Finds ``openai.types`` packages as the path finder does, then swaps in the lazy loader."""

    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname != TYPES_PACKAGE and not fullname.startswith(TYPES_PACKAGE + "."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.submodule_search_locations or not (spec.origin or "").endswith("__init__.py"):
            return spec
        try:
            names = reexports(Path(spec.origin).read_bytes())  # type: ignore[arg-type]
        except (OSError, SyntaxError, ValueError):
            names = None
        if names is not None:
            spec.loader = _LazyReexports(names)
        return spec


def install_lazy_types() -> bool:
    """Make ``openai.types``' re-exporting packages lazy for the rest of this process, if ``openai`` is not
    imported yet (True: in place). Called by anchor's command line only (see the module docstring)."""
    if any(isinstance(f, _LazyTypesFinder) for f in sys.meta_path):
        return True
    if "openai" in sys.modules:
        return False
    sys.meta_path.insert(0, _LazyTypesFinder())
    return True


__all__ = ["install_lazy_types", "reexports"]
