"""The Redis store: episodes shared by every process and replica.

Each episode is a hash ``{prefix}episode:{id}`` with fields ``v`` (version) and
``d`` (document). Reads and compare-and-set writes are Lua scripts that take
many episodes at once, and each write is atomic on the server. A batch of steps
is one script call, and so are the reads and writes of all the requests in
flight during one event-loop turn (``service.store.coalesce``): redis-py packs
commands in Python, and one command per episode cost more than the steps
themselves.

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
that queues its record. An episode of a tenant also counts in ``{prefix}live:tenant``
(episodes by tenant) and ``{prefix}live:bytes`` (their metadata bytes, by tenant), its
``live:env`` entry saying ``env \x1f tenant \x1f bytes``; its add is a script of its
own, which counts out expired episodes, checks the tenant's quotas and adds, or refuses
the whole request, in one atomic step.

Each API key's rate limit is a token bucket, the hash ``{prefix}rate:{key id}`` (tokens,
time of the last refill by Redis's clock), which expires once it would be full again.

Dead letters are the stream ``{prefix}archive:dead``, entries ``d`` (the record), ``e``
(the error) and ``t`` (Unix time); a script moves a record between the two streams
in one step, so it is always in exactly one of them. The dead letters are kept
until an operator retries or drops them: they are data the database refused, not
a cache, and ``wander_archive_dead_letters`` shows how many there are.

The scripts touch several keys, so the store needs a single Redis server (or a
replicated one), not Redis Cluster.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import redis.asyncio as redis
from cachetools import LRUCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from wander.service.errors import StoreUnavailable
from wander.service.store.base import DeadLetter, EpisodeStore, Pending, Versioned, Write
from wander.service.store.coalesce import Coalescer
from wander.service.store.quotas import quota_exceeded

_NOW_MS = """
local clock = redis.call('TIME')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
"""
"""Lua: the server's clock in milliseconds, as ``now``."""

_ADD_MANY = (
    _NOW_MS
    + """
local ttl = tonumber(ARGV[1])
for i = 6, #KEYS do
  local env, data = ARGV[2 * i - 10], ARGV[2 * i - 9]
  redis.call('HSET', KEYS[i], 'v', 1, 'd', data)
  redis.call('EXPIRE', KEYS[i], ttl)
  if redis.call('ZADD', KEYS[1], 'NX', now + ttl * 1000, KEYS[i]) == 1 then
    redis.call('HSET', KEYS[2], KEYS[i], env)
    redis.call('HINCRBY', KEYS[3], env, 1)
  end
end
"""
)
"""New episodes of no tenant: ``KEYS`` the five live keys, then the episodes; ``ARGV`` the
TTL, then (environment, document) per episode. Run twice (a retry after a lost reply), it
counts each episode once."""

_LOAD_MANY = """
local ttl = ARGV[1]
local found = {}
for i, key in ipairs(KEYS) do
  local item = redis.call('HMGET', key, 'v', 'd')
  if item[1] then redis.call('EXPIRE', key, ttl) end
  found[2 * i - 1] = item[1]
  found[2 * i] = item[2]
end
return found
"""
"""Loads: ``KEYS`` episodes; a flat reply of (version, document) pairs, nil if gone."""

_NOT_LIVE = """
local function not_live(key)
  if redis.call('ZREM', KEYS[LIVE], key) == 1 then
    local entry = redis.call('HGET', KEYS[LIVE + 1], key)
    redis.call('HDEL', KEYS[LIVE + 1], key)
    if entry then
      local env, tenant, size = string.match(entry, '^(.*)\31(.*)\31(%d+)$')
      if env then
        redis.call('HINCRBY', KEYS[LIVE + 3], tenant, -1)
        redis.call('HINCRBY', KEYS[LIVE + 4], tenant, 0 - tonumber(size))  -- never '-0'
      else
        env = entry
      end
      redis.call('HINCRBY', KEYS[LIVE + 2], env, -1)
    end
  end
end
local function count_out_expired(limit)
  local due = redis.call('ZRANGEBYSCORE', KEYS[LIVE], '-inf', now, 'LIMIT', 0, limit)
  for _, key in ipairs(due) do
    local left = redis.call('PTTL', key)
    if left == -2 then
      not_live(key)
    else
      redis.call('ZADD', KEYS[LIVE], 'XX', now + math.max(left, 1000), key)
    end
  end
  return #due
end
"""
"""Lua, on the five live keys from ``KEYS[LIVE]`` (the index, each episode's entry, the
counts by environment, by tenant, the metadata bytes by tenant): ``not_live(key)`` takes
the episode out of the index and its counts, once (whoever removes it from the index
counts it out); ``count_out_expired(limit)`` looks at up to ``limit`` episodes past their
first possible expiry (it needs ``now``), counting out those Redis has forgotten and
looking again at the others when their current TTL ends. An entry is the environment,
or ``env \x1f tenant \x1f metadata bytes`` for an episode of a tenant."""

