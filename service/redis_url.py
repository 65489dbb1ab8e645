"""What ``WANDER_REDIS_URL`` points at: one Redis, a Redis Cluster, or a primary that Sentinel
finds, and the clients that reach it.

- ``redis://``, ``rediss://``, ``unix://``: one Redis (or a replicated one behind one
  address), as redis-py reads such URLs.
- ``redis+cluster://[user:password@]host:port[,host:port...]``: a Redis Cluster, reached
  through any of the nodes listed (the others are discovered); a cluster has no databases,
  so the URL has no path. ``rediss+cluster://`` for TLS.
- ``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]``: the primary
  that the Sentinels listed know as ``service`` (``SENTINEL get-master-addr-by-name``),
  found again after a failover. The credentials are the primary's; the Sentinels are
  asked without any. ``rediss+sentinel://`` for TLS to the primary.

A port left out is 6379 (26379 for a Sentinel). A URL that fits none of these is a
``ValueError`` saying what is wrong, raised while the settings are read: ``wander serve``
stops on one line rather than in a traceback at the first request. Parsing only, free of
redis-py: the clients are ``service.store.targets``'.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote

Kind = Literal["single", "cluster", "sentinel"]

_SINGLE = ("redis", "rediss", "unix")
_URL = re.compile(
    r"(?P<scheme>[a-z+]+)://(?:(?P<user>[^:@/]*)(?::(?P<password>[^@/]*))?@)?"
    r"(?P<hosts>[^/?#@]*)(?P<path>/[^?#]*)?"
)
_HOST = re.compile(r"(?P<host>\[[0-9a-fA-F:.]+\]|[^:\[\]]+)(?::(?P<port>[0-9]{1,5}))?")
_DEFAULT_PORT = {"cluster": 6379, "sentinel": 26379}
_EXAMPLES = (
    "redis://host:6379/0, redis+cluster://host:7000,host:7001 or "
    "redis+sentinel://host:26379/mymaster"
)


@dataclass(frozen=True)
class RedisTarget:
    """A parsed ``WANDER_REDIS_URL``."""

    kind: Kind
    url: str
    nodes: tuple[tuple[str, int], ...] = ()
    """The cluster's seed nodes, or the Sentinels (empty for one Redis)."""
    service: str = ""
    """The name Sentinel knows the primary by."""
    db: int = 0
    username: str | None = None
    password: str | None = None
    tls: bool = False

    @property
    def credentials(self) -> dict[str, Any]:
        return {"username": self.username, "password": self.password, "ssl": self.tls}


def parse_redis_url(url: str) -> RedisTarget:
    """The target of ``url``; ``ValueError`` (its message names the problem, never the
    password) where it is not one of the forms above."""
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme in _SINGLE:
        return RedisTarget("single", url)
    base, _, kind = scheme.partition("+")
    if base not in ("redis", "rediss") or kind not in ("cluster", "sentinel"):
        raise ValueError(
            "a Redis URL starts with redis://, rediss://, unix://, redis+cluster:// or "
            f"redis+sentinel:// (e.g. {_EXAMPLES})"
        )
    match = _URL.fullmatch(url)
    if match is None or not match["hosts"]:
        raise ValueError(f"a {scheme}:// URL lists host:port pairs (e.g. {_EXAMPLES})")
    nodes = tuple(_node(part, _DEFAULT_PORT[kind], scheme) for part in match["hosts"].split(","))
    path = [part for part in (match["path"] or "").split("/") if part]
    service, db = "", 0
    if kind == "cluster" and path not in ([], ["0"]):
        raise ValueError("a Redis Cluster has a single database: no path after its nodes")
    if kind == "sentinel":
        if not path or len(path) > 2:
            raise ValueError(
                "a redis+sentinel:// URL names the primary's service after its Sentinels, "
                "and optionally a database: redis+sentinel://host:26379/mymaster[/0]"
            )
        service = unquote(path[0])
        if len(path) == 2:
            if not path[1].isdigit():
                raise ValueError(f"the database after the service is a number, not {path[1]!r}")
            db = int(path[1])
    return RedisTarget(
        kind,  # type: ignore[arg-type]  # "cluster" or "sentinel", checked above
        url,
        nodes,
        service,
        db,
        unquote(match["user"] or "") or None,
        unquote(match["password"]) if match["password"] is not None else None,
        base == "rediss",
    )


def _node(text: str, default_port: int, scheme: str) -> tuple[str, int]:
    match = _HOST.fullmatch(text.strip())
    port = int(match["port"]) if match and match["port"] else default_port
    if match is None or not 0 < port < 65536:
        raise ValueError(f"{text!r} is not a host:port pair in the {scheme}:// URL")
    return match["host"].strip("[]"), port
