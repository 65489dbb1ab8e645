"""The Redis store: episodes shared by every process and replica.

Each episode is a hash ``{prefix}episode:{id}`` with fields ``v`` (version) and
``d`` (document). Reads and compare-and-set writes are Lua scripts, so each is
one round trip and atomic on the server; many of them go in one pipeline. The
store remembers the last version it read or wrote of recent episodes, so that a
step served by the same process needs a single round trip (its write); a stale
memory only costs a failed compare-and-set and a fresh read. The archive backlog is the stream
``{prefix}archive``, read through a consumer group: a record taken by an
archiver that dies before acknowledging it is claimed by another after
``claim_after_seconds``.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import redis.asyncio as redis
from cachetools import LRUCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.errors import StoreUnavailable
from service.store.base import EpisodeStore, Pending, Versioned, Write

_LOAD = """
local item = redis.call('HMGET', KEYS[1], 'v', 'd')
if item[1] then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return item
"""

_REPLACE = """
local version = redis.call('HGET', KEYS[1], 'v')
if not version or tonumber(version) ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'v', tonumber(version) + 1, 'd', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
if ARGV[4] ~= '' then redis.call('XADD', KEYS[2], '*', 'd', ARGV[4]) end
return 1
"""

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
        self._consumer = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self._claim_after_ms = int(claim_after_seconds * 1000)
        self._group_ready = False
        self._load = client.register_script(_LOAD)
        self._replace = client.register_script(_REPLACE)
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

    async def add(self, documents: Mapping[str, bytes]) -> None:
        async with self._available(), self._redis.pipeline(transaction=True) as pipe:
            for episode_id, data in documents.items():
                key = self.key(episode_id)
                pipe.hset(key, mapping={"v": 1, "d": data})
                pipe.expire(key, self.ttl_seconds)
            await pipe.execute()

    async def load(self, episode_id: str, *, cached: bool = False) -> Versioned | None:
        return (await self.load_many([episode_id], cached=cached))[0]

    async def load_many(
        self, episode_ids: Sequence[str], *, cached: bool = False
    ) -> list[Versioned | None]:
        found: dict[str, Versioned | None] = {}
        if cached:
            found = {i: self._recent[i] for i in episode_ids if i in self._recent}
        missing = [i for i in episode_ids if i not in found]
        if missing:
            async with self._available(), self._redis.pipeline(transaction=False) as pipe:
                for episode_id in missing:
                    await self._load(
                        keys=[self.key(episode_id)], args=[self.ttl_seconds], client=pipe
                    )
                replies = await pipe.execute()
            for episode_id, (version, data) in zip(missing, replies, strict=True):
                found[episode_id] = self._remember(episode_id, version, data)
        return [found[episode_id] for episode_id in episode_ids]

    async def replace(
        self, episode_id: str, version: int, data: bytes, archive: bytes | None = None
    ) -> bool:
        return (await self.replace_many([Write(episode_id, version, data, archive)]))[0]

    async def replace_many(self, writes: Sequence[Write]) -> list[bool]:
        async with self._available(), self._redis.pipeline(transaction=False) as pipe:
            for write in writes:
                await self._replace(
                    keys=[self.key(write.episode_id), self._stream],
                    args=[write.version, write.data, self.ttl_seconds, write.archive or b""],
                    client=pipe,
                )
            replies = await pipe.execute()
        written = [bool(reply) for reply in replies]
        for write, ok in zip(writes, written, strict=True):
            self._remember(write.episode_id, write.version + 1 if ok else None, write.data)
        return written

    def _remember(self, episode_id: str, version: Any, data: bytes | None) -> Versioned | None:
        """Keep what was just read or written; forget what turned out to be stale."""
        if version is None or data is None:
            self._recent.pop(episode_id, None)
            return None
        item = Versioned(data, int(version))
        self._recent[episode_id] = item
        return item

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

    async def ping(self) -> None:
        async with self._available():
            await self._redis.ping()

    async def aclose(self) -> None:
        await self._redis.aclose()

    @asynccontextmanager
    async def _available(self) -> AsyncIterator[None]:
        try:
            yield
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            raise StoreUnavailable(f"the Redis store is unreachable: {exc}") from exc


def _entries(reply: Any) -> list[Any]:
    """The entries of a one-stream XREADGROUP reply."""
    return list(reply[0][1]) if reply else []


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
