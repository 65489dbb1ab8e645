"""No finished episode is lost or written twice when the database goes away, or the
process with it (DESIGN §6)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import httpx
import pytest
import sqlalchemy
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from wander.service.app import create_app
from wander.service.archive import Archive, EpisodeFilter
from wander.service.archive.migrations import upgrade
from wander.service.settings import Settings

from tests.agents import random_agent
from tests.helpers import create, error_of, play_game
from tests.proxy import OutageProxy

GAMES = 6


@pytest.fixture
def proxy(postgresql_url: str) -> Iterator[tuple[OutageProxy, str]]:
    """The test's PostgreSQL database (``postgresql_url``) behind a proxy that can cut it off;
    yields the proxy and the URL through it."""
    upgrade(postgresql_url)
    target = sqlalchemy.make_url(postgresql_url)
    with OutageProxy(target.host or "127.0.0.1", target.port or 5432) as outage:
        url = target.set(host="127.0.0.1", port=outage.port)
        yield outage, url.render_as_string(hide_password=False)


@asynccontextmanager
async def service(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = create_app(settings)
    async with (
        LifespanManager(app, shutdown_timeout=30) as manager,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=manager.app), base_url="http://wander.test"
        ) as client,
    ):
        yield app, client


async def play(api: httpx.AsyncClient, run: str, games: int = GAMES) -> set[str]:
    """Finish ``games`` games; every step must succeed whatever the database does."""
    ids = set()
    for example in range(games):
        [episode] = await create(api, example=example, run=run)
        await play_game(api, episode, random_agent(example))
        ids.add(episode["id"])
    return ids


def archived_ids(url: str, run: str) -> list[str]:
    archive = Archive(url)
    try:
        page = archive.episodes(run, EpisodeFilter(), limit=1000, offset=0)
    finally:
        archive.dispose()
    return [episode.id for episode in page.episodes]


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
        app.state.archiver.poll_seconds = 3600  # only the shutdown flush can write now
        await asyncio.sleep(0.7)
        played = await play(api, "flush", games=3)
        assert await app.state.archiver.store.backlog() == 3
    assert sorted(archived_ids(sqlite_url, "flush")) == sorted(played)
