"""The per-tenant quotas every store checks when it adds episodes, in one place."""

from __future__ import annotations

from wander.service.errors import QuotaExceeded


def over_quota(
    count: int,
    metadata_bytes: int,
    live: int,
    live_bytes: int,
    max_live: int | None,
    max_metadata_bytes: int | None,
) -> QuotaExceeded | None:
    """Why adding ``count`` episodes of ``metadata_bytes`` each to a tenant holding ``live``
    episodes and ``live_bytes`` of metadata would pass a quota; None when it would not."""
    if max_live is not None and live + count > max_live:
        return quota_exceeded("live_episodes", max_live, live, count)
    wanted = count * metadata_bytes
    if max_metadata_bytes is not None and wanted and live_bytes + wanted > max_metadata_bytes:
        return quota_exceeded("metadata_bytes", max_metadata_bytes, live_bytes, wanted)
    return None


def quota_exceeded(quota: str, limit: int, used: int, requested: int) -> QuotaExceeded:
    what = "live episodes" if quota == "live_episodes" else "bytes of metadata"
    return QuotaExceeded(
        f"the tenant holds {used} {what} of its {limit} ({quota}): {requested} more would "
        "pass it; finish or delete episodes first",
        {"quota": quota, "limit": limit, "used": used, "requested": requested},
    )
