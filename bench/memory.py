"""What an episode costs the store's memory: live, finished within the grace, and after.

For each store (the in-process one: the service's resident memory; Redis: its
``used_memory``), a ``wander serve`` on a SQLite archive of its own:

1. creates ``--episodes`` tic-tac-toe episodes (groups of 100) and holds them live: what
   a live episode costs;
2. on a fresh service, plays games in waves of 1,000 (random legal moves, batch steps,
   each wave archived) for one ``WANDER_FINISHED_GRACE_SECONDS`` (``--grace``): what a
   finished game costs while its document waits for a retried last step; then for two
   graces more: how much the store grows per game once finished games leave it as fast
   as new ones finish (0 when memory stays flat).

    python -m bench.memory --episodes 20000

Resident memory is the allocator's view: memory Python frees is reused by the process,
rarely given back.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import secrets
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import redis

from bench.loadgen import random_move
from bench.measure import backlog, forget_prefix, resident_bytes
from wander.testing import ServiceProcess

GROUP = 100
BATCH = 1024
WAVE = 1000
"""Games created, then played to their end, together."""


def create(client: httpx.Client, episodes: int, rng: random.Random) -> dict[str, tuple[str, int]]:
    """``episodes`` new episodes: id -> (board, turn)."""
    live: dict[str, tuple[str, int]] = {}
    for _ in range(episodes // GROUP):
        body = {"env": "tictactoe", "n": GROUP, "example": rng.randrange(10_000)}
        response = client.post("/v1/episodes", json=body)
        response.raise_for_status()
        live |= {e["id"]: (e["info"]["board"], 0) for e in response.json()["episodes"]}
    return live


def finish(client: httpx.Client, live: dict[str, tuple[str, int]], rng: random.Random) -> None:
    """Play every episode of ``live`` to its end."""
    while live:
        chunk = list(live.items())[:BATCH]
        steps = [
            {"episode_id": id_, "action": random_move(board, rng), "turn": turn}
            for id_, (board, turn) in chunk
        ]
        response = client.post("/v1/step", json={"steps": steps})
        response.raise_for_status()
        for result in response.json()["results"]:
            if "error" in result:
                raise RuntimeError(result)
            if result["done"]:
                del live[result["episode_id"]]
            else:
                live[result["episode_id"]] = (result["info"]["board"], result["turn"])


def archived(client: httpx.Client) -> None:
    """Wait until the backlog is empty."""
    while backlog(str(client.base_url)):
        time.sleep(0.2)


@contextlib.contextmanager
def service(
    store: str, grace: float, redis_url: str
) -> Iterator[tuple[ServiceProcess, httpx.Client]]:
    with tempfile.TemporaryDirectory() as directory:
        prefix = f"bench-memory-{secrets.token_hex(4)}:"
        env = {
            "WANDER_DATABASE_URL": f"sqlite:///{directory}/archive.db",
            "WANDER_FINISHED_GRACE_SECONDS": str(grace),
            "WANDER_ARCHIVE_BACKLOG_MAX": "0",
            "WANDER_MEMORY_MAX_EPISODES": "10000000",
        }
        if store == "redis":
            env |= {"WANDER_REDIS_URL": redis_url, "WANDER_REDIS_PREFIX": prefix}
        process = ServiceProcess(env).start()
        try:
            with httpx.Client(base_url=process.url, timeout=120) as client:
                yield process, client
        finally:
            process.stop()
            if store == "redis":
                forget_prefix(redis_url, prefix)


def measure(store: str, episodes: int, grace: float, redis_url: str) -> dict[str, Any]:
    """Two services on ``store``: one holds ``episodes`` live episodes; the other plays
    games in waves for three graces, the first grace's games still held, then replaced."""
    rng = random.Random(0)
    row: dict[str, Any] = {"store": store}
    with service(store, grace, redis_url) as (process, client):
        used = _meter(store, process, redis_url)
        finish(client, create(client, 2 * GROUP, rng), rng)  # warm: imports, caches
        archived(client)
        before = used()
        create(client, episodes, rng)
        row["per_live_episode"] = (used() - before) / episodes
    with service(store, grace, redis_url) as (process, client):
        used = _meter(store, process, redis_url)
        finish(client, create(client, 2 * GROUP, rng), rng)
        archived(client)
        time.sleep(grace + 1)
        start, games = used(), [0, 0]
        for phase in (0, 1):
            until = time.monotonic() + (grace if phase == 0 else 2 * grace)
            while time.monotonic() < until:
                finish(client, create(client, WAVE, rng), rng)
                games[phase] += WAVE
            archived(client)
            if phase == 0:
                in_grace = used()
        row["per_finished_game_in_grace"] = (in_grace - start) / games[0]
        row["per_finished_game_past_grace"] = (used() - in_grace) / games[1]
        row["games"] = sum(games)
    return row


def _meter(store: str, process: ServiceProcess, redis_url: str) -> Callable[[], int]:
    """What the store's memory reads now: Redis's ``used_memory``, else the service's."""
    if store == "redis":
        server = redis.Redis.from_url(redis_url)
        return lambda: int(server.info("memory")["used_memory"])
    assert process.process is not None
    pid = process.process.pid
    return lambda: resident_bytes(pid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20_000)
    parser.add_argument("--grace", type=float, default=10.0)
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1"))
    args = parser.parse_args()
    for store in ("memory", "redis"):
        row = measure(store, args.episodes, args.grace, args.redis_url)
        print(json.dumps({k: round(v) if isinstance(v, float) else v for k, v in row.items()}))


if __name__ == "__main__":
    main()
