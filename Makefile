# Two entry points: `make run` (dagster dev on example_project) and `make test` (install + every check).
# Both create .venv with every pinned dependency (constraints.txt) on first use.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# `make run`: dagster dev on example_project, its instance (runs, event logs, schedules) kept under the
# project so runs survive restarts; the web UI on loopback only unless HOST says otherwise.
HOST ?= 127.0.0.1
PORT ?= 3000
DAGSTER_HOME_DIR := $(CURDIR)/example_project/.dagster_home

.PHONY: install run test lint bench

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[all,dev]"
	touch $(STAMP)

install: $(STAMP)

$(DAGSTER_HOME_DIR)/dagster.yaml:
	mkdir -p $(DAGSTER_HOME_DIR)
	printf '# Dagster instance of the example project (created by make run).\ntelemetry:\n  enabled: false\nnux:\n  enabled: false\n' > $@

# dagster dev treats SIGTERM like SIGINT, so when started in the background of a non-interactive shell
# (SIGINT ignored, inherited) it would ignore SIGTERM too; the python exec wrapper restores SIGINT first.
run: install $(DAGSTER_HOME_DIR)/dagster.yaml
	cd example_project && DAGSTER_HOME="$(DAGSTER_HOME_DIR)" PYSPARK_PYTHON="$(CURDIR)/$(BIN)/python" \
		SPARK_LOCAL_IP=127.0.0.1 exec "$(CURDIR)/$(BIN)/python" -c \
		'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' \
		"$(CURDIR)/$(BIN)/dagster" dev --host $(HOST) --port $(PORT)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python benchmarks/bench_dataset.py
