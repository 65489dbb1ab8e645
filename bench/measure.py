"""What the benchmarks read off a running service, and what they clean up after one."""

from __future__ import annotations

from pathlib import Path

import httpx
import redis


def resident_bytes(pid: int) -> int:
    """The resident memory of process ``pid``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def backlog(url: str) -> int:
    """The archive backlog the service at ``url`` reports (``wander_archive_backlog``)."""
    metrics = httpx.get(f"{url}/metrics", timeout=30).text
    line = next(m for m in metrics.splitlines() if m.startswith("wander_archive_backlog "))
    return int(float(line.split()[1]))


def forget_prefix(redis_url: str, prefix: str) -> None:
    """Delete every key under ``prefix`` on the Redis at ``redis_url``."""
    client = redis.Redis.from_url(redis_url)
    try:
        for key in client.scan_iter(match=f"{prefix}*", count=10_000):
            client.delete(key)
    finally:
        client.close()
