"""The store contract, run against the in-process store, a real Redis and a real Redis
Cluster of three primaries."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis

from tests.helpers import logged
from tests.poison import queue
from wander.service.errors import QuotaExceeded, StoreUnavailable
from wander.service.settings import Settings
from wander.service.store import EpisodeStore, Usage, Versioned, open_store
from wander.service.store import memory as memory_store
from wander.service.store.base import RecordWithLog
from wander.service.store.outbox import Outbox, outbox_path
from wander.service.store.redis import RedisStore
from wander.testing import free_port

STORE_KINDS = ["memory", "redis", "cluster"]
TTL = 1.0
"""Seconds: the idle TTL of the tests of expiry (``expiring``); a sleep of ``WAIT`` stays
within it (by 0.4 s, for a busy machine), and two pass it."""
WAIT = 0.6
LONG_TTL = 600.0
"""The idle TTL of the other tests: nothing of theirs expires, however busy the machine."""


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[EpisodeStore]:
    store = open_store(settings.model_copy(update={"episode_ttl_seconds": LONG_TTL}))
    yield store
    await store.aclose()


@pytest.fixture
async def expiring(settings: Settings) -> AsyncIterator[EpisodeStore]:
    """A store whose episodes expire ``TTL`` seconds after their last use."""
    store = open_store(settings.model_copy(update={"episode_ttl_seconds": TTL}))
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


async def test_idle_episodes_expire_and_use_refreshes_them(expiring: EpisodeStore) -> None:
    await expiring.add({"idle": b"x", "used": b"y"}, "tictactoe")
    await asyncio.sleep(WAIT)
    assert await expiring.load("used") is not None  # refreshes its TTL
    await asyncio.sleep(WAIT)
    assert await expiring.load("used") is not None
    assert await expiring.load("idle") is None


async def test_a_ttl_below_a_second_is_kept_to_the_millisecond(settings: Settings) -> None:
    store = open_store(settings.model_copy(update={"episode_ttl_seconds": 0.3}))
    try:
        await store.add({"a": b"1", "b": b"2"}, "tictactoe")
        assert await store.live() == {"tictactoe": 2}
        await asyncio.sleep(0.4)
        assert await store.load("a") is None
        assert await store.live() == {"tictactoe": 0}
    finally:
        await store.aclose()


async def test_live_episodes_count_until_they_finish_or_expire(expiring: EpisodeStore) -> None:
    await expiring.add({"a": b"1", "b": b"2"}, "tictactoe")
    await expiring.add({"c": b"3"}, "other")
    assert await expiring.live() == {"tictactoe": 2, "other": 1}
    assert await expiring.replace("a", 1, b"done", archive=b"record")  # finished
    assert await expiring.replace("b", 1, b"going on")  # no record: still live
    assert await expiring.live() == {"tictactoe": 1, "other": 1}
    await asyncio.sleep(WAIT)
    assert await expiring.load("b") is not None  # refreshes its TTL, not "c"'s
    await asyncio.sleep(WAIT)
    assert await expiring.live() == {"tictactoe": 1, "other": 0}
    await asyncio.sleep(WAIT)
    assert await expiring.live() == {"tictactoe": 0, "other": 0}


async def test_writes_append_to_the_log_in_order(store: EpisodeStore) -> None:
    await store.add({"a": b"v1", "b": b"w1"}, "tictactoe", log=[b"1", b"2"])
    assert await store.replace("a", 1, b"v2", append=[b"3"])
    assert await store.replace("a", 2, b"v3")
    assert await store.replace("a", 3, b"v4", append=[b"4", b"5"])
    assert await store.load("a", log=True) == Versioned(b"v4", 4, [b"1", b"2", b"3", b"4", b"5"])
    assert await store.load("b", log=True) == Versioned(b"w1", 1, [b"1", b"2"])  # its own log
    assert await store.load("a") == Versioned(b"v4", 4)  # the document alone
    assert await store.load("missing", log=True) is None


async def test_a_lost_compare_and_set_appends_nothing(store: EpisodeStore) -> None:
    await store.add({"a": b"v1"}, "tictactoe", log=[b"0"])
    writes = (store.replace("a", 1, b"v2", append=[str(i).encode(), b"x"]) for i in range(1, 33))
    wins = await asyncio.gather(*writes)
    assert sum(wins) == 1
    winner = str(wins.index(True) + 1).encode()
    assert not await store.replace("a", 1, b"stale", append=[b"stale"])
    assert await store.load("a", log=True) == Versioned(b"v2", 2, [b"0", winner, b"x"])


async def test_a_record_with_log_is_queued_around_the_log_it_leaves(store: EpisodeStore) -> None:
    await store.add({"a": b"v1", "b": b"w1"}, "tictactoe", log=[b'{"m":0}'])
    assert await store.replace("a", 1, b"v2", append=[b"1"])
    around = RecordWithLog(b'{"id":"a","messages":', b"}")
    assert await store.replace("a", 2, b"done", archive=around, append=[b"2", b'"3"'])
    assert await store.replace("b", 1, b"done", archive=RecordWithLog(b"<", b">"))
    assert not await store.replace("b", 1, b"again", archive=RecordWithLog(b"?", b"?"))
    records = [item.data for item in await store.pending(10)]
    assert records == [b'{"id":"a","messages":[{"m":0},1,2,"3"]}', b'<[{"m":0}]>']


async def test_reads_and_writes_keep_the_log_as_long_as_the_document(
    expiring: EpisodeStore,
) -> None:
    await expiring.add({"idle": b"x", "read": b"y", "written": b"z"}, "tictactoe", log=[b"0"])
    for version in (1, 2):
        await asyncio.sleep(WAIT)  # past the first TTL at the second round
        assert await expiring.load("read") is not None
        assert await expiring.replace("written", version, b"z", append=[b"+"])
    assert await expiring.load("read", log=True) == Versioned(b"y", 1, [b"0"])
    assert await expiring.load("written", log=True) == Versioned(b"z", 3, [b"0", b"+", b"+"])
    assert await expiring.load("idle", log=True) is None


async def test_a_released_episode_keeps_its_document_for_a_while_and_no_log(
    settings: Settings,
) -> None:
    """What a retried last step reads stays ``finished_seconds`` (``TTL``), however often
    it is read; the log, and so the episode to a read of it, is gone at once."""
    store = open_store(
        settings.model_copy(update={"episode_ttl_seconds": LONG_TTL, "finished_grace_seconds": TTL})
    )
    try:
        await store.add({"a": b"v1", "b": b"w1"}, "tictactoe", log=[b"0"])
        assert await store.replace("a", 1, b"done", archive=b"record", append=[b"1"])
        await store.release(["a", "missing"])
        await store.release(["a"])  # again: as it was
        assert await store.load("a", log=True) is None
        assert await store.load("a") == Versioned(b"done", 2)
        assert await store.load("b", log=True) == Versioned(b"w1", 1, [b"0"])  # not released
        await asyncio.sleep(WAIT)
        assert await store.load("a") == Versioned(b"done", 2)  # refreshes nothing
        await asyncio.sleep(WAIT)
        assert await store.load("a") is None
        assert await store.load("missing") is None
        assert await store.load("b") is not None
    finally:
        await store.aclose()


async def test_redis_forgets_an_episode_and_its_log_together(
    redis_url: str, redis_prefix: str
) -> None:
    store = RedisStore.from_url(redis_url, 0.25, redis_prefix)  # to the millisecond
    client = redis.Redis.from_url(redis_url)
    keys = (store.key("a"), store.log_key("a"))
    await store.add({"a": b"v1"}, "tictactoe", log=[b"0"])
    assert await store.replace("a", 1, b"v2", append=[b"1"])
    assert client.exists(*keys) == 2
    assert all(0 < client.pttl(key) <= 250 for key in keys)
    await asyncio.sleep(0.3)
    assert client.exists(*keys) == 0
    await store.aclose()


async def test_redis_plays_on_an_episode_stored_before_the_log(
    redis_url: str, redis_prefix: str
) -> None:
    """The previous version kept an episode as its document alone, no log: it reads as
    an empty log, and its next write starts one."""
    store = RedisStore.from_url(redis_url, 60, redis_prefix)
    client = redis.Redis.from_url(redis_url)
    client.hset(store.key("old"), mapping={"v": 3, "d": b"everything"})
    client.expire(store.key("old"), 60)
    assert await store.load("old", log=True) == Versioned(b"everything", 3, [])
    assert await store.replace("old", 3, b"head", append=[b"1", b"2"])
    assert await store.load("old", log=True) == Versioned(b"head", 4, [b"1", b"2"])
    assert 0 < client.ttl(store.log_key("old")) <= 60
    await store.aclose()


def episodes(*ids: str) -> dict[str, bytes]:
    return {episode_id: b"{}" for episode_id in ids}


async def test_a_quota_refuses_the_whole_add_and_writes_nothing(store: EpisodeStore) -> None:
    await store.add(episodes("a", "b"), "tictactoe", tenant="t", metadata_bytes=10, max_live=5)
    with pytest.raises(QuotaExceeded) as refused:
        await store.add(episodes(*"cdefg"), "tictactoe", tenant="t", max_live=5)
    assert refused.value.code == "quota_exceeded"
    assert refused.value.details == {
        "quota": "live_episodes", "limit": 5, "used": 2, "requested": 5
    }  # fmt: skip
    assert "at most 5 live episodes" in refused.value.message
    assert await store.tenant_usage("t") == Usage(2, 20)
    assert await store.load("c") is None
    assert await store.live() == {"tictactoe": 2}
    with pytest.raises(QuotaExceeded) as refused:
        await store.add(
            episodes("c", "d"), "tictactoe", tenant="t", metadata_bytes=15, max_metadata_bytes=49
        )
    assert refused.value.details == {
        "quota": "metadata_bytes", "limit": 49, "used": 20, "requested": 30
    }  # fmt: skip
    await store.add(episodes(*"cde"), "tictactoe", tenant="t", metadata_bytes=1, max_live=5)
    assert await store.tenant_usage("t") == Usage(5, 23)
    assert await store.load("e") == Versioned(b"{}", 1)


async def test_finishing_an_episode_gives_its_quota_back(store: EpisodeStore) -> None:
    quota = {"tenant": "t", "metadata_bytes": 100, "max_live": 2, "max_metadata_bytes": 200}
    await store.add(episodes("a", "b"), "tictactoe", **quota)
    assert await store.replace("a", 1, b"going on")  # no record: still live
    with pytest.raises(QuotaExceeded):
        await store.add(episodes("c"), "tictactoe", **quota)
    assert await store.replace("a", 2, b"done", archive=b"record")
    assert await store.tenant_usage("t") == Usage(1, 100)
    await store.add(episodes("c"), "tictactoe", **quota)
    assert await store.tenant_usage("t") == Usage(2, 200)
    # An episode with no metadata gives back its slot and no bytes.
    await store.add(episodes("bare"), "tictactoe", tenant="u", max_live=1)
    assert await store.replace("bare", 1, b"done", archive=b"record")
    assert await store.tenant_usage("u") == Usage(0, 0)


async def test_expired_episodes_give_their_quota_back(expiring: EpisodeStore) -> None:
    await expiring.add(episodes("idle", "used"), "tictactoe", tenant="t", metadata_bytes=7)
    await asyncio.sleep(WAIT)
    assert await expiring.load("used") is not None  # refreshes its TTL, not "idle"'s
    await asyncio.sleep(WAIT)
    # No usage read first: the add itself counts "idle" out before deciding.
    await expiring.add(episodes("new"), "tictactoe", tenant="t", metadata_bytes=7, max_live=2)
    assert await expiring.tenant_usage("t") == Usage(2, 14)
    await asyncio.sleep(2 * WAIT)
    assert await expiring.tenant_usage("t") == Usage(0, 0)
    assert await expiring.live() == {"tictactoe": 0}


async def test_tenants_are_counted_apart(store: EpisodeStore) -> None:
    await store.add(episodes("a1", "a2"), "tictactoe", tenant="a", metadata_bytes=1, max_live=2)
    await store.add(episodes("b1", "b2"), "other", tenant="b", metadata_bytes=2, max_live=2)
    await store.add(episodes("open"), "tictactoe")  # no tenant: counted by nobody
    with pytest.raises(QuotaExceeded):
        await store.add(episodes("a3"), "tictactoe", tenant="a", max_live=2)
    assert await store.tenant_usage("a") == Usage(2, 2)
    assert await store.tenant_usage("b") == Usage(2, 4)
    assert await store.tenant_usage("nobody") == Usage(0, 0)
    assert await store.live() == {"tictactoe": 3, "other": 2}
    assert await store.replace("b1", 1, b"done", archive=b"record")
    assert await store.tenant_usage("a") == Usage(2, 2)
    assert await store.tenant_usage("b") == Usage(1, 2)


async def test_concurrent_adds_never_pass_a_quota_together(store: EpisodeStore) -> None:
    async def create(i: int) -> bool:
        try:
            await store.add(episodes(f"e{i}"), "tictactoe", tenant="t", max_live=10)
        except QuotaExceeded:
            return False
        return True

    created = await asyncio.gather(*(create(i) for i in range(40)))
    assert sum(created) == 10
    assert await store.tenant_usage("t") == Usage(10, 0)


async def test_limits_need_a_tenant(store: EpisodeStore) -> None:
    with pytest.raises(ValueError, match="needs a tenant"):
        await store.add(episodes("a"), "tictactoe", max_live=1)
    assert await store.load("a") is None


async def test_a_bucket_gives_its_burst_then_a_token_per_interval(store: EpisodeStore) -> None:
    assert [await store.take("k", rate=10, burst=3) for _ in range(3)] == [0.0] * 3
    wait = await store.take("k", rate=10, burst=3)
    assert 0.05 < wait <= 0.1  # the next token, 1/rate after the first was taken
    assert 0 < await store.take("k", rate=10, burst=3) <= wait  # a refusal takes nothing
    assert await store.take("other", rate=10, burst=3) == 0.0  # buckets are apart
    await asyncio.sleep(wait)
    assert await store.take("k", rate=10, burst=3) == 0.0
    assert await store.take("k", rate=10, burst=3) > 0
    await asyncio.sleep(0.5)  # 5 tokens' time, but the bucket holds no more than 3
    assert [await store.take("k", rate=10, burst=3) for _ in range(3)] == [0.0] * 3
    assert await store.take("k", rate=10, burst=3) > 0.05
    with pytest.raises(ValueError, match="rate > 0"):
        await store.take("k", rate=0, burst=3)


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


async def test_redis_counts_out_live_entries_written_before_tenants(
    redis_url: str, redis_prefix: str
) -> None:
    """The previous version recorded an episode's environment alone in ``live:env``; such
    an entry is still counted out, by the write that finishes it or once it expires,
    beside the newer entries of tenants' episodes, and each leaves nothing behind."""
    store = RedisStore.from_url(redis_url, 60, redis_prefix)
    client = redis.Redis.from_url(redis_url)
    now_ms = int(time.time() * 1000)
    for episode_id, ttl_ms in (("old-done", 60_000), ("old-idle", 300)):
        key = store.key(episode_id)
        client.hset(key, mapping={"v": 1, "d": b"{}"})
        client.pexpire(key, ttl_ms)
        client.zadd(f"{redis_prefix}live", {key: now_ms + ttl_ms})
        client.hset(f"{redis_prefix}live:env", key, "tictactoe")
        client.hincrby(f"{redis_prefix}live:count", "tictactoe", 1)
    await store.add(episodes("new"), "tictactoe", tenant="t", metadata_bytes=5, max_live=1)
    assert await store.live() == {"tictactoe": 3}
    assert await store.replace("old-done", 1, b"done", archive=b"record")
    await asyncio.sleep(0.5)
    assert await store.live() == {"tictactoe": 1}
    assert await store.tenant_usage("t") == Usage(1, 5)
    assert await store.replace("new", 1, b"done", archive=b"record")
    assert await store.live() == {"tictactoe": 0}
    for kind in ("env", "tenant", "bytes"):
        assert client.hlen(f"{redis_prefix}live:{kind}") == 0
    assert client.zcard(f"{redis_prefix}live") == 0
    await store.aclose()


