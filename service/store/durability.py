"""Whether a Redis keeps what the service writes to it across its own restart.

Episodes and the archive backlog (finished episodes not yet in SQL) live in the
store. A Redis without persistence (``appendonly no`` and no ``save`` points,
Redis's default in many containers) loses all of them when it restarts; with
snapshots only, it loses what changed since the last one. ``wander serve`` says
so at start, because nothing else would until the data is gone.
"""

from __future__ import annotations

import redis


def persistence_warning(url: str) -> str | None:
    """What a restart of the Redis at ``url`` would lose ("keeps nothing on disk..."), or
    None when it keeps everything (append-only file on) or cannot be asked (unreachable,
    or CONFIG refused, as managed services do)."""
    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        appendonly = client.config_get("appendonly").get("appendonly")
        save = client.config_get("save").get("save", "")
    except redis.RedisError:
        return None
    finally:
        client.close()
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
