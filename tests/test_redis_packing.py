"""The store's Redis connections pack commands in C (``service.store.targets``): the
bytes on the wire must be those redis-py's own asyncio packing sends."""

from __future__ import annotations

import pytest
import redis.asyncio
import redis.utils

from wander.service.redis_url import parse_redis_url
from wander.service.store.targets import async_client

ARGUMENTS = [
    ("EVALSHA", "0" * 40, 2, "wander:episode:ep_1", "wander:log:ep_1", 3600),
    ("SET", b"\x00binary\r\n", "naïve ✓", -7, 0.1, 1e20, 2**70),
    ("CLIENT SETNAME", "wander"),  # a command name of two words
    pytest.param(
        ("RPUSH", "k", memoryview(b"view"), bytearray(b"array"), b"x" * 10_000),
        marks=pytest.mark.skipif(
            int(redis.__version__.split(".")[0]) < 8,
            reason="redis-py packs a memoryview or bytearray from 8.0 (the store sends neither)",
        ),
    ),
]


@pytest.mark.skipif(not redis.utils.HIREDIS_AVAILABLE, reason="hiredis is not installed")
@pytest.mark.parametrize("args", ARGUMENTS)
def test_commands_are_packed_as_redis_py_packs_them(args: tuple[object, ...]) -> None:
    client = async_client(parse_redis_url("redis://127.0.0.1:6379/0"), 1)
    connection = client.connection_pool.connection_class()
    expected = b"".join(redis.asyncio.Connection().pack_command(*args))
    assert b"".join(connection.pack_command(*args)) == expected
    assert type(connection).pack_command is not redis.asyncio.Connection.pack_command
