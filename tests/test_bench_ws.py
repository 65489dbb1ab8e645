"""Smoke test of the WebSocket bench (`make bench`): the load generator's ``ws`` mode
plays whole tic-tac-toe games through a real ``wander serve`` on Redis, with no error.
It measures nothing: the numbers belong in bench/results/."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.loadgen import run_load
from wander.testing import ServiceProcess


@pytest.fixture
def service(redis_url: str, redis_prefix: str, sqlite_url: str) -> Iterator[ServiceProcess]:
    env = {"WANDER_REDIS_URL": redis_url, "WANDER_REDIS_PREFIX": redis_prefix,
           "WANDER_DATABASE_URL": sqlite_url}  # fmt: skip
    process = ServiceProcess(env).start()
    yield process
    process.stop()


async def test_two_websocket_sessions_play_whole_games(service: ServiceProcess) -> None:
    result = await run_load(
        f"{service.url}/openenv/tictactoe", agents=2, seconds=1.0, mode="ws", batch=1,
        opponent="random",
    )  # fmt: skip
    assert result.errors == 0
    assert result.episodes >= 2  # each session finished a game at least
    assert result.requests == result.steps  # one timed answer per step frame
    assert result.steps >= 3 * result.episodes  # X needs three moves to end a game
