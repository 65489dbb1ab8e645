"""The layering rules hold, and a module that breaks one fails the suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.layers import build_view, lint_imports


def test_the_layers_hold(tmp_path: Path) -> None:
    result = lint_imports(build_view(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


@pytest.mark.parametrize(
    ("module", "source", "contract"),
    [
        ("wander/client/planted.py", "import wander.service.engine",
         "The client never imports the service, the trainer or the CLI"),
        ("wander/client/planted.py", "from wander.trainer import grpo",
         "The client never imports the service, the trainer or the CLI"),
        ("wander/service/envs/tictactoe/planted.py", "from wander.service.store import memory",
         "Environments import only the SDK, seeding and their own modules"),
        ("wander/service/archive/planted.py", "from wander.client import sync",
         "The service imports only the client's wire models and summary code"),
        ("wander/trainer/planted.py", "from wander.service.envs import tictactoe",
         "The trainer never imports the service"),
        ("wander/service/store/planted.py", "from wander.service.engine import Engine",
         "Inside the service: app, routes, engine, catalog, environments"),
        ("bench/planted.py", "import tests.conftest", "Benchmarks never import the tests"),
    ],
)  # fmt: skip
def test_a_planted_violation_is_reported(
    tmp_path: Path, module: str, source: str, contract: str
) -> None:
    view = build_view(tmp_path)
    (view / module).write_text(f"{source}\n")  # in the view only: the repository is untouched
    result = lint_imports(view)
    assert result.returncode != 0
    assert f"{contract} BROKEN" in result.stdout, result.stdout
    planted = module.removesuffix(".py").replace("/", ".")
    assert planted in result.stdout
