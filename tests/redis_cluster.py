"""The tests' Redis Clusters and Sentinel: `wander.testing`'s servers, skipping the test
where ``redis-server`` (or ``redis-cli``) is not installed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import redis

from wander.testing import NO_DISK, RedisCluster, RedisServers, free_port, wait_until


def start_cluster(directory: Path, options: Sequence[str] = NO_DISK) -> RedisCluster:
    """A started cluster of three primaries, its files in ``directory``."""
    try:
        return RedisCluster(directory, options=options).start()
    except FileNotFoundError as exc:
        pytest.skip(f"{exc}: the Redis Cluster tests are skipped")


def start_sentinel(servers: RedisServers, service: str = "wander") -> tuple[str, int]:
    """A primary and one Sentinel watching it as ``service``: the ``redis+sentinel://``
    URL, and the primary's port."""
    primary, sentinel = free_port(), free_port()
    try:
        servers.start(primary, NO_DISK)
    except FileNotFoundError as exc:
        pytest.skip(f"{exc}: the Sentinel test is skipped")
    servers.start(
        sentinel, ["--sentinel"], config=f"sentinel monitor {service} 127.0.0.1 {primary} 1\n"
    )
    with redis.Redis(port=sentinel) as client:
        wait_until(
            lambda: client.sentinel_get_master_addr_by_name(service),
            f"the Sentinel on {sentinel} did not name its primary",
        )
    return f"redis+sentinel://127.0.0.1:{sentinel}/{service}", primary