_ADD_TENANT = (
    "local LIVE = 1\n"
    + _NOW_MS
    + _NOT_LIVE
    + """
local ttl, env, tenant, size = tonumber(ARGV[1]), ARGV[2], ARGV[3], tonumber(ARGV[4])
local max_live, max_bytes = tonumber(ARGV[5]), tonumber(ARGV[6])
count_out_expired(tonumber(ARGV[7]))
local n = #KEYS - 5
local live = tonumber(redis.call('HGET', KEYS[4], tenant) or '0')
local used = tonumber(redis.call('HGET', KEYS[5], tenant) or '0')
if max_live >= 0 and live + n > max_live then
  return {'live_episodes', max_live, live, n}
end
if max_bytes >= 0 and size > 0 and used + n * size > max_bytes then
  return {'metadata_bytes', max_bytes, used, n * size}
end
local entry = env .. '\31' .. tenant .. '\31' .. size
for i = 6, #KEYS do
  redis.call('HSET', KEYS[i], 'v', 1, 'd', ARGV[i + 2])
  redis.call('EXPIRE', KEYS[i], ttl)
  if redis.call('ZADD', KEYS[1], 'NX', now + ttl * 1000, KEYS[i]) == 1 then
    redis.call('HSET', KEYS[2], KEYS[i], entry)
    redis.call('HINCRBY', KEYS[3], env, 1)
    redis.call('HINCRBY', KEYS[4], tenant, 1)
    redis.call('HINCRBY', KEYS[5], tenant, size)
  end
end
return false
"""
)
"""New episodes of a tenant, within its quotas: ``KEYS`` the five live keys, then the
episodes; ``ARGV`` the TTL, the environment, the tenant, the metadata bytes of each, the
most live episodes and metadata bytes (-1: no limit), how many expired episodes to count
out first, then the documents. Replies nil when added, or (quota, limit, used, requested)
when refused, with nothing written."""

_USAGE = (
    "local LIVE = 1\n"
    + _NOW_MS
    + _NOT_LIVE
    + """
local looked_at = count_out_expired(tonumber(ARGV[2]))
return {looked_at, redis.call('HGET', KEYS[4], ARGV[1]) or 0,
        redis.call('HGET', KEYS[5], ARGV[1]) or 0}
"""
)
"""A tenant's usage: ``KEYS`` the five live keys; ``ARGV`` the tenant, how many expired
episodes to count out first. Replies how many were looked at, its episodes, its bytes."""

_TAKE = (
    _NOW_MS
    + """
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local bucket = redis.call('HMGET', KEYS[1], 't', 'a')
local tokens, at = tonumber(bucket[1]), tonumber(bucket[2])
if not tokens then tokens, at = burst, now end
tokens = math.min(burst, tokens + math.max(now - at, 0) * rate / 1000)
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 't', string.format('%.6f', tokens), 'a', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return wait
"""
)
"""A token bucket: ``KEYS`` the bucket; ``ARGV`` its rate (a second) and size. Replies 0 when
a token was taken, else the milliseconds until one will be there. Tokens are written as
text: Redis would truncate a Lua number to an integer. The bucket expires once it would
be full again, so an idle key leaves nothing behind."""

_REPLACE_MANY = (
    "local LIVE = 2\n"
    + _NOT_LIVE
    + """
local ttl = ARGV[1]
local written = {}
for i = 7, #KEYS do
  local version, data, archive = ARGV[3 * i - 19], ARGV[3 * i - 18], ARGV[3 * i - 17]
  local stored = redis.call('HGET', KEYS[i], 'v')
  if stored and tonumber(stored) == tonumber(version) then
    redis.call('HSET', KEYS[i], 'v', tonumber(stored) + 1, 'd', data)
    redis.call('EXPIRE', KEYS[i], ttl)
    if archive ~= '' then
      redis.call('XADD', KEYS[1], '*', 'd', archive)
      not_live(KEYS[i])
    end
    written[i - 6] = 1
  else
    written[i - 6] = 0
  end
end
return written
"""
)
"""Compare-and-sets: ``KEYS`` = the archive stream, the five live keys, then the
episodes; ``ARGV`` = the TTL, then (version, document, archive record or '') per episode;
a reply of 1 (written) or 0. A write that queues a record finishes its episode: it is
live no more."""

