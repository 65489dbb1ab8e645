"""Handling dead letters: the admin routes on both stores, and `wander archive
dead-letters list|retry|drop` against a real service on Redis and PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import redis
from typer.testing import CliRunner

from tests.helpers import archived_ids, error_of, service
from tests.poison import NUL_RUN, REFUSE_CURSED, execute, queue
from tests.records import tictactoe_record
from wander.cli import app as cli
from wander.service.archive.migrations import upgrade
from wander.service.settings import Settings
from wander.service.store import EpisodeStore
from wander.testing import ServiceProcess

runner = CliRunner(env={"COLUMNS": "200"})

UNREADABLE = b'{"id": "ep_odd", "env": "tictactoe", "run": "r\\u0000"}'
"""A record the archiver cannot even read: set aside at once, on any database."""


async def dead_letter_ids(api: httpx.AsyncClient, count: int) -> list[str]:
    """The ids listed once the archiver has set ``count`` records aside. (A page's list and
    its total are read one after the other while the archiver runs: wait for both.)"""
    for _ in range(100):
        page = (await api.get("/v1/admin/dead-letters")).json()
        if page["total"] == count == len(page["dead_letters"]):
            return [letter["id"] for letter in page["dead_letters"]]
        await asyncio.sleep(0.05)
    raise AssertionError(f"never {count} dead letters: {page}")


async def test_dead_letters_are_listed_retried_and_dropped(settings: Settings) -> None:
    async with service(settings) as (app, api):
        await listed_retried_and_dropped(app.state.archiver.store, api)


async def listed_retried_and_dropped(store: EpisodeStore, api: httpx.AsyncClient) -> None:
    before = datetime.now(UTC)
    await queue(store, UNREADABLE, b"not json")
    first, second = await dead_letter_ids(api, 2)

    page = (await api.get("/v1/admin/dead-letters")).json()
    odd, junk = page["dead_letters"]
    assert (odd["episode_id"], odd["env"], odd["run"]) == ("ep_odd", "tictactoe", "r\x00")
    assert odd["error"].startswith("not an episode record: version: Field required")
    assert (junk["episode_id"], junk["env"], junk["run"]) == (None, None, None)
    assert junk["error"].startswith("not an episode record: Invalid JSON")
    failed_at = datetime.fromisoformat(odd["failed_at"])
    assert before - timedelta(seconds=1) <= failed_at <= datetime.now(UTC)
    paged = (await api.get("/v1/admin/dead-letters", params={"limit": 1, "after": first})).json()
    assert paged["total"] == 2 and [letter["id"] for letter in paged["dead_letters"]] == [second]

    retried = await api.post("/v1/admin/dead-letters/retry", json={"ids": [first, "0-9", first]})
    assert retried.status_code == 200, retried.text
    assert retried.json() == {"ids": [first], "missing": ["0-9"]}
    # Still unreadable: the archiver sets it aside again, under a new id, after the other.
    again = await dead_letter_ids(api, 2)
    assert again[0] == second and again[1] not in (first, second)

    dropped = await api.post("/v1/admin/dead-letters/drop", json={"all": True})
    assert dropped.json() == {"ids": again, "missing": []}
    assert (await api.get("/v1/admin/dead-letters")).json() == {"total": 0, "dead_letters": []}
    assert await store.backlog() == 0


@pytest.mark.parametrize("store_kind", ["memory"])
@pytest.mark.parametrize(
    "body",
    [
        {},
        {"all": False},
        {"ids": []},
        {"ids": ["1-0"], "all": True},
        {"ids": "1-0"},
        {"ids": ["a b"]},
        {"ids": ["x" * 65]},
        {"ids": ["1-0"] * 1001},
        {"all": True, "also": 1},
        {"all": "yes"},
        [],
    ],
)
async def test_a_selection_names_ids_or_all(api: httpx.AsyncClient, body: Any) -> None:
    for action in ("retry", "drop"):
        response = await api.post(f"/v1/admin/dead-letters/{action}", json=body)
        assert response.status_code == 422, response.text
        assert error_of(response)["code"] == "validation_error"


@pytest.mark.parametrize("store_kind", ["memory"])
@pytest.mark.parametrize("query", ["limit=0", "limit=1001", "limit=x", "after=a%00b", "after="])
async def test_listing_parameters_are_checked(api: httpx.AsyncClient, query: str) -> None:
    response = await api.get(f"/v1/admin/dead-letters?{query}")
    assert response.status_code == 422, response.text


@pytest.fixture
def served(
    postgresql_url: str, redis_url: str, redis_prefix: str
) -> Iterator[tuple[ServiceProcess, str]]:
    """A real `wander serve` on Redis and PostgreSQL, whose database refuses the run label
    "cursed"; yields it and its database URL."""
    upgrade(postgresql_url)
    execute(postgresql_url, *REFUSE_CURSED)
    env = {
        "WANDER_DATABASE_URL": postgresql_url,
        "WANDER_REDIS_URL": redis_url,
        "WANDER_REDIS_PREFIX": redis_prefix,
    }
    process = ServiceProcess(env).start()
    yield process, postgresql_url
    process.stop()


def queue_over_redis(url: str, prefix: str, data: list[bytes]) -> None:
    """Queue records as the service's steps do, into its Redis stream."""
    client = redis.Redis.from_url(url)
    for item in data:
        client.xadd(f"{prefix}archive", {"d": item})
    client.close()


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 15
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        time.sleep(0.1)


