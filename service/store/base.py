"""The episode store interface.

A store keeps each episode as an opaque JSON document with a version number.
Every write is a compare-and-set on that version, which is all the engine needs
to make steps atomic across coroutines, processes and replicas: of two steps
that read the same version, exactly one can write. Every read or write
refreshes the episode's idle TTL.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import NamedTuple


class Versioned(NamedTuple):
    data: bytes
    version: int


class EpisodeStore(ABC):
    """Where episodes live while they are played."""

    def __init__(self, ttl_seconds: int) -> None:
        self.ttl_seconds = ttl_seconds

    @abstractmethod
    async def add(self, documents: Mapping[str, bytes]) -> None:
        """Store new episodes (id -> document) at version 1, all or none."""

    @abstractmethod
    async def load(self, episode_id: str) -> Versioned | None:
        """The episode's document and version, or None if unknown or expired."""

    @abstractmethod
    async def replace(self, episode_id: str, version: int, data: bytes) -> bool:
        """Write ``data`` as version ``version + 1`` if the stored version is still
        ``version``; False (and no write) if it changed or the episode is gone."""

    @abstractmethod
    async def ping(self) -> None:
        """Raise ``StoreUnavailable`` unless the store answers."""

    @abstractmethod
    async def aclose(self) -> None:
        """Release connections."""
