"""The house rules of ``src/anchor``'s imports: arrows run one way, down the layers below, with no
circle; and no source file is too long.

Every ``import anchor...`` / ``from anchor... import ...`` counts, at any depth (inside functions
and ``TYPE_CHECKING`` blocks too), so a circle or an upward arrow dodged by a late import is still
found. ``from anchor.x import y`` is an arrow to ``anchor.x.y`` when that is a module, else to
``anchor.x``. A package's ``__init__`` is the module named after the package (``anchor`` itself is
the package facade, ``from anchor import Anchor``).

It exits 1, naming each one, on:

* a **circle**: modules that import each other, directly or round a loop;
* an **arrow up**: a module importing one of a higher layer of :data:`LAYERS`;
* a **knot**: parts of one layer that import each other round a loop (parts of a layer may use
  each other, one way);
* a module in **no layer** (a new package or top-level module is given its place in :data:`LAYERS`);
* a **split folder**: a part that is a module inside a package, placed apart from the rest of its folder
  (a module that belongs lower than its package goes into a package of its own);
* a file **too long**: over ``--max-lines`` (default 550) lines.

``--ignore evaluation`` leaves out the modules of ``anchor.evaluation`` (repeatable; a package or
module name, with or without ``anchor.``). tests/test_layout.py runs the same checks, and the
script itself.

    python scripts/check_import_cycles.py [SRC_DIR] [--ignore NAME] [--max-lines N]
    # exit 1 and what is wrong, or exit 0
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

MAX_LINES = 550

#: The layers of the package, bottom first. A module may import modules of its own layer and of the
#: layers below it, never above. Each part is a whole top-level module or package of ``anchor``, so that
#: each folder sits on one floor (a module placed apart from its package is reported as a split folder);
#: a module belongs to the longest part that names it. ``anchor`` is the package facade (its ``__init__``).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation: errors, files, secrets, text, progress, plots; the bounded answer loop (which imports nothing "
     "of anchor, so that the pipeline and the run engine answer through it alike)",
     ("errors", "version", "lazy", "secrets", "text", "jsonl", "files", "progress", "extras", "plots", "answering")),
    ("the domain model and the settings (a factor space records the settings it was built with)",
     ("settings", "types", "config", "demo")),
    ("the LLM client and the prompts", ("llm", "prompts")),
    ("embeddings, and heavy work off the event loop", ("embedding", "compute")),
    ("the stages and what they are made of, the pages that show their objects, the known-truth worlds and "
     "the metrics on arrays", ("artefacts", "cases", "space", "mapping", "inference", "calibration", "bird",
                               "audit", "truth", "metrics")),
    ("the pipeline: the stages put together", ("pipeline",)),
    ("the package facade", ("anchor",)),
    ("a run's files: its records, the instances it answers and the run directory (which every command that "
     "writes or reads a run goes through)", ("rundir",)),
    ("the methods a run drives, and their registry", ("methods",)),
    ("the run engine: one run session, its workers and pools", ("runs",)),
    ("a run's scores: its metrics.json, the cost by scenario, the scores against a known truth", ("scoring",)),
    ("the commands that drive the engine on a user's cases: anchor predict, and the known-truth bench on it",
     ("predict", "truth_bench")),
    ("the evaluation harness: datasets, reports, cost comparisons, the calibration study", ("evaluation",)),
    ("commands built on the harness, and the service", ("analysis", "reproduce", "serve")),
    ("the command line", ("cli",)),
)


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


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
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


def part_of(module: str, layers: Sequence[tuple[str, Sequence[str]]] = LAYERS) -> str | None:
    """The part of ``layers`` that ``module`` belongs to (the longest that names it), or None."""
    if module == "anchor":
        return "anchor" if any("anchor" in parts for _, parts in layers) else None
    rest = module.removeprefix("anchor.")
    best = None
    for _, parts in layers:
        for part in parts:
            if part != "anchor" and (rest == part or rest.startswith(part + ".")) and (
                    best is None or len(part) > len(best)):
                best = part
    return best


def layer_of(part: str, layers: Sequence[tuple[str, Sequence[str]]] = LAYERS) -> int:
    return next(i for i, (_, parts) in enumerate(layers) if part in parts)


def unplaced(graph: Mapping[str, set[str]], layers: Sequence[tuple[str, Sequence[str]]] = LAYERS) -> list[str]:
    """The modules no part of ``layers`` names."""
    return sorted(m for m in graph if part_of(m, layers) is None)


def upward_arrows(graph: Mapping[str, set[str]],
                  layers: Sequence[tuple[str, Sequence[str]]] = LAYERS) -> list[tuple[str, str]]:
    """Every (importer, imported) pair whose imported module sits in a higher layer."""
    out = []
    for a in sorted(graph):
        pa = part_of(a, layers)
        for b in sorted(graph[a]):
            pb = part_of(b, layers)
            if pa is not None and pb is not None and layer_of(pb, layers) > layer_of(pa, layers):
                out.append((a, b))
    return out


def part_graph(graph: Mapping[str, set[str]],
               layers: Sequence[tuple[str, Sequence[str]]] = LAYERS) -> dict[str, set[str]]:
    """Part -> the other parts its modules import."""
    out: dict[str, set[str]] = {}
    for a, targets in graph.items():
        pa = part_of(a, layers)
        if pa is None:
            continue
        out.setdefault(pa, set()).update(
            pb for b in targets if (pb := part_of(b, layers)) is not None and pb != pa)
    return out


def knots(graph: Mapping[str, set[str]], layers: Sequence[tuple[str, Sequence[str]]] = LAYERS) -> list[list[str]]:
    """Parts of one layer that import each other round a loop (a loop through a higher layer takes an
    arrow up, reported as such)."""
    parts = part_graph(graph, layers)
    sideways = {a: {b for b in targets if layer_of(b, layers) == layer_of(a, layers)} for a, targets in parts.items()}
    return cycles(sideways)


def split_folders(layers: Sequence[tuple[str, Sequence[str]]] = LAYERS) -> list[str]:
    """The parts that are modules inside a package rather than whole top-level packages or modules."""
    return [part for _, parts in layers for part in parts if "." in part]


def long_files(src: Path, max_lines: int = MAX_LINES, ignore: Sequence[str] = ()) -> dict[str, int]:
    """Module -> its number of lines, for every file over ``max_lines``."""
    out: dict[str, int] = {}
    for name, path in sorted(module_names(src).items()):
        if not ignored(name, ignore):
            n = len(path.read_text(encoding="utf-8").splitlines())
            if n > max_lines:
                out[name] = n
    return out


def main(argv: list[str] | None = None, layers: Sequence[tuple[str, Sequence[str]]] = LAYERS) -> int:
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
    up = upward_arrows(graph, layers)
    for a, b in up:
        pa, pb = part_of(a, layers), part_of(b, layers)
        assert pa is not None and pb is not None
        print(f"arrow up: {a} ({pa}, layer {layer_of(pa, layers) + 1}) imports {b} "
              f"({pb}, layer {layer_of(pb, layers) + 1})")
    tied = knots(graph, layers)
    parts = part_graph(graph, layers)
    for comp in tied:
        print("knot:", " <-> ".join(comp))
        for a in comp:
            print(f"  {a} imports {', '.join(sorted(parts[a] & set(comp)))}")
    lost = unplaced(graph, layers)
    for name in lost:
        print(f"in no layer: {name} (give its package a place in LAYERS)")
    split = split_folders(layers)
    for part in split:
        print(f"split folder: {part} is placed apart from the rest of {part.split('.')[0]}/ (move it into a "
              "package of its own)")
    long = long_files(args.src, args.max_lines, args.ignore)
    for name, n in long.items():
        print(f"too long: {name} has {n} lines (at most {args.max_lines})")
    print(f"{len(graph)} modules, {sum(len(v) for v in graph.values())} imports, {len(layers)} layers: "
          f"{len(found)} circle(s), {len(up)} arrow(s) up, {len(tied)} knot(s), {len(lost)} module(s) in no layer, "
          f"{len(split)} folder(s) split, {len(long)} file(s) over {args.max_lines} lines")
    return 1 if found or up or tied or lost or split or long else 0


if __name__ == "__main__":
    sys.exit(main())
