"""The clients of a ``WANDER_REDIS_URL`` target (``service.redis_url``): the store's asyncio
client, and synchronous ones of each primary for the start-up check."""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.sentinel
import redis.cluster
import redis.sentinel

from wander.service.redis_url import RedisTarget

_TIMEOUTS = {"socket_timeout": 5, "socket_connect_timeout": 5}


def async_client(target: RedisTarget, max_connections: int) -> Any:
    """An asyncio client of ``target``: ``redis.asyncio.Redis``, or ``RedisCluster`` for a
    cluster (``max_connections`` per node: its caller bounds how many it uses at once,
    since a cluster client refuses more rather than wait)."""
    if target.kind == "cluster":
        return redis.asyncio.cluster.RedisCluster(
            startup_nodes=[redis.asyncio.cluster.ClusterNode(h, p) for h, p in target.nodes],
            max_connections=max_connections,
            **target.credentials,
            **_TIMEOUTS,
        )
    if target.kind == "sentinel":
        sentinel = redis.asyncio.sentinel.Sentinel(list(target.nodes), **_TIMEOUTS)
        return sentinel.master_for(
            target.service,
            db=target.db,
            max_connections=max_connections,
            **target.credentials,
            **_TIMEOUTS,
        )
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        target.url, max_connections=max_connections, timeout=5, **_TIMEOUTS
    )
    return redis.asyncio.Redis.from_pool(pool)


def primaries(target: RedisTarget, timeout: float = 2.0) -> list[tuple[str, redis.Redis]]:
    """Synchronous clients of each server that holds primary data, by address: the one
    Redis, every primary of a cluster, or the primary Sentinel names now. Raises
    ``redis.RedisError`` when they cannot be found."""
    timeouts = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    if target.kind == "single":
        return [(target.url, redis.Redis.from_url(target.url, **timeouts))]
    if target.kind == "sentinel":
        sentinel = redis.sentinel.Sentinel(list(target.nodes), **timeouts)
        host, port = sentinel.discover_master(target.service)
        client = redis.Redis(host, port, db=target.db, **target.credentials, **timeouts)
        return [(f"{host}:{port}", client)]
    cluster = redis.cluster.RedisCluster(
        startup_nodes=[redis.cluster.ClusterNode(h, p) for h, p in target.nodes],
        **target.credentials,
        **timeouts,
    )
    try:
        nodes = [(node.host, node.port) for node in cluster.get_primaries()]
    finally:
        cluster.close()
    return [
        (f"{host}:{port}", redis.Redis(host, port, **target.credentials, **timeouts))
        for host, port in nodes
    ]
