"""Whether a Redis keeps what the service writes to it across its own restart.

Episodes and the archive backlog (finished episodes not yet in SQL) live in the
store. A Redis without persistence (``appendonly no`` and no ``save`` points,
Redis's default in many containers) loses all of them when it restarts; with
snapshots only, it loses what changed since the last one. ``wander serve`` says
so at start, because nothing else would until the data is gone.
"""

from __future__ import annotations

import redis

from wander.service.redis_url import parse_redis_url
from wander.service.store.targets import primaries


def persistence_warning(url: str) -> str | None:
    """What a restart of the Redis at ``url`` would lose ("keeps nothing on disk..."), or
    None when it keeps everything (append-only file on) or cannot be asked (unreachable,
    or CONFIG refused, as managed services do).

    On a cluster every primary is asked, and the first that would lose data is named
    ("node host:port keeps nothing..."); through Sentinel, the primary it names now (a
    replica promoted later is not asked)."""
    target = parse_redis_url(url)
    try:
        nodes = primaries(target)
    except redis.RedisError:
        return None
    warnings = []
    for address, client in nodes:
        with client:
            warning = _warning(client)
        if warning is not None:
            warnings.append(warning if target.kind == "single" else f"node {address} {warning}")
    return warnings[0] if warnings else None


def _warning(client: redis.Redis) -> str | None:
    try:
        appendonly = client.config_get("appendonly").get("appendonly")
        save = client.config_get("save").get("save", "")
    except redis.RedisError:
        return None
    if appendonly == "yes":
        return None
    if not save:
        return (
            "keeps nothing on disk (appendonly no, no save points): if it restarts, "
            "every active episode and every finished episode not yet archived is lost. "
            "Turn on its append-only file (appendonly yes)."
        )
    return (
        f"only saves snapshots (save {save!r}): if it crashes, what changed since "
        "the last snapshot is lost, finished episodes not yet archived included. "
        "Turn on its append-only file (appendonly yes)."
    )
