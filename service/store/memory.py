"""The in-process store: for one process (``wander serve`` without ``WANDER_REDIS_URL``)."""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from cachetools import TLRUCache, TTLCache

from wander.service.errors import StoreFull
from wander.service.store.base import (
    ArchiveRecord,
    DeadLetter,
    EpisodeStore,
    Pending,
    Usage,
    Versioned,
    bucket_interval,
    check_limits,
    quota_exceeded,
    spliced,
)
from wander.service.store.outbox import Outbox

log = logging.getLogger(__name__)

MAX_DEAD_LETTERS = 10_000
"""Dead letters kept in the process; past this the oldest is discarded, with an error in
the log. They live in the service's own memory, and a database that refused every
record (a bad migration) must not grow the process without end."""


class _Live(NamedTuple):
    """What a live episode counts toward."""

    env: str
    tenant: str | None
    metadata_bytes: int


class _Stored(NamedTuple):
    """An episode: its current document and version, and its log (appended to in place)."""

    item: Versioned
    log: list[bytes]


class _Episodes(TTLCache[str, _Stored]):
    """Episodes with idle expiry, naming each expired one to ``on_expired``: every
    expired item leaves through ``expire``, which each write calls, and ``live`` too."""

    def __init__(self, ttl_seconds: float, on_expired: Callable[[str], object]) -> None:
        super().__init__(maxsize=math.inf, ttl=ttl_seconds, timer=time.monotonic)
        self._on_expired = on_expired

    def expire(self, time: Any = None) -> list[tuple[str, _Stored]]:
        expired = list(super().expire(time))
        for episode_id, _ in expired:
            self._on_expired(episode_id)
        return expired


