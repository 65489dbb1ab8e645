"""Backpressure from the archive: past a bound of finished episodes not yet archived,
new episodes wait.

Games finish faster than a busy archive writes them; left alone, the backlog (and the
store's memory, and how far run summaries trail) grows without end. Past
``WANDER_ARCHIVE_BACKLOG_MAX`` finished episodes waiting, creating episodes answers 503
``archive_backlog`` with ``Retry-After`` (clients retry it), while steps of live episodes
still apply, so no game is stranded, and the backlog drains. The count is the store's
(every replica's, on Redis), read at most every ``READ_EVERY`` seconds per process.
"""

from __future__ import annotations

import time

from wander.service.errors import ArchiveBacklog
from wander.service.store import EpisodeStore

READ_EVERY = 0.5
"""Seconds a process trusts the backlog it last counted."""


class BacklogGate:
    """Refuses new episodes while the archive's backlog is past ``limit`` (0: never)."""

    def __init__(self, store: EpisodeStore, limit: int) -> None:
        self.store, self.limit = store, limit
        self.backlog = 0
        """Finished episodes waiting for the archive, as last counted."""
        self._counted_at = float("-inf")

    async def admit(self) -> None:
        """Raise ``ArchiveBacklog`` while the backlog is past the limit."""
        if not self.limit:
            return
        if time.monotonic() - self._counted_at > READ_EVERY:
            self.backlog = await self.store.backlog()
            self._counted_at = time.monotonic()
        refusal = self.refusal()
        if refusal:
            raise ArchiveBacklog(refusal, {"backlog": self.backlog, "limit": self.limit})

    def refusal(self) -> str | None:
        """Why new episodes are refused now, or None."""
        if not self.limit or self.backlog <= self.limit:
            return None
        return (
            f"{self.backlog} finished episodes are waiting for the archive, past the "
            f"bound of {self.limit} (WANDER_ARCHIVE_BACKLOG_MAX): new episodes wait until "
            "it drains; steps of live episodes go on"
        )
