"""Several service processes on one Redis (or one Redis Cluster) serve one episode as if
they were one (docs/architecture.md#seeds-and-determinism: same inputs, same bytes, on
any replica, before and after a restart)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agents import answer
from tests.helpers import service
from wander.service.archive.migrations import upgrade
from wander.service.envs.seeding import stable_hash
from wander.service.envs.tictactoe.game import legal_moves
from wander.service.settings import Settings
from wander.testing import ServiceProcess

CONFIG = {"min_random_move_prob": 0.5, "max_random_move_prob": 0.5, "max_turns": 12}


def board_agent(board: str) -> str:
    """Deterministic in the board alone, with an invalid move now and then."""
    pick = stable_hash("agent", board)
    if pick % 5 == 0:
        return answer(9)
    moves = legal_moves(board)
    return answer(moves[pick % len(moves)])


STORE_KINDS = ["redis", "cluster"]


@pytest.fixture
def replicas(
    shared_redis: tuple[str, str], store_kind: str, sqlite_url: str
) -> Iterator[list[ServiceProcess]]:
    """Two service processes on the Redis or the Redis Cluster of ``store_kind``."""
    redis_url, redis_prefix = shared_redis
    env = {
        "WANDER_REDIS_URL": redis_url,
        "WANDER_REDIS_PREFIX": redis_prefix,
        "WANDER_DATABASE_URL": sqlite_url,
    }
    servers = [ServiceProcess(env).start(), ServiceProcess(env).start()]
    yield servers
    for server in servers:
        server.stop()


def strip_ids(result: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in result.items() if key != "episode_id"}


async def reference_game(
    example: int, database_url: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The game played on one process with the in-process store."""
    upgrade(database_url)
    async with service(Settings(redis_url=None, database_url=database_url)) as (_, api):
        body = {"env": "tictactoe", "config": CONFIG, "example": example}
        episode = (await api.post("/v1/episodes", json=body)).json()["episodes"][0]
        results, board, done = [], episode["info"]["board"], False
        while not done:
            action = {"action": board_agent(board), "turn": len(results)}
            result = (await api.post(f"/v1/episodes/{episode['id']}/step", json=action)).json()
            results.append(strip_ids(result))
            board, done = result["info"]["board"], result["done"]
        score = (await api.get(f"/v1/episodes/{episode['id']}/score")).json()
        return results, strip_ids(score)


@pytest.mark.parametrize("example", [3, 8])
def test_alternating_replicas_and_a_kill_9_change_nothing(
    replicas: list[ServiceProcess], example: int, tmp_path: Path
) -> None:
    reference_db = f"sqlite:///{tmp_path}/reference.db"
    expected_results, expected_score = asyncio.run(reference_game(example, reference_db))
    assert len(expected_results) >= 3

    body = {"env": "tictactoe", "config": CONFIG, "example": example}
    episode = httpx.post(f"{replicas[0].url}/v1/episodes", json=body).json()["episodes"][0]
    results, board, done = [], episode["info"]["board"], False
    while not done:
        turn = len(results)
        if turn == 2:
            replicas[0].kill()  # mid-episode, between two steps
            replicas[0].start()
        server = replicas[turn % 2]
        action = {"action": board_agent(board), "turn": turn}
        response = httpx.post(f"{server.url}/v1/episodes/{episode['id']}/step", json=action)
        assert response.status_code == 200, response.text
        result = response.json()
        results.append(strip_ids(result))
        board, done = result["info"]["board"], result["done"]
    score = httpx.get(f"{replicas[1].url}/v1/episodes/{episode['id']}/score").json()

    assert results == expected_results
    assert strip_ids(score) == expected_score


async def test_32_simultaneous_steps_across_two_processes_apply_once(
    replicas: list[ServiceProcess],
) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        body = {"env": "tictactoe", "config": CONFIG, "example": 1}
        created = await client.post(f"{replicas[0].url}/v1/episodes", json=body)
        episode_id = created.json()["episodes"][0]["id"]
        responses = await asyncio.gather(
            *(
                client.post(
                    f"{replicas[i % 2].url}/v1/episodes/{episode_id}/step",
                    json={"action": answer(4, f"racer {i}"), "turn": 0},
                )
                for i in range(32)
            )
        )
        assert sorted(r.status_code for r in responses) == [200] + [409] * 31
        record = (await client.get(f"{replicas[1].url}/v1/episodes/{episode_id}")).json()
        assert record["turn"] == 1 and len(record["messages"]) == 4