def listed(url: str) -> list[dict[str, Any]]:
    letters: list[dict[str, Any]] = httpx.get(f"{url}/v1/admin/dead-letters").json()["dead_letters"]
    return letters


def test_the_cli_lists_retries_and_drops_dead_letters(
    served: tuple[ServiceProcess, str], redis_url: str, redis_prefix: str
) -> None:
    server, database_url = served
    url = ["--url", server.url]
    records = [
        tictactoe_record(0, "win"),
        tictactoe_record(1, "win", run=NUL_RUN),
        tictactoe_record(2, "draw", run="cursed"),
        tictactoe_record(3, "loss"),
    ]
    queue_over_redis(redis_url, redis_prefix, [r.model_dump_json().encode() for r in records])
    wait_for(lambda: len(listed(server.url)) == 2, "two dead letters")
    assert archived_ids(database_url, "run-a") == ["ep_0000", "ep_0003"]
    nul, cursed = listed(server.url)

    shown = runner.invoke(cli, ["archive", "dead-letters", "list", *url])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    nul_line = next(line for line in lines if nul["id"] in line)
    assert "ep_0001" in nul_line and "a\\x00b" in nul_line and "NUL (0x00)" in nul_line
    cursed_line = next(line for line in lines if cursed["id"] in line)
    assert "ep_0002" in cursed_line and "cursed runs are refused" in cursed_line
    assert lines[-1] == "2 of 2 dead letters"
    one = runner.invoke(cli, ["archive", "dead-letters", "list", "--limit", "1", *url])
    assert one.output.splitlines()[-1] == f"1 of 2 dead letters; the next with --after {nul['id']}"

    # The database is fixed: the cursed record goes back and is archived this time.
    execute(database_url, "DROP TRIGGER refuse_cursed ON episodes")
    retried = runner.invoke(cli, ["archive", "dead-letters", "retry", cursed["id"], *url])
    assert retried.exit_code == 0, retried.output
    assert retried.output == "Moved 1 dead letter back to the archive backlog.\n"
    wait_for(lambda: archived_ids(database_url, "cursed") == ["ep_0002"], "ep_0002 archived")
    assert [letter["id"] for letter in listed(server.url)] == [nul["id"]]

    missing = runner.invoke(cli, ["archive", "dead-letters", "retry", cursed["id"], *url])
    assert missing.exit_code == 1
    assert missing.output.splitlines()[-1] == f"Error: no dead letter has the id {cursed['id']}"
    both = runner.invoke(cli, ["archive", "dead-letters", "retry", nul["id"], "--all", *url])
    assert both.exit_code == 2 and "give dead-letter ids or --all" in both.output

    kept = runner.invoke(cli, ["archive", "dead-letters", "drop", "--all", *url], input="n\n")
    assert kept.exit_code == 1 and "Drop every dead letter for good?" in kept.output
    assert len(listed(server.url)) == 1
    dropped = runner.invoke(cli, ["archive", "dead-letters", "drop", "--all", "--yes", *url])
    assert dropped.exit_code == 0 and dropped.output == "Dropped 1 dead letter.\n"
    empty = runner.invoke(cli, ["archive", "dead-letters", "list", *url])
    assert empty.exit_code == 0 and empty.output == "No dead letters.\n"
