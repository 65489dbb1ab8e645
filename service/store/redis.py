"""The Redis store: episodes shared by every process and replica.

Each episode is a hash ``{prefix}episode:{id}`` with fields ``v`` (version) and
``d`` (document), and a list ``{prefix}log:{id}``, its log: a write appends to it with
RPUSH in the script that compares and sets the version, and every script that touches
one key of an episode refreshes the TTL of both. An episode stored before logs existed
(its messages in its document) has no list; it reads as an empty log. Reads and
compare-and-set writes are Lua scripts (``service.store.scripts``) that take many
episodes at once, and each write is atomic on the server. A batch of steps is one
script call, and so are the reads and writes of all the requests in flight during one
event-loop turn (``service.store.coalesce``): redis-py packs commands in Python, and one
command per episode cost more than the steps themselves.

The store remembers the last version it read or wrote of recent episodes, so
that a step served by the same process needs a single round trip (its write);
a stale memory only costs a failed compare-and-set and a fresh read. The
archive backlog is the stream ``{prefix}archive``, read through a consumer
group: a record taken by an archiver that dies before acknowledging it is
claimed by another after ``claim_after_seconds``. The stream has no expiry, on
purpose: it holds finished episodes not yet archived, and stays as small as the
backlog (acknowledged records are deleted). A store that closes with nothing
unacknowledged leaves the group, so that restarts do not pile up consumers.

Live episodes (added, not finished, not expired) are counted by environment in the hash
``{prefix}live:count``. Redis forgets an idle episode by itself, and nothing hears of it, so
the sorted set ``{prefix}live`` holds each live episode's key by the earliest time it can
expire (``{prefix}live:env`` its environment), and counting looks only at those past
theirs: an episode Redis forgot is counted out, one still there (its TTL was refreshed)
is looked at again when its TTL now ends. Finishing takes an episode out in the write
that queues its record.

A tenant's episodes are counted the same way, in the hashes ``{prefix}live:tenant`` (live
episodes) and ``{prefix}live:bytes`` (their metadata bytes), tenant -> count, a tenant's
field deleted at zero: their entry in ``live:env`` is ``env\ntenant\nbytes``, so that
counting an episode out gives its tenant's quota back too (an entry of the environment
alone, as the previous version wrote for every episode, is counted out as before). An add
with limits checks them and writes in one script, after counting out expired episodes:
replicas creating at once cannot pass a quota together. An older replica counts such an
entry out under a wrong environment, and never out of its tenant: stop every replica of
the previous version before any adds with a tenant.

The request-rate bucket of ``take`` is the string ``{prefix}rate:{bucket}``: the time, in
microseconds of the server's clock (replicas' clocks may disagree), at which the bucket is
full again, expiring then, so that a bucket left alone leaves nothing behind.

Dead letters are the stream ``{prefix}archive:dead``, entries ``d`` (the record), ``e``
(the error) and ``t`` (Unix time); a script moves a record between the two streams
in one step, so it is always in exactly one of them. The dead letters are kept
until an operator retries or drops them: they are data the database refused, not
a cache, and ``wander_archive_dead_letters`` shows how many there are.

On a Redis Cluster each script touches one slot: the keys are split into partitions,
each a complete set of the keys above under a hash tag of its own
(``service.store.partitions``), and a bulk call sends one script call per partition. On
one Redis there is one partition, named as above.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import secrets
import socket
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, NamedTuple, TypeVar

from cachetools import LRUCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from wander.service.errors import StoreUnavailable
from wander.service.redis_url import parse_redis_url
from wander.service.store import scripts
from wander.service.store.base import (
    ArchiveRecord,
    DeadLetter,
    EpisodeStore,
    Pending,
    RecordWithLog,
    Usage,
    Versioned,
    Write,
    bucket_interval,
    check_limits,
    quota_exceeded,
)
from wander.service.store.coalesce import Coalescer
from wander.service.store.partitions import Layout, Partition
from wander.service.store.targets import async_client

_STREAM_ID = re.compile(r"([0-9]{1,20})-([0-9]{1,20})")
"""A complete stream id, small enough for Redis (64-bit parts): anything else is no id
the store ever handed out, and Redis would answer it with an error."""
IDS_PER_SCRIPT = 500
"""Dead letters moved or dropped per script call: each call blocks the Redis server."""

_UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError)

LIVE_CHECKS = 1000
"""Episodes the live count looks at per script call: each call blocks the Redis server."""

ARCHIVERS = "archivers"
RECENT_EPISODES = 20_000
"""Episodes whose last version the store remembers (an LRU: memory stays bounded)."""


@dataclass(frozen=True, eq=False)
class _Group:
    """The episodes of one ``add``: added all or none. Compared by identity, which tells
    the groups apart among the episodes of many calls sent in one script call."""

    env: str
    tenant: str | None
    metadata_bytes: int
    max_live: int | None
    max_metadata_bytes: int | None
    log: Sequence[bytes]
    """The entries each episode's log opens with."""


