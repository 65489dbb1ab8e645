"""Per-step cost against episode length: the engine on a store, no HTTP.

``agents`` tic-tac-toe episodes of 64 turns are played together in batch steps
(``Engine.step_many``), every move invalid with a ~1 KB message (a model that thinks
aloud), so that each episode grows by two messages a turn up to its limit; the time of
each round, divided by its steps, is the per-step cost at that turn. A step that rewrote
the whole stored episode got slower as the episode grew; one that appends does not.

    python -m bench.long_episode --redis-url redis://127.0.0.1:6379 --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import time

from bench.measure import forget_prefix
from wander.client.models import BatchStepItem, CreateEpisodesRequest
from wander.service.catalog import Catalog
from wander.service.engine import Engine
from wander.service.envs import Registry
from wander.service.settings import Settings
from wander.service.store import open_store

TURNS = 64
ACTION = "<think>" + "thinking aloud " * 64 + "</think><move>9</move>"
"""An invalid move (no cell 9) of about 1 KB: the episode goes on, two messages longer."""


async def play(settings: Settings, agents: int) -> list[float]:
    """Microseconds per step at each turn, for one game of ``agents`` episodes."""
    engine = Engine(open_store(settings), Catalog(Registry.from_entry_points()), settings)
    try:
        request = CreateEpisodesRequest(env="tictactoe", n=agents, config={"max_turns": TURNS})
        episodes = await engine.create(request)
        per_turn: list[float] = []
        for turn in range(TURNS):
            items = [BatchStepItem(episode_id=e["id"], action=ACTION, turn=turn) for e in episodes]
            started = time.perf_counter()
            results = await engine.step_many(items)
            per_turn.append((time.perf_counter() - started) / agents * 1e6)
            assert all("error" not in r for r in results), results[0]
        return per_turn
    finally:
        await engine.aclose()
        await engine.store.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", default=None, help="default: the in-process store")
    parser.add_argument("--agents", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5, help="games, each of --agents episodes")
    args = parser.parse_args()
    prefix = f"bench-long-{secrets.token_hex(4)}:"
    settings = Settings(redis_url=args.redis_url, redis_prefix=prefix)
    try:
        games = [asyncio.run(play(settings, args.agents)) for _ in range(args.rounds)]
    finally:
        if args.redis_url:
            forget_prefix(args.redis_url, prefix)
    for first, last in ((0, 8), (TURNS - 8, TURNS)):
        medians = [statistics.median(game[first:last]) for game in games]
        per_game = [round(m) for m in medians]
        print(
            f"turns {first:2}-{last - 1:2}: {statistics.median(medians):7.1f} µs/step "
            f"(median of {args.rounds} games; per game {per_game})"
        )


if __name__ == "__main__":
    main()
