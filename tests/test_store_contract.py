"""The store contract, run against the in-process store and a real Redis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis
from wander.service.errors import StoreUnavailable
from wander.service.settings import Settings
from wander.service.store import EpisodeStore, Versioned, open_store
from wander.service.store.redis import RedisStore

from wander.testing import free_port


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[EpisodeStore]:
    store = open_store(settings.model_copy(update={"episode_ttl_seconds": 2}))
    yield store
    await store.aclose()


async def test_added_episodes_load_at_version_one(store: EpisodeStore) -> None:
    await store.add({"a": b'{"x": 1}', "b": b'{"x": 2}'})
    assert await store.load("a") == Versioned(b'{"x": 1}', 1)
    assert await store.load("b") == Versioned(b'{"x": 2}', 1)
    assert await store.load("missing") is None


async def test_replace_is_a_compare_and_set(store: EpisodeStore) -> None:
    await store.add({"a": b"v1"})
    assert await store.replace("a", 1, b"v2")
    assert not await store.replace("a", 1, b"stale")
    assert await store.load("a") == Versioned(b"v2", 2)
    assert await store.replace("a", 2, b"v3")
    assert await store.load("a") == Versioned(b"v3", 3)
    assert not await store.replace("missing", 1, b"x")
    assert await store.load("missing") is None


async def test_concurrent_writers_of_one_version_exactly_one_wins(store: EpisodeStore) -> None:
    await store.add({"a": b"v1"})
    wins = await asyncio.gather(*(store.replace("a", 1, f"w{i}".encode()) for i in range(32)))
    assert sum(wins) == 1
    winner = wins.index(True)
    assert await store.load("a") == Versioned(f"w{winner}".encode(), 2)


async def test_idle_episodes_expire_and_use_refreshes_them(store: EpisodeStore) -> None:
    await store.add({"idle": b"x", "used": b"y"})
    await asyncio.sleep(1.2)
    assert await store.load("used") is not None  # refreshes its TTL
    await asyncio.sleep(1.2)
    assert await store.load("used") is not None
    assert await store.load("idle") is None


async def test_an_unreachable_redis_raises_store_unavailable() -> None:
    store = RedisStore.from_url(f"redis://127.0.0.1:{free_port()}/0", ttl_seconds=60)
    with pytest.raises(StoreUnavailable):
        await store.ping()
    with pytest.raises(StoreUnavailable):
        await store.load("a")
    with pytest.raises(StoreUnavailable):
        await store.add({"a": b"x"})
    with pytest.raises(StoreUnavailable):
        await store.replace("a", 1, b"x")
    await store.aclose()


async def test_a_redis_store_leaves_the_archivers_group_unless_it_holds_records(
    redis_url: str, redis_prefix: str
) -> None:
    """Every process joins the group; restarts must not pile up consumers, nor lose
    what a closing process had taken and not yet archived."""
    idle, holding = (RedisStore.from_url(redis_url, 60, redis_prefix) for _ in range(2))
    assert await idle.pending(10) == []  # joins the group, takes nothing
    await idle.add({"a": b"v1"})
    assert await idle.replace("a", 1, b"v2", archive=b"record")
    assert [item.data for item in await holding.pending(10)] == [b"record"]
    await idle.aclose()
    await holding.aclose()
    groups = redis.Redis.from_url(redis_url)
    consumers = groups.xinfo_consumers(f"{redis_prefix}archive", "archivers")
    assert [consumer["pending"] for consumer in consumers] == [1]  # the holder's, kept
    successor = RedisStore.from_url(redis_url, 60, redis_prefix, claim_after_seconds=0)
    assert [item.data for item in await successor.pending(10)] == [b"record"]
    await successor.aclose()
