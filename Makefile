# The two commands: `make plan STACK=<name>` and `make test`. Both set up .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STACK ?= dev
STAMP := $(VENV)/.installed

.PHONY: plan test lint typecheck unit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

plan: $(STAMP)
	$(BIN)/gpucluster plan $(STACK)

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/pyright components policies tools bench

unit: $(STAMP)
	$(BIN)/pytest -q

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python bench/plan_bench.py

clean:
	rm -rf $(VENV) out .pytest_cache .ruff_cache
