"""The Redis store: episodes shared by every process and replica.

Each episode is a hash ``{prefix}episode:{id}`` with fields ``v`` (version) and
``d`` (document). Reads and compare-and-set writes are Lua scripts, so each is
one round trip and atomic on the server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import redis.asyncio as redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.errors import StoreUnavailable
from service.store.base import EpisodeStore, Versioned

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
return 1
"""


class RedisStore(EpisodeStore):
    def __init__(self, client: redis.Redis, ttl_seconds: int, prefix: str = "wander:") -> None:
        super().__init__(ttl_seconds)
        self._redis = client
        self._prefix = prefix
        self._load = client.register_script(_LOAD)
        self._replace = client.register_script(_REPLACE)

    @classmethod
    def from_url(cls, url: str, ttl_seconds: int, prefix: str = "wander:") -> RedisStore:
        client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        return cls(client, ttl_seconds, prefix)

    def key(self, episode_id: str) -> str:
        return f"{self._prefix}episode:{episode_id}"

    async def add(self, documents: Mapping[str, bytes]) -> None:
        async with self._available(), self._redis.pipeline(transaction=True) as pipe:
            for episode_id, data in documents.items():
                key = self.key(episode_id)
                pipe.hset(key, mapping={"v": 1, "d": data})
                pipe.expire(key, self.ttl_seconds)
            await pipe.execute()

    async def load(self, episode_id: str) -> Versioned | None:
        async with self._available():
            version, data = await self._load(keys=[self.key(episode_id)], args=[self.ttl_seconds])
        if version is None:
            return None
        return Versioned(data, int(version))

    async def replace(self, episode_id: str, version: int, data: bytes) -> bool:
        async with self._available():
            written = await self._replace(
                keys=[self.key(episode_id)], args=[version, data, self.ttl_seconds]
            )
        return bool(written)

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