class _NewEpisode(NamedTuple):
    episode_id: str
    data: bytes
    group: _Group


class _Load(NamedTuple):
    episode_id: str
    log: bool


_Item = TypeVar("_Item")
_Reply = TypeVar("_Reply")


class RedisStore(EpisodeStore):
    durable = True

    def __init__(
        self,
        client: Any,
        ttl_seconds: float,
        prefix: str = "wander:",
        claim_after_seconds: float = 60.0,
        *,
        partitions: int | None = None,
        max_concurrent_calls: int | None = None,
        finished_seconds: float = 600.0,
    ) -> None:
        """``client``: a ``redis.asyncio`` client, or a ``RedisCluster`` with
        ``partitions`` (``service.store.partitions``). ``max_concurrent_calls`` bounds the
        calls in flight, for a client that refuses more rather than wait (a cluster's)."""
        super().__init__(ttl_seconds, finished_seconds)
        self._ttl_ms = max(1, round(ttl_seconds * 1000))
        """What the scripts are given: keys expire in milliseconds (``PEXPIRE``)."""
        self._finished_ms = max(1, round(finished_seconds * 1000))
        self._redis = client
        self._layout = Layout(prefix, partitions)
        self._consumer = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self._claim_after_ms = int(claim_after_seconds * 1000)
        self._joined: set[Partition] = set()
        self._calls = asyncio.Semaphore(max_concurrent_calls) if max_concurrent_calls else None
        self._discovering = asyncio.Lock()
        self._discovered = False
        self._add_script = client.register_script(scripts.ADD_MANY)
        self._load_script = client.register_script(scripts.LOAD_MANY)
        self._replace_script = client.register_script(scripts.REPLACE_MANY)
        self._acknowledge_script = client.register_script(scripts.ACKNOWLEDGE)
        self._release_script = client.register_script(scripts.RELEASE)
        self._leave_script = client.register_script(scripts.LEAVE_GROUP)
        self._dead_letter_script = client.register_script(scripts.DEAD_LETTER)
        self._retry_script = client.register_script(scripts.RETRY_DEAD)
        self._drop_script = client.register_script(scripts.DROP_DEAD)
        self._live_script = client.register_script(scripts.LIVE)
        self._usage_script = client.register_script(scripts.USAGE)
        self._take_script = client.register_script(scripts.TAKE)
        self._adds = Coalescer(self._add_all)
        self._takes = Coalescer(self._take_all)
        self._loads = Coalescer(self._load_all)
        self._writes = Coalescer(self._replace_all)
        self._recent: LRUCache[str, Versioned] = LRUCache(maxsize=RECENT_EPISODES)

    @classmethod
    def from_url(
        cls,
        url: str,
        ttl_seconds: float,
        prefix: str = "wander:",
        claim_after_seconds: float = 60.0,
        max_connections: int = 64,
        partitions: int = 16,
        *,
        finished_seconds: float = 600.0,
    ) -> RedisStore:
        """A store on its own connections (``service.store.targets``): at most
        ``max_connections`` (per node of a cluster), and a request that finds them all
        busy waits for one instead of failing. On a cluster, ``partitions`` of keys."""
        target = parse_redis_url(url)
        client = async_client(target, max_connections)
        if target.kind != "cluster":
            return cls(
                client, ttl_seconds, prefix, claim_after_seconds, finished_seconds=finished_seconds
            )
        return cls(
            client,
            ttl_seconds,
            prefix,
            claim_after_seconds,
            partitions=partitions,
            max_concurrent_calls=max_connections,
            finished_seconds=finished_seconds,
        )

    def key(self, episode_id: str) -> str:
        return self._layout.of_episode(episode_id).key(episode_id)

    def log_key(self, episode_id: str) -> str:
        return self._layout.of_episode(episode_id).log_key(episode_id)

    def bucket_key(self, bucket: str) -> str:
        return self._layout.of_bucket(bucket).bucket_key(bucket)

    def new_ids(self, n: int) -> list[str]:
        return self._layout.new_ids(n)

    async def add(
        self,
        documents: Mapping[str, bytes],
        env: str,
        *,
        log: Sequence[bytes] = (),
        tenant: str | None = None,
        metadata_bytes: int = 0,
        max_live: int | None = None,
        max_metadata_bytes: int | None = None,
    ) -> None:
        """On a cluster, ``documents`` must share a partition (ids from ``new_ids``, or
        ids without a partition tag): the add is then one script call, all or none.

        A quota is checked against what the tenant holds in every partition, but
        atomically only with the writes of the episodes' own partition: adds landing in
        different partitions at the same moment may pass a quota together, each seeing
        the other's partition as it was just before. Each partition alone never holds
        more than the limit, so the overshoot is bounded (at most the partitions times
        the limit, and in practice the adds in flight at once); on one Redis there is one
        partition, and the check is exact."""
        check_limits(tenant, max_live, max_metadata_bytes)
        partition = {self._layout.of_episode(episode_id) for episode_id in documents}
        if len(partition) > 1:
            raise ValueError("the episodes of one add must share a partition: use new_ids")
        group = _Group(env, tenant, metadata_bytes, max_live, max_metadata_bytes, log)
        episodes = [_NewEpisode(episode_id, data, group) for episode_id, data in documents.items()]
        while episodes:
            reply = (await self._adds(episodes))[0]
            if reply == 1:
                return
            if reply != 0:  # else more expired episodes were due: counted out, try again
                assert tenant is not None  # only a group with a tenant has limits
                quota, limit, used, requested = reply
                raise quota_exceeded(tenant, _text(quota), limit, used, requested)

    async def tenant_usage(self, tenant: str) -> Usage:
        return await self._usage(tenant, self._layout.partitions)

    async def _usage(self, tenant: str, partitions: Sequence[Partition]) -> Usage:
        """What ``tenant`` holds in ``partitions``, expired episodes counted out."""

        async def held(partition: Partition) -> Usage:
            while True:
                looked_at, live, metadata_bytes = await self._call(
                    self._usage_script, partition.live_keys, [LIVE_CHECKS, tenant]
                )
                if looked_at < LIVE_CHECKS:
                    return Usage(live, metadata_bytes)

        usages = await asyncio.gather(*map(held, partitions))
        return Usage(sum(u.live_episodes for u in usages), sum(u.metadata_bytes for u in usages))

    async def take(self, bucket: str, rate: float, burst: int) -> float:
        interval = bucket_interval(rate, burst)
        [wait] = await self._takes([(bucket, interval, burst)])
        return wait / 1_000_000

    async def load(
        self, episode_id: str, *, cached: bool = False, log: bool = False
    ) -> Versioned | None:
        if not log:
            return (await self.load_many([episode_id], cached=cached))[0]
        [(version, data, entries)] = await self._loads([_Load(episode_id, True)])
        if self._remember(episode_id, version, data) is None:
            return None
        return Versioned(data, int(version), list(entries))

    async def load_many(
        self, episode_ids: Sequence[str], *, cached: bool = False
    ) -> list[Versioned | None]:
        found: dict[str, Versioned | None] = {}
        if cached:
            found = {i: self._recent[i] for i in episode_ids if i in self._recent}
        missing = [i for i in episode_ids if i not in found]
        loaded = await self._loads([_Load(episode_id, False) for episode_id in missing])
        for episode_id, (version, data, _) in zip(missing, loaded, strict=True):
            found[episode_id] = self._remember(episode_id, version, data)
        return [found[episode_id] for episode_id in episode_ids]

    async def replace(
        self,
        episode_id: str,
        version: int,
        data: bytes,
        archive: ArchiveRecord | None = None,
        append: Sequence[bytes] = (),
    ) -> bool:
        return (await self.replace_many([Write(episode_id, version, data, archive, append)]))[0]

    async def replace_many(self, writes: Sequence[Write]) -> list[bool]:
        written = await self._writes(writes)
        for write, ok in zip(writes, written, strict=True):
            self._remember(write.episode_id, write.version + 1 if ok else None, write.data)
        return written

    # The bulk calls behind the coalescers: one script call per partition each.

    async def _per_partition(
        self,
        items: Sequence[_Item],
        partition_of: Callable[[_Item], Partition],
        call: Callable[[Partition, list[_Item]], Awaitable[list[_Reply]]],
    ) -> list[_Reply]:
        """``call`` for the items of each partition, concurrently; replies in item order."""
        if len(self._layout.partitions) == 1:
            return await call(self._layout.partitions[0], list(items))
        indices: dict[Partition, list[int]] = {}
        for i, item in enumerate(items):
            indices.setdefault(partition_of(item), []).append(i)
        replies = await asyncio.gather(
            *(call(partition, [items[i] for i in where]) for partition, where in indices.items())
        )
        ordered: list[_Reply] = [None] * len(items)  # type: ignore[list-item]  # all filled
        for where, reply in zip(indices.values(), replies, strict=True):
            for i, one in zip(where, reply, strict=True):
                ordered[i] = one
        return ordered

    async def _add_all(self, episodes: list[_NewEpisode]) -> list[Any]:
        return await self._per_partition(
            episodes, lambda episode: self._layout.of_episode(episode.episode_id), self._add_in
        )

    async def _add_in(self, partition: Partition, episodes: list[_NewEpisode]) -> list[Any]:
        args: list[Any] = [self._ttl_ms, LIVE_CHECKS]
        sizes: list[int] = []
        for group, members in itertools.groupby(episodes, key=attrgetter("group")):
            documents = [episode.data for episode in members]
            sizes.append(len(documents))
            elsewhere = await self._held_elsewhere(group, partition)
            args += (len(documents), group.env, group.tenant or "", group.metadata_bytes)
            args += (_limit(group.max_live), _limit(group.max_metadata_bytes), *elsewhere)
            args += (len(group.log), *documents, *group.log)
        keys = list(partition.live_keys)
        for episode in episodes:
            keys += (partition.key(episode.episode_id), partition.log_key(episode.episode_id))
        replies = await self._call(self._add_script, keys, args)
        return [reply for reply, size in zip(replies, sizes, strict=True) for _ in range(size)]

    async def _held_elsewhere(self, group: _Group, partition: Partition) -> Usage:
        """What a group's tenant holds outside ``partition``, if it has limits to check."""
        limited = group.max_live is not None or group.max_metadata_bytes is not None
        others = [p for p in self._layout.partitions if p is not partition]
        if not limited or not others or group.tenant is None:
            return Usage(0, 0)
        return await self._usage(group.tenant, others)

    async def _take_all(self, takes: list[tuple[str, int, int]]) -> list[int]:
        return await self._per_partition(
            takes, lambda take: self._layout.of_bucket(take[0]), self._take_in
        )

    async def _take_in(self, partition: Partition, takes: list[tuple[str, int, int]]) -> list[int]:
        keys = [partition.bucket_key(bucket) for bucket, _, _ in takes]
        args = [arg for _, interval, burst in takes for arg in (interval, burst)]
        return list(await self._call(self._take_script, keys, args))

    async def _load_all(self, loads: list[_Load]) -> list[tuple[Any, Any, Any]]:
        return await self._per_partition(
            loads, lambda load: self._layout.of_episode(load.episode_id), self._load_in
        )

    async def _load_in(
        self, partition: Partition, loads: list[_Load]
    ) -> list[tuple[Any, Any, Any]]:
        keys: list[str] = []
        for load in loads:
            keys += (partition.key(load.episode_id), partition.log_key(load.episode_id))
        args = [self._ttl_ms, *("1" if load.log else "" for load in loads)]
        reply = await self._call(self._load_script, keys, args)
        return list(zip(reply[::3], reply[1::3], reply[2::3], strict=True))

    async def _replace_all(self, writes: list[Write]) -> list[bool]:
        return await self._per_partition(
            writes, lambda write: self._layout.of_episode(write.episode_id), self._replace_in
        )

    async def _replace_in(self, partition: Partition, writes: list[Write]) -> list[bool]:
        args: list[Any] = [self._ttl_ms]
        keys = [partition.stream, *partition.live_keys]
        for write in writes:
            args += (write.version, write.data, *_archive_args(write.archive))
            args += (len(write.append), *write.append)
            keys += (partition.key(write.episode_id), partition.log_key(write.episode_id))
        return [bool(reply) for reply in await self._call(self._replace_script, keys, args)]

    def _remember(self, episode_id: str, version: Any, data: bytes | None) -> Versioned | None:
        """Keep what was just read or written; forget what turned out to be stale."""
        if version is None or data is None:
            self._recent.pop(episode_id, None)
            return None
        item = Versioned(data, int(version))
        self._recent[episode_id] = item
        return item

    async def live(self) -> dict[str, int]:
        async def counted(partition: Partition) -> dict[str, int]:
            while True:
                looked_at, counts = await self._call(
                    self._live_script, partition.live_keys, [LIVE_CHECKS]
                )
                if looked_at < LIVE_CHECKS:
                    return {
                        _text(env): int(n) for env, n in zip(counts[::2], counts[1::2], strict=True)
                    }

        total: Counter[str] = Counter()
        for counts in await asyncio.gather(*map(counted, self._layout.partitions)):
            total.update(counts)
        return dict(total)

    async def pending(self, count: int) -> list[Pending]:
        """Up to ``count`` records from each partition, oldest first by the time they were
        queued; past ``count``, the rest are this consumer's and come first next time."""
        taken = await asyncio.gather(
            *(self._pending_in(partition, count) for partition in self._layout.partitions)
        )
        records = sorted(
            (_stream_order(token), self._layout.token(partition, token), data)
            for partition, entries in zip(self._layout.partitions, taken, strict=True)
            for token, data in entries
        )
        return [Pending(token, data) for _, token, data in records[:count]]

    async def _pending_in(self, partition: Partition, count: int) -> list[tuple[str, bytes]]:
        async with self._available():
            try:
                return await self._read_backlog(partition, count)
            except ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                self._joined.discard(partition)  # the stream was deleted under us
                return await self._read_backlog(partition, count)

    async def _read_backlog(self, partition: Partition, count: int) -> list[tuple[str, bytes]]:
        stream = partition.stream
        if partition not in self._joined:
            try:
                await self._redis.xgroup_create(stream, ARCHIVERS, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
            self._joined.add(partition)
        # Ours from an earlier attempt first, then a dead archiver's, then new ones.
        entries = _entries(
            await self._redis.xreadgroup(ARCHIVERS, self._consumer, {stream: "0"}, count)
        )
        if not entries:
            _, entries, *_ = await self._redis.xautoclaim(
                stream, ARCHIVERS, self._consumer, self._claim_after_ms, "0-0", count
            )
        if not entries:
            entries = _entries(
                await self._redis.xreadgroup(ARCHIVERS, self._consumer, {stream: ">"}, count)
            )
        return [(_text(token), fields[b"d"]) for token, fields in entries if fields]

    async def acknowledge(self, tokens: Sequence[str]) -> None:
        await asyncio.gather(
            *(
                self._call(self._acknowledge_script, [partition.stream], [ARCHIVERS, *ids])
                for partition, ids in self._layout.by_partition(tokens).items()
            )
        )

    async def release(self, episode_ids: Sequence[str]) -> None:
        by_partition: dict[Partition, list[str]] = {}
        for episode_id in dict.fromkeys(episode_ids):
            self._recent.pop(episode_id, None)
            partition = self._layout.of_episode(episode_id)
            by_partition.setdefault(partition, []).append(episode_id)
        for partition, ids in by_partition.items():
            for start in range(0, len(ids), IDS_PER_SCRIPT):
                keys: list[str] = []
                for episode_id in ids[start : start + IDS_PER_SCRIPT]:
                    keys += (partition.key(episode_id), partition.log_key(episode_id))
                await self._call(self._release_script, keys, [self._finished_ms])

    async def backlog(self) -> int:
        return await self._total_length(lambda partition: partition.stream)

    async def dead_letter_count(self) -> int:
        return await self._total_length(lambda partition: partition.dead)

    async def _total_length(self, stream_of: Callable[[Partition], str]) -> int:
        async def length(partition: Partition) -> int:
            async with self._available():
                return int(await self._redis.xlen(stream_of(partition)))

        return sum(await asyncio.gather(*map(length, self._layout.partitions)))

    async def dead_letter(self, token: str, error: str) -> str | None:
        parsed = self._layout.parse_token(token)
        if parsed is None or not _is_stream_id(parsed[1]):
            return None
        partition, stream_id = parsed
        letter_id = await self._call(
            self._dead_letter_script,
            [partition.stream, partition.dead],
            [ARCHIVERS, stream_id, error, repr(time.time())],
        )
        return None if letter_id is None else self._layout.token(partition, _text(letter_id))

    async def dead_letters(self, count: int, after: str | None = None) -> list[DeadLetter]:
        """Oldest first across partitions: by stream id, then partition."""
        start = None if after is None else self._layout.parse_token(after)
        if after is not None and (start is None or not _is_stream_id(start[1])):
            return []

        async def page(partition: Partition) -> list[Any]:
            first = "-"
            if start is not None:  # after (id, partition): later ids, or this id further on
                first = start[1] if partition.index > start[0].index else f"({start[1]}"
            async with self._available():
                return list(await self._redis.xrange(partition.dead, first, "+", count))

        pages = await asyncio.gather(*map(page, self._layout.partitions))
        letters = sorted(
            (_stream_order(_text(letter_id)), partition.index, letter_id, fields)
            for partition, entries in zip(self._layout.partitions, pages, strict=True)
            for letter_id, fields in entries
        )
        return [
            DeadLetter(
                self._layout.token(self._layout.partitions[index], _text(letter_id)),
                fields[b"d"],
                _text(fields[b"e"]),
                float(fields[b"t"]),
            )
            for _, index, letter_id, fields in letters[:count]
        ]

    async def retry_dead_letters(self, ids: Sequence[str]) -> list[str]:
        return await self._each_chunk(
            self._retry_script, lambda partition: [partition.dead, partition.stream], ids
        )

    async def drop_dead_letters(self, ids: Sequence[str]) -> list[str]:
        return await self._each_chunk(self._drop_script, lambda partition: [partition.dead], ids)

    async def _each_chunk(
        self, script: Any, keys_of: Callable[[Partition], list[str]], ids: Sequence[str]
    ) -> list[str]:
        """Run ``script`` over the well-formed ``ids`` of each partition, a few hundred per
        call; the ids it acted on, in the order given."""
        requested = list(dict.fromkeys(ids))
        done: set[str] = set()
        for partition, stream_ids in self._layout.by_partition(requested).items():
            valid = [stream_id for stream_id in stream_ids if _is_stream_id(stream_id)]
            for start in range(0, len(valid), IDS_PER_SCRIPT):
                chunk = valid[start : start + IDS_PER_SCRIPT]
                reply = await self._call(script, keys_of(partition), chunk)
                done.update(self._layout.token(partition, _text(i)) for i in reply)
        return [letter_id for letter_id in requested if letter_id in done]

    async def ping(self) -> None:
        async with self._available():
            await self._redis.ping()

    async def aclose(self) -> None:
        for partition in list(self._joined):
            await self._leave_group(partition)
        await self._redis.aclose()

    async def _leave_group(self, partition: Partition) -> None:
        try:
            await self._leave_script(keys=[partition.stream], args=[ARCHIVERS, self._consumer])
        except _UNREACHABLE:
            pass  # the consumer stays, as after a crash; another archiver claims its records
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):  # the stream was deleted: nothing to leave
                raise

    async def _discover(self) -> None:
        """Learn the cluster's nodes before the first commands: redis-py's cluster client
        does it at its first command, and several first commands at once (the partitions
        of one bulk call) broke each other's new connections."""
        if self._discovered:
            return
        async with self._discovering:
            if not self._discovered:
                await self._redis.initialize()
                self._discovered = True

    async def _call(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        """One script call, its keys all in one partition."""
        async with self._available():
            return await script(keys=keys, args=args)

    @asynccontextmanager
    async def _available(self) -> AsyncIterator[None]:
        """Redis errors of reach as ``StoreUnavailable``; on a cluster, one of a bounded
        number of calls in flight."""
        try:
            if self._calls is None:
                yield
            else:
                await self._discover()
                async with self._calls:
                    yield
        except _UNREACHABLE as exc:
            raise StoreUnavailable(f"the Redis store is unreachable: {exc}") from exc


def _entries(reply: Any) -> list[Any]:
    """The entries of a one-stream XREADGROUP reply."""
    return list(reply[0][1]) if reply else []


def _stream_order(stream_id: str) -> tuple[int, int]:
    """A stream id as a sortable pair: ids of different streams compare by their time."""
    milliseconds, _, sequence = stream_id.partition("-")
    return int(milliseconds), int(sequence or 0)


def _is_stream_id(value: str) -> bool:
    match = _STREAM_ID.fullmatch(value)
    return match is not None and all(int(part) < 2**64 for part in match.groups())


def _archive_args(archive: ArchiveRecord | None) -> tuple[str, bytes, bytes]:
    """An archive record as ``scripts.REPLACE_MANY`` takes it: its kind and two parts."""
    if archive is None:
        return "", b"", b""
    if isinstance(archive, RecordWithLog):
        return "log", archive.before, archive.after
    return "record", archive, b""


def _limit(value: int | None) -> int | str:
    """A limit as a script takes it: '' for none."""
    return "" if value is None else value


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
