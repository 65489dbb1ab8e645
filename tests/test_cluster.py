"""The Redis store on a Redis Cluster of three primaries and behind Sentinel: a group stays
in one partition, batches and the archive span them, each finished episode is archived
once, and the URLs that name them are checked at start."""

from __future__ import annotations

import asyncio
import re
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis
from pydantic import ValidationError

from tests.agents import perfect_agent
from tests.helpers import archived_ids, create, service
from tests.redis_cluster import start_sentinel
from wander.service.archive.migrations import upgrade
from wander.service.errors import QuotaExceeded
from wander.service.settings import Settings
from wander.service.store import EpisodeStore, Usage, Versioned, open_store
from wander.service.store.base import Write
from wander.service.store.durability import persistence_warning
from wander.service.store.redis import RedisStore
from wander.testing import RedisServers

PARTITION = re.compile(r"ep_p([0-9]+)-")


def partition_of(episode_id: str) -> int:
    match = PARTITION.match(episode_id)
    assert match is not None, episode_id
    return int(match[1])


@pytest.fixture
async def store(redis_cluster_url: str, cluster_prefix: str) -> AsyncIterator[RedisStore]:
    store = RedisStore.from_url(redis_cluster_url, 60, cluster_prefix)
    yield store
    await store.aclose()