async def test_redis_replicas_share_quotas_and_buckets(redis_url: str, redis_prefix: str) -> None:
    replicas = [RedisStore.from_url(redis_url, 60, redis_prefix) for _ in range(2)]

    async def create(i: int) -> bool:
        try:
            await replicas[i % 2].add(episodes(f"e{i}"), "tictactoe", tenant="t", max_live=7)
        except QuotaExceeded:
            return False
        return True

    assert sum(await asyncio.gather(*(create(i) for i in range(30)))) == 7
    takes = [await replicas[i % 2].take("key", rate=2, burst=4) for i in range(5)]
    assert takes[:4] == [0.0] * 4
    assert 0.4 < takes[4] <= 0.5
    left_ms = redis.Redis.from_url(redis_url).pttl(f"{redis_prefix}rate:key")
    assert 1500 < left_ms <= 2000  # forgotten once full again: 4 tokens at 2 a second
    for replica in replicas:
        await replica.aclose()


async def test_the_in_process_stores_outbox_keeps_what_a_killed_process_did_not_archive(
    tmp_path: Path,
) -> None:
    """A store on a SQLite archive's outbox: what was queued and not acknowledged when the
    process died (no ``aclose``) is the next store's backlog, in order, under new tokens
    that the next records follow; what was acknowledged, or set aside, is not."""
    path = tmp_path / "archive.db.outbox"
    first = memory_store.MemoryStore(60, Outbox(path))
    acknowledged, _, dead, _ = await taken(first, b"r1", b"r2", b"r3", b"r4")
    await first.acknowledge([acknowledged])
    await first.dead_letter(dead, "refused")
    # killed: nothing closed, nothing flushed
    second = memory_store.MemoryStore(60, Outbox(path))
    assert [item.data for item in await second.pending(10)] == [b"r2", b"r4"]
    assert await second.backlog() == 2
    await queue(second, b"r5")
    pending = await second.pending(10)
    assert [item.data for item in pending] == [b"r2", b"r4", b"r5"]
    assert len({item.token for item in pending}) == 3
    await second.acknowledge([item.token for item in pending])
    await second.aclose()
    assert Outbox(path).records() == []


def test_only_a_sqlite_file_archive_has_an_outbox() -> None:
    assert outbox_path("sqlite:////var/lib/wander/archive.db") == Path(
        "/var/lib/wander/archive.db.outbox"
    )
    assert outbox_path("sqlite:///wander.db?timeout=5") == Path("wander.db.outbox")
    for url in ("sqlite://", "sqlite:///:memory:", "postgresql://db/wander"):
        assert outbox_path(url) is None
