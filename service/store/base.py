"""The episode store interface.

A store keeps each episode as an opaque document with a version number, and a log:
entries appended, never rewritten. Every write is a compare-and-set on the version,
which is all the engine needs to make steps atomic across coroutines, processes and
replicas: of two steps that read the same version, exactly one can write, and only
its entries are appended (in the same atomic write). Every read or write refreshes
the idle TTL of the document and its log together, so they expire together.

The log is what makes a step's cost follow the step, not the episode: the document
holds what a step changes (small), the log the messages, which a step only adds to.
A write reads neither back; a read takes the log only when asked (``load(log=True)``).

A store also holds the archive backlog: the write that finishes an episode
queues its final record in the same atomic operation, so a finished episode is
either still playable or waiting for the archive, never lost in between. The
archiver takes records from the backlog and acknowledges them once they are
in the database.

Once the archive holds a finished episode, the archiver releases it (``release``): its
log leaves the store, and its document stays only ``finished_seconds`` more, for a retried
last step to be answered from (its record is read from the archive from then on). A busy
service's store so holds what is being played and what the archive has yet to take, not
an hour of finished games.

A record the database refuses for good is moved, in one atomic operation, from
the backlog to the store's dead letters, with the error and the time: it stops
blocking the records behind it, and stays, visible, until an operator moves it
back to the backlog (after fixing the cause) or drops it.

The store also keeps what quotas are checked against, since every replica must see
the same figures: each tenant's live episodes and the metadata bytes they hold (counted
with the live episodes, so that an episode that expires gives its quota back), and the
request-rate buckets of the keys.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from wander.service.errors import QuotaExceeded
from wander.service.store.partitions import new_episode_id


class Versioned(NamedTuple):
    data: bytes
    version: int
    log: list[bytes] | None = None
    """The episode's log, oldest entry first, read with the document in one atomic read:
    only from ``load(log=True)``."""


class RecordWithLog(NamedTuple):
    """An archive record that holds its episode's whole log: ``before``, then the log's
    entries (this write's appends included) as a JSON array, then ``after``.

    The store splices the record together in the write that queues it, so that the step
    that ends an episode reads no log back either. The entries must be JSON values."""

    before: bytes
    after: bytes


ArchiveRecord = bytes | RecordWithLog
"""A record to queue for the archive: as it is, or around the episode's log."""


class Write(NamedTuple):
    """One compare-and-set: ``data`` replaces ``version`` and ``append`` is added to the
    log; ``archive``, if any, is queued."""

    episode_id: str
    version: int
    data: bytes
    archive: ArchiveRecord | None = None
    append: Sequence[bytes] = ()


class Pending(NamedTuple):
    """A record waiting for the archive; ``token`` acknowledges it."""

    token: str
    data: bytes


class DeadLetter(NamedTuple):
    """An archive record set aside because the database refused it."""

    id: str
    """The dead letter's id in the store (not the episode's): what retry and drop take."""
    data: bytes
    """The record, as it was queued."""
    error: str
    """Why the database refused it."""
    failed_at: float
    """When it was set aside (Unix time)."""


class Usage(NamedTuple):
    """What a tenant holds now: its live episodes and their metadata bytes."""

    live_episodes: int
    metadata_bytes: int


class EpisodeStore(ABC):
    """Where episodes live while they are played."""

    durable: bool
    """Whether episodes and the archive backlog outlive this process."""

    def __init__(self, ttl_seconds: float, finished_seconds: float = 600.0) -> None:
        self.ttl_seconds = ttl_seconds
        self.finished_seconds = finished_seconds
        """How long a released episode's document stays (``release``)."""

    def new_ids(self, n: int) -> list[str]:
        """Ids for the ``n`` episodes of one ``add`` (a GRPO group), each unguessable.

        A store that splits its episodes into partitions (the Redis store on a cluster)
        gives them ids of one partition, so that the group is added all or none."""
        return [new_episode_id() for _ in range(n)]

    @abstractmethod
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
        """Store new episodes (id -> document) of environment ``env`` at version 1, each
        with ``log`` as its log (a group's episodes open alike), all or none. They count
        as live (``live``) until finished or forgotten.

        With ``tenant`` they also count toward that tenant's ``tenant_usage``, each with
        ``metadata_bytes``, for as long as they are live. With ``max_live`` or
        ``max_metadata_bytes`` (which need a ``tenant``), the episodes are added only if
        the tenant then holds no more than that, in one atomic step with the check, so
        that concurrent adds on many replicas never pass a quota together; else
        ``QuotaExceeded`` and nothing is written. Expired episodes are counted out
        before deciding: they give their quota back."""

    @abstractmethod
    async def tenant_usage(self, tenant: str) -> Usage:
        """The tenant's live episodes and their metadata bytes now (expired ones counted
        out), as ``add`` checks them."""

    @abstractmethod
    async def load(
        self, episode_id: str, *, cached: bool = False, log: bool = False
    ) -> Versioned | None:
        """The episode's document and version, or None if unknown or expired; with
        ``log``, its log too (a fresh read: ``cached`` is ignored), and None for a
        released episode (``release``), whose log the store no longer holds.

        ``cached``: a store may answer from what it last read or wrote itself,
        saving a round trip; the answer may then be stale, which a compare-and-set
        detects. Decisions that no write will check must use a fresh load."""

    async def load_many(
        self, episode_ids: Sequence[str], *, cached: bool = False
    ) -> list[Versioned | None]:
        """``load`` for many episodes (a store may do it in one round trip)."""
        return [await self.load(episode_id, cached=cached) for episode_id in episode_ids]

    @abstractmethod
    async def replace(
        self,
        episode_id: str,
        version: int,
        data: bytes,
        archive: ArchiveRecord | None = None,
        append: Sequence[bytes] = (),
    ) -> bool:
        """Write ``data`` as version ``version + 1``, and add ``append`` to the log, if the
        stored version is still ``version``; False (and no write) if it changed or the
        episode is gone. With ``archive``, the same write queues that record for the
        archive (a ``RecordWithLog`` around the log as this write leaves it)."""

    async def replace_many(self, writes: Sequence[Write]) -> list[bool]:
        """``replace`` for many episodes (a store may do it in one round trip)."""
        return [await self.replace(*write) for write in writes]

    @abstractmethod
    async def release(self, episode_ids: Sequence[str]) -> None:
        """The archive holds these finished episodes: drop their logs, and keep their
        documents (what a retried last step reads) only ``finished_seconds`` more, a read
        refreshing it no more. An id the store does not hold is skipped."""

    def on_queued(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` whenever this process queues a record for the archive.

        A store whose backlog dies with the process (``durable`` False) must, so that the
        archiver takes each record at once rather than at its next poll: what waits in
        such a backlog is lost by a ``kill -9``. A durable store may ignore it, as this
        default does; its backlog outlives the process and the archiver polls it."""
        return None

    @abstractmethod
    async def live(self) -> dict[str, int]:
        """Live episodes by environment: added, and neither finished (the write that
        queued their archive record) nor forgotten after idling ``ttl_seconds``. Every
        environment that had a live episode is listed, at 0 once it has none left.

        Kept by the store, not counted by the process: an episode that expires has no
        request, and no process, to count it out, and a gauge kept by the process would
        count it for ever."""

    @abstractmethod
    async def take(self, bucket: str, rate: float, burst: int) -> float:
        """Take one token from the bucket named ``bucket``, shared by every process and
        replica: it refills at ``rate`` tokens a second (> 0) up to ``burst`` (>= 1), and
        starts full. 0.0 if a token was taken, else the seconds until one will be there
        (and nothing is taken). A bucket left alone until it is full again is forgotten.

        Both stores keep a bucket as one number, the time at which it will be full again
        (the generic cell rate algorithm): each token taken pushes it ``1 / rate`` later,
        and a token is there as long as that time is at most ``(burst - 1) / rate`` away.
        That is one read and one write per call, and the bucket expires when full."""

    @abstractmethod
    async def pending(self, count: int) -> list[Pending]:
        """Up to ``count`` unacknowledged archive records, oldest first. A record handed
        out but never acknowledged (its taker failed or died) is handed out again."""

    @abstractmethod
    async def acknowledge(self, tokens: Sequence[str]) -> None:
        """Drop archive records that are safely in the database."""

    @abstractmethod
    async def backlog(self) -> int:
        """Archive records not yet acknowledged."""

    @abstractmethod
    async def dead_letter(self, token: str, error: str) -> str | None:
        """Move the backlog record ``token`` to the dead letters with ``error``, in one atomic
        operation; returns its dead-letter id, or None if the backlog no longer holds it
        (another archiver took it over and wrote it)."""

    @abstractmethod
    async def dead_letters(self, count: int, after: str | None = None) -> list[DeadLetter]:
        """Up to ``count`` dead letters, oldest first; with ``after``, those after that id."""

    @abstractmethod
    async def dead_letter_count(self) -> int:
        """How many dead letters the store holds."""

    @abstractmethod
    async def retry_dead_letters(self, ids: Sequence[str]) -> list[str]:
        """Move these dead letters back to the end of the backlog, each atomically; returns
        the ids moved (an id the store does not hold is skipped)."""

    @abstractmethod
    async def drop_dead_letters(self, ids: Sequence[str]) -> list[str]:
        """Delete these dead letters for good; returns the ids deleted."""

    async def dead_letter_ids(self, page: int = 1000) -> list[str]:
        """The ids of every dead letter held now, oldest first: "retry all" and "drop all"
        act on this snapshot, so a record that fails again while they run (and comes back
        with a new id) is not chased forever."""
        ids: list[str] = []
        while letters := await self.dead_letters(page, ids[-1] if ids else None):
            ids += (letter.id for letter in letters)
        return ids

    @abstractmethod
    async def ping(self) -> None:
        """Raise ``StoreUnavailable`` unless the store answers."""

    @abstractmethod
    async def aclose(self) -> None:
        """Release connections."""


def spliced(record: ArchiveRecord, log: Sequence[bytes]) -> bytes:
    """The record to queue: ``record`` itself, or the log spliced into it."""
    if isinstance(record, bytes):
        return record
    return b"".join((record.before, b"[", b",".join(log), b"]", record.after))


def check_limits(tenant: str | None, max_live: int | None, max_metadata_bytes: int | None) -> None:
    """Refuse limits without a tenant: there would be nobody to count them against."""
    if tenant is None and (max_live is not None or max_metadata_bytes is not None):
        raise ValueError("a quota on live episodes or metadata needs a tenant")


def quota_exceeded(tenant: str, quota: str, limit: int, used: int, requested: int) -> QuotaExceeded:
    """The error of an ``add`` that would take ``tenant`` past ``quota``
    (``live_episodes`` or ``metadata_bytes``)."""
    what = "live episodes" if quota == "live_episodes" else "bytes of metadata in live episodes"
    return QuotaExceeded(
        f"tenant {tenant!r} may hold at most {limit} {what}; it holds {used} and this request "
        f"adds {requested}: finish or delete episodes first",
        {"quota": quota, "limit": limit, "used": used, "requested": requested},
    )


def bucket_interval(rate: float, burst: int) -> int:
    """Microseconds between two tokens of a bucket (``take``), once its arguments are checked.

    Both stores count a bucket in whole microseconds, which Redis's Lua numbers (doubles)
    hold exactly for today's times; rounding the interval makes a rate of more than
    10,000 a second up to 0.5% off, and leaves lower ones as they are within 0.005%."""
    if not rate > 0 or burst < 1:
        raise ValueError(f"a bucket needs a rate > 0 and a burst >= 1, not {rate} and {burst}")
    return max(1, round(1_000_000 / rate))
