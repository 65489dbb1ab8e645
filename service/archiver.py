"""Write-behind archiving: finished episodes go from the store's backlog to SQL.

A step that finishes an episode only queues its record in the store (in the
same atomic write as the step); this worker moves records to the database in
batches, in the background, and acknowledges them only once they are
committed. While the database is down the backlog waits in the store and the
worker retries with backoff, so no step ever waits on the database and no
finished episode is lost; writes are upserts, so a record written twice is
still one row.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from wander.client.models import EpisodeRecord
from wander.service import metrics
from wander.service.archive import Archive
from wander.service.errors import DatabaseUnavailable
from wander.service.store import EpisodeStore

log = logging.getLogger(__name__)


class Archiver:
    def __init__(
        self,
        store: EpisodeStore,
        archive: Archive,
        *,
        batch_size: int = 200,
        poll_seconds: float = 0.5,
        max_backoff_seconds: float = 10.0,
    ) -> None:
        self.store = store
        self.archive = archive
        self.batch_size = batch_size
        self.poll_seconds = poll_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        """Archive until ``stop()``, backing off while anything fails.

        It stops between batches rather than being cancelled, so a store or
        database call is never interrupted halfway.
        """
        backoff = 0.0
        while not self._stopping.is_set():
            try:
                written = await self.archive_batch()
                metrics.ARCHIVE_BACKLOG.set(await self.store.backlog())
            except Exception as exc:
                if isinstance(exc, DatabaseUnavailable):
                    metrics.DATABASE_ERRORS.inc()
                backoff = min(max(2 * backoff, 0.25), self.max_backoff_seconds)
                log.warning("archiving paused, retrying in %.2fs: %s", backoff, exc)
                await self._sleep(backoff)
                continue
            backoff = 0.0
            if written < self.batch_size:
                await self._sleep(self.poll_seconds)

    def stop(self) -> None:
        self._stopping.set()

    async def archive_batch(self) -> int:
        """Write one batch from the backlog; returns how many records it wrote."""
        batch = await self.store.pending(self.batch_size)
        if not batch:
            return 0
        # Parsed in the worker thread too: a batch of records is milliseconds of
        # work that would otherwise stall every request waiting on the event loop.
        await asyncio.to_thread(self._write, [item.data for item in batch])
        await self.store.acknowledge([item.token for item in batch])
        return len(batch)

    def _write(self, data: list[bytes]) -> None:
        self.archive.write([EpisodeRecord.model_validate_json(item) for item in data])

    async def flush(self) -> int:
        """Write the whole backlog now; raises if the database refuses."""
        written = 0
        while count := await self.archive_batch():
            written += count
        return written

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)
