"""No finished episode is lost or written twice when the database goes away, or the
process with it (docs/architecture.md#the-archive, docs/operations.md#reliability)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from tests.agents import random_agent
from tests.helpers import archived_ids, create, error_of, play_game, service
from tests.poison import NUL_RUN, queue
from tests.proxy import OutageProxy, behind_proxy
from tests.records import tictactoe_record
from wander.client import AsyncWanderClient
from wander.service.archive.migrations import upgrade
from wander.service.backpressure import READ_EVERY
from wander.service.settings import Settings

GAMES = 6


@pytest.fixture
def proxy(postgresql_url: str) -> Iterator[tuple[OutageProxy, str]]:
    """The test's PostgreSQL database (``postgresql_url``) behind a proxy that can cut it off;
    yields the proxy and the URL through it."""
    upgrade(postgresql_url)
    with behind_proxy(postgresql_url) as (outage, url):
        yield outage, url


async def play(api: httpx.AsyncClient, run: str, games: int = GAMES) -> set[str]:
    """Finish ``games`` games; every step must succeed whatever the database does."""
    ids = set()
    for example in range(games):
        [episode] = await create(api, example=example, run=run)
        await play_game(api, episode, random_agent(example))
        ids.add(episode["id"])
    return ids


async def eventually_archived(url: str, run: str, expected: set[str]) -> list[str]:
    for _ in range(150):
        ids = await asyncio.to_thread(archived_ids, url, run)
        if len(ids) >= len(expected):
            return ids
        await asyncio.sleep(0.1)
    raise AssertionError(f"only {len(ids)} of {len(expected)} episodes were archived")


async def test_redis_keeps_the_backlog_through_an_outage_and_a_restart(
    proxy: tuple[OutageProxy, str], postgresql_url: str, redis_url: str, redis_prefix: str
) -> None:
    outage, database_url = proxy
    settings = Settings(
        redis_url=redis_url,
        redis_prefix=redis_prefix,
        database_url=database_url,
        archive_claim_seconds=0.5,
    )
    outage.down()
    async with service(settings) as (app, api):
        played = await play(api, "outage")
        ready = await api.get("/readyz")
        assert ready.status_code == 503
        assert error_of(ready)["code"] == "database_unavailable"
        assert await app.state.archiver.store.backlog() == GAMES
    # The process is gone with the database still down: the backlog waits in Redis.
    assert archived_ids(postgresql_url, "outage") == []

    outage.up()
    async with service(settings) as (app, api):
        ids = await eventually_archived(database_url, "outage", played)
        assert (await api.get("/readyz")).status_code == 200
        more = await play(api, "outage", games=2)
        ids = await eventually_archived(database_url, "outage", played | more)
        assert await app.state.archiver.store.backlog() == 0
    assert sorted(ids) == sorted(played | more)  # each exactly once


async def test_the_in_process_store_retries_until_the_database_is_back(
    proxy: tuple[OutageProxy, str],
) -> None:
    outage, database_url = proxy
    outage.down()
    async with service(Settings(redis_url=None, database_url=database_url)) as (app, api):
        played = await play(api, "retry")
        await asyncio.sleep(0.5)  # the archiver fails and backs off meanwhile
        assert await app.state.archiver.store.backlog() == GAMES
        outage.up()
        ids = await eventually_archived(database_url, "retry", played)
        assert await app.state.archiver.store.backlog() == 0
    assert sorted(ids) == sorted(played)


async def test_the_in_process_store_flushes_on_shutdown(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    async with service(Settings(redis_url=None, database_url=sqlite_url)) as (app, api):
        app.state.archiver.stop()  # only the shutdown flush can write now
        await asyncio.sleep(0.1)
        played = await play(api, "flush", games=3)
        assert await app.state.archiver.store.backlog() == 3
    assert sorted(archived_ids(sqlite_url, "flush")) == sorted(played)


@pytest.mark.parametrize("store_kind", ["memory", "redis"])
async def test_an_outage_sets_nothing_aside_and_a_poison_record_waits_with_the_rest(
    proxy: tuple[OutageProxy, str], store_kind: str, request: pytest.FixtureRequest
) -> None:
    """While the database is unreachable no record is to blame: all wait, none is set
    aside. Once it is back the poison record among them is, and only it."""
    outage, database_url = proxy
    settings = Settings(redis_url=None, database_url=database_url)
    if store_kind == "redis":
        prefix = request.getfixturevalue("redis_prefix")
        settings = Settings(
            redis_url=request.getfixturevalue("redis_url"), redis_prefix=prefix,
            database_url=database_url,
        )  # fmt: skip
    poison = tictactoe_record(99, "win", run=NUL_RUN)
    outage.down()
    async with service(settings) as (app, api):
        store = app.state.archiver.store
        played = await play(api, "poisoned", games=2)
        await queue(store, poison)
        played |= await play(api, "poisoned", games=2)
        await asyncio.sleep(1.0)  # the archiver fails and backs off meanwhile
        assert await store.backlog() == 5
        assert await store.dead_letter_count() == 0

        outage.up()
        ids = await eventually_archived(database_url, "poisoned", played)
        for _ in range(100):
            if await store.backlog() == 0:
                break
            await asyncio.sleep(0.1)
        [letter] = await store.dead_letters(10)
    assert letter.data == poison.model_dump_json().encode()
    assert "NUL" in letter.error
    assert sorted(ids) == sorted(played)  # each exactly once


async def test_past_its_backlog_bound_new_episodes_wait_and_live_ones_step(
    sqlite_url: str,
) -> None:
    """The archive stopped, three games finish: past a bound of two, creating answers 503
    ``archive_backlog`` with Retry-After, a live game steps on, /readyz says why; the
    client retries the create, which succeeds once the archive drains the backlog."""
    upgrade(sqlite_url)
    settings = Settings(redis_url=None, database_url=sqlite_url, archive_backlog_max=2)
    async with service(settings) as (app, api):
        app.state.archiver.stop()
        [live] = await create(api, example=9, run="backlog")
        await play(api, "backlog", games=3)
        await asyncio.sleep(READ_EVERY)  # the backlog a process counted stands this long
        refused = await api.post("/v1/episodes", json={"env": "tictactoe"})
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        assert error_of(refused)["code"] == "archive_backlog"
        assert error_of(refused)["details"] == {"backlog": 3, "limit": 2}
        stepped = await api.post(
            f"/v1/episodes/{live['id']}/step", json={"action": "<move>4</move>"}
        )
        assert stepped.status_code == 200, stepped.text
        ready = await api.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["archive"].startswith("3 finished episodes are waiting for the archive")

        async def drain() -> None:
            await asyncio.sleep(0.3)
            assert await app.state.archiver.flush() == 3

        client = AsyncWanderClient("http://wander.test", transport=httpx.ASGITransport(app=app))
        async with client:
            draining = asyncio.create_task(drain())
            [episode] = await client.create("tictactoe", run="after")
            await draining
        assert episode.turn == 0
        assert (await api.get("/readyz")).json() == {"status": "ready"}
