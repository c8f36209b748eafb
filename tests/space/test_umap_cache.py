"""UMAP's kernels cached on disk (anchor.space.umap_cache): a later process loads them instead of
compiling, and a seeded fit gives the same bits either way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FIT = textwrap.dedent("""
    import hashlib, json, sys, time
    import numba, pynndescent
    # umap's kernels in the test's folder; pynndescent's (cached beside its source since its import)
    # stay where they are, so they need not be compiled again here.
    numba.config.CACHE_DIR = sys.argv[1]
    import numpy as np
    from anchor.space.structure import UMAPReducer
    from anchor.space.umap_cache import cache_report
    rng = np.random.default_rng(0)
    points = rng.normal(size=(30, 384))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    t0 = time.process_time()
    reduced = UMAPReducer(seed=3).fit_transform(points)
    hits, compiled = cache_report()
    print(json.dumps({"digest": hashlib.sha256(np.ascontiguousarray(reduced).tobytes()).hexdigest(),
                      "shape": list(reduced.shape), "hits": hits, "compiled": compiled,
                      "fit_cpu_s": round(time.process_time() - t0, 2)}))
""")


def _fit(cache_dir: Path) -> dict:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ANCHOR_", "NUMBA_"))}
    environ.update(PYTHONPATH=os.pathsep.join([str(ROOT / "src"), environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", FIT, str(cache_dir)], env=environ, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_cached_kernel_gives_the_fit_a_fresh_compilation_gives(tmp_path):
    compiled = _fit(tmp_path)  # an empty cache: compiles, as umap does without one, and saves
    loaded = _fit(tmp_path)  # a later process: loads what was saved
    assert compiled["compiled"] > 0 and compiled["hits"] == 0
    assert loaded["hits"] > 0 and loaded["compiled"] == 0
    assert loaded["digest"] == compiled["digest"] and loaded["shape"] == [30, 10]
    assert any(p.suffix == ".nbc" and p.parent.name.startswith("umap") for p in tmp_path.rglob("*"))


@pytest.mark.usefixtures("clean_anchor_env")
def test_warm_up_command_loads_minilm_and_fits_umap():
    from typer.testing import CliRunner

    from anchor.cli import app

    result = CliRunner().invoke(app, ["warm-up", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert set(info) == {"schema_version", "minilm", "minilm_note", "minilm_seconds", "umap_seconds",
                         "umap_kernels_loaded", "umap_kernels_compiled"}
    assert info["minilm"] == "loaded" and info["minilm_seconds"] >= 0
    # UMAP went through the cached kernels: loaded them, or compiled them into the cache.
    assert info["umap_kernels_loaded"] + info["umap_kernels_compiled"] > 0
