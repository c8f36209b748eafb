#!/usr/bin/env bash
# Install llama-cpp-python (the embedded backend) into the given Python environment.
#
# It has no wheel on PyPI and compiles from source. A native build (-DGGML_NATIVE=ON, the
# default) segfaults on these machines' AVX-512/AMX CPUs at the first generation, so we build
# with portable AVX2 flags. pip's wheel cache ignores CMAKE_ARGS, so we never use it for this
# package: the wheel is built with --no-cache-dir into a wheelhouse whose name encodes the
# version and flags, and reused from there (the first build takes 6-8 minutes on 2 cores).
set -euo pipefail

PY=${1:-python3}
# The version is pinned in constraints.txt, beside the project's other exact versions.
CONSTRAINTS="$(dirname "$0")/../constraints.txt"
VERSION=$(sed -n 's/^llama-cpp-python==\([^[:space:]#]*\).*/\1/p' "$CONSTRAINTS")
if [ -z "$VERSION" ]; then
    echo "error: $CONSTRAINTS pins no llama-cpp-python version (a line llama-cpp-python==X.Y.Z)" >&2
    exit 1
fi
FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF"

if "$PY" -c "import sys, llama_cpp; sys.exit(0 if llama_cpp.__version__ == '$VERSION' else 1)" 2>/dev/null; then
    echo "llama-cpp-python $VERSION already installed"
    exit 0
fi

TAG=$(printf '%s %s' "$VERSION" "$FLAGS" | sha256sum | cut -c1-12)
WHEELHOUSE="${ANCHOR_WHEELHOUSE:-$HOME/.cache/anchor/wheels}/llama-cpp-python-$TAG"
mkdir -p "$WHEELHOUSE"
if ! ls "$WHEELHOUSE"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1; then
    echo "building llama-cpp-python $VERSION with: $FLAGS (one-off, several minutes)"
    CMAKE_ARGS="$FLAGS" "$PY" -m pip wheel --no-cache-dir --no-deps "llama-cpp-python==$VERSION" -w "$WHEELHOUSE"
fi
"$PY" -m pip install "$WHEELHOUSE"/llama_cpp_python-"$VERSION"-*.whl
