# Two entry points: `make run` (the main job) and `make test` (install + every check).
# Both create .venv with every pinned dependency (constraints.txt) on first use.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test lint bench

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[all,dev]"
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/python example_project/quickstart.py

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python benchmarks/bench_dataset.py