_LIVE = (
    "local LIVE = 1\n"
    + _NOW_MS
    + _NOT_LIVE
    + """
return {count_out_expired(tonumber(ARGV[1])), redis.call('HGETALL', KEYS[3])}
"""
)
"""Count the live episodes: ``KEYS`` the five live keys; ``ARGV`` how many episodes past
their first possible expiry to look at (reads and writes refresh the TTL, not the index).
Replies how many were looked at, and the counts by environment."""

_LEAVE_GROUP = """
if #redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2]) == 0 then
  redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
end
"""
"""Leave the archivers' group (``ARGV``: the group, the consumer) unless the consumer
still holds records: deleting it would drop them from the group's pending list, and no
other archiver could claim them. One script, so no record is read in between."""

_DEAD_LETTER = """
local entry = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])[1]
if not entry then return false end
local data = entry[2][2]
local id = redis.call('XADD', KEYS[2], '*', 'd', data, 'e', ARGV[3], 't', ARGV[4])
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return id
"""
"""Move a backlog record to the dead letters: ``KEYS`` the backlog, the dead letters;
``ARGV`` the group, the record's id, the error, the time. Nil if the record is gone."""

_RETRY_DEAD = """
local moved = {}
for _, id in ipairs(ARGV) do
  local entry = redis.call('XRANGE', KEYS[1], id, id)[1]
  if entry then
    redis.call('XADD', KEYS[2], '*', 'd', entry[2][2])
    redis.call('XDEL', KEYS[1], id)
    moved[#moved + 1] = id
  end
end
return moved
"""
"""Dead letters back to the backlog: ``KEYS`` the dead letters, the backlog; ``ARGV`` ids.
Every entry of either stream has its record as the first field (``d``)."""

_DROP_DEAD = """
local dropped = {}
for _, id in ipairs(ARGV) do
  if redis.call('XDEL', KEYS[1], id) == 1 then dropped[#dropped + 1] = id end
end
return dropped
"""
"""Delete dead letters: ``KEYS`` the dead letters; ``ARGV`` ids; replies the ids deleted."""

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


