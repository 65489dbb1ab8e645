"""The timestamps the engine stores (``records.now``)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from wander.service import records

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def test_timestamps_are_written_as_datetime_isoformat_writes_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A whole second has no fraction; a new second is formatted anew, not the last one's."""
    second = 1_764_157_697 * 10**9
    for nanoseconds in (second, second + 1_000, second + 10**9 - 1, second + 86_400 * 10**9):
        monkeypatch.setattr(time, "time_ns", lambda n=nanoseconds: n)
        expected = EPOCH + timedelta(microseconds=nanoseconds // 1000)
        assert records.now() == expected.isoformat()
