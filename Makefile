# tether: the two commands of the README are `make demo` and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test venv services lint typecheck pytest bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	test -x $(BIN)/uv || $(BIN)/pip install --quiet --disable-pip-version-check uv
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[dev]'
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

test: $(STAMP) services lint typecheck pytest

bench: $(STAMP) services
	bash benchmarks/run_all.sh

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
