"""One bulk call for many concurrent small ones.

A single-step request reads or writes one episode, and 64 agents stepping at
once mean 64 concurrent Redis commands whose Python-side cost (packing, the
connection pool, parsing the reply) exceeds Redis's own work many times over.
A ``Coalescer`` gathers the calls made during one turn of the event loop and
sends them as a single bulk call on the next, so the number of commands
follows the number of loop turns, not the number of requests: the busier the
service, the larger the batches, and an idle one adds a single loop turn of
latency.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

In = TypeVar("In")
Out = TypeVar("Out")

MAX_BULK = 1024
"""Items per bulk call: bounds how long one Lua script holds the Redis server."""


class Coalescer(Generic[In, Out]):
    def __init__(self, bulk: Callable[[list[In]], Awaitable[list[Out]]]) -> None:
        self._bulk = bulk
        self._queued: list[tuple[Sequence[In], asyncio.Future[list[Out]]]] = []
        self._sending: set[asyncio.Task[None]] = set()

    async def __call__(self, items: Sequence[In]) -> list[Out]:
        """``bulk(items)``, sent together with the other calls of this loop turn."""
        if not items:
            return []
        loop = asyncio.get_running_loop()
        if not self._queued:
            loop.call_soon(self._flush)
        future: asyncio.Future[list[Out]] = loop.create_future()
        self._queued.append((items, future))
        return await future

    def _flush(self) -> None:
        queued, self._queued = self._queued, []
        batch: list[tuple[Sequence[In], asyncio.Future[list[Out]]]] = []
        size = 0
        for items, future in queued:
            if batch and size + len(items) > MAX_BULK:
                self._start(batch)
                batch, size = [], 0
            batch.append((items, future))
            size += len(items)
        self._start(batch)

    def _start(self, batch: list[tuple[Sequence[In], asyncio.Future[list[Out]]]]) -> None:
        task = asyncio.get_running_loop().create_task(self._send(batch))
        self._sending.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[tuple[Sequence[In], asyncio.Future[list[Out]]]]) -> None:
        try:
            results = await self._bulk([item for items, _ in batch for item in items])
        except BaseException as exc:  # every waiter gets the failure, then it goes on
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        start = 0
        for items, future in batch:
            if not future.done():  # a cancelled waiter
                future.set_result(results[start : start + len(items)])
            start += len(items)
