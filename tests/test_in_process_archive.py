"""The in-process store's finished episodes reach the archive as they finish, so that
``kill -9`` of its service loses at most those of the last moment: the
archiver is woken by each record queued in the process's backlog, instead of polling it
every half second (a kill lost what finished in between: 70 games in the attack)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable
from typing import TypeVar

import httpx

from tests.agents import random_agent
from tests.helpers import archived_ids, create, play_game, service
from tests.load import BatchPlayers, Players, account
from wander.service.archive.migrations import upgrade
from wander.service.settings import Settings
from wander.testing import ServiceProcess

LOAD_SECONDS = 6.0
LAST_MOMENT_SECONDS = 0.2
"""What a kill may lose: the games that finished while the archive writes under way at
that moment ran; 0.1 to 0.15 s worth of games on the saturated 2-core development
machine (README's "Reliability"), with a margin, plus a couple."""


async def test_a_finished_episode_is_archived_without_waiting_for_a_poll(
    sqlite_url: str,
) -> None:
    upgrade(sqlite_url)
    async with service(Settings(redis_url=None, database_url=sqlite_url)) as (app, api):
        app.state.archiver.poll_seconds = 3600
        await asyncio.sleep(0.7)  # the poll under way ends: the next is an hour away
        for example in range(3):
            [episode] = await create(api, example=example, run="woken")
            await play_game(api, episode, random_agent(example))
            for _ in range(100):
                if episode["id"] in await asyncio.to_thread(archived_ids, sqlite_url, "woken"):
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"game {example} was not archived while the service ran")
        for _ in range(100):  # the row is written before its outbox entry is let go
            if await app.state.archiver.store.backlog() == 0:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the archived games stayed in the backlog")


def embedded(sqlite_url: str) -> dict[str, str]:
    """The settings of the embedded default (in-process store, SQLite archive, written by
    a process of its own)."""
    upgrade(sqlite_url)
    return {
        "WANDER_REDIS_URL": "",
        "WANDER_DATABASE_URL": sqlite_url,
        "WANDER_LOG_LEVEL": "warning",
        "WANDER_ARCHIVE_WRITER": "process",
    }


L = TypeVar("L", Players, BatchPlayers)


async def killed_under(
    environment: dict[str, str], load: Callable[[str], L], seconds: float
) -> tuple[L, float]:
    """A service of ``environment`` under ``load`` (made for its URL), killed with ``kill -9``
    after ``seconds``: the load, and how long it ran. Nothing is flushed: what is archived
    was archived while the service ran.

    The load starts once the service has archived a game: its writer process starts with
    it, and until the interpreter has imported what it writes with (seconds, on a machine
    busy with the rest of the suite: nothing was archived in six, once), the games wait in
    the backlog: what a kill then loses is the writer's start, not the last moment."""
    service = ServiceProcess(environment).start()
    players = load(service.url)
    try:
        await archived_warm_up(service.url, environment["WANDER_DATABASE_URL"])
        playing = asyncio.create_task(players.play())
        started = time.monotonic()
        await asyncio.sleep(seconds)
        service.kill()
        elapsed = time.monotonic() - started
        playing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await playing
    finally:
        service.kill()
    return players, elapsed


async def archived_warm_up(url: str, database_url: str, timeout: float = 120.0) -> None:
    """Play one game on the service at ``url`` and wait until it is archived."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as api:
        [episode] = await create(api, run="warm-up")
        await play_game(api, episode, random_agent(0))
    deadline = time.monotonic() + timeout
    while episode["id"] not in await asyncio.to_thread(archived_ids, database_url, "warm-up"):
        assert time.monotonic() < deadline, "the service archived nothing"
        await asyncio.sleep(0.1)


async def test_kill_9_loses_at_most_the_last_moment(sqlite_url: str) -> None:
    """Without a restart: the archive holds every game but those of the last moment."""
    load = functools.partial(Players, run="kill-9", agents=16)
    players, elapsed = await killed_under(embedded(sqlite_url), load, LOAD_SECONDS)
    result = account(players.finished, sqlite_url, "kill-9")
    print(
        f"\nin-process store, kill -9 after {elapsed:.1f} s of load: "
        f"{result.finished} games finished ({result.finished / elapsed:.0f}/s), "
        f"{result.archived} archived, {len(result.lost)} lost, "
        f"{len(result.duplicated)} duplicated, {result.unseen} archived unseen; "
        f"{players.traffic.requests} requests"
    )
    assert result.finished > 20, "the load never got going"
    assert result.duplicated == []
    assert len(result.lost) <= 2 + result.finished / elapsed * LAST_MOMENT_SECONDS, result.lost


BATCH_SECONDS = 6.0


async def test_kill_9_under_batch_load_loses_no_game_it_reported_finished(
    sqlite_url: str,
) -> None:
    """The embedded default under batch load (4 clients stepping 64 games a request): the
    archive falls behind the games, ``kill -9`` takes the process, and a service started
    again on the same files archives every game a client saw finish (the outbox kept
    them on disk: ``store/outbox.py``); lost, at most 1% and a second's worth."""
    environment = embedded(sqlite_url)
    load = functools.partial(BatchPlayers, run="kill-9-batch", clients=4, width=64)
    players, elapsed = await killed_under(environment, load, BATCH_SECONDS)
    behind = account(players.finished, sqlite_url, "kill-9-batch")
    again = ServiceProcess(environment).start()
    try:
        for _ in range(300):
            result = account(players.finished, sqlite_url, "kill-9-batch")
            if not result.lost:
                break
            await asyncio.sleep(0.1)
    finally:
        again.stop()
    print(
        f"\nin-process store, kill -9 after {elapsed:.1f} s of batch load: "
        f"{result.finished} games finished ({result.finished / elapsed:.0f}/s), "
        f"{len(behind.lost)} not yet archived at the kill, {len(result.lost)} lost after "
        f"a restart, {len(result.duplicated)} duplicated"
    )
    assert result.finished > 200, "the load never got going"
    assert result.duplicated == []
    assert len(result.lost) <= min(result.finished / 100, result.finished / elapsed)