class RedisStore(EpisodeStore):
    durable = True

    def __init__(
        self,
        client: redis.Redis,
        ttl_seconds: int,
        prefix: str = "wander:",
        claim_after_seconds: float = 60.0,
    ) -> None:
        super().__init__(ttl_seconds)
        self._redis = client
        self._prefix = prefix
        self._stream = f"{prefix}archive"
        self._dead = f"{prefix}archive:dead"
        self._live_keys = [
            f"{prefix}live", f"{prefix}live:env", f"{prefix}live:count",
            f"{prefix}live:tenant", f"{prefix}live:bytes",
        ]  # fmt: skip
        self._consumer = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self._claim_after_ms = int(claim_after_seconds * 1000)
        self._group_ready = False
        self._add_script = client.register_script(_ADD_MANY)
        self._load_script = client.register_script(_LOAD_MANY)
        self._replace_script = client.register_script(_REPLACE_MANY)
        self._leave_script = client.register_script(_LEAVE_GROUP)
        self._dead_letter_script = client.register_script(_DEAD_LETTER)
        self._retry_script = client.register_script(_RETRY_DEAD)
        self._drop_script = client.register_script(_DROP_DEAD)
        self._live_script = client.register_script(_LIVE)
        self._add_tenant_script = client.register_script(_ADD_TENANT)
        self._usage_script = client.register_script(_USAGE)
        self._take_script = client.register_script(_TAKE)
        self._adds = Coalescer(self._add_all)
        self._loads = Coalescer(self._load_all)
        self._writes = Coalescer(self._replace_all)
        self._recent: LRUCache[str, Versioned] = LRUCache(maxsize=RECENT_EPISODES)

    @classmethod
    def from_url(
        cls,
        url: str,
        ttl_seconds: int,
        prefix: str = "wander:",
        claim_after_seconds: float = 60.0,
        max_connections: int = 64,
    ) -> RedisStore:
        """A store on its own pool: at most ``max_connections``, and a request that finds
        them all busy waits for one (up to the socket timeout) instead of failing."""
        pool = redis.BlockingConnectionPool.from_url(
            url,
            max_connections=max_connections,
            timeout=5,
            socket_timeout=5,
            socket_connect_timeout=5,
        )
        return cls(redis.Redis.from_pool(pool), ttl_seconds, prefix, claim_after_seconds)

    def key(self, episode_id: str) -> str:
        return f"{self._prefix}episode:{episode_id}"

    async def add(
        self,
        documents: Mapping[str, bytes],
        env: str,
        *,
        tenant: str | None = None,
        metadata_bytes: int = 0,
        max_live: int | None = None,
        max_metadata_bytes: int | None = None,
    ) -> None:
        if tenant is None:  # many requests' adds in one script call
            await self._adds([(episode_id, env, data) for episode_id, data in documents.items()])
            return
        # One script call per request: its quota check and its add are one atomic step.
        args: list[Any] = [
            self.ttl_seconds, env, tenant, metadata_bytes,
            -1 if max_live is None else max_live,
            -1 if max_metadata_bytes is None else max_metadata_bytes,
            LIVE_CHECKS, *documents.values(),
        ]  # fmt: skip
        async with self._available():
            refused = await self._add_tenant_script(
                keys=[*self._live_keys, *(self.key(episode_id) for episode_id in documents)],
                args=args,
            )
        if refused:
            quota, limit, used, requested = refused
            raise quota_exceeded(_text(quota), int(limit), int(used), int(requested))

    async def tenant_usage(self, tenant: str) -> tuple[int, int]:
        while True:
            async with self._available():
                looked_at, live, used = await self._usage_script(
                    keys=self._live_keys, args=[tenant, LIVE_CHECKS]
                )
            if looked_at < LIVE_CHECKS:
                return int(live), int(used)

    async def take(self, bucket: str, rate: float, burst: int) -> float:
        async with self._available():
            wait_ms = await self._take_script(
                keys=[f"{self._prefix}rate:{bucket}"], args=[repr(float(rate)), burst]
            )
        return int(wait_ms) / 1000

    async def load(self, episode_id: str, *, cached: bool = False) -> Versioned | None:
        return (await self.load_many([episode_id], cached=cached))[0]

    async def load_many(
        self, episode_ids: Sequence[str], *, cached: bool = False
    ) -> list[Versioned | None]:
        found: dict[str, Versioned | None] = {}
        if cached:
            found = {i: self._recent[i] for i in episode_ids if i in self._recent}
        missing = [i for i in episode_ids if i not in found]
        for episode_id, (version, data) in zip(missing, await self._loads(missing), strict=True):
            found[episode_id] = self._remember(episode_id, version, data)
        return [found[episode_id] for episode_id in episode_ids]

    async def replace(
        self, episode_id: str, version: int, data: bytes, archive: bytes | None = None
    ) -> bool:
        return (await self.replace_many([Write(episode_id, version, data, archive)]))[0]

    async def replace_many(self, writes: Sequence[Write]) -> list[bool]:
        written = await self._writes(writes)
        for write, ok in zip(writes, written, strict=True):
            self._remember(write.episode_id, write.version + 1 if ok else None, write.data)
        return written

    # The bulk calls behind the coalescers: one script call each.

    async def _add_all(self, documents: list[tuple[str, str, bytes]]) -> list[None]:
        args: list[Any] = [self.ttl_seconds]
        for _, env, data in documents:
            args += (env, data)
        async with self._available():
            await self._add_script(
                keys=[*self._live_keys, *(self.key(episode_id) for episode_id, _, _ in documents)],
                args=args,
            )
        return [None] * len(documents)

    async def _load_all(self, episode_ids: list[str]) -> list[tuple[Any, Any]]:
        async with self._available():
            reply = await self._load_script(
                keys=[self.key(i) for i in episode_ids], args=[self.ttl_seconds]
            )
        return list(zip(reply[::2], reply[1::2], strict=True))

    async def _replace_all(self, writes: list[Write]) -> list[bool]:
        args: list[Any] = [self.ttl_seconds]
        for write in writes:
            args += (write.version, write.data, write.archive or b"")
        async with self._available():
            replies = await self._replace_script(
                keys=[
                    self._stream,
                    *self._live_keys,
                    *(self.key(write.episode_id) for write in writes),
                ],
                args=args,
            )
        return [bool(reply) for reply in replies]

    def _remember(self, episode_id: str, version: Any, data: bytes | None) -> Versioned | None:
        """Keep what was just read or written; forget what turned out to be stale."""
        if version is None or data is None:
            self._recent.pop(episode_id, None)
            return None
        item = Versioned(data, int(version))
        self._recent[episode_id] = item
        return item

    async def live(self) -> dict[str, int]:
        while True:
            async with self._available():
                looked_at, counts = await self._live_script(
                    keys=self._live_keys, args=[LIVE_CHECKS]
                )
            if looked_at < LIVE_CHECKS:
                return {
                    _text(env): int(n) for env, n in zip(counts[::2], counts[1::2], strict=True)
                }

    async def pending(self, count: int) -> list[Pending]:
        async with self._available():
            try:
                return await self._pending(count)
            except ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                self._group_ready = False  # the stream was deleted under us
                return await self._pending(count)

    async def _pending(self, count: int) -> list[Pending]:
        if not self._group_ready:
            try:
                await self._redis.xgroup_create(self._stream, ARCHIVERS, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
            self._group_ready = True
        # Ours from an earlier attempt first, then a dead archiver's, then new ones.
        entries = _entries(
            await self._redis.xreadgroup(ARCHIVERS, self._consumer, {self._stream: "0"}, count)
        )
        if not entries:
            _, entries, *_ = await self._redis.xautoclaim(
                self._stream, ARCHIVERS, self._consumer, self._claim_after_ms, "0-0", count
            )
        if not entries:
            entries = _entries(
                await self._redis.xreadgroup(ARCHIVERS, self._consumer, {self._stream: ">"}, count)
            )
        return [Pending(_text(token), fields[b"d"]) for token, fields in entries if fields]

    async def acknowledge(self, tokens: Sequence[str]) -> None:
        if not tokens:
            return
        async with self._available(), self._redis.pipeline(transaction=True) as pipe:
            pipe.xack(self._stream, ARCHIVERS, *tokens)
            pipe.xdel(self._stream, *tokens)
            await pipe.execute()

    async def backlog(self) -> int:
        async with self._available():
            return int(await self._redis.xlen(self._stream))

    async def dead_letter(self, token: str, error: str) -> str | None:
        async with self._available():
            letter_id = await self._dead_letter_script(
                keys=[self._stream, self._dead], args=[ARCHIVERS, token, error, repr(time.time())]
            )
        return None if letter_id is None else _text(letter_id)

    async def dead_letters(self, count: int, after: str | None = None) -> list[DeadLetter]:
        if after is not None and not _is_stream_id(after):
            return []
        async with self._available():
            entries = await self._redis.xrange(
                self._dead, "-" if after is None else f"({after}", "+", count
            )
        return [
            DeadLetter(_text(letter_id), fields[b"d"], _text(fields[b"e"]), float(fields[b"t"]))
            for letter_id, fields in entries
        ]

    async def dead_letter_count(self) -> int:
        async with self._available():
            return int(await self._redis.xlen(self._dead))

    async def retry_dead_letters(self, ids: Sequence[str]) -> list[str]:
        return await self._each_chunk(self._retry_script, [self._dead, self._stream], ids)

    async def drop_dead_letters(self, ids: Sequence[str]) -> list[str]:
        return await self._each_chunk(self._drop_script, [self._dead], ids)

    async def _each_chunk(self, script: Any, keys: list[str], ids: Sequence[str]) -> list[str]:
        """Run ``script`` over the well-formed ``ids``, a few hundred per call."""
        valid = [letter_id for letter_id in dict.fromkeys(ids) if _is_stream_id(letter_id)]
        done: list[str] = []
        for start in range(0, len(valid), IDS_PER_SCRIPT):
            async with self._available():
                reply = await script(keys=keys, args=valid[start : start + IDS_PER_SCRIPT])
            done += (_text(letter_id) for letter_id in reply)
        return done

    async def ping(self) -> None:
        async with self._available():
            await self._redis.ping()

    async def aclose(self) -> None:
        if self._group_ready:
            await self._leave_group()
        await self._redis.aclose()

    async def _leave_group(self) -> None:
        try:
            await self._leave_script(keys=[self._stream], args=[ARCHIVERS, self._consumer])
        except _UNREACHABLE:
            pass  # the consumer stays, as after a crash; another archiver claims its records
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):  # the stream was deleted: nothing to leave
                raise

    @asynccontextmanager
    async def _available(self) -> AsyncIterator[None]:
        try:
            yield
        except _UNREACHABLE as exc:
            raise StoreUnavailable(f"the Redis store is unreachable: {exc}") from exc


def _entries(reply: Any) -> list[Any]:
    """The entries of a one-stream XREADGROUP reply."""
    return list(reply[0][1]) if reply else []


def _is_stream_id(value: str) -> bool:
    match = _STREAM_ID.fullmatch(value)
    return match is not None and all(int(part) < 2**64 for part in match.groups())


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
