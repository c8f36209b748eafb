"""UMAP's numba kernels compiled once per machine instead of once per process.

umap-learn compiles its kernels with numba on the first fit in every process (about 13 s of CPU
on two cores) because it marks almost none of them ``cache=True``. :func:`import_umap` switches
numba's on-disk cache on for every jitted function of umap before its first compilation, so a
process whose kernels are cached loads them in a few hundredths of a second. ``anchor warm-up``
(which ``make venv`` runs) fills the cache; without it, the first fit on a machine compiles and
saves them, and every later process loads them.

Where: numba's own cache, an ``__pycache__`` folder beside umap's source (numba's user cache
folder when that is not writable, or ``NUMBA_CACHE_DIR`` when set), as pynndescent's kernels
already are. numba keys each entry on the source file's time stamp and size, the function's
bytecode, the numba version and the CPU, so an upgraded umap or numba, or another machine,
compiles afresh instead of loading stale code. A loaded kernel is the machine code the compiler
produced: a seeded fit gives the same bits with or without the cache (tests/space/test_umap_cache.py).
Where numba finds no writable place for a kernel, that kernel is compiled in every process, as
umap does by itself.
"""

from __future__ import annotations

import sys
import threading
from types import ModuleType

_LOCK = threading.Lock()
_DONE = False
_CACHED: list[object] = []  # the kernels whose cache this module switched on


def import_umap() -> ModuleType:
    """``import umap``, with its kernels cached on disk (see the module docstring)."""
    global _DONE
    import umap  # about 2.5 s: imported only where a fit runs

    with _LOCK:
        if not _DONE:
            _cache_kernels()
            _DONE = True
    return umap


def _umap_kernels() -> list[object]:
    from numba.core.dispatcher import Dispatcher

    seen: dict[int, object] = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "umap" or name.startswith("umap.")):
            continue
        for value in list(vars(module).values()):
            # umap's own kernels (its modules also hold pynndescent's, which cache themselves)
            if isinstance(value, Dispatcher) and str(value.py_func.__module__).startswith("umap"):
                seen.setdefault(id(value), value)
    return list(seen.values())


def _cache_kernels() -> None:
    for kernel in _umap_kernels():
        # Only before the first compilation: a kernel compiled already (umap compiles a few with
        # explicit signatures at import) keeps what it has.
        if kernel.signatures:  # type: ignore[attr-defined]
            continue
        try:
            kernel.enable_caching()  # type: ignore[attr-defined]
        except RuntimeError:  # numba found no writable cache folder for it
            continue
        _CACHED.append(kernel)


def cache_report() -> tuple[int, int]:
    """(kernels loaded from the cache, kernels compiled into it) so far in this process."""
    hits = misses = 0
    for kernel in _CACHED:
        stats = kernel.stats  # type: ignore[attr-defined]
        hits += sum(stats.cache_hits.values())
        misses += sum(stats.cache_misses.values())
    return hits, misses
