# The two commands: `make plan STACK=<name>` and `make test`. Both set up .venv on a fresh machine:
# `make plan` installs the runtime dependencies (the Pulumi SDKs, pydantic, rich, PyYAML, jsonschema, cryptography,
# and the Azure SDK the node scale sets' provider runs on);
# `make test` adds the dev tools (pytest, pytest-xdist, hypothesis, ruff, pyright with its Node.js, kubernetes-validate, cel-python)
# and the real consumers the tests run (shellcheck, hadolint); `make e2e` builds the others (e2e/consumers.py).
# Every package at the version of the lock files (constraints/*.txt, `python -m tools.lock`): the plan that was
# reviewed and the deployment runner's `make install` install the same ones.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STACK ?= dev
RUNTIME := $(VENV)/.runtime
DEV := $(VENV)/.dev
PIP := $(BIN)/pip install --disable-pip-version-check --progress-bar on

.PHONY: plan test e2e consumers lint typecheck unit golden consumer-facts install bench clean

$(RUNTIME): pyproject.toml constraints/runtime.txt
	@echo "==> [1/2] creating $(VENV) with $(PYTHON)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "==> [2/2] installing what planning needs (pulumi, pulumi-azure-native, ...: about 730 MB, a few minutes on a fresh machine)"
	$(PIP) -c constraints/runtime.txt -e .
	@touch $@
	@echo "==> ready: $(BIN)/gpucluster"

$(DEV): $(RUNTIME) constraints/dev.txt
	@echo "==> installing the dev tools for make test (pytest, pytest-xdist, hypothesis, ruff, pyright and its Node.js, kubernetes-validate, cel-python, shellcheck, hadolint)"
	$(PIP) -c constraints/dev.txt -e '.[dev]'
	@touch $@

install: $(RUNTIME)

plan: $(RUNTIME)
	$(BIN)/gpucluster plan $(STACK)

lint: $(DEV)
	$(BIN)/ruff check .

typecheck: $(DEV)
	$(BIN)/pyright components policies tools bench e2e

# pytest-xdist: one worker per core, each test file on one worker (its module fixtures built once), the slowest files
# started first (tests/conftest.py, SLOW_FIRST); the plans many tests read are made once per run and shared.
unit: $(DEV)
	$(BIN)/pytest -q -n auto --dist loadfile --no-loadscope-reorder

# ruff, pyright and pytest at once (pyright and ruff take a core-minute beside pytest's workers); fails if any fails.
test: $(DEV)
	@$(MAKE) --no-print-directory -j3 lint typecheck unit

# The real programs (docs/consumer-checks.md): kube-apiserver, etcd, Kueue, kwok, promtool, helm, ... built once from
# the Go module proxy at the pinned versions into .cache/consumers/<name>-<version>/ (e2e/build.py; needs Go 1.26),
# then the scenarios in e2e/tests/ run against them, one control plane at a time; out/e2e/report.json says what ran.
consumers: $(DEV)
	$(BIN)/python -m e2e.build

e2e: consumers
	$(BIN)/pytest -q -p no:xdist e2e/tests

# The shipped stacks' figures (tests/golden/stacks.json): regenerate after a deliberate change to a stack.
golden: $(RUNTIME)
	$(BIN)/python -m tools.golden

# What the consumers accept, read from their sources at the pinned tags (components/catalog/facts/consumers/): re-run
# after a version bump, with mirrors of the repositories under MIRRORS (docs/consumer-checks.md).
MIRRORS ?= .mirrors
consumer-facts: $(RUNTIME)
	$(BIN)/python -m tools.extract_consumer_facts --mirrors $(MIRRORS)

bench: $(RUNTIME)
	$(BIN)/python bench/plan_bench.py

clean:
	rm -rf $(VENV) out .pytest_cache .ruff_cache
