"""Many simultaneous steps on one episode apply exactly once (docs/api.md#step-semantics), on
every store: in-process, Redis and Redis Cluster."""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx
from asgi_lifespan import LifespanManager

from tests.agents import answer
from tests.helpers import create, error_of, step
from wander.service.app import create_app
from wander.service.archive.migrations import upgrade
from wander.service.settings import Settings

STORE_KINDS = ["memory", "redis", "cluster"]
OPTIMAL = {"min_random_move_prob": 0.0, "max_random_move_prob": 0.0}


async def test_32_identical_steps_apply_once_and_all_get_its_result(api: httpx.AsyncClient) -> None:
    [episode] = await create(api, config=OPTIMAL, example=1)
    responses = await asyncio.gather(*(step(api, episode["id"], answer(4), 0) for _ in range(32)))
    assert {r.status_code for r in responses} == {200}
    assert len({r.content for r in responses}) == 1
    record = (await api.get(f"/v1/episodes/{episode['id']}")).json()
    assert record["turn"] == 1
    assert [m["role"] for m in record["messages"]] == ["system", "user", "assistant", "user"]


async def test_32_different_steps_for_one_turn_one_wins(api: httpx.AsyncClient) -> None:
    [episode] = await create(api, config=OPTIMAL, example=1)
    responses = await asyncio.gather(
        *(step(api, episode["id"], answer(4, f"racer {i}"), 0) for i in range(32))
    )
    statuses = Counter(r.status_code for r in responses)
    assert statuses == {200: 1, 409: 31}
    assert {error_of(r)["code"] for r in responses if r.status_code == 409} == {"turn_mismatch"}
    winner = next(r for r in responses if r.status_code == 200).json()
    record = (await api.get(f"/v1/episodes/{episode['id']}")).json()
    assert record["turn"] == 1 and len(record["messages"]) == 4
    assert record["step_rewards"] == [winner["reward"]]


async def test_32_unturned_steps_all_apply_without_losing_one(api: httpx.AsyncClient) -> None:
    [episode] = await create(api, config={"max_turns": 64}, example=1)
    responses = await asyncio.gather(*(step(api, episode["id"], f"bad {i}") for i in range(32)))
    assert {r.status_code for r in responses} == {200}
    assert sorted(r.json()["turn"] for r in responses) == list(range(1, 33))
    record = (await api.get(f"/v1/episodes/{episode['id']}")).json()
    assert record["turn"] == 32
    actions = [m["content"] for m in record["messages"] if m["role"] == "assistant"]
    assert sorted(actions) == sorted(f"bad {i}" for i in range(32))
    assert record["state"]["invalid_moves"] == 32


async def test_more_requests_than_redis_connections_wait_instead_of_failing(
    redis_url: str, redis_prefix: str, sqlite_url: str
) -> None:
    upgrade(sqlite_url)
    settings = Settings(
        redis_url=redis_url,
        redis_prefix=redis_prefix,
        database_url=sqlite_url,
        redis_max_connections=2,
    )
    async with LifespanManager(create_app(settings)) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as api:
            episodes = await create(api, example=0, n=40)
            responses = await asyncio.gather(
                *(step(api, episode["id"], answer(4), 0) for episode in episodes)
            )
    assert [r.status_code for r in responses] == [200] * 40
