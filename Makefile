# The README's two commands are `make up` and `make test`; each installs what it needs first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000

.PHONY: up test lint bench install install-dev clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Installs are stamped so a second run starts at once; editing pyproject.toml reinstalls.
$(VENV)/.installed-all: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[all]'
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed-all

install: $(VENV)/.installed-all
install-dev: $(VENV)/.installed-dev

up: install
	$(BIN)/deskpilot up --port $(PORT)

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/mypy

test: install-dev lint
	$(BIN)/python -m pytest -q -rs

bench: install
	$(BIN)/deskpilot bench chat --turns 400 --concurrency 8

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
