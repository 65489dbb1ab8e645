"""The in-process store: for one process (``wander serve`` without ``WANDER_REDIS_URL``)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping

from cachetools import TTLCache

from service.store.base import EpisodeStore, Versioned


class MemoryStore(EpisodeStore):
    """Episodes in a dict with idle expiry.

    Its methods never await, so under asyncio each runs to completion without
    interleaving: the compare-and-set is atomic by construction.
    """

    def __init__(self, ttl_seconds: int) -> None:
        super().__init__(ttl_seconds)
        self._items: TTLCache[str, Versioned] = TTLCache(
            maxsize=math.inf, ttl=ttl_seconds, timer=time.monotonic
        )

    async def add(self, documents: Mapping[str, bytes]) -> None:
        for episode_id, data in documents.items():
            self._items[episode_id] = Versioned(data, 1)

    async def load(self, episode_id: str) -> Versioned | None:
        item = self._items.get(episode_id)
        if item is not None:
            self._items[episode_id] = item  # a read refreshes the idle TTL
        return item

    async def replace(self, episode_id: str, version: int, data: bytes) -> bool:
        item = self._items.get(episode_id)
        if item is None or item.version != version:
            return False
        self._items[episode_id] = Versioned(data, version + 1)
        return True

    async def ping(self) -> None:
        return None

    async def aclose(self) -> None:
        self._items.clear()
