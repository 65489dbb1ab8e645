"""The store contract, run against the in-process store and a real Redis."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import redis

from tests.helpers import logged
from tests.poison import queue
from wander.service.errors import QuotaExceeded, StoreUnavailable
from wander.service.settings import Settings
from wander.service.store import EpisodeStore, Versioned, open_store
from wander.service.store import memory as memory_store
from wander.service.store.redis import RedisStore
from wander.testing import free_port


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[EpisodeStore]:
    store = open_store(settings.model_copy(update={"episode_ttl_seconds": 2}))
    yield store
    await store.aclose()


async def test_added_episodes_load_at_version_one(store: EpisodeStore) -> None:
    await store.add({"a": b'{"x": 1}', "b": b'{"x": 2}'}, "tictactoe")
    assert await store.load("a") == Versioned(b'{"x": 1}', 1)
    assert await store.load("b") == Versioned(b'{"x": 2}', 1)
    assert await store.load("missing") is None


async def test_replace_is_a_compare_and_set(store: EpisodeStore) -> None:
    await store.add({"a": b"v1"}, "tictactoe")
    assert await store.replace("a", 1, b"v2")
    assert not await store.replace("a", 1, b"stale")
    assert await store.load("a") == Versioned(b"v2", 2)
    assert await store.replace("a", 2, b"v3")
    assert await store.load("a") == Versioned(b"v3", 3)
    assert not await store.replace("missing", 1, b"x")
    assert await store.load("missing") is None


async def test_concurrent_writers_of_one_version_exactly_one_wins(store: EpisodeStore) -> None:
    await store.add({"a": b"v1"}, "tictactoe")
    wins = await asyncio.gather(*(store.replace("a", 1, f"w{i}".encode()) for i in range(32)))
    assert sum(wins) == 1
    winner = wins.index(True)
    assert await store.load("a") == Versioned(f"w{winner}".encode(), 2)


async def test_idle_episodes_expire_and_use_refreshes_them(store: EpisodeStore) -> None:
    await store.add({"idle": b"x", "used": b"y"}, "tictactoe")
    await asyncio.sleep(1.2)
    assert await store.load("used") is not None  # refreshes its TTL
    await asyncio.sleep(1.2)
    assert await store.load("used") is not None
    assert await store.load("idle") is None


async def test_live_episodes_count_until_they_finish_or_expire(store: EpisodeStore) -> None:
    await store.add({"a": b"1", "b": b"2"}, "tictactoe")
    await store.add({"c": b"3"}, "other")
    assert await store.live() == {"tictactoe": 2, "other": 1}
    assert await store.replace("a", 1, b"done", archive=b"record")  # finished
    assert await store.replace("b", 1, b"going on")  # no record: still live
    assert await store.live() == {"tictactoe": 1, "other": 1}
    await asyncio.sleep(1.2)
    assert await store.load("b") is not None  # refreshes its TTL, not "c"'s
    await asyncio.sleep(1.2)
    assert await store.live() == {"tictactoe": 1, "other": 0}
    await asyncio.sleep(1.2)
    assert await store.live() == {"tictactoe": 0, "other": 0}


def documents(prefix: str, n: int) -> dict[str, bytes]:
    return {f"{prefix}{i}": b"{}" for i in range(n)}


async def test_a_tenants_quota_refuses_an_add_whole(store: EpisodeStore) -> None:
    limits = {"max_live": 8, "max_metadata_bytes": 1000}
    await store.add(documents("a", 3), "tictactoe", tenant="t", metadata_bytes=100, **limits)
    await store.add(documents("b", 5), "tictactoe", tenant="t", metadata_bytes=10, **limits)
    assert await store.tenant_usage("t") == (8, 350)
    with pytest.raises(QuotaExceeded) as refused:
        await store.add(documents("c", 1), "tictactoe", tenant="t", **limits)
    assert refused.value.details == {
        "quota": "live_episodes", "limit": 8, "used": 8, "requested": 1
    }  # fmt: skip
    assert await store.load("c0") is None
    # Finishing one frees its slot and its bytes; then the bytes are the limit.
    assert await store.replace("a0", 1, b"done", archive=b"record")
    assert await store.tenant_usage("t") == (7, 250)
    with pytest.raises(QuotaExceeded) as refused:
        await store.add(documents("d", 1), "tictactoe", tenant="t", metadata_bytes=751, **limits)
    assert refused.value.details == {
        "quota": "metadata_bytes", "limit": 1000, "used": 250, "requested": 751
    }  # fmt: skip
    await store.add(documents("e", 1), "tictactoe", tenant="t", metadata_bytes=750, **limits)
    assert await store.tenant_usage("t") == (8, 1000)
    # Another tenant counts apart, and so does no tenant.
    await store.add(documents("f", 4), "tictactoe", tenant="u", metadata_bytes=1, **limits)
    await store.add(documents("g", 9), "tictactoe")
    assert await store.tenant_usage("u") == (4, 4)
    assert await store.tenant_usage("t") == (8, 1000)
    assert await store.live() == {"tictactoe": 8 + 4 + 9}


async def test_expired_episodes_free_their_tenants_quota(store: EpisodeStore) -> None:
    await store.add(documents("a", 3), "tictactoe", tenant="t", metadata_bytes=7, max_live=3)
    with pytest.raises(QuotaExceeded):
        await store.add(documents("b", 1), "tictactoe", tenant="t", max_live=3)
    await asyncio.sleep(2.3)  # the store's TTL is 2 s
    await store.add(documents("b", 3), "tictactoe", tenant="t", max_live=3)
    assert await store.tenant_usage("t") == (3, 0)


async def test_concurrent_adds_never_pass_the_quota_together(store: EpisodeStore) -> None:
    async def add(i: int) -> bool:
        try:
            await store.add(documents(f"x{i}-", 3), "tictactoe", tenant="t", max_live=20)
        except QuotaExceeded:
            return False
        return True

    added = await asyncio.gather(*(add(i) for i in range(30)))
    assert sum(added) == 6
    assert await store.tenant_usage("t") == (18, 0)


async def test_a_token_bucket_takes_a_burst_then_refuses_until_it_refills(
    store: EpisodeStore,
) -> None:
    taken = [await store.take("key-a", 10, 5) for _ in range(5)]
    assert taken == [0.0] * 5
    wait = await store.take("key-a", 10, 5)
    assert 0.05 <= wait <= 0.1  # a token every 0.1 s
    assert await store.take("key-b", 10, 5) == 0.0  # buckets are apart
    await asyncio.sleep(wait + 0.01)
    assert await store.take("key-a", 10, 5) == 0.0
    assert await store.take("key-a", 10, 5) > 0


async def test_an_episode_counted_by_the_previous_version_is_still_counted_out(
    settings: Settings, store: EpisodeStore
) -> None:
    if not isinstance(store, RedisStore):
        pytest.skip("the previous version's entries are Redis's")
    await store.add({"old": b"{}"}, "tictactoe")
    with redis.Redis.from_url(str(settings.redis_url)) as client:
        key = store.key("old")  # written as that version did: the environment alone
        assert client.hget(f"{settings.redis_prefix}live:env", key) == b"tictactoe"
    assert await store.replace("old", 1, b"done", archive=b"record")
    assert await store.live() == {"tictactoe": 0}


async def taken(store: EpisodeStore, *records: bytes) -> list[str]:
    """Queue ``records`` for the archive and take them, as an archiver does: their tokens."""
    await queue(store, *records)
    return [item.token for item in await store.pending(len(records))]


async def test_a_dead_letter_leaves_the_backlog_with_its_error_and_retry_requeues_it(
    store: EpisodeStore,
) -> None:
    first, poison, last = await taken(store, b"r1", b"poison", b"r3")
    before = time.time()
    letter_id = await store.dead_letter(poison, "refused: NUL in run")
    assert letter_id is not None
    assert await store.backlog() == 2
    assert [item.data for item in await store.pending(10)] == [b"r1", b"r3"]
    [letter] = await store.dead_letters(10)
    assert (letter.id, letter.data, letter.error) == (letter_id, b"poison", "refused: NUL in run")
    assert before - 1 <= letter.failed_at <= time.time() + 1
    assert await store.dead_letter_count() == 1
    assert await store.dead_letter(poison, "again") is None  # no longer in the backlog

    moved = await store.retry_dead_letters([letter_id, letter_id, "0-1", "7", "x" * 300])
    assert moved == [letter_id]
    assert await store.dead_letter_count() == 0
    assert await store.backlog() == 3
    await store.acknowledge([first, last])
    assert [item.data for item in await store.pending(10)] == [b"poison"]  # at the end
    assert await store.retry_dead_letters([letter_id]) == []


async def test_a_store_whose_backlog_dies_with_it_says_when_a_record_is_queued(
    store: EpisodeStore,
) -> None:
    """The archiver then takes the record at once (a ``kill -9`` would lose it);
    Redis keeps its backlog, so the archiver may poll it."""
    told: list[None] = []
    store.on_queued(lambda: told.append(None))
    await store.add({"a": b"v1"}, "tictactoe")
    assert await store.replace("a", 1, b"v2")  # no record: the episode goes on
    assert told == []
    [token] = await taken(store, b"r1")
    letter_id = await store.dead_letter(token, "refused")
    assert letter_id is not None
    assert await store.retry_dead_letters([letter_id]) == [letter_id]
    assert len(told) == (0 if store.durable else 2)  # queued, then queued again


async def test_dead_letters_page_oldest_first_and_drop_by_id(store: EpisodeStore) -> None:
    tokens = await taken(store, *(f"r{i}".encode() for i in range(5)))
    ids = [await store.dead_letter(token, f"error {i}") for i, token in enumerate(tokens)]
    assert await store.backlog() == 0
    first = await store.dead_letters(2)
    assert [letter.data for letter in first] == [b"r0", b"r1"]
    rest = await store.dead_letters(10, after=first[-1].id)
    assert [letter.error for letter in rest] == ["error 2", "error 3", "error 4"]
    assert await store.dead_letters(10, after=rest[-1].id) == []
    assert await store.dead_letters(10, after="not an id") == []
    assert await store.dead_letter_ids(page=2) == ids

    assert await store.drop_dead_letters([ids[1], ids[1], "1-x"]) == [ids[1]]
    assert [letter.data for letter in await store.dead_letters(10)] == [b"r0", b"r2", b"r3", b"r4"]
    assert await store.drop_dead_letters(ids) == [ids[0], *ids[2:]]
    assert await store.dead_letter_count() == 0
    assert await store.backlog() == 0


async def test_the_in_process_store_keeps_a_bounded_number_of_dead_letters(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(memory_store, "MAX_DEAD_LETTERS", 3)
    store = memory_store.MemoryStore(60)
    tokens = await taken(store, *(f"r{i}".encode() for i in range(5)))
    with logged(caplog, "wander.service.store.memory"):
        ids = [await store.dead_letter(token, f"error {i}") for i, token in enumerate(tokens)]
    assert [letter.data for letter in await store.dead_letters(10)] == [b"r2", b"r3", b"r4"]
    discarded = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert discarded == [
        f"dead letter {ids[i]} discarded: more than 3 are kept in the process (error {i})"
        for i in (0, 1)
    ]


async def test_redis_dead_letters_outlive_the_store_that_wrote_them(
    redis_url: str, redis_prefix: str
) -> None:
    writer = RedisStore.from_url(redis_url, 60, redis_prefix)
    [token] = await taken(writer, b"poison")
    letter_id = await writer.dead_letter(token, "refused")
    await writer.aclose()
    reader = RedisStore.from_url(redis_url, 60, redis_prefix)
    assert [(letter.id, letter.data) for letter in await reader.dead_letters(10)] == [
        (letter_id, b"poison")
    ]
    assert await reader.pending(10) == []
    await reader.aclose()


async def test_an_unreachable_redis_raises_store_unavailable() -> None:
    store = RedisStore.from_url(f"redis://127.0.0.1:{free_port()}/0", ttl_seconds=60)
    with pytest.raises(StoreUnavailable):
        await store.ping()
    with pytest.raises(StoreUnavailable):
        await store.load("a")
    with pytest.raises(StoreUnavailable):
        await store.add({"a": b"x"}, "tictactoe")
    with pytest.raises(StoreUnavailable):
        await store.replace("a", 1, b"x")
    with pytest.raises(StoreUnavailable):
        await store.dead_letters(10)
    with pytest.raises(StoreUnavailable):
        await store.retry_dead_letters(["1-0"])
    await store.aclose()


async def test_a_redis_store_leaves_the_archivers_group_unless_it_holds_records(
    redis_url: str, redis_prefix: str
) -> None:
    """Every process joins the group; restarts must not pile up consumers, nor lose
    what a closing process had taken and not yet archived."""
    idle, holding = (RedisStore.from_url(redis_url, 60, redis_prefix) for _ in range(2))
    assert await idle.pending(10) == []  # joins the group, takes nothing
    await idle.add({"a": b"v1"}, "tictactoe")
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
