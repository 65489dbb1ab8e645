"""What a hosted OpenEnv environment's step costs, live and replayed:
``python -m bench.hosted`` with the python of a venv holding ``wander-rl[service,openenv]``.

``Countdown`` (below, written against OpenEnv's API only) ends after ``TURNS`` steps.
A real ``wander serve`` hosts it as ``openenv/countdown`` and plays ``--episodes``
episodes one step at a time, twice:

- **live**: the worker of each step is kept for the episode's next one
  (``WANDER_ENV_LIVE_EPISODES``, default), so step k continues the live environment;
- **replayed**: ``WANDER_ENV_LIVE_EPISODES=0``, so step k runs in a fresh worker that
  rebuilds the environment (reset, then the k earlier actions) before it steps.

Prints the mean latency of each turn (milliseconds) under both, over HTTP, as a client
sees it. The gap at the last turn is the cost of replaying a 10-turn episode.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from openenv.core.env_server import (  # pyright: ignore[reportMissingImports] (openenv extra)
    Action,
    Environment,
    Observation,
    State,
)

from wander.testing import ServiceProcess

TURNS = 10
ROOT = Path(__file__).resolve().parents[1]


class CountAction(Action):
    by: int


class CountObservation(Observation):
    total: int
    left: int


class Countdown(Environment[CountAction, CountObservation, State]):
    """Add numbers for ``TURNS`` turns; reward 1 at the end if the total is even."""

    def __init__(self) -> None:
        super().__init__()
        self._state, self._total = State(), 0

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> CountObservation:
        self._state, self._total = State(episode_id=episode_id, step_count=0), (seed or 0) % 7
        return CountObservation(total=self._total, left=TURNS)

    def step(
        self, action: CountAction, timeout_s: float | None = None, **kwargs: Any
    ) -> CountObservation:
        self._state.step_count += 1
        self._total += action.by
        left = TURNS - self._state.step_count
        reward = float(self._total % 2 == 0) if left == 0 else 0.0
        return CountObservation(total=self._total, left=left, done=left == 0, reward=reward)

    @property
    def state(self) -> State:
        return self._state


def play(url: str, episodes: int) -> list[list[float]]:
    """Seconds per step, by turn, over ``episodes`` episodes played one after another."""
    by_turn: list[list[float]] = [[] for _ in range(TURNS)]
    with httpx.Client(base_url=url, timeout=60) as client:
        for seed in range(episodes):
            created = client.post("/v1/episodes", json={"env": "openenv/countdown", "seed": seed})
            episode = created.json()["episodes"][0]["id"]
            for turn in range(TURNS):
                started = time.perf_counter()
                answer = client.post(
                    f"/v1/episodes/{episode}/step", json={"action": '{"by": 3}', "turn": turn}
                )
                by_turn[turn].append(time.perf_counter() - started)
                assert answer.status_code == 200, answer.text
    return by_turn


def measure(live_episodes: int, episodes: int) -> list[float]:
    """Mean milliseconds per step, by turn, on a service keeping ``live_episodes``."""
    with tempfile.TemporaryDirectory() as folder:
        settings = {
            "WANDER_OPENENV": "countdown=bench.hosted:Countdown",
            "WANDER_ENV_LIVE_EPISODES": str(live_episodes),
            "WANDER_DATABASE_URL": f"sqlite:///{folder}/archive.db",
            "PYTHONPATH": str(ROOT),
        }
        service = ServiceProcess(settings, cwd=str(ROOT)).start()
        try:
            play(service.url, 2)  # the fork server, imports, caches
            return [statistics.mean(times) * 1000 for times in play(service.url, episodes)]
        finally:
            service.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=20)
    arguments = parser.parse_args()
    live = measure(16, arguments.episodes)
    replayed = measure(0, arguments.episodes)
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, {arguments.episodes} episodes")
    print("| turn | live (ms) | replayed (ms) |\n|---:|---:|---:|")
    for turn, (one, other) in enumerate(zip(live, replayed, strict=True)):
        print(f"| {turn} | {one:.1f} | {other:.1f} |")


if __name__ == "__main__":
    main()
