# Two commands on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install serve test bench lint clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first, pinned: this version is on local disk here (a CPU build); the trainer
	# extra asks for a range it satisfies, so nothing bigger is downloaded.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

serve: install
	$(BIN)/wander serve --host $(HOST) --port $(PORT)

test: install
	$(BIN)/python -m pytest

# The service benchmark matrix (a few minutes); results in bench/results/.
bench: install
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench.run

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
