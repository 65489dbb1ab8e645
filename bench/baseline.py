"""The ceiling: the same games played directly on the environment SDK (no HTTP, no store)."""

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
    started = time.perf_counter()
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
    elapsed = time.perf_counter() - started
    cuts = statistics.quantiles(latencies, n=100)
    return BaselineResult(
        opponent=opponent,
        seconds=round(elapsed, 2),
        steps=steps,
        episodes=episodes,
        steps_per_s=steps / elapsed,
        episodes_per_s=episodes / elapsed,
        p50_us=cuts[49] * 1e6,
        p99_us=cuts[98] * 1e6,
    )
