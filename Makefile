# `make demo` and `make test` work on a fresh machine: each creates .venv and installs what it needs.
# `make demo` installs dsm alone (no extras); `make test` adds the test extras to the same .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_CPU ?= torch==2.13.0+cpu
PIP := $(BIN)/python -m pip --quiet --disable-pip-version-check
HASH := $(shell cat pyproject.toml setup.py dsm/hashing/_rowhash.c dsm/formats/_jsonkernel.c | cksum | cut -d' ' -f1)
BASE_STAMP := $(VENV)/.installed-base-$(HASH)
STAMP := $(VENV)/.installed-test-$(HASH)

.PHONY: demo test lint typecheck unit install install-base kernel-deps browser bench clean screenshots schemas

# The compiled fingerprint kernel (dsm/hashing/_rowhash.c) needs a C compiler and xxhash.h. As root on Debian/Ubuntu
# they are installed here when missing; elsewhere, or if apt-get fails, dsm is built without the kernel and
# computes the same fingerprints on its slower pure-Python path (`--json` provenance says so). The JSON kernel
# (dsm/formats/_jsonkernel.c) needs the compiler only; without it JSONL is read and written by pyarrow alone.
kernel-deps:
	@if ! printf '#include <xxhash.h>\n' | $${CC:-cc} -E -x c - >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing gcc and libxxhash-dev for the compiled fingerprint kernel"; \
			export DEBIAN_FRONTEND=noninteractive; \
			apt-get install -y -qq gcc libxxhash-dev >/dev/null 2>&1 || \
			{ apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq gcc libxxhash-dev >/dev/null 2>&1; } || \
			echo "could not install gcc and libxxhash-dev: dsm will use its pure-Python fingerprint path"; \
		else \
			echo "no xxhash.h (Debian/Ubuntu: apt-get install gcc libxxhash-dev): dsm will use its pure-Python fingerprint path"; \
		fi; \
	fi

# dsm and its own dependencies only: what `pip install dsm` gives a user (the kernel built with it). --no-compile:
# Python compiles the modules a command imports on first use instead of every module of pyarrow and numpy at
# install time (a smaller, faster first install; the test extras below are compiled as usual).
$(BASE_STAMP): pyproject.toml setup.py dsm/hashing/_rowhash.c dsm/formats/_jsonkernel.c | kernel-deps
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --no-compile -e .
	rm -f $(VENV)/.installed-base-*
	touch $@

install-base: $(BASE_STAMP)

# The test extras on top: S3 and Azure clients, the servers' parts, the viewers, torch (the CPU build where
# this machine has one: the CUDA build is several GB and no test uses a GPU), linters.
$(STAMP): $(BASE_STAMP)
	$(PIP) install --upgrade pip
	$(PIP) install --only-binary :all: '$(TORCH_CPU)' || true
	$(PIP) install -e '.[test,s3,azure,torch,ray,web]'
	rm -f $(VENV)/.installed-test-*
	touch $@

# Azurite (the Azure Blob emulator the tests run) from npm, into this project's node_modules, never globally.
NODE_STAMP := node_modules/.installed-$(shell cat package.json package-lock.json | cksum | cut -d' ' -f1)

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

install: $(STAMP) $(NODE_STAMP)

# The web viewer's browser tests drive Debian's Chromium through Playwright (never a browser Playwright
# downloads): installed here when it is missing and this is root (CI is); elsewhere the tests say what to do.
CHROMIUM ?= /usr/bin/chromium

browser:
	@test -x $(CHROMIUM) || { if [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "note: $(CHROMIUM) is missing; as root: apt-get install chromium (the browser tests need it)"; fi; }

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

# Tests run in PYTEST_WORKERS processes (pytest-xdist), a test file to each: the suite waits on servers, browsers
# and subprocesses as much as it computes (two workers kept two cores 78% busy; three, 86%, and the suite took
# 17% less time), and each worker starts the servers its files need.
PYTEST_WORKERS ?= 3

unit: install browser
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile

test: lint typecheck unit

bench: install
	$(BIN)/python benchmarks/verify.py
	$(BIN)/python benchmarks/read.py
	$(BIN)/python benchmarks/csv_read.py
	$(BIN)/python benchmarks/startup.py
	$(BIN)/python benchmarks/bench_overhead.py
	$(BIN)/python benchmarks/rewrite.py --sizes 0.5,1.0
	$(BIN)/python benchmarks/cutover.py
	$(BIN)/python benchmarks/inspect_rows.py
	$(BIN)/python benchmarks/serve.py
	$(BIN)/python benchmarks/view.py

# The SVG snapshots of `dsm view` (tests/__snapshots__/) made again, and the three docs/ shows copied from
# them; the screenshots of `dsm serve` (docs/screenshots/) taken again by its browser tests. Look at the new
# pictures before committing them.
screenshots: install browser
	DSM_SCREENSHOTS=docs $(BIN)/pytest -q tests/test_serve_browser.py
	$(BIN)/pytest -q tests/test_view_snapshots.py --snapshot-update -k "not docs"
	cp tests/__snapshots__/test_view_snapshots/test_chat_thread.svg docs/view-chat.svg
	cp tests/__snapshots__/test_view_snapshots/test_image_view.svg docs/view-image.svg
	cp tests/__snapshots__/test_view_snapshots/test_episode_view.svg docs/view-episode.svg

# The validators of dsm's JSON Schemas (dsm/contract.schema.json, dsm/policy.schema.json), written again as
# Python by fastjsonschema into dsm/json_schema/ after a schema changes (tests/test_json_schema.py says when).
schemas: install-base
	$(BIN)/python -m dsm.json_schema

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
