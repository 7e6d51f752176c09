# Two commands do all set-up on a fresh machine:
#   make run    create .venv, install Turnvisor, start `turnvisor serve` (SQLite, mock agent)
#   make test   install what the tests need (venv extras, chromium, bubblewrap, podman, agent CLIs)
#               and run everything
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
ARGS ?=

.PHONY: run test install install-test lint typecheck unit pytest agents browser-deps sandbox-deps \
	container-deps agent-image clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $@

$(TEST_STAMP): pyproject.toml $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,bench]'
	touch $@

install: $(STAMP)
install-test: $(TEST_STAMP) browser-deps sandbox-deps container-deps agents

run: install
	$(VENV)/bin/turnvisor serve $(ARGS)

# Debian's chromium for the browser tests (Playwright never downloads one here).
browser-deps:
	@command -v /usr/bin/chromium >/dev/null 2>&1 || bash scripts/install_chromium.sh

# Debian's bubblewrap and passt: the agent sandbox and its network, on by default where they
# run (their tests need them); OpenSSH's client and server for the ssh executor's tests.
sandbox-deps:
	@bash scripts/install_bubblewrap.sh
	@bash scripts/install_ssh.sh

# Podman, runc and debootstrap for the container executor's tests (tests/container).
container-deps:
	bash scripts/install_container_deps.sh

# The agentctl image for executor = "container" profiles (cached; tests/container builds it too).
agent-image: $(STAMP)
	PYTHON=$(PY) bash scripts/build_agent_image.sh

# Pinned real agent CLIs, installed into a cache outside the repo.
agents:
	bash scripts/install_agents.sh

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

typecheck:
	$(VENV)/bin/mypy

unit:
	node --test tests/ui_unit/

# The slowest tests listed at the end: CI's time budget is watched from its log.
pytest:
	$(PY) -m pytest --durations=25 $(ARGS)

test: install-test lint typecheck unit pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
