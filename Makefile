# `make demo` and `make test` work on a fresh machine: each creates .venv and installs what it needs.
# `make demo` installs dsm alone (no extras); `make test` adds the test extras to the same .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_CPU ?= torch==2.13.0+cpu
PIP := $(BIN)/python -m pip --quiet --disable-pip-version-check
HASH := $(shell cat pyproject.toml | cksum | cut -d' ' -f1)
BASE_STAMP := $(VENV)/.installed-base-$(HASH)
STAMP := $(VENV)/.installed-test-$(HASH)

.PHONY: demo test lint typecheck unit install install-base bench clean

# dsm and its own dependencies only: what `pip install dsm` gives a user. --no-compile: Python compiles the
# modules a command imports on first use instead of every module of pyarrow and numpy at install time (a
# smaller, faster first install; the test extras below are compiled as usual).
$(BASE_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --no-compile -e .
	rm -f $(VENV)/.installed-base-*
	touch $@

install-base: $(BASE_STAMP)

# The test extras on top: S3 and Azure clients, the servers' parts, torch (the CPU build where this machine
# has one: the CUDA build is several GB and no test uses a GPU), linters.
$(STAMP): $(BASE_STAMP)
	$(PIP) install --only-binary :all: '$(TORCH_CPU)' || true
	$(PIP) install -e '.[test,s3,azure,torch]'
	rm -f $(VENV)/.installed-test-*
	touch $@

# Azurite (the Azure Blob emulator the tests run) from npm, into this project's node_modules, never globally.
NODE_STAMP := node_modules/.installed-$(shell cat package.json package-lock.json | cksum | cut -d' ' -f1)

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

install: $(STAMP) $(NODE_STAMP)

DEMO_REGISTRY := demo-data/registry

demo: $(BASE_STAMP)
	rm -rf demo-data
	$(BIN)/python -m dsm.demo demo-data/web-sample
	$(BIN)/dsm register demo-data/web-sample --name web-sample --owner data-platform@example.com \
		--description "Sample rows: text, numbers, PNG images" --registry $(DEMO_REGISTRY)
	$(BIN)/dsm alias web-sample prod 1 --registry $(DEMO_REGISTRY)
	$(BIN)/dsm ls --registry $(DEMO_REGISTRY)
	$(BIN)/dsm show web-sample@prod --registry $(DEMO_REGISTRY)
	$(BIN)/dsm verify web-sample@prod --deep --registry $(DEMO_REGISTRY)
	$(BIN)/dsm head web-sample@prod -n 2 --columns id,text,lang,image --registry $(DEMO_REGISTRY)

lint: install
	$(BIN)/ruff check dsm tests benchmarks
	$(BIN)/ruff format --check dsm tests benchmarks
	$(BIN)/lint-imports --no-cache

typecheck: install
	$(BIN)/mypy

unit: install
	$(BIN)/pytest -q

test: lint typecheck unit

bench: install
	$(BIN)/python benchmarks/verify.py
	$(BIN)/python benchmarks/read.py
	$(BIN)/python benchmarks/bench_overhead.py
	$(BIN)/python benchmarks/rewrite.py --sizes 0.5,1.0
	$(BIN)/python benchmarks/cutover.py
	$(BIN)/python benchmarks/inspect.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
