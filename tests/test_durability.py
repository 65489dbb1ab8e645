"""`wander serve` says when its Redis would lose episodes on a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.redis_server import RedisServer
from wander.cli import app as cli
from wander.service.store.durability import persistence_warning
from wander.testing import free_port

PERSISTENCE = {
    "none": ["--save", "", "--appendonly", "no"],
    "snapshots": ["--save", "3600 1", "--appendonly", "no"],
    "aof": ["--save", "", "--appendonly", "yes"],
}


@pytest.fixture(params=list(PERSISTENCE))
def redis_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A redis-server of the test's own, with one of the persistence settings."""
    server = RedisServer(tmp_path, PERSISTENCE[request.param]).start()
    yield request.param, server.url
    server.stop()


def test_the_warning_says_what_a_restart_loses(redis_server: tuple[str, str]) -> None:
    kind, url = redis_server
    warning = persistence_warning(url)
    if kind == "aof":
        assert warning is None
    elif kind == "none":
        assert warning is not None and warning.startswith("keeps nothing on disk")
    else:
        assert warning is not None and warning.startswith("only saves snapshots (save '3600 1')")


def test_wander_serve_prints_it_at_start(
    redis_server: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    kind, url = redis_server
    started: list[str] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: started.append(app))
    environment = {"WANDER_REDIS_URL": url, "WANDER_DATABASE_URL": f"sqlite:///{tmp_path}/a.db"}
    result = CliRunner(env={**environment, "COLUMNS": "200"}).invoke(cli, ["serve"])
    assert result.exit_code == 0, result.output
    assert started == ["wander.service.app:create_app"]
    warned = f"Warning: the Redis at {url} " in result.output
    assert warned == (kind != "aof")


def test_an_unreachable_redis_is_not_a_warning() -> None:
    assert persistence_warning(f"redis://127.0.0.1:{free_port()}/0") is None
