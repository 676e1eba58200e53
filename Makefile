# The README's two commands are `make up` and `make test`; each installs what it needs first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
# pytest-xdist workers: one more than the cores, at most 4 (each may run a whole stack of
# services). Tests also wait (services starting and stopping, a crawl's politeness delays, an
# answer on its way), and with one worker per core the cores sat idle a fifth to a quarter of the
# run: its CPU time was 144-163 % of the wall time on 2 cores.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))

.PHONY: up test lint bench install install-dev system-packages test-system-packages clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Installs are stamped so a second run starts at once; editing pyproject.toml reinstalls. pip
# does not compile what it installs: Python compiles a module the first time it is imported, and
# most of torch, CUDA's wrappers and the rest are never imported here (the install took 236 s
# with compiling, 118-132 s without, on 2 cores).
PIP_INSTALL := $(BIN)/python -m pip install --quiet --no-compile

$(VENV)/.installed-all: pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -e '.[all]'
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -e '.[dev]'
	touch $@ $(VENV)/.installed-all

install: $(VENV)/.installed-all
install-dev: $(VENV)/.installed-dev

# What the system must provide: Chromium, which the crawler renders pages with and the browser
# tests drive (Playwright never downloads a browser), and the DejaVu fonts of the OCR tests'
# screenshots. As root they are installed with apt; otherwise make stops and names the command.
SYSTEM_PACKAGES := chromium fonts-dejavu-core
CHROMIUM_PATH ?= /usr/bin/chromium
DEJAVU_FONT := /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
APT_INSTALL := apt-get install -y --no-install-recommends $(SYSTEM_PACKAGES)

system-packages:
	@if [ -x "$(CHROMIUM_PATH)" ] && [ -f "$(DEJAVU_FONT)" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "Installing $(SYSTEM_PACKAGES) with apt"; \
		apt-get update -q && $(APT_INSTALL) || exit 1; \
		[ -x "$(CHROMIUM_PATH)" ] || { echo "still no Chromium at $(CHROMIUM_PATH)" >&2; exit 1; }; \
	else \
		echo "Chromium ($(CHROMIUM_PATH)) or the DejaVu fonts are missing; install them with:" >&2; \
		echo "    sudo $(APT_INSTALL)" >&2; \
		exit 1; \
	fi

# The tests also run Chroma's token check as deployed (nginx in front of Chroma).
TEST_SYSTEM_PACKAGES := nginx-light

test-system-packages: system-packages
	@if command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "Installing $(TEST_SYSTEM_PACKAGES) with apt"; \
		apt-get update -q && apt-get install -y --no-install-recommends $(TEST_SYSTEM_PACKAGES) || exit 1; \
	else \
		echo "nginx is missing; install it with:" >&2; \
		echo "    sudo apt-get install -y --no-install-recommends $(TEST_SYSTEM_PACKAGES)" >&2; \
		exit 1; \
	fi

# Bytecode is written even where the environment turns it off (PYTHONDONTWRITEBYTECODE): without
# .pyc files every start compiles torch, spaCy and the rest anew (a redactor's imports took 19 s
# without them, 7 s with).
up: system-packages install
	PYTHONDONTWRITEBYTECODE= $(BIN)/deskpilot up --port $(PORT)

# The packages bandit reads are mypy's; its settings (tests left out, B404) are in pyproject.toml.
PACKAGES := contracts gateway orchestrator redactor ocr indexer crawler ticketing deploy

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/bandit -q -c pyproject.toml -r $(PACKAGES)

# Bytecode is written even where the environment turns it off (PYTHONDONTWRITEBYTECODE): every
# service a test starts imports the project again, and pytest rewrites the test modules' asserts
# in each worker; without .pyc files each of them compiles it all anew.
test: test-system-packages install-dev lint
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -rs --durations=30 -n $(TEST_WORKERS) --maxprocesses 4 --dist loadgroup

bench: install
	PYTHONDONTWRITEBYTECODE= $(BIN)/deskpilot bench chat --turns 400 --concurrency 8

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
