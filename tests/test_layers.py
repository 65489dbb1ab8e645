"""The layering rules hold, and a module that breaks one fails the suite.

import-linter reads the contracts of ``pyproject.toml`` and finds ``wander`` where
Python does: in the dev venv, the tree of links the strict editable install made
(``docs/architecture.md#layout``); ``bench`` and ``tests`` from the repository's root.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def lint_imports() -> subprocess.CompletedProcess[str]:
    """``lint-imports`` as ``make lint`` runs it."""
    return subprocess.run(
        [Path(sys.executable).with_name("lint-imports"), "--no-cache", "--no-logo"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
    )  # fmt: skip


def folder_of(package: str) -> Path:
    """Where Python imports ``package`` from (for ``wander.*``: the editable install's links)."""
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations, package
    return Path(next(iter(spec.submodule_search_locations)))


@pytest.fixture
def planted(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A module ``planted.py`` in the package the test names, removed afterwards."""
    module = folder_of(request.param) / "planted.py"
    assert not module.exists()
    try:
        yield module
    finally:
        module.unlink(missing_ok=True)


def test_the_layers_hold() -> None:
    result = lint_imports()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


@pytest.mark.parametrize(
    ("planted", "source", "contract"),
    [
        ("wander.client", "import wander.service.engine",
         "The client never imports the service, the trainer or the CLI"),
        ("wander.client", "from wander.trainer import grpo",
         "The client never imports the service, the trainer or the CLI"),
        ("wander.service.envs.tictactoe", "from wander.service.store import memory",
         "Environments import only the SDK, seeding and their own modules"),
        ("wander.service.archive", "from wander.client import sync",
         "The service imports only the client's wire models and summary code"),
        ("wander.trainer", "from wander.service.envs import tictactoe",
         "The trainer never imports the service"),
        ("wander.service.store", "from wander.service.engine import Engine",
         "Inside the service: app, routes, engine, catalog, environments"),
        ("bench", "import tests.conftest", "Benchmarks never import the tests"),
    ],
    indirect=["planted"],
)  # fmt: skip
def test_a_planted_violation_is_reported(planted: Path, source: str, contract: str) -> None:
    planted.write_text(f"{source}\n")
    result = lint_imports()
    assert result.returncode != 0
    assert f"{contract} BROKEN" in result.stdout, result.stdout
    assert ".planted" in result.stdout
