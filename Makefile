# The two commands: `make run` (the main job on embedded defaults) and `make test`.
# Both bootstrap .venv on first use and are idempotent.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-exhaustive lint typecheck bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,bench,claude]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python -m lamina.demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/python -m pytest -q

test-exhaustive: $(STAMP)
	LAMINA_EXHAUSTIVE=1 $(BIN)/python -m pytest -q -rP

bench: $(STAMP)
	$(BIN)/python -m benchmarks all --quick

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
