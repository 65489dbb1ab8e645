"""Write-behind archiving: finished episodes go from the store's backlog to SQL.

A step that finishes an episode only queues its record in the store (in the
same atomic write as the step); this worker moves records to the database in
batches, in the background, and acknowledges them only once they are
committed. While the database is down the backlog waits in the store and the
worker retries with backoff, so no step ever waits on the database and no
finished episode is lost; writes are upserts, so a record written twice is
still one row.

One record the database refuses must not hold up the others (it did: a NUL in a
run label on PostgreSQL stopped the archive for good). A batch that fails for any
reason but an unreachable database is written again record by record, and each
failure is judged:

- the database is unreachable: everything stays queued; back off and retry;
- the database refused the record for what it holds (a value its column cannot
  store, a constraint): it can never be written, so it becomes a dead letter at
  once — moved, with the error and the time, out of the backlog into the store's
  dead letters, where ``wander archive dead-letters`` lists, retries or drops it;
- any other error: if the database still takes a plain record (``check_writes``)
  the record is to blame, and after ``max_attempts`` such failures it becomes a
  dead letter (arq's ``max_tries``); if not, the database is, and nothing is set
  aside: a read-only or full database must stall the archive visibly (``/readyz``),
  not empty the backlog into the dead letters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import orjson

from wander.service import metrics
from wander.service.archive import Archive, RecordRefused, WriteRefused
from wander.service.archive.writer import (
    RecordWriter,
    ThreadWriter,
    UnreadableRecord,
    WriterStopped,
)
from wander.service.errors import ArchiveStalled, DatabaseUnavailable, StoreUnavailable
from wander.service.store import EpisodeStore, Pending

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
"""Failures of one record, while the database takes others, before it is set aside."""
STALL_SECONDS = 60.0
"""How long every attempt may fail before ``/readyz`` says the archive is stalled: longer
than a few backoffs (they grow to 10 s), so that a brief outage is not reported."""


class RecordLabel(NamedTuple):
    """Whose record it is, as far as it can be read."""

    episode_id: str | None
    env: str | None
    run: str | None


def record_label(data: bytes) -> RecordLabel:
    """Whose queued record ``data`` is, for logs and listings; read leniently, since a
    dead letter may be anything, even not JSON."""
    try:
        record = orjson.loads(data)
    except orjson.JSONDecodeError:
        record = None
    if not isinstance(record, dict):
        return RecordLabel(None, None, None)
    fields = (record.get(key) for key in ("id", "env", "run"))
    return RecordLabel(*(value if isinstance(value, str) else None for value in fields))


class Archiver:
    def __init__(
        self,
        store: EpisodeStore,
        archive: Archive,
        *,
        writer: RecordWriter | None = None,
        batch_size: int = 500,
        poll_seconds: float = 0.5,
        max_backoff_seconds: float = 10.0,
        max_attempts: int = MAX_ATTEMPTS,
        stall_seconds: float = STALL_SECONDS,
    ) -> None:
        self.store = store
        self.archive = archive
        self.writer = writer or ThreadWriter(archive)
        """Where records are written (``archive.writer``); ``archive`` itself only checks
        whether the database takes writes."""
        self.batch_size = batch_size
        self.poll_seconds = poll_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self.max_attempts = max_attempts
        self.stall_seconds = stall_seconds
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()
        """Set when the store queues a record (a store that says so) or when stopping."""
        store.on_queued(self._wake.set)
        self._attempts: dict[str, int] = {}
        """Failures so far of the records that failed for no reason the database named."""
        self._failing_since: float | None = None
        self._failures = 0
        self._last_error = ""

    async def run(self) -> None:
        """Archive until ``stop()``, backing off while anything fails.

        It stops between batches rather than being cancelled, so a store or
        database call is never interrupted halfway.
        """
        backoff = 0.0
        while not self._stopping.is_set():
            self._wake.clear()  # before reading the backlog: a record queued after wakes it
            try:
                handled = await self.archive_batch()
            except Exception as exc:
                self._failed(exc)
                backoff = min(max(2 * backoff, 0.25), self.max_backoff_seconds)
                log.warning("archiving paused, retrying in %.2fs: %s", backoff, _describe(exc))
                await self._report()
                await self._sleep(backoff)
                continue
            self._failing_since, self._failures = None, 0
            backoff = 0.0
            await self._report()
            if handled < self.batch_size:
                await self._idle()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    def check_progress(self) -> None:
        """Raise ``ArchiveStalled`` if every attempt has failed for ``stall_seconds``."""
        if self._failing_since is None:
            return
        failing = time.monotonic() - self._failing_since
        if failing >= self.stall_seconds:
            raise ArchiveStalled(
                f"the archive has made no progress for {failing:.0f} s "
                f"({self._failures} failed attempts); the last error: {self._last_error}",
                details={
                    "failing_seconds": round(failing, 1),
                    "attempts": self._failures,
                    "last_error": self._last_error,
                },
            )

    async def archive_batch(self) -> int:
        """Archive one batch from the backlog; returns how many records left the backlog
        (written or set aside as dead letters). Raises when none could."""
        batch = await self.store.pending(self.batch_size)
        # Forget the failures of records no longer queued (written by another archiver).
        self._attempts = {i.token: n for i in batch if (n := self._attempts.get(i.token))}
        # A record that failed before is written alone, so that it does not fail a batch again.
        suspects = [item for item in batch if item.token in self._attempts]
        rest = [item for item in batch if item.token not in self._attempts]
        written = 0
        if rest:
            try:
                ids = await self._write(rest)
            except DatabaseUnavailable:
                raise
            except Exception as exc:
                log.warning("a batch of %d records failed, writing them one by one: %s",
                            len(rest), _describe(exc))  # fmt: skip
                suspects = batch
            else:
                await self._archived(rest, ids)
                written = len(rest)
        if not suspects:
            return written
        handled, failure = await self._one_by_one(suspects)
        if failure is not None and written + handled == 0:
            raise failure
        return written + handled

    async def _one_by_one(self, batch: Sequence[Pending]) -> tuple[int, Exception | None]:
        """Write ``batch`` record by record, setting aside the records to blame; raises if
        the database is to blame. Returns how many left the backlog, and the last error of
        a record that stays."""
        written: list[Pending] = []
        ids: list[str] = []
        set_aside = 0
        failure: Exception | None = None
        database_checked = False
        try:
            for item in batch:
                try:
                    ids += await self._write([item])
                    written.append(item)
                except RecordRefused as exc:
                    set_aside += await self._dead_letter(item, str(exc))
                except DatabaseUnavailable:
                    raise
                except Exception as exc:
                    if not database_checked:  # is the database to blame? This raises if so.
                        with _counting():
                            await asyncio.to_thread(self.archive.check_writes)
                        database_checked = True
                    if await self._failed_attempt(item, exc):
                        set_aside += 1
                    else:
                        failure = exc
        finally:
            await self._archived(written, ids)
        return len(written) + set_aside, failure

    async def _archived(self, batch: Sequence[Pending], episode_ids: Sequence[str]) -> None:
        """The database holds ``batch``, the records of ``episode_ids``: out of the backlog,
        and out of the store's memory (``EpisodeStore.release``). A crash in between leaves
        the episodes to their TTL, as before there was a release."""
        await self.store.acknowledge([item.token for item in batch])
        await self.store.release(episode_ids)

    async def _failed_attempt(self, item: Pending, exc: Exception) -> int:
        """Count a failure of ``item`` that the database did not explain; at the last
        allowed one, set it aside. Returns 1 if it left the backlog."""
        attempts = self._attempts[item.token] = self._attempts.get(item.token, 0) + 1
        if attempts < self.max_attempts:
            log.warning("episode %s failed to archive (attempt %d of %d): %s",
                        record_label(item.data).episode_id, attempts, self.max_attempts,
                        _describe(exc))  # fmt: skip
            return 0
        return await self._dead_letter(item, f"{_describe(exc)} (after {attempts} attempts)")

    async def _write(self, batch: Sequence[Pending]) -> list[str]:
        """Write ``batch``; returns the ids of its episodes. In chunks, each its own
        transaction: a record written twice (a later chunk fails, the batch is written
        again) is still one row."""
        ids: list[str] = []
        chunk = self.writer.chunk
        for start in range(0, len(batch), chunk):
            with _counting():
                ids += await self.writer.write([i.data for i in batch[start : start + chunk]])
        return ids

    async def _dead_letter(self, item: Pending, error: str) -> int:
        """Set ``item`` aside; 1 if it left the backlog, 0 if another archiver took it."""
        letter = await self.store.dead_letter(item.token, error)
        self._attempts.pop(item.token, None)
        if letter is None:
            return 0
        episode = record_label(item.data).episode_id
        log.error("episode %s set aside as dead letter %s: %s", episode, letter, error)
        return 1

    async def flush(self) -> int:
        """Write the whole backlog now; raises if the database refuses. Called at shutdown:
        with the in-process store, dead letters die with the process, and the log says so."""
        written = 0
        try:
            while count := await self.archive_batch():
                written += count
        finally:
            if not self.store.durable and (lost := await self.store.dead_letter_count()):
                log.error("%d dead letters are lost with the in-process store", lost)
        return written

    def _failed(self, exc: Exception) -> None:
        if self._failing_since is None:
            self._failing_since = time.monotonic()
        self._failures += 1
        self._last_error = _describe(exc)

    async def _report(self) -> None:
        """Set the backlog gauges from the store, failing or not: the real numbers."""
        with contextlib.suppress(StoreUnavailable):
            metrics.ARCHIVE_BACKLOG.set(await self.store.backlog())
            metrics.ARCHIVE_DEAD_LETTERS.set(await self.store.dead_letter_count())

    async def _sleep(self, seconds: float) -> None:
        """Back off: only stopping cuts it short, so a failing database is not hammered."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def _idle(self) -> None:
        """Wait for more records: until the store queues one (the in-process store says
        when; its backlog dies with the process), ``poll_seconds`` at most (Redis: other
        processes queue records too), or stopping."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), self.poll_seconds)


@contextlib.contextmanager
def _counting() -> Iterator[None]:
    """Count the failures of the database in ``wander_database_errors_total``."""
    try:
        yield
    except (UnreadableRecord, WriterStopped):
        raise  # refused before the database saw it, or its writer process stopped
    except (DatabaseUnavailable, WriteRefused):
        metrics.DATABASE_ERRORS.inc()
        raise


def _describe(exc: BaseException) -> str:
    """An error on one bounded line: ``Class: message``."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= 1000 else text[:999] + "…"
