"""Find import circles between the modules of ``src/anchor``.

Every ``import anchor...`` / ``from anchor... import ...`` counts, at any depth (inside functions
and ``TYPE_CHECKING`` blocks too), so a circle dodged by a late import is still found.
``from anchor.x import y`` is an edge to ``anchor.x.y`` when that is a module, else to ``anchor.x``.
A package's ``__init__`` is the module named after the package.

    python scripts/check_import_cycles.py [SRC_DIR]   # exit 1 and the circles, or exit 0
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


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


def main() -> int:
    src = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "src")
    modules = module_names(src)
    graph = {name: {e for e in edges(name, path, modules) if e} for name, path in modules.items()}
    found = cycles(graph)
    for comp in found:
        print("circle:", " <-> ".join(comp))
        for a in comp:
            print(f"  {a} imports {', '.join(sorted(graph[a] & set(comp)))}")
    print(f"{len(modules)} modules, {sum(len(v) for v in graph.values())} imports, {len(found)} circle(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
