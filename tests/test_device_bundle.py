"""``benchmarks/device/bundle.py``: what it packs for a device machine is anchor's whole run-time closure that the
device lacks (the SDK's aiohttp extra included, matplotlib's tree left out), every package of it pinned in the
lock, and a malformed flag is refused naming it. (Packing itself downloads wheels: not run here.)"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bundle", REPO / "benchmarks" / "device" / "bundle.py")
assert _spec is not None and _spec.loader is not None
bundle = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bundle)


def test_the_closure_is_what_the_device_lacks_and_the_lock_pins():
    packed = bundle.closure("anchor-infer", bundle.DEVICE_HAS | bundle.NOT_REACHED)
    # anchor's own requirements, and the aiohttp client its openai[aiohttp] asks for, with theirs
    assert {"openai", "pydantic", "pydantic-core", "umap-learn", "pynndescent", "aiohttp", "yarl", "httpx2"} <= set(packed)
    # neither what the device has nor what bench_workers never imports, nor what only those pull in
    assert not set(packed) & (bundle.DEVICE_HAS | bundle.NOT_REACHED)
    assert not {"pillow", "fonttools", "kiwisolver", "contourpy"} & set(packed)  # matplotlib's
    locked = bundle.locked_versions()
    assert [p for p in packed if p not in locked] == []


def test_every_closure_without_a_stop_reaches_the_heavy_packages():
    full = bundle.closure("anchor-infer", set())
    assert {"numpy", "scipy", "scikit-learn", "matplotlib", "pillow"} <= set(full) and "anchor-infer" not in full


def test_a_malformed_python_version_is_refused_naming_the_flag(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "device" / "bundle.py"), "--python-version",
                           "twelve", "--out", str(tmp_path / "b")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--python-version must look like 3.12" in done.stderr
    assert not (tmp_path / "b").exists()
