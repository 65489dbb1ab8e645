"""Episode stores: in-process (one process) and Redis (shared)."""

from __future__ import annotations

from wander.service.settings import Settings
from wander.service.store.base import DeadLetter, EpisodeStore, Pending, Usage, Versioned
from wander.service.store.memory import MemoryStore
from wander.service.store.outbox import Outbox, outbox_path

__all__ = [
    "DeadLetter",
    "EpisodeStore",
    "MemoryStore",
    "Pending",
    "Usage",
    "Versioned",
    "open_store",
]


def open_store(settings: Settings) -> EpisodeStore:
    """The store the settings ask for: Redis if ``redis_url`` is set, else in-process."""
    if settings.redis_url:
        from wander.service.store.redis import RedisStore

        return RedisStore.from_url(
            settings.redis_url,
            settings.episode_ttl_seconds,
            settings.redis_prefix,
            settings.archive_claim_seconds,
            settings.redis_max_connections,
            settings.redis_partitions,
            finished_seconds=settings.finished_grace_seconds,
        )
    path = outbox_path(settings.database_url)
    return MemoryStore(
        settings.episode_ttl_seconds,
        Outbox(path) if path is not None else None,
        finished_seconds=settings.finished_grace_seconds,
        max_episodes=settings.memory_max_episodes,
    )
