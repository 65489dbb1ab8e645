"""Asynchronous rollouts against lockstep, at the same batch: ``python -m bench.async_rollouts``.

A real ``wander serve`` (in-process store, SQLite) and GRPO of a tiny model on
``--env`` (tic-tac-toe), on this machine's CPU, run ``--steps`` optimizer steps twice: lockstep
(``max_staleness = 0``: each batch played, then trained on) and asynchronous
(``max_staleness = 1``: the next batch played while the trainer trains on this one).
Prints (and appends to ``--output``, markdown) the wall time of the run and per step, the
samples (episodes) trained per hour, and each run's mean reward, as a first check
that learning is no worse (the learning benchmark, ``bench.learning``, is the real
one).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from wander.client import WanderClient
from wander.testing import ServiceProcess
from wander.trainer.config import GRPORunConfig
from wander.trainer.grpo import build_trainer
from wander.trainer.models import load


class StepClock(TrainerCallback):
    """The wall time of each optimizer step, from the end of the one before (so the
    time spent waiting for its batch is in it)."""

    def __init__(self) -> None:
        self.last = time.monotonic()
        self.steps: list[float] = []

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        now = time.monotonic()
        self.steps.append(now - self.last)
        self.last = now


def run_once(url: str, scratch: Path, staleness: int, args: argparse.Namespace) -> dict[str, Any]:
    groups = args.batch // args.generations
    run = GRPORunConfig(
        model="tiny", url=url, env=args.env, examples=groups * args.steps,
        run=f"async-{staleness}", output_dir=str(scratch / f"s{staleness}"),
        max_completion_length=args.max_completion_length, max_staleness=staleness,
        sampling={"max_tokens_per_turn": args.max_tokens_per_turn},
        grpo={"num_generations": args.generations, "generation_batch_size": args.batch,
              "per_device_train_batch_size": args.batch, "max_steps": args.steps,
              "learning_rate": 1e-3, "logging_steps": 1, "save_strategy": "no",
              "loss_type": "cispo", "beta": 0.0, "seed": args.seed},
    )  # fmt: skip
    model, tokenizer = load("tiny")
    clock = StepClock()
    with WanderClient(url) as client:
        trainer = build_trainer(run, client, model, tokenizer)
        trainer.add_callback(clock)
        started = time.monotonic()
        trainer.train()
        wall = time.monotonic() - started
    rewards = [entry["reward"] for entry in trainer.state.log_history if "reward" in entry]
    return {
        "max_staleness": staleness,
        "wall_s": wall,
        "step_s": statistics.median(clock.steps[1:]),  # the first step waits in both
        "samples_per_hour": args.batch * args.steps / wall * 3600,
        "mean_reward": statistics.fmean(rewards),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="tictactoe")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=32, help="episodes per generation batch")
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--max-completion-length", type=int, default=256)
    parser.add_argument("--max-tokens-per-turn", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    with tempfile.TemporaryDirectory() as scratch:
        database = f"sqlite:///{scratch}/archive.db"
        service = ServiceProcess({"WANDER_DATABASE_URL": database, "WANDER_REDIS_URL": ""})
        service.start()
        try:
            results = [run_once(service.url, Path(scratch), s, args) for s in (0, 1)]
        finally:
            service.stop()
    lines = [
        f"{args.steps} steps, batch {args.batch} ({args.batch // args.generations} x "
        f"{args.generations}), {args.max_tokens_per_turn} tokens a turn, tiny model, "
        f"{args.env}, {os.cpu_count()} CPUs",
        "",
        "| max_staleness | wall (s) | per step (s, median) | samples/hour | mean reward |",
        "|---|---|---|---|---|",
        *(
            f"| {r['max_staleness']} | {r['wall_s']:.1f} | {r['step_s']:.2f} | "
            f"{r['samples_per_hour']:.0f} | {r['mean_reward']:.3f} |"
            for r in results
        ),
    ]
    print("\n".join(lines))
    if args.output is not None:  # appended: one table per setting
        with args.output.open("a") as out:
            out.write("\n".join(lines) + "\n\n")


if __name__ == "__main__":
    main()
