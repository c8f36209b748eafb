"""Find import circles between the modules of ``src/anchor``, and source files that are too long.

Every ``import anchor...`` / ``from anchor... import ...`` counts, at any depth (inside functions
and ``TYPE_CHECKING`` blocks too), so a circle dodged by a late import is still found.
``from anchor.x import y`` is an edge to ``anchor.x.y`` when that is a module, else to ``anchor.x``.
A package's ``__init__`` is the module named after the package. A file over ``--max-lines``
(default 550) lines is reported too. ``--ignore evaluation`` leaves out the modules of
``anchor.evaluation`` (repeatable; a package or module name, with or without ``anchor.``).
tests/test_layout.py runs the same checks.

    python scripts/check_import_cycles.py [SRC_DIR] [--ignore NAME] [--max-lines N]
    # exit 1 and the circles and long files, or exit 0
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Sequence
from pathlib import Path

MAX_LINES = 550


def module_names(src: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in src.rglob("*.py"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def edges(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "anchor":
                    found.add(_nearest(alias.name, modules))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "anchor":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in modules else _nearest(target, modules))
    found.discard(name)
    return found


def _nearest(dotted: str, modules: dict[str, Path]) -> str:
    while dotted and dotted not in modules:
        dotted = dotted.rpartition(".")[0]
    return dotted


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def ignored(name: str, ignore: Sequence[str]) -> bool:
    """Whether module ``name`` is, or is inside, one of the ``ignore`` names."""
    for part in ignore:
        prefix = part if part.split(".")[0] == "anchor" else f"anchor.{part}"
        if name == prefix or name.startswith(prefix + "."):
            return True
    return False


def import_graph(src: Path, ignore: Sequence[str] = ()) -> dict[str, set[str]]:
    """Module -> the anchor modules it imports, leaving out the ``ignore`` ones on both ends."""
    modules = module_names(src)
    return {name: {e for e in edges(name, path, modules) if e and not ignored(e, ignore)}
            for name, path in modules.items() if not ignored(name, ignore)}


def long_files(src: Path, max_lines: int = MAX_LINES, ignore: Sequence[str] = ()) -> dict[str, int]:
    """Module -> its number of lines, for every file over ``max_lines``."""
    out: dict[str, int] = {}
    for name, path in sorted(module_names(src).items()):
        if not ignored(name, ignore):
            n = len(path.read_text(encoding="utf-8").splitlines())
            if n > max_lines:
                out[name] = n
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src", nargs="?", type=Path, default=Path(__file__).resolve().parents[1] / "src")
    parser.add_argument("--ignore", action="append", default=[], metavar="NAME",
                        help="leave out this package or module (e.g. evaluation); repeatable")
    parser.add_argument("--max-lines", type=int, default=MAX_LINES, help=f"longest file allowed (default {MAX_LINES})")
    args = parser.parse_args(argv)
    graph = import_graph(args.src, args.ignore)
    found = cycles(graph)
    for comp in found:
        print("circle:", " <-> ".join(comp))
        for a in comp:
            print(f"  {a} imports {', '.join(sorted(graph[a] & set(comp)))}")
    long = long_files(args.src, args.max_lines, args.ignore)
    for name, n in long.items():
        print(f"too long: {name} has {n} lines (at most {args.max_lines})")
    print(f"{len(graph)} modules, {sum(len(v) for v in graph.values())} imports, {len(found)} circle(s), "
          f"{len(long)} file(s) over {args.max_lines} lines")
    return 1 if found or long else 0


if __name__ == "__main__":
    sys.exit(main())
