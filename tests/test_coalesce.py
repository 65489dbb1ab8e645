"""The coalescer behind the Redis store: concurrent calls become one bulk call."""

from __future__ import annotations

import asyncio

import pytest

from wander.service.store import coalesce
from wander.service.store.coalesce import Coalescer


class Recorder:
    """A bulk function that doubles its items and records every call it gets."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[list[int]] = []
        self.fail = fail

    async def __call__(self, items: list[int]) -> list[int]:
        self.calls.append(items)
        await asyncio.sleep(0)
        if self.fail:
            raise ConnectionError("store down")
        return [2 * item for item in items]


async def test_concurrent_calls_share_one_bulk_call_and_get_their_own_results() -> None:
    bulk = Recorder()
    coalescer = Coalescer(bulk)
    results = await asyncio.gather(coalescer([1, 2]), coalescer([3]), coalescer([4, 5, 6]))
    assert results == [[2, 4], [6], [8, 10, 12]]
    assert bulk.calls == [[1, 2, 3, 4, 5, 6]]


async def test_calls_of_later_loop_turns_go_in_later_bulk_calls() -> None:
    bulk = Recorder()
    coalescer = Coalescer(bulk)
    assert await coalescer([1]) == [2]
    assert await coalescer([2]) == [4]
    assert await coalescer([]) == []
    assert bulk.calls == [[1], [2]]


async def test_a_failure_reaches_every_caller_of_the_bulk_call() -> None:
    coalescer = Coalescer(Recorder(fail=True))
    results = await asyncio.gather(coalescer([1]), coalescer([2]), return_exceptions=True)
    assert [type(result) for result in results] == [ConnectionError, ConnectionError]


async def test_a_cancelled_caller_leaves_the_others_their_results() -> None:
    coalescer = Coalescer(Recorder())
    first = asyncio.ensure_future(coalescer([1]))
    second = asyncio.ensure_future(coalescer([2]))
    await asyncio.sleep(0)
    first.cancel()
    assert await second == [4]
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_large_batches_are_split(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(coalesce, "MAX_BULK", 3)
    bulk = Recorder()
    coalescer = Coalescer(bulk)
    results = await asyncio.gather(coalescer([1, 2]), coalescer([3, 4]), coalescer([5]))
    assert results == [[2, 4], [6, 8], [10]]
    assert bulk.calls == [[1, 2], [3, 4, 5]]
