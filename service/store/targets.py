"""The clients of a ``WANDER_REDIS_URL`` target (``service.redis_url``): the store's asyncio
client, and synchronous ones of each primary for the start-up check."""

from __future__ import annotations

import functools
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.sentinel
import redis.cluster
import redis.connection
import redis.sentinel
import redis.utils

from wander.service.redis_url import RedisTarget

_TIMEOUTS = {"socket_timeout": 5, "socket_connect_timeout": 5}


class _Cluster(redis.asyncio.cluster.RedisCluster):
    """redis-py's asyncio cluster client, made to come through a primary's restart.

    A primary restarted on its files and ``nodes.conf`` rejoins with its slots, but
    answers ``CLUSTERDOWN`` for its first two seconds (Redis waits that long before it
    serves as a primary again). redis-py 8.1 answers that reply by closing every
    connection of the client (``aclose``), those that other commands are using at that
    moment included: they then fail with ``RuntimeError`` or ``AttributeError`` from the
    socket layer, 500s for the service's clients (``tests/test_faults.py`` restarts a
    primary under load to check that none comes). So:

    - ``aclose`` while commands are in flight only asks for the cluster's topology
      again at the next command (which redis-py's ``aclose`` does too); the connections
      are closed once nothing uses them, when the store closes;
    - a ``CLUSTERDOWN`` that outlasts redis-py's retries is a ``ConnectionError``: the
      cluster cannot serve those slots now, and the store answers 503
      ``store_unavailable`` as for a primary that does not answer at all.

    A primary that does not answer needs one thing more (`_reconnect_free_connections`):
    redis-py renews that node's free connections, asks another node for the topology at
    the next command, and finds the primary again on its address once it is back.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_flight = 0

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        self._in_flight += 1
        try:
            return await super().execute_command(*args, **kwargs)
        except redis.exceptions.ClusterDownError as exc:
            raise redis.exceptions.ConnectionError(f"the cluster is down: {exc}") from exc
        finally:
            self._in_flight -= 1

    async def aclose(self) -> None:
        if self._in_flight:
            self._initialize = True
        else:
            await super().aclose()


async def _reconnect_free_connections(node: redis.asyncio.cluster.ClusterNode) -> None:
    """Mark a node's free connections to reconnect before their next command, rather than
    disconnect them now.

    redis-py 8.1 disconnects them (after a command to the node failed to reach it) in
    tasks of its own, from a snapshot of the free list: a command that takes one of them
    meanwhile connects it, and the late disconnect pulls the socket from under its write,
    an ``AttributeError`` (a 500 for a client of the service; the fault test saw two).
    Marked, each is disconnected and connected again by the command that takes it next,
    as redis-py does for the connections in use at that moment (a stress of primaries
    killed under 48 concurrent commands: 5 such errors in the first of eight kills
    before, none in ten after)."""
    for connection in node._free:
        connection.mark_for_reconnect()


if hasattr(redis.asyncio.cluster.ClusterNode, "disconnect_free_connections"):  # redis-py 8
    redis.asyncio.cluster.ClusterNode.disconnect_free_connections = _reconnect_free_connections  # type: ignore[method-assign]


def async_client(target: RedisTarget, max_connections: int) -> Any:
    """An asyncio client of ``target``: ``redis.asyncio.Redis``, or ``RedisCluster`` for a
    cluster (one that comes through a primary's restart: `_Cluster`; ``max_connections``
    per node: its caller bounds how many it uses at once, since a cluster client refuses
    more rather than wait)."""
    if target.kind == "cluster":
        return _Cluster(
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
    if redis.utils.HIREDIS_AVAILABLE:
        pool.connection_class = _packed_in_c(pool.connection_class)
    return redis.asyncio.Redis.from_pool(pool)


class _PackedInC:
    """Commands packed by hiredis, in C, as redis-py's synchronous client packs them;
    its asyncio connections pack them in Python, argument by argument.

    A batch step's compare-and-set is one script call of ~9 arguments per episode (its
    head, the messages it appends, its archive record): packed in Python it is a visible
    share of the service's CPU under batch load, and hiredis packs it in about half the
    time (bench/README.md has the figures)."""

    _serializer = redis.connection.HiredisRespSerializer()

    def pack_command(self, *args: Any) -> list[bytes]:
        packed: list[bytes] = self._serializer.pack(*args)
        return packed


@functools.cache
def _packed_in_c(connection_class: type) -> type:
    """``connection_class`` (plain, TLS or Unix socket, as the URL says) packing in C."""
    return type(connection_class.__name__, (_PackedInC, connection_class), {})


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
