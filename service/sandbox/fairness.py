"""The workers' slots, shared fairly by tenants.

With one queue in order of arrival, a tenant that sends many calls that run to their
deadline (within its rate limit) makes every other tenant's calls wait behind all of
them, until they wait past ``WANDER_ENV_WAIT_SECONDS`` and fail ``env_busy``. Here
each tenant waits in a queue of its own, and a free slot goes to the tenants in turn
(round robin, the one served longest ago first), skipping a tenant that already holds
its share while others wait: ``ceil(slots / tenants waiting or running)``. A tenant
alone may use every slot; once another asks, the first slot to come free is the
newcomer's, so a call waits for at most one call of another tenant to end (the
deadline) before it runs. A slot that no tenant under its share wants still
goes, in turn, to one that waits (slots are never left idle while calls wait).

A call that gets no slot within ``wait`` seconds gives up (the pool answers
``env_busy``). Calls of no tenant (an open service) are one tenant's: in order of
arrival.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter, deque
from collections.abc import Hashable


class FairSlots:
    """``size`` slots, granted to tenants in turn, each up to its share while others
    wait."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.running: Counter[Hashable] = Counter()
        """Slots held, by tenant."""
        self._waiting: dict[Hashable, deque[asyncio.Future[bool]]] = {}
        """Waiting calls by tenant; the order of the keys is the turn (a tenant served
        goes to the end)."""

    async def acquire(self, tenant: Hashable, wait: float) -> bool:
        """Take a slot for ``tenant``, waiting at most ``wait`` seconds; whether it got one
        (the caller then ``release``s it)."""
        loop = asyncio.get_running_loop()
        granted: asyncio.Future[bool] = loop.create_future()
        self._waiting.setdefault(tenant, deque()).append(granted)
        self._dispatch()
        if granted.done():
            return True
        timer = loop.call_later(wait, self._expire, tenant, granted)
        try:
            return await granted
        except BaseException:  # the call was cancelled while it waited
            if granted.done() and not granted.cancelled() and granted.result():
                self.release(tenant)  # granted in the same turn: give it back
            else:
                self._withdraw(tenant, granted)
            raise
        finally:
            timer.cancel()

    def release(self, tenant: Hashable) -> None:
        """A call of ``tenant`` ended: its slot goes to the next in turn."""
        self.running[tenant] -= 1
        if self.running[tenant] <= 0:
            del self.running[tenant]
        self._dispatch()

    def share(self) -> int:
        """The most slots a tenant may hold while others wait."""
        active = len(self._waiting.keys() | self.running.keys())
        return math.ceil(self.size / max(1, active))

    def _dispatch(self) -> None:
        while self._waiting and self.running.total() < self.size:
            tenant = self._next()
            queue = self._waiting.pop(tenant)
            granted = queue.popleft()
            if queue:
                self._waiting[tenant] = queue  # its next call waits its turn again
            if granted.done():  # cancelled, not withdrawn yet
                continue
            self.running[tenant] += 1
            granted.set_result(True)

    def _next(self) -> Hashable:
        """The first tenant in turn under its share; failing that, the first in turn."""
        share = self.share()
        for tenant in self._waiting:
            if self.running[tenant] < share:
                return tenant
        return next(iter(self._waiting))

    def _expire(self, tenant: Hashable, granted: asyncio.Future[bool]) -> None:
        if not granted.done():
            self._withdraw(tenant, granted)
            granted.set_result(False)

    def _withdraw(self, tenant: Hashable, granted: asyncio.Future[bool]) -> None:
        queue = self._waiting.get(tenant)
        if queue is not None and granted in queue:
            queue.remove(granted)
            if not queue:
                del self._waiting[tenant]
        self._dispatch()  # one tenant fewer: the others' shares grew
