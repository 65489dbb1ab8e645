#!/usr/bin/env bash
# The fast tier of the tests against the LOWEST versions pyproject.toml allows for the
# direct dependencies (uv's `--resolution lowest-direct`; what those need resolves to its
# newest), so that a floor that is not true fails here and not on a user's machine.
# Usage: tools/lowest_versions.sh [VENV [PYTEST_ARGS...]]   (VENV: .venv-lowest; made afresh)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv-lowest}
PYTHON=${PYTHON:-python3}
BIN=$VENV/bin

if [ -e "$VENV" ]; then
  [ -f "$VENV/pyvenv.cfg" ] || { echo "$VENV is not a venv: not removing it" >&2; exit 2; }
  rm -rf "$VENV"
fi
"$PYTHON" -m venv "$VENV"
"$BIN/python" -m pip install --quiet uv
# torch through pip first, with constraints.txt's pin and from the sources pip is set up
# with, as `make test` gets it: uv reads no pip.conf, and left to PyPI alone it would take
# torch's CUDA build (gigabytes). uv keeps the torch it finds installed.
"$BIN/python" -m pip install --quiet -c constraints.txt torch
# Editable in strict mode, as `make` installs it (the tests read the package as installed).
"$BIN/uv" pip install --quiet --python "$BIN/python" --resolution lowest-direct \
  -c constraints.txt -e '.[dev]' --config-settings editable_mode=strict
"$BIN/python" -m pytest --fast "${@:2}"
