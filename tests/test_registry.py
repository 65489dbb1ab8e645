"""Environments an install cannot offer are listed with the reason, not silently absent."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from tests.helpers import service
from wander.extras import install_command
from wander.service.settings import Settings
from wander.testing import ServiceProcess

EXTRA = install_command("rg")


@pytest.fixture
async def without_reasoning_gym(
    monkeypatch: pytest.MonkeyPatch, sqlite_url: str
) -> AsyncIterator[httpx.AsyncClient]:
    """The service on an install where reasoning-gym cannot be imported."""
    from wander.service.archive.migrations import upgrade

    monkeypatch.setitem(sys.modules, "reasoning_gym.factory", None)  # import fails
    upgrade(sqlite_url)
    async with service(Settings(redis_url=None, database_url=sqlite_url)) as (_, api):
        yield api


async def test_the_listing_names_the_missing_extra(
    without_reasoning_gym: httpx.AsyncClient,
) -> None:
    listing = (await without_reasoning_gym.get("/v1/environments")).json()
    names = [env["name"] for env in listing["environments"]]
    assert "tictactoe" in names and not any(name.startswith("rg/") for name in names)
    [unavailable] = listing["unavailable"]
    assert unavailable["name"] == "rg/*"
    assert EXTRA in unavailable["reason"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/environments/rg/leg_counting", None),
        ("POST", "/v1/episodes", {"env": "rg/leg_counting"}),
    ],
)
async def test_asking_for_one_says_what_to_install(
    without_reasoning_gym: httpx.AsyncClient, method: str, path: str, body: object
) -> None:
    response = await without_reasoning_gym.request(method, path, json=body)
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "env_not_found"
    assert "rg/leg_counting" in error["message"] and EXTRA in error["message"]


async def test_with_reasoning_gym_installed_nothing_is_unavailable(api: httpx.AsyncClient) -> None:
    listing = (await api.get("/v1/environments")).json()
    assert listing["unavailable"] == []
    assert any(env["name"] == "rg/leg_counting" for env in listing["environments"])
    missing = await api.get("/v1/environments/nope")
    assert missing.json()["error"]["message"] == "no environment named 'nope'"


def test_wander_envs_names_what_a_service_without_the_extra_lacks(tmp_path: Path) -> None:
    """A real `wander serve` whose Python cannot import reasoning-gym, nor the numpy and
    sympy it brings (as after `make serve`: stand-in packages that fail to import, first
    on its path), and the `wander envs` a user would run."""
    from wander.cli import app as cli

    shims = tmp_path / "shim"
    for missing in ("reasoning_gym", "numpy", "sympy"):
        (shims / missing).mkdir(parents=True)
        (shims / missing / "__init__.py").write_text(
            f"raise ModuleNotFoundError({f'No module named {missing!r}'!r}, name={missing!r})\n"
        )
    env = {
        "PYTHONPATH": str(shims),
        "WANDER_REDIS_URL": "",
        "WANDER_DATABASE_URL": f"sqlite:///{tmp_path}/archive.db",
    }
    server = ServiceProcess(env).start()
    try:
        result = CliRunner(env={"COLUMNS": "200"}).invoke(cli, ["envs", "--url", server.url])
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    assert "tictactoe" in result.output and "rg/leg_counting" not in result.output
    assert (
        f"rg/* not offered: it needs the reasoning-gym package, which is not installed: {EXTRA}"
        in (" ".join(result.output.split()))
    )
