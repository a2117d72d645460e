# tether: the two commands of the README are `make demo` and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test venv services lint typecheck pytest bench clean docs docs-serve

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	test -x $(BIN)/uv || $(BIN)/pip install --quiet --disable-pip-version-check uv
	# Bytecode is compiled at install (as pip does; uv does not by default): with
	# PYTHONDONTWRITEBYTECODE set, every interpreter the tests start (Parsl workers, CLIs,
	# servers) would otherwise compile each module it imports from source, every time.
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[dev]'
	$(BIN)/python -m compileall -q src
	# The CPU build of PyTorch (for the seed's figure 3.6 test) comes from the machine's
	# local wheel folder only, never as a multi-GB download.
	if ls /opt/wheels/torch-*cp311*.whl >/dev/null 2>&1; then \
		$(BIN)/uv pip install --quiet --python $(BIN)/python --find-links /opt/wheels 'torch==2.13.0'; \
	fi
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/tether demo

services:
	bash scripts/services.sh

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP) services
	$(BIN)/pytest

# The checks and the services' start run side by side (mypy and the docs build are the
# longest, about a minute together one after the other), then the suite.
test: $(STAMP)
	$(MAKE) --no-print-directory --output-sync=target -j4 services lint typecheck docs
	$(BIN)/pytest

# The documentation site (mkdocs.yml): strict, so a broken link or reference fails it.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

bench: $(STAMP) services
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[dev,bench]'
	bash benchmarks/run_all.sh $(ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache site
