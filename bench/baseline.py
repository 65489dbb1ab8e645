"""The ceiling: the same games played directly on the environment SDK (no HTTP, no store).

``python -m bench.baseline [SECONDS]`` prints one line per opponent. Steps per
CPU-second (``time.process_time``) is the one-core rate; steps/s, wall-clock, falls
with whatever else the machine runs.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass

from wander.service.envs.seeding import TurnRandom, example_seed
from wander.service.envs.tictactoe import TicTacToe, TicTacToeConfig

OPPONENTS = {
    "random": TicTacToeConfig(min_random_move_prob=1.0, max_random_move_prob=1.0),
    "optimal": TicTacToeConfig(min_random_move_prob=0.0, max_random_move_prob=0.0),
}


@dataclass
class BaselineResult:
    opponent: str
    seconds: float
    steps: int
    episodes: int
    steps_per_s: float
    cpu_steps_per_s: float
    episodes_per_s: float
    p50_us: float
    p99_us: float


def play_in_process(opponent: str, seconds: float = 3.0, seed: int = 0) -> BaselineResult:
    """Random legal moves, game after game: reset, step until done, score."""
    env, config = TicTacToe(), OPPONENTS[opponent]
    rng = random.Random(seed)
    examples = env.examples(config, "train")
    latencies: list[float] = []
    steps = episodes = 0
    started, cpu = time.perf_counter(), time.process_time()
    while time.perf_counter() - started < seconds:
        index = rng.randrange(len(examples))
        seed_ = example_seed(env.name, "train", config.seed, index)
        state, _ = env.reset(config, examples[index], seed_)
        done = False
        while not done:
            cell = rng.choice([i for i, mark in enumerate(state["board"]) if mark == "."])
            action = {"role": "assistant", "content": f"<think>random</think><move>{cell}</move>"}
            begun = time.perf_counter()
            state, _, done, _ = env.step(config, state, action, TurnRandom(seed_))
            env.total(env.score(config, state).components)
            latencies.append(time.perf_counter() - begun)
            steps += 1
        episodes += 1
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    cuts = statistics.quantiles(latencies, n=100)
    return BaselineResult(
        opponent=opponent,
        seconds=round(elapsed, 2),
        steps=steps,
        episodes=episodes,
        steps_per_s=steps / elapsed,
        cpu_steps_per_s=steps / cpu,
        episodes_per_s=episodes / elapsed,
        p50_us=cuts[49] * 1e6,
        p99_us=cuts[98] * 1e6,
    )


if __name__ == "__main__":
    import sys

    for name in OPPONENTS:
        result = play_in_process(name, float(sys.argv[1]) if len(sys.argv) > 1 else 3.0)
        print(
            f"{name}: {result.steps_per_s:,.0f} steps/s, {result.cpu_steps_per_s:,.0f} steps per "
            f"CPU-second, p50 {result.p50_us:.1f} µs, p99 {result.p99_us:.1f} µs"
        )
