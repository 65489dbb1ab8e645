"""What a hosted environment's step costs, live and replayed: ``python -m bench.hosted
openenv`` with the python of a venv holding ``wander-rl[service,openenv]``, ``python -m
bench.hosted verifiers`` (or ``verifiers-tools``) with one holding
``wander-rl[service,verifiers]``.

Countdown, a trivial environment that ends after 10 turns, written against the
framework's own API (``bench/hosted_openenv.py``, ``bench/tasksets/countdown.py``), is
hosted by a real ``wander serve`` (``openenv/countdown``, ``vf/countdown``), which plays
``--episodes`` episodes one step at a time, twice. ``verifiers-tools`` plays Tally
(``bench/tasksets/tally.py``), a tool taskset: nine tool calls answered by the episode's
own MCP server (a process that every replay starts again), then a reply:

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from wander.testing import ServiceProcess

TURNS = 10
ROOT = Path(__file__).resolve().parents[1]
HOSTED = {
    "openenv": ("openenv/countdown", lambda turn: '{"by": 3}',
                {"WANDER_OPENENV": "countdown=bench.hosted_openenv:Countdown",
                 "PYTHONPATH": str(ROOT)}),
    "verifiers": ("vf/countdown", lambda turn: "3",
                  {"WANDER_VERIFIERS": "countdown",
                   "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'bench' / 'tasksets'}"}),
    "verifiers-tools": ("vf/tally", lambda turn: tally_call(turn),
                        {"WANDER_VERIFIERS": "tally", "WANDER_ENV_PROCESSES": "vf/tally",
                         "WANDER_ENV_CALL_SECONDS": "120",
                         "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'bench' / 'tasksets'}"}),
}  # fmt: skip
"""Each environment, the action its steps send (by turn), and the settings."""


def tally_call(turn: int) -> str | dict[str, Any]:
    """Tally's action at ``turn``: a call of its tool, then (last) the reply."""
    if turn == TURNS - 1:
        return "done"
    call = {"id": f"t{turn}", "type": "function",
            "function": {"name": "tally_add", "arguments": '{"number": 3}'}}  # fmt: skip
    return {"role": "assistant", "tool_calls": [call]}


def play(
    url: str, env: str, action: Callable[[int], str | dict[str, Any]], episodes: int
) -> list[list[float]]:
    """Seconds per step, by turn, over ``episodes`` episodes played one after another."""
    by_turn: list[list[float]] = [[] for _ in range(TURNS)]
    with httpx.Client(base_url=url, timeout=60) as client:
        for seed in range(episodes):
            created = client.post("/v1/episodes", json={"env": env, "seed": seed})
            episode = created.json()["episodes"][0]["id"]
            for turn in range(TURNS):
                started = time.perf_counter()
                answer = client.post(
                    f"/v1/episodes/{episode}/step", json={"action": action(turn), "turn": turn}
                )
                by_turn[turn].append(time.perf_counter() - started)
                assert answer.status_code == 200, answer.text
    return by_turn


def measure(framework: str, live_episodes: int, episodes: int) -> list[float]:
    """Mean milliseconds per step, by turn, on a service keeping ``live_episodes``."""
    env, action, hosted = HOSTED[framework]
    with tempfile.TemporaryDirectory() as folder:
        settings = {
            **hosted,
            "WANDER_ENV_LIVE_EPISODES": str(live_episodes),
            "WANDER_DATABASE_URL": f"sqlite:///{folder}/archive.db",
        }
        service = ServiceProcess(settings, cwd=str(ROOT)).start()
        try:
            play(service.url, env, action, 2)  # the fork server, imports, caches
            return [
                statistics.mean(times) * 1000 for times in play(service.url, env, action, episodes)
            ]
        finally:
            service.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("framework", choices=sorted(HOSTED))
    parser.add_argument("--episodes", type=int, default=20)
    arguments = parser.parse_args()
    live = measure(arguments.framework, 16, arguments.episodes)
    replayed = measure(arguments.framework, 0, arguments.episodes)
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, {arguments.episodes} episodes")
    print("| turn | live (ms) | replayed (ms) |\n|---:|---:|---:|")
    for turn, (one, other) in enumerate(zip(live, replayed, strict=True)):
        print(f"| {turn} | {one:.1f} | {other:.1f} |")


if __name__ == "__main__":
    main()