class MemoryStore(EpisodeStore):
    """Episodes in a dict with idle expiry, and the archive backlog in an ordered dict.

    Its methods never await between reading and writing, so under asyncio each
    runs to completion without interleaving: the compare-and-set is atomic by
    construction. Every record queued wakes the archiver (``on_queued``), which drains
    the backlog continuously, and the service drains the rest on shutdown. With an
    ``outbox`` (a SQLite archive's: ``outbox.py``) the backlog is also on disk, written
    before the step that finished the game returns, so a ``kill -9`` loses none of it:
    the next process on the same files archives what is left. Without one, the backlog
    lives as long as the process. Dead letters live in the process either way.

    It holds at most ``max_episodes`` episodes (live, and finished ones the archive does
    not have yet): past that, ``add`` raises ``StoreFull`` rather than grow the process
    without end. Released episodes' documents (``release``) are kept apart, at most as
    many, for ``finished_seconds``.
    """

    durable = False

    def __init__(
        self,
        ttl_seconds: float,
        outbox: Outbox | None = None,
        *,
        finished_seconds: float = 600.0,
        max_episodes: int | None = None,
    ) -> None:
        super().__init__(ttl_seconds, finished_seconds)
        self.max_episodes = max_episodes
        self._live: dict[str, _Live] = {}
        self._live_count: Counter[str] = Counter()
        self._tenant_live: Counter[str] = Counter()
        self._tenant_bytes: Counter[str] = Counter()
        self._items = _Episodes(ttl_seconds, self._forget)
        self._finished: TTLCache[str, Versioned] = TTLCache(
            maxsize=max_episodes or math.inf, ttl=finished_seconds, timer=time.monotonic
        )
        """Released episodes' documents, for a retried last step."""
        self._buckets: TLRUCache[str, int] = TLRUCache(
            maxsize=math.inf, ttu=lambda _bucket, full_at, _now: full_at, timer=_microseconds
        )
        """Each bucket's time (``_microseconds``) at which it is full again, until then."""
        self._backlog: dict[str, bytes] = {}
        self._dead: dict[str, DeadLetter] = {}
        self._outbox = outbox
        left = outbox.records() if outbox is not None else []
        for token, record in left:  # what a killed process had not archived
            self._backlog[str(token)] = record
        self._tokens = itertools.count(left[-1][0] + 1 if left else 0)
        self._queued: list[Callable[[], object]] = []

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
        check_limits(tenant, max_live, max_metadata_bytes)
        if not documents:
            return
        self._items.expire()  # expired episodes give their quota back first
        new = [episode_id for episode_id in documents if episode_id not in self._live]
        new_bytes = len(new) * metadata_bytes
        held = len(self._items)
        if self.max_episodes is not None and held + len(new) > self.max_episodes:
            raise StoreFull(
                f"the in-process store holds {held} episodes and may hold {self.max_episodes} "
                "(WANDER_MEMORY_MAX_EPISODES): new episodes wait until live ones finish and "
                "are archived; steps go on",
                {"episodes": held, "limit": self.max_episodes},
            )
        if tenant is not None:
            held_live, held_bytes = self._usage(tenant)
            if max_live is not None and held_live + len(new) > max_live:
                raise quota_exceeded(tenant, "live_episodes", max_live, held_live, len(new))
            if max_metadata_bytes is not None and held_bytes + new_bytes > max_metadata_bytes:
                raise quota_exceeded(
                    tenant, "metadata_bytes", max_metadata_bytes, held_bytes, new_bytes
                )
        for episode_id, data in documents.items():
            self._items[episode_id] = _Stored(Versioned(data, 1), list(log))
        live = _Live(env, tenant, metadata_bytes)
        for episode_id in new:
            self._live[episode_id] = live
        self._live_count[env] += len(new)
        if tenant is not None and new:
            self._tenant_live[tenant] += len(new)
            if new_bytes:
                self._tenant_bytes[tenant] += new_bytes

    async def tenant_usage(self, tenant: str) -> Usage:
        self._items.expire()
        return self._usage(tenant)

    def _usage(self, tenant: str) -> Usage:
        return Usage(self._tenant_live[tenant], self._tenant_bytes[tenant])

    async def load(
        self, episode_id: str, *, cached: bool = False, log: bool = False
    ) -> Versioned | None:
        stored = self._items.get(episode_id)
        if stored is None:
            return None if log else self._finished.get(episode_id)
        self._items[episode_id] = stored  # a read refreshes the idle TTL
        return stored.item._replace(log=list(stored.log)) if log else stored.item

    async def replace(
        self,
        episode_id: str,
        version: int,
        data: bytes,
        archive: ArchiveRecord | None = None,
        append: Sequence[bytes] = (),
    ) -> bool:
        stored = self._items.get(episode_id)
        if stored is None or stored.item.version != version:
            return False
        stored.log.extend(append)
        self._items[episode_id] = _Stored(Versioned(data, version + 1), stored.log)
        if archive is not None:
            self._forget(episode_id)
            self._queue(spliced(archive, stored.log))
        return True

    async def release(self, episode_ids: Sequence[str]) -> None:
        for episode_id in episode_ids:
            stored = self._items.pop(episode_id, None)
            if stored is not None:
                self._finished[episode_id] = stored.item

    def _forget(self, episode_id: str) -> None:
        """The episode is live no more: finished, or expired."""
        live = self._live.pop(episode_id, None)
        if live is None:
            return
        self._live_count[live.env] -= 1
        if live.tenant is not None:
            _decrease(self._tenant_live, live.tenant, 1)
            _decrease(self._tenant_bytes, live.tenant, live.metadata_bytes)

    async def live(self) -> dict[str, int]:
        self._items.expire()
        return dict(self._live_count)

    async def take(self, bucket: str, rate: float, burst: int) -> float:
        interval = bucket_interval(rate, burst)
        now = _microseconds()
        full_at = max(self._buckets.get(bucket, now), now) + interval
        wait = full_at - now - burst * interval
        if wait > 0:
            return wait / 1_000_000
        self._buckets[bucket] = full_at
        return 0.0

    def on_queued(self, callback: Callable[[], object]) -> None:
        self._queued.append(callback)

    def _queue(self, record: bytes) -> None:
        token = next(self._tokens)
        if self._outbox is not None:  # on disk before the step that finished it returns
            self._outbox.add(token, record)
        self._backlog[str(token)] = record
        for callback in self._queued:
            callback()

    async def pending(self, count: int) -> list[Pending]:
        return [
            Pending(token, data) for token, data in itertools.islice(self._backlog.items(), count)
        ]

    async def acknowledge(self, tokens: Sequence[str]) -> None:
        for token in tokens:
            self._backlog.pop(token, None)
        self._forget_on_disk(tokens)

    def _forget_on_disk(self, tokens: Sequence[str]) -> None:
        if self._outbox is not None:
            self._outbox.remove([int(token) for token in tokens if token.isdecimal()])

    async def backlog(self) -> int:
        return len(self._backlog)

    async def dead_letter(self, token: str, error: str) -> str | None:
        data = self._backlog.pop(token, None)
        if data is None:
            return None
        self._forget_on_disk([token])  # dead letters live in the process (as before)
        letter = DeadLetter(str(next(self._tokens)), data, error, time.time())
        self._dead[letter.id] = letter
        if len(self._dead) > MAX_DEAD_LETTERS:
            oldest = self._dead.pop(next(iter(self._dead)))
            log.error(
                "dead letter %s discarded: more than %d are kept in the process (%s)",
                oldest.id, MAX_DEAD_LETTERS, oldest.error,
            )  # fmt: skip
        return letter.id

    async def dead_letters(self, count: int, after: str | None = None) -> list[DeadLetter]:
        letters = iter(self._dead.values())
        if after is not None:
            # Ids count up: those after ``after`` are the greater numbers.
            start = int(after) if after.isdecimal() and len(after) < 20 else math.inf
            letters = (letter for letter in letters if int(letter.id) > start)
        return list(itertools.islice(letters, count))

    async def dead_letter_count(self) -> int:
        return len(self._dead)

    async def retry_dead_letters(self, ids: Sequence[str]) -> list[str]:
        moved = [letter_id for letter_id in dict.fromkeys(ids) if letter_id in self._dead]
        for letter_id in moved:
            self._queue(self._dead.pop(letter_id).data)
        return moved

    async def drop_dead_letters(self, ids: Sequence[str]) -> list[str]:
        return [
            letter_id
            for letter_id in dict.fromkeys(ids)
            if self._dead.pop(letter_id, None) is not None
        ]

    async def ping(self) -> None:
        return None

    async def aclose(self) -> None:
        if self._outbox is not None:
            self._outbox.close()
            self._outbox = None
        self._items.clear()
        self._finished.clear()
        self._live.clear()
        self._live_count.clear()
        self._tenant_live.clear()
        self._tenant_bytes.clear()
        self._buckets.clear()


def _microseconds() -> int:
    """The monotonic clock in whole microseconds, as buckets count (``bucket_interval``)."""
    return time.monotonic_ns() // 1000


def _decrease(counts: Counter[str], key: str, by: int) -> None:
    """Count ``by`` less for ``key``, forgetting it at zero (tenants come and go)."""
    counts[key] -= by
    if counts[key] <= 0:
        del counts[key]
