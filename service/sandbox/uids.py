"""The user ids of live workers: each worker its own, from ``WANDER_ENV_UIDS``.

A worker that shares its uid with another can signal it, trace it, or read what it
leaves behind; one with a uid of its own can do none of that, and ``RLIMIT_NPROC`` 0
(which counts the processes of the uid) stops it alone. So no two live workers ever
hold one uid: the fork server takes a uid for each worker it forks and gives it back
only once it has reaped the worker, when nothing of that uid runs any more.

Uids are taken in rotation (the next free one after the last taken), not the lowest
free: a uid comes back into use only after the whole range has gone round, so what a
dead worker may have left under its uid in the kernel (a key in its user keyring: the
worker's IPC objects die with its IPC namespace) is long gone. The rotation starts at a
random place: a fork server started again after one that died does not hand out the
uids its predecessor's workers (killed with it) held last.
"""

from __future__ import annotations

import re
import secrets

RANGE = re.compile(r"\s*(\d+)\s*-\s*(\d+)\s*")
LARGEST_UID = 2**32 - 2
"""``(uid_t) -1`` means "unchanged" to ``setuid``: never a worker's."""


def parse_range(text: str) -> range:
    """``"100000-165535"`` as the uids it names (both ends included); ``ValueError`` for
    anything else, and for a range holding uid 0 (root) or past the largest uid."""
    matched = RANGE.fullmatch(text)
    if matched is None:
        raise ValueError(f"{text!r} is not a range of user ids such as 100000-165535")
    first, last = int(matched[1]), int(matched[2])
    if not 0 < first <= last <= LARGEST_UID:
        raise ValueError(f"{text!r}: the range must be ordered, from 1 to {LARGEST_UID}")
    return range(first, last + 1)


class Uids:
    """The uids of ``pool`` that no live worker holds."""

    def __init__(self, pool: range) -> None:
        self.pool = pool
        self._live: set[int] = set()
        self._next = secrets.randbelow(len(pool))
        """Where the search for a free uid starts (an index into ``pool``)."""

    def take(self) -> int | None:
        """A uid no live worker holds, now held; None when every uid is held."""
        if len(self._live) >= len(self.pool):
            return None
        while (uid := self.pool[self._next]) in self._live:
            self._next = (self._next + 1) % len(self.pool)
        self._next = (self._next + 1) % len(self.pool)
        self._live.add(uid)
        return uid

    def give_back(self, uid: int) -> None:
        """``uid``'s worker has been reaped: the uid is free again."""
        self._live.discard(uid)

    def __len__(self) -> int:
        return len(self._live)
