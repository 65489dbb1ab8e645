"""The in-process store: for one process (``wander serve`` without ``WANDER_REDIS_URL``)."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping, Sequence

from cachetools import TTLCache
from wander.service.store.base import EpisodeStore, Pending, Versioned


class MemoryStore(EpisodeStore):
    """Episodes in a dict with idle expiry, and the archive backlog in an ordered dict.

    Its methods never await between reading and writing, so under asyncio each
    runs to completion without interleaving: the compare-and-set is atomic by
    construction. The backlog lives as long as the process; the service drains
    it into the archive on shutdown.
    """

    durable = False

    def __init__(self, ttl_seconds: int) -> None:
        super().__init__(ttl_seconds)
        self._items: TTLCache[str, Versioned] = TTLCache(
            maxsize=math.inf, ttl=ttl_seconds, timer=time.monotonic
        )
        self._backlog: dict[str, bytes] = {}
        self._tokens = itertools.count()

    async def add(self, documents: Mapping[str, bytes]) -> None:
        for episode_id, data in documents.items():
            self._items[episode_id] = Versioned(data, 1)

    async def load(self, episode_id: str, *, cached: bool = False) -> Versioned | None:
        item = self._items.get(episode_id)
        if item is not None:
            self._items[episode_id] = item  # a read refreshes the idle TTL
        return item

    async def replace(
        self, episode_id: str, version: int, data: bytes, archive: bytes | None = None
    ) -> bool:
        item = self._items.get(episode_id)
        if item is None or item.version != version:
            return False
        self._items[episode_id] = Versioned(data, version + 1)
        if archive is not None:
            self._backlog[str(next(self._tokens))] = archive
        return True

    async def pending(self, count: int) -> list[Pending]:
        return [
            Pending(token, data) for token, data in itertools.islice(self._backlog.items(), count)
        ]

    async def acknowledge(self, tokens: Sequence[str]) -> None:
        for token in tokens:
            self._backlog.pop(token, None)

    async def backlog(self) -> int:
        return len(self._backlog)

    async def ping(self) -> None:
        return None

    async def aclose(self) -> None:
        self._items.clear()