async def test_every_finished_episode_of_every_partition_is_handed_out_once(
    store: RedisStore,
) -> None:
    groups = [store.new_ids(3) for _ in range(12)]
    assert all(len({partition_of(i) for i in group}) == 1 for group in groups)
    assert len({partition_of(group[0]) for group in groups}) > 1  # 16 partitions: all alike 1e-13
    for group in groups:
        await store.add(dict.fromkeys(group, b"v1"), "tictactoe")
    ids = [episode_id for group in groups for episode_id in group]
    assert await store.load_many(ids) == [Versioned(b"v1", 1)] * len(ids)
    written = await store.replace_many(
        [Write(i, 1, b"done", i.encode()) for i in ids[::2]]
        + [Write(i, 1, b"on") for i in ids[1::2]]
    )
    assert written == [True] * len(ids)
    assert await store.live() == {"tictactoe": len(ids) // 2}
    assert await store.backlog() == len(ids) // 2

    handed: list[bytes] = []
    while batch := await store.pending(5):
        assert len(batch) <= 5
        handed += (item.data for item in batch)
        await store.acknowledge([item.token for item in batch])
    assert sorted(handed) == sorted(i.encode() for i in ids[::2])  # each once, none lost
    assert await store.backlog() == 0


async def test_a_dead_letter_keeps_its_partition(store: RedisStore) -> None:
    groups = [store.new_ids(1)[0] for _ in range(8)]
    for episode_id in groups:
        await store.add({episode_id: b"v1"}, "tictactoe")
        assert await store.replace(episode_id, 1, b"done", archive=episode_id.encode())
    queued = await store.pending(10)
    letters = [await store.dead_letter(item.token, "refused") for item in queued]
    assert await store.dead_letter_count() == 8
    listed = [letter.id for letter in await store.dead_letters(10)]
    assert sorted(listed) == sorted(letters)  # by time queued (partitions break ties)
    first = await store.dead_letters(3)
    later = await store.dead_letters(10, after=first[-1].id)
    assert [letter.id for letter in first + later] == listed  # pages neither skip nor repeat
    assert await store.retry_dead_letters(letters[:2]) == letters[:2]
    assert await store.drop_dead_letters(letters[2:]) == letters[2:]
    retried = sorted(item.data for item in queued[:2])  # pending's order is the partitions'
    assert sorted(item.data for item in await store.pending(10)) == retried


async def test_a_quota_counts_the_tenants_episodes_in_every_partition(store: RedisStore) -> None:
    groups = [store.new_ids(2) for _ in range(6)]
    partitions = {partition_of(group[0]) for group in groups}
    assert len(partitions) > 1
    quota = {"tenant": "t", "metadata_bytes": 3, "max_live": 8}
    for group in groups[:4]:
        await store.add(dict.fromkeys(group, b"{}"), "tictactoe", **quota)
    with pytest.raises(QuotaExceeded) as refused:
        await store.add(dict.fromkeys(groups[4], b"{}"), "tictactoe", **quota)
    assert refused.value.details == {"quota": "live_episodes", "limit": 8, "used": 8,
                                     "requested": 2}  # fmt: skip
    assert await store.tenant_usage("t") == Usage(8, 24)
    elsewhere = next(  # new ids land in a random partition: draw until another one
        ids for ids in iter(lambda: store.new_ids(1), None)
        if partition_of(ids[0]) != partition_of(groups[4][0])
    )  # fmt: skip
    with pytest.raises(ValueError, match="share a partition"):
        await store.add({groups[4][0]: b"{}", elsewhere[0]: b"{}"}, "tictactoe")


async def test_groups_and_batches_span_partitions_and_each_game_is_archived_once(
    redis_cluster_url: str, cluster_prefix: str, sqlite_url: str
) -> None:
    upgrade(sqlite_url)
    settings = Settings(redis_url=redis_cluster_url, redis_prefix=cluster_prefix,
                        database_url=sqlite_url)  # fmt: skip
    async with service(settings) as (_, api):
        episodes = []
        for example in range(6):
            episodes += await create(api, example=example, n=4, run="cluster")
        by_group: dict[str, set[int]] = {}
        for episode in episodes:
            by_group.setdefault(episode["group"], set()).add(partition_of(episode["id"]))
        assert all(len(partitions) == 1 for partitions in by_group.values())
        assert len(set.union(*by_group.values())) > 1
        boards = {episode["id"]: episode["info"]["board"] for episode in episodes}
        while boards:
            steps = [{"episode_id": i, "action": perfect_agent(b)} for i, b in boards.items()]
            response = await api.post("/v1/step", json={"steps": steps})
            results = response.json()["results"]
            assert [result["episode_id"] for result in results] == list(boards)
            for result in results:
                boards[result["episode_id"]] = result["info"]["board"]
                if result["done"]:
                    del boards[result["episode_id"]]
        deadline = time.monotonic() + 20
        while len(archived_ids(sqlite_url, "cluster")) < len(episodes):
            assert time.monotonic() < deadline, "the archive never received every game"
            await asyncio.sleep(0.1)
    assert sorted(archived_ids(sqlite_url, "cluster")) == sorted(e["id"] for e in episodes)
    store = open_store(settings)
    assert (await store.backlog(), await store.dead_letter_count()) == (0, 0)
    await store.aclose()


def test_the_start_up_check_asks_every_primary(redis_cluster_url: str) -> None:
    warning = persistence_warning(redis_cluster_url)
    assert warning is not None
    assert re.match(r"node 127\.0\.0\.1:[0-9]+ keeps nothing on disk", warning), warning


async def test_the_store_finds_its_primary_through_sentinel() -> None:
    prefix = "wander-test:sentinel:"  # on a Redis of the test's own, gone with it
    with tempfile.TemporaryDirectory(prefix="wander-sentinel-") as directory:
        servers = RedisServers(Path(directory))
        try:
            url, primary = start_sentinel(servers)
            store: EpisodeStore = open_store(
                Settings(redis_url=url, redis_prefix=prefix, episode_ttl_seconds=60)
            )
            await store.add({"a": b"v1"}, "tictactoe")
            assert await store.replace("a", 1, b"v2", archive=b"record")
            assert [item.data for item in await store.pending(10)] == [b"record"]
            await store.aclose()
            with redis.Redis(port=primary) as direct:
                assert direct.hget(f"{prefix}episode:a", "d") == b"v2"
            plain = persistence_warning(f"redis://127.0.0.1:{primary}/0")
            assert persistence_warning(url) == f"node 127.0.0.1:{primary} {plain}"
        finally:
            servers.stop()


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:6379", "starts with redis://"),
        ("redis+cluster://", "lists host:port pairs"),
        ("redis+cluster://127.0.0.1:99999", "is not a host:port pair"),
        ("redis+cluster://:hunter2@127.0.0.1:7000/3", "single database"),
        ("redis+sentinel://127.0.0.1:26379", "names the primary's service"),
        ("redis+sentinel://127.0.0.1:26379/main/x", "database after the service is a number"),
        ("redis+swarm://127.0.0.1", "starts with redis://"),
    ],
)
def test_a_redis_url_that_cannot_work_stops_the_settings(url: str, problem: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(redis_url=url)
    assert problem in str(refused.value)
    assert "hunter2" not in str(refused.value)


def test_cluster_and_sentinel_urls_are_read() -> None:
    from wander.service.redis_url import parse_redis_url

    cluster = parse_redis_url("rediss+cluster://me:p%40ss@a:7000,b,[::1]:7002")
    assert cluster.kind == "cluster"
    assert cluster.nodes == (("a", 7000), ("b", 6379), ("::1", 7002))
    assert (cluster.username, cluster.password, cluster.tls) == ("me", "p@ss", True)
    sentinel = parse_redis_url("redis+sentinel://s1,s2:26380/my%20primary/2")
    assert sentinel.nodes == (("s1", 26379), ("s2", 26380))
    assert (sentinel.service, sentinel.db, sentinel.tls) == ("my primary", 2, False)
