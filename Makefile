# Two commands on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install --quiet
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: serve test test-fast test-lowest interop-venvs bench bench-scaling bench-soak lint wheel screenshots clean lock

# The package installs editable in strict mode: a tree of links under build/ shaped as
# the installed package, so that static tools (editors, basedpyright, import-linter)
# resolve `wander.*` as Python does (docs/architecture.md#layout). The tree lists the
# files there were at install: adding or removing one in a package folder changes the
# folder, and the next `make` relinks (~3 s).
EDITABLE := --config-settings editable_mode=strict
PACKAGE_FOLDERS := $(shell find cli service client trainer migrations -type d -not -name __pycache__)

# Serving needs the service extra and nothing more: no torch, transformers or TRL.
$(VENV)/.serve: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -e '.[service]' $(EDITABLE)
	touch $@ $(VENV)/.links

# Everything the test suite needs, with the pins of constraints.txt (why: see there).
$(VENV)/.dev: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -c constraints.txt -e '.[dev]' $(EDITABLE)
	touch $@ $(VENV)/.serve $(VENV)/.links

$(VENV)/.links: $(PACKAGE_FOLDERS)
	$(PIP) --no-deps -e . $(EDITABLE)
	touch $@

serve: $(VENV)/.serve $(VENV)/.links
	$(BIN)/wander serve --host $(HOST) --port $(PORT)

# Python caches compiled modules (and pytest its rewritten test modules) in __pycache__,
# even where the environment says not to (as on these CI machines): every `wander serve`
# and every test process would compile them again (~6 s of CPU per test process).
unexport PYTHONDONTWRITEBYTECODE

# The tests run in TEST_PROCESSES processes (pytest-xdist): on two cores, three keep both
# busy while a test waits on a server or a subprocess. Each process takes whole files
# (a module's shared server starts once), the heaviest first (tests/conftest.py);
# TEST_PROCESSES=0 runs them all in pytest's own process.
TEST_PROCESSES ?= 3
XDIST := -n $(TEST_PROCESSES) --dist loadfile --no-loadscope-reorder
PYTEST := $(BIN)/python -m pytest $(XDIST)

# The 25 slowest tests are listed at the end: the suite must stay under ten minutes.
test: $(VENV)/.dev $(VENV)/.links interop-venvs
	$(PYTEST) --durations=25

# The unit and ASGI tests (under 2 minutes): none of the tiers that tests/conftest.py
# gives (slow, live_server, interop, browser). `make test` runs them all.
test-fast: $(VENV)/.dev $(VENV)/.links
	$(PYTEST) --fast

# The venvs of the interop tests' other side (verifiers, openenv: tests/interop.py),
# built before the tests start: minutes on a new machine, under a second once built.
interop-venvs: $(VENV)/.dev
	$(BIN)/python -m tests.interop

# The fast tier against the lowest versions pyproject.toml allows, in a venv of its own
# (.venv-lowest, made afresh with uv; ~13 minutes on two cores): the floors are true.
test-lowest:
	bash tools/lowest_versions.sh .venv-lowest $(XDIST)

# The versions the service's image installs (deploy/service.lock, read by the Dockerfile
# as constraints), so that two builds install the same: run after changing a dependency.
lock: $(VENV)/.dev
	$(PIP) install --quiet uv
	$(BIN)/uv pip compile pyproject.toml --extra service --universal --python-version 3.11 \
	  --custom-compile-command "make lock" -o deploy/service.lock

# The service benchmark matrix (a few minutes); results in bench/results/.
bench: $(VENV)/.dev
	$(PIP) -c constraints.txt -e '.[bench]'
	$(BIN)/python -m bench.run

# Steps/s against service workers (1, 2, 4) on one Redis, then on a local 3-primary Redis
# Cluster the run starts and stops: bench/results/scaling.{png,md}.
# SCALING="--workers 1,2,4,8,16 --generators 4" on a larger host (bench/README.md).
bench-scaling: $(VENV)/.dev
	$(PIP) -c constraints.txt -e '.[bench,plot]'
	$(BIN)/python -m bench.scaling $(SCALING)

# Ten minutes of mixed load on each store, sampled, then kill -9 (bench/soak.py): a
# table and a plot into bench/results/soak.{md,png}.
bench-soak: $(VENV)/.dev
	$(PIP) -c constraints.txt -e '.[bench,plot]'
	$(BIN)/python -m bench.soak

lint: $(VENV)/.dev $(VENV)/.links
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PYTHONPATH=. $(BIN)/lint-imports --no-logo
	$(BIN)/basedpyright

# Desktop and phone-width screenshots of every console page into docs/img/ (the README
# shows them), taken in Debian's chromium (`apt-get install chromium`).
screenshots: $(VENV)/.dev
	$(BIN)/python tools/screenshots.py docs/img

# A wheel of the package in dist/ (what `pip install dist/wander_rl-*.whl` takes).
wheel:
	$(PYTHON) -m pip wheel --quiet --no-deps --wheel-dir dist .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build dist *.egg-info
